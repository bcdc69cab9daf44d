//! The per-thread runtime: executor, driver, timers, metrics.
//!
//! # The loop
//! One turn: poll the main future if it was woken, run every task that was
//! runnable at the start of the turn (they only queue operations: no
//! syscalls on the io_uring backend), then park the driver once: on io_uring
//! a single `io_uring_enter` submits everything queued and, only when nothing
//! is runnable, waits for one completion or the next timer deadline; then all
//! completions are reaped from shared memory and their tasks woken. Expired
//! timers fire, remote wakes are drained, and the next turn starts.
//!
//! # One runtime per thread
//! A thread has at most one [`Runtime`] at a time (thread-per-core): the
//! runtime installs itself in a thread-local when built and removes itself
//! when dropped. Runtimes and everything tied to one are `!Send`.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::{Context as TaskCx, Poll};
use std::time::{Duration, Instant};

use crate::context::{self, try_with_ctx, with_ctx, Context};
#[cfg(feature = "experiments")]
use crate::driver::BatchWait;
use crate::driver::{Backend, BackendReport, Driver, DriverConfig};
use crate::metrics::MetricsSnapshot;
use crate::sched::{self, Remote};
use crate::task::{self, JoinHandle};

/// Configures and builds a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    backend: Backend,
    config: DriverConfig,
    #[cfg(feature = "tokio")]
    host_tokio: bool,
    #[cfg(feature = "tokio")]
    host_shutdown_timeout: Option<Duration>,
    #[cfg(feature = "tokio")]
    host_configure: Option<crate::hosted::HostConfigure>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// Defaults: `Backend::Auto`, 256 SQ entries. The environment is never
    /// read: a program that lets its operators switch backends reads its
    /// own flags or variables and calls [`backend`](Self::backend)
    /// (`LaunchArgs`, feature `clap`, does: `--backend` with
    /// `RINGKIT_BACKEND` as its fallback).
    pub fn new() -> Builder {
        Builder {
            backend: Backend::Auto,
            config: DriverConfig::default(),
            #[cfg(feature = "tokio")]
            host_tokio: false,
            #[cfg(feature = "tokio")]
            host_shutdown_timeout: None,
            #[cfg(feature = "tokio")]
            host_configure: None,
        }
    }

    /// Which backend to use.
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }

    /// Hosted mode (feature `tokio`): the runtime also runs a tokio
    /// current-thread runtime and a `LocalSet`, in one loop with its own,
    /// so that inside [`block_on`](Runtime::block_on) and its tasks
    /// `tokio::spawn`, `spawn_local`, `spawn_blocking`, `tokio::time`,
    /// `tokio::net`, `tokio::fs`, `tokio::sync` and crates built on them
    /// (database clients, reqwest, tonic) work, while ringkit's own I/O
    /// stays on its driver. How the loops are joined, and what it costs:
    /// the module docs of `hosted.rs`.
    ///
    /// What differs from `#[tokio::main]`:
    /// - The hosted tokio runtime is current-thread, so
    ///   `tokio::task::block_in_place` panics, as on any current-thread
    ///   runtime: run blocking work with `tokio::task::spawn_blocking`.
    /// - Each runtime thread hosts its own tokio runtime. A resource made on
    ///   a tokio runtime (a database pool and its connections, a reqwest
    ///   client's connections) is driven by that runtime's reactor only:
    ///   make it inside this runtime, on each thread that uses it (for a
    ///   server, in the per-thread closure of `serve`), not in a
    ///   `#[tokio::main]` around it. A pool per thread means threads x pool
    ///   size connections to the database.
    /// - Built where a tokio runtime is current, `build` logs a warning
    ///   (resources made on that runtime are not driven by this one), and
    ///   its `block_on` inside a tokio task panics as tokio's own does.
    ///
    /// ```
    /// let rt = ringkit::Builder::new().host_tokio().build()?;
    /// rt.block_on(async {
    ///     let t = tokio::spawn(async { 6 * 7 });
    ///     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    ///     assert_eq!(t.await.unwrap(), 42);
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[cfg(feature = "tokio")]
    pub fn host_tokio(mut self) -> Self {
        self.host_tokio = true;
        self
    }

    /// Hosted mode: dropping the runtime waits at most `limit` for the
    /// hosted tokio runtime's running `spawn_blocking` jobs (tokio's
    /// `Runtime::shutdown_timeout`); those still running are left to finish
    /// on their own threads. Without it the drop waits for them, as
    /// dropping a tokio runtime does.
    #[cfg(feature = "tokio")]
    pub fn host_shutdown_timeout(mut self, limit: Duration) -> Self {
        self.host_shutdown_timeout = Some(limit);
        self
    }

    /// Hosted mode: `f` edits the hosted tokio runtime's builder before it
    /// is built (ringkit has made it current-thread with every driver
    /// on). With tokio's `test-util` feature,
    /// `|b| { b.start_paused(true); }` starts tokio's clock paused at the
    /// runtime's start, as `#[tokio::test(start_paused = true)]` does
    /// (`tokio::time::pause` called later pauses it at an instant that is
    /// not on tokio's millisecond ticks, so a timer due "now" then waits
    /// for the next tick). Changing the flavour is not supported.
    ///
    /// ```
    /// let rt = ringkit::Builder::new()
    ///     .host_tokio()
    ///     .host_tokio_configure(|b| {
    ///         b.event_interval(31);
    ///     })
    ///     .build()?;
    /// rt.block_on(async { tokio::task::yield_now().await });
    /// # std::io::Result::Ok(())
    /// ```
    #[cfg(feature = "tokio")]
    pub fn host_tokio_configure(
        mut self,
        f: impl Fn(&mut tokio::runtime::Builder) + Send + Sync + 'static,
    ) -> Self {
        self.host_configure = Some(crate::hosted::HostConfigure(std::sync::Arc::new(f)));
        self
    }

    /// io_uring SQ entries (CQ gets 4x).
    pub fn entries(mut self, n: u32) -> Self {
        self.config.entries = n;
        self
    }

    /// Use exactly these `IORING_SETUP_*` flags instead of the best available set.
    pub fn uring_flags(mut self, flags: u32) -> Self {
        self.config.flags = Some(flags);
        self
    }

    /// Provided-buffer ring for multishot receives: `count` buffers of `size` bytes.
    pub fn recv_buffers(mut self, count: u16, size: u32) -> Self {
        self.config.buf_count = count;
        self.config.buf_size = size;
        self
    }

    /// Feature `experiments`. io_uring: when the loop blocks, always wait for up to `want`
    /// completions, but return once `min_wait` has passed and at least one
    /// is ready (`IORING_FEAT_MIN_TIMEOUT`, Linux 6.12; ignored with a
    /// warning on older kernels, and by the epoll backend). Fewer enters
    /// and wake-ups under load, for up to `min_wait` of added latency when
    /// traffic is light: [`BatchWait::Fixed`]. See
    /// [`batch_wait_policy`](Self::batch_wait_policy) for the adaptive one.
    #[cfg(feature = "experiments")]
    pub fn batch_wait(mut self, want: u32, min_wait: Duration) -> Self {
        self.config.experiments.batch_wait = BatchWait::Fixed { want, min_wait }.normalized();
        self
    }

    /// Feature `experiments`. io_uring: how the loop waits when it blocks. [`BatchWait::Off`]
    /// (the library's default) wakes for every completion;
    /// [`BatchWait::Adaptive`] waits for a batch only while the loop's
    /// thread has been on CPU for nearly all of the last few milliseconds
    /// (the loop is the bottleneck), so a lightly loaded loop pays no
    /// latency for it ([`BatchWait::AUTO`]).
    ///
    /// Either way a park waits for no batch when fewer than two operations
    /// are in flight, nor when the next timer is due within `min_wait`;
    /// `want` is capped at the operations in flight; a park with no
    /// deadline that the minimum ended empty-handed waits on for one
    /// completion. A wake from another thread may still wait up to
    /// `min_wait`. `Adaptive` judges by CPU time: a loop busy computing,
    /// with little I/O, batches too. `min_wait` is taken in whole µs, 1 µs
    /// to 1 s; `want` at least 1.
    ///
    /// Ignored by the epoll backend, by hosted runtimes (the host's loop
    /// does the waiting) and on kernels without `IORING_FEAT_MIN_TIMEOUT`
    /// (Linux 6.12, with its stable fixes: a kernel that keeps waiting for
    /// `want` after the minimum would hold a lone completion until the
    /// next timer).
    #[cfg(feature = "experiments")]
    pub fn batch_wait_policy(mut self, policy: BatchWait) -> Self {
        self.config.experiments.batch_wait = policy.normalized();
        self
    }

    /// io_uring: promote busy sockets into a registered file table of up to
    /// `slots` entries (capped by `RLIMIT_NOFILE`; 0, the default, is off).
    /// A stream gets a slot after its 16th operation, so a short connection
    /// pays nothing; from then on its receives and sends skip the kernel's
    /// per-operation file lookup and reference count (`fget`/`fput`). The
    /// slot costs one `io_uring_register` call and is closed through the
    /// ring with the stream. A full table leaves later streams on plain fds.
    pub fn fixed_files(mut self, slots: u32) -> Self {
        self.config.fixed_files = slots;
        self
    }

    /// io_uring: let a multishot receive take several provided buffers per
    /// completion when a peer has sent more than one holds
    /// (`IORING_RECVSEND_BUNDLE`, Linux 6.10; without it, or with `false`,
    /// one buffer per completion). Reads still hand out one buffer at a
    /// time, in order, without a copy. On by default.
    pub fn recv_bundle(mut self, on: bool) -> Self {
        self.config.recv_bundle = on;
        self
    }

    /// Feature `experiments`. io_uring: how [`TcpStream::write_all_pooled`](crate::net::TcpStream::write_all_pooled)
    /// sends a batch of buffers: one vectored `SENDMSG` (the default), a
    /// chain of linked sends whose success CQEs are skipped but the last,
    /// or one send bundle from a send ring ([`SendBatch`](crate::driver::SendBatch)).
    /// Each posts one CQE per batch; the switch is there to measure them
    /// against each other.
    #[cfg(feature = "experiments")]
    pub fn send_batch(mut self, how: crate::driver::SendBatch) -> Self {
        self.config.experiments.send_batch = how;
        self
    }

    /// Build the runtime on this thread.
    pub fn build(self) -> io::Result<Runtime> {
        if context::is_installed() {
            return Err(io::Error::other(
                "this thread already has a ringkit runtime (one per thread)",
            ));
        }
        let backend = self.backend;
        #[cfg_attr(not(feature = "tokio"), allow(unused_mut))]
        let mut config = self.config.clone();
        #[cfg(feature = "tokio")]
        {
            config.hosted = self.host_tokio;
            if self.host_tokio && tokio::runtime::Handle::try_current().is_ok() {
                // Not an error: from a `spawn_blocking` job, or a thread that
                // only entered a handle, this is legitimate (and from inside
                // a tokio task, tokio's own `block_on` refuses, saying why).
                tracing::warn!(
                    "ringkit: a hosted runtime built where a tokio runtime is current: \
                     resources made on that runtime (a connection pool, a client) are driven \
                     only by it, not by this one; make them inside this runtime"
                );
            }
            let defer = ringkit_uring::sys::IORING_SETUP_DEFER_TASKRUN;
            if self.host_tokio
                && backend != Backend::Epoll
                && config.flags.unwrap_or(0) & defer != 0
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a hosted runtime cannot use IORING_SETUP_DEFER_TASKRUN: its registered \
                     eventfd misses completions caused by eventfd writes (cross-thread wakes, \
                     signals); ask for COOP_TASKRUN or no flags",
                ));
            }
        }
        // SAFETY: plain eventfd creation.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        let (driver, report) = match Driver::new(backend, &config, efd) {
            Ok(x) => x,
            Err(e) => {
                // SAFETY: we own efd.
                unsafe { libc::close(efd) };
                return Err(e);
            }
        };
        if let Some(reason) = &report.fallback_reason {
            tracing::warn!("ringkit: using epoll instead of io_uring: {reason}");
        }
        let remote = Arc::new(Remote::new(efd));
        let id = sched::register_remote(remote.clone());
        #[cfg(feature = "tokio")]
        let hosted = self.host_tokio;
        #[cfg(not(feature = "tokio"))]
        let hosted = false;
        let ctx = Context::new(id, driver, report, remote, hosted);
        // SAFETY: the context is boxed and owned by the `Runtime` built
        // below, whose `Installed` guard uninstalls it before the box goes.
        unsafe { context::install(&ctx) };
        // SAFETY: the context is boxed: its driver and metrics stay put
        // until `Runtime::drop` uninstalls them (before the box goes).
        unsafe {
            crate::driver::current::install(&ctx.driver, &ctx.metrics, crate::time::driver_clock())
        };
        #[allow(unused_mut)]
        let mut rt = Runtime {
            #[cfg(feature = "tokio")]
            host: None,
            _installed: Installed,
            ctx,
            _not_send: std::marker::PhantomData,
        };
        #[cfg(feature = "tokio")]
        if self.host_tokio {
            let fd = rt.ctx.driver.borrow_mut().readiness_fd()?;
            rt.host = Some(crate::hosted::Host::new(
                fd,
                self.host_shutdown_timeout,
                self.host_configure.as_ref(),
            )?);
        }
        Ok(rt)
    }
}

/// A single-threaded runtime: one per thread (thread-per-core), `!Send`.
///
/// Each turn of its loop runs the tasks that are runnable, then parks the
/// driver once: on io_uring one `io_uring_enter` submits every queued
/// operation and, only when nothing is runnable, waits for a completion or
/// the next timer; on epoll one `epoll_wait`. [`launch`](crate::launch)
/// starts one per thread; [`Builder`] chooses the backend and its options.
///
/// ```
/// let rt = ringkit::Runtime::new()?;
/// let answer = rt.block_on(async {
///     let h = ringkit::spawn(async { 6 * 7 });
///     h.await.unwrap()
/// });
/// assert_eq!(answer, 42);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// ```compile_fail
/// fn assert_send<T: Send>(_: T) {}
/// assert_send(ringkit::Runtime::new().unwrap());
/// ```
pub struct Runtime {
    /// Hosted mode: dropped first, while the context is still installed
    /// (its tasks may hold ringkit operations).
    #[cfg(feature = "tokio")]
    host: Option<crate::hosted::Host>,
    /// Clears this thread's pointers to `ctx` before `ctx` is freed, also
    /// when `Drop` unwinds half-way (fields drop even then).
    _installed: Installed,
    ctx: Box<Context>,
    _not_send: std::marker::PhantomData<*const ()>,
}

/// This thread's pointers to a runtime's context: cleared on drop.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        crate::driver::current::uninstall();
        context::uninstall();
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("backend", self.ctx.report())
            .finish()
    }
}

impl Runtime {
    /// A runtime with default settings (`Backend::Auto`).
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// A [`Builder`].
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// Which backend runs, with which flags, and why (fallback reason).
    pub fn backend_report(&self) -> &BackendReport {
        self.ctx.report()
    }

    /// Counters of this runtime (syscalls, SQEs, CQEs, polls).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.ctx.snapshot()
    }

    /// Spawn a task; it runs when the runtime runs (in `block_on`).
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        task::spawn(fut)
    }

    /// Run `fut` to completion, running spawned tasks and I/O meanwhile.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let cx = &*self.ctx;
        #[cfg(feature = "tokio")]
        if let Some(host) = &self.host {
            return host.block_on(cx, fut);
        }
        let mut fut = std::pin::pin!(fut);
        let waker = cx.main_waker();
        let mut tcx = TaskCx::from_waker(&waker);
        cx.wake_main();
        loop {
            if let Poll::Ready(v) = cx.run_turn(fut.as_mut(), &mut tcx) {
                return v;
            }
            let timeout = if cx.has_runnable() {
                Some(Duration::ZERO)
            } else {
                cx.timers
                    .borrow_mut()
                    .next_deadline()
                    .map(|d| d.saturating_duration_since(Instant::now()))
            };
            cx.park(timeout);
        }
    }

    /// Whether this runtime hosts a tokio runtime (`Builder::host_tokio`,
    /// feature `tokio`).
    pub fn is_hosted(&self) -> bool {
        #[cfg(feature = "tokio")]
        return self.host.is_some();
        #[cfg(not(feature = "tokio"))]
        false
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Dropping tokio's runtime panics inside another runtime's task
        // (tokio refuses to block there): ringkit's own tear-down still
        // runs, then the panic goes on.
        #[cfg(feature = "tokio")]
        let host_panic = self.host.take().and_then(|host| {
            let ctx = &self.ctx;
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                host.shutdown(|| ctx.drop_tasks())
            }))
            .err()
        });
        // (Again after a host: dropping tokio's runtime may have spawned
        // ringkit tasks.)
        self.ctx.drop_tasks();
        self.ctx.driver.borrow_mut().shutdown();
        crate::driver::current::uninstall();
        context::uninstall();
        // Later wakes of this runtime do nothing; the eventfd is closed when
        // the last `Arc<Remote>` goes (a racing waker may hold one).
        sched::unregister_remote(self.ctx.id);
        #[cfg(feature = "tokio")]
        if let Some(p) = host_panic {
            std::panic::resume_unwind(p);
        }
    }
}

/// The backend report of the current thread's runtime; `None` on a thread
/// without one.
pub fn backend_report() -> Option<BackendReport> {
    try_with_ctx(|cx| cx.report().clone())
}

/// The metrics of the current thread's runtime.
pub fn metrics() -> MetricsSnapshot {
    with_ctx(Context::snapshot)
}

/// The number of the current turn of this thread's event loop (it grows
/// by one each time the loop parks in the driver); `None` outside a
/// runtime. Work done within one turn sees the same I/O results, so a
/// value that changes slowly (the `Date` of HTTP responses) can be read
/// from the clock once per turn instead of once per use.
pub fn loop_turn() -> Option<u64> {
    try_with_ctx(|cx| cx.metrics.parks.get())
}
