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
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::driver::Backend;
use crate::net::TcpListener;
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
///     println!("thread {i} ran on {:?}", ringkit::backend_report().map(|r| r.chosen));
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

/// A listening socket on `addr` with `SO_REUSEADDR` and `SO_REUSEPORT`
/// (one per thread), close-on-exec; the error names the address.
pub fn bind_reuseport_std(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"));
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM.cloexec(),
        None,
    )
    .map_err(named)?;
    s.set_reuse_address(true).map_err(named)?;
    s.set_reuse_port(true).map_err(named)?;
    s.bind(&addr.into()).map_err(named)?;
    s.listen(1024).map_err(named)?;
    Ok(s.into())
}

/// Serve on `cfg`'s threads, one `SO_REUSEPORT` listener each: the one way
/// every ringkit server starts (ringkit-http, ringkit-echo, ringkit-hyper).
///
/// In order: the soft `RLIMIT_NOFILE` is raised to the hard limit; the
/// `SIGINT`/`SIGTERM` handler is installed (from then on a signal starts a
/// graceful stop, see [`crate::signal`]); every thread's listener is bound
/// on `addr` before any thread starts, so an address that cannot be bound
/// is this call's error, naming the address, and nothing runs; then each
/// thread builds its runtime and runs `serve(i, listener)`. A thread whose
/// `serve` fails asks the others to stop ([`crate::signal::request_shutdown`]);
/// the call returns once every thread has returned, with the first error
/// (its message names the thread). The library prints nothing.
///
/// ```no_run
/// use ringkit::{serve_threads, LaunchConfig};
/// serve_threads(LaunchConfig::new(2), "127.0.0.1:7000".parse().unwrap(), |_i, l| async move {
///     let shutdown = ringkit::signal::shutdown_requested();
///     let accept = async {
///         loop {
///             let s = l.accept_stream().await?;
///             ringkit::spawn(async move { drop(s) });
///         }
///     };
///     match ringkit::sync::select(std::pin::pin!(accept), std::pin::pin!(shutdown)).await {
///         ringkit::sync::Either::Left(r) => r,
///         ringkit::sync::Either::Right(()) => Ok(()),
///     }
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve_threads<F, Fut>(cfg: LaunchConfig, addr: SocketAddr, serve: F) -> io::Result<()>
where
    F: Fn(usize, TcpListener) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = io::Result<()>> + 'static,
{
    crate::raise_nofile_limit();
    crate::signal::install()?;
    let listeners = (0..cfg.threads)
        .map(|_| Ok(Mutex::new(Some(bind_reuseport_std(addr)?))))
        .collect::<io::Result<Vec<_>>>()?;
    let listeners = Arc::new(listeners);
    let errors: Arc<Mutex<Vec<io::Error>>> = Arc::default();
    let errs = errors.clone();
    let handles = launch(cfg, move |i| {
        let (serve, errs) = (serve.clone(), errs.clone());
        let std_listener = listeners[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        async move {
            let run = async {
                let l = std_listener.ok_or_else(|| io::Error::other("listener already taken"))?;
                serve(i, TcpListener::from_std(l)?).await
            };
            if let Err(e) = run.await {
                let e = io::Error::new(e.kind(), format!("thread {i}: {e}"));
                errs.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                crate::signal::request_shutdown();
            }
        }
    })?;
    for h in handles {
        h.join()
            .map_err(|_| io::Error::other("a server thread panicked"))??;
    }
    let first = errors
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
        .next();
    first.map_or(Ok(()), Err)
}
