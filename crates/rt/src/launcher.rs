//! Thread-per-core: start N runtimes on N threads, optionally pinned.
//!
//! ```no_run
//! use ringkit::{launch, Backend, LaunchConfig};
//! let handles = launch(LaunchConfig::new(2).backend(Backend::Auto), |i| async move {
//!     let l = ringkit::net::TcpListener::bind_reuseport("127.0.0.1:7000").unwrap();
//!     loop {
//!         let s = l.accept_stream().await.unwrap();
//!         ringkit::spawn(async move { drop(s) });
//!     }
//! }).unwrap();
//! for h in handles { h.join().unwrap(); }
//! ```

use std::future::Future;
use std::io;
use std::thread::JoinHandle;

use crate::driver::Backend;
use crate::runtime::Builder;

/// Settings for [`launch`].
#[derive(Debug, Clone)]
pub struct LaunchConfig {
    threads: usize,
    cpus: Option<Vec<usize>>,
    builder: Builder,
}

impl LaunchConfig {
    /// `threads` runtimes, unpinned, default builder.
    pub fn new(threads: usize) -> LaunchConfig {
        LaunchConfig {
            threads: threads.max(1),
            cpus: None,
            builder: Builder::new(),
        }
    }

    /// Pin thread `i` to `cpus[i % cpus.len()]`.
    pub fn cpus(mut self, cpus: Vec<usize>) -> Self {
        self.cpus = if cpus.is_empty() { None } else { Some(cpus) };
        self
    }

    /// Backend for every runtime.
    pub fn backend(mut self, b: Backend) -> Self {
        self.builder = self.builder.backend(b);
        self
    }

    /// A custom runtime builder for every thread.
    pub fn builder(mut self, b: Builder) -> Self {
        self.builder = b;
        self
    }
}

/// Pin the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Start one runtime per thread and run `make(i)` on thread `i` until it
/// returns. Each thread builds its own runtime; a build error ends that thread
/// with the error. `examples/echo_threads.rs` is a whole server.
///
/// ```
/// use ringkit::LaunchConfig;
/// let handles = ringkit::launch(LaunchConfig::new(2), |i| async move {
///     ringkit::time::sleep(std::time::Duration::from_millis(1)).await;
///     println!("thread {i} ran on {}", ringkit::backend_report());
/// })?;
/// for h in handles {
///     h.join().expect("no panic")?;
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn launch<F, Fut>(cfg: LaunchConfig, make: F) -> io::Result<Vec<JoinHandle<io::Result<()>>>>
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let mut handles = Vec::with_capacity(cfg.threads);
    for i in 0..cfg.threads {
        let make = make.clone();
        let builder = cfg.builder.clone();
        let cpu = cfg.cpus.as_ref().map(|c| c[i % c.len()]);
        let h = std::thread::Builder::new()
            .name(format!("ringkit-{i}"))
            .spawn(move || -> io::Result<()> {
                if let Some(cpu) = cpu {
                    pin_to_cpu(cpu)?;
                }
                let rt = builder.build()?;
                rt.block_on(make(i));
                Ok(())
            })?;
        handles.push(h);
    }
    Ok(handles)
}
