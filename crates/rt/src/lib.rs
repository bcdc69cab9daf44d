//! ringkit: a thread-per-core async runtime with io_uring and epoll backends
//! behind one API.
//!
//! ```no_run
//! use ringkit::net::{TcpListener, TcpStream};
//! ringkit::Runtime::new()?.block_on(async {
//!     let l = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = l.local_addr()?;
//!     ringkit::spawn(async move {
//!         let (s, _) = l.accept().await.unwrap();
//!         let (res, buf) = s.read(Vec::with_capacity(64)).await;
//!         res.unwrap();
//!         s.write_all(buf).await.0.unwrap();
//!     });
//!     let c = TcpStream::connect(addr).await?;
//!     c.write_all(&b"ping"[..]).await.0?;
//!     let (n, buf) = c.read(Vec::with_capacity(64)).await;
//!     assert_eq!(&buf[..n?], b"ping");
//!     Ok::<_, std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! - [`Runtime`] / [`Builder`]: one single-threaded executor per thread; the
//!   backend ([`Backend`]) is chosen once at start and reported
//!   ([`Runtime::backend_report`]). The library never reads the
//!   environment.
//! - [`spawn`] / [`JoinHandle`]: `!Send` tasks, each poll with a cooperative
//!   budget of ready I/O (see [`unconstrained`] for the opt-out).
//! - [`launch`]: thread-per-core, with CPU pinning.
//! - [`net`], [`fs`], [`time`], [`buf`]: I/O with owned buffers.
//! - [`driver`]: the backend contract and the cancellation guarantees.
//! - [`sync::Drain`]: the graceful-shutdown broadcast of a server thread.
//! - [`metrics()`]: per-thread syscall and ring counters; with the `publish`
//!   feature, `publish` writes them to a file for a benchmark to read.

#![warn(missing_docs)]

pub mod alloc;
pub mod buf;
mod context;
mod coop;
pub mod driver;
mod eventfd_table;
pub mod fs;
#[cfg(feature = "tokio")]
mod hosted;
mod kick;
mod launcher;
mod metrics;
pub mod net;
#[cfg(feature = "publish")]
pub mod publish;
mod runtime;
mod sched;
pub mod signal;
pub mod sync;
mod task;
pub mod time;
mod timers;

pub use coop::{unconstrained, Unconstrained};
#[cfg(feature = "experiments")]
pub use driver::BatchWait;
pub use driver::{Backend, BackendReport};
pub use launcher::{bind_reuseport_std, launch, pin_to_cpu, serve_threads, LaunchConfig};
#[cfg(feature = "clap")]
mod launch_args;
#[cfg(feature = "clap")]
pub use launch_args::LaunchArgs;
pub use metrics::MetricsSnapshot;
pub use runtime::{backend_report, loop_turn, metrics, Builder, Runtime};
pub use task::{spawn, yield_now, JoinError, JoinHandle};

/// Build a runtime with default settings on this thread and run `fut` on it.
///
/// One thread, this one (like tokio's `current_thread` flavour, not its
/// multi-threaded default): ringkit runs one event loop per thread and
/// never moves tasks between them. For one loop per core, start a server
/// with [`serve_threads`] (or [`launch`]), which runs a closure on each of
/// the threads [`LaunchConfig::new`] asks for.
pub fn run<F: std::future::Future>(fut: F) -> std::io::Result<F::Output> {
    Ok(Runtime::new()?.block_on(fut))
}

/// Instantiate an async test once per backend: `mod name { fn uring(); fn epoll(); }`.
///
/// The io_uring instance skips (printing why) when io_uring is unusable here.
///
/// ```
/// ringkit::test_all! {
///     async fn sleeps() {
///         ringkit::time::sleep(std::time::Duration::from_millis(1)).await;
///     }
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! test_all {
    ($( $(#[$m:meta])* async fn $name:ident() $body:block )*) => {
        $(
            #[allow(non_snake_case)]
            mod $name {
                #[allow(unused_imports)]
                use super::*;
                $(#[$m])*
                #[test]
                fn uring() {
                    $crate::__run_test($crate::Backend::Uring, async $body)
                }
                $(#[$m])*
                #[test]
                fn epoll() {
                    $crate::__run_test($crate::Backend::Epoll, async $body)
                }
            }
        )*
    };
}

#[doc(hidden)]
pub fn __run_test<F: std::future::Future<Output = ()>>(backend: Backend, fut: F) {
    raise_nofile_limit();
    let rt = match Builder::new().backend(backend).build() {
        Ok(rt) => rt,
        Err(e) if backend == Backend::Uring => {
            eprintln!("skipped: io_uring unavailable here: {e}");
            return;
        }
        Err(e) => panic!("cannot build a {backend} runtime: {e}"),
    };
    assert_eq!(rt.backend_report().chosen, backend);
    rt.block_on(fut);
}

/// Raise the soft `RLIMIT_NOFILE` to the hard limit (tests open thousands of
/// sockets; servers usually want this too). Returns the new soft limit.
pub fn raise_nofile_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write a valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return want.rlim_cur;
            }
        }
    }
    r.rlim_cur
}
