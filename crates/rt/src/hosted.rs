//! Hosted mode (feature `tokio`): a tokio current-thread runtime and a
//! `LocalSet` inside a ringkit runtime, run as one loop.
//!
//! # The joint loop
//! tokio's `block_on` is the outer loop and the only place the thread
//! sleeps; ringkit's loop is its main future. Each poll of that future is
//! one ringkit turn: the main future and the runnable tasks are polled,
//! then the driver is parked with a zero timeout (io_uring: one
//! `io_uring_enter` that submits and, under `DEFER_TASKRUN`, runs the
//! deferred completions; epoll: one `epoll_wait(0)`), timers fire and
//! remote wakes are taken in. Then:
//!
//! - **work left** (runnable tasks, or an epoll batch that filled its
//!   buffer): `tokio::task::yield_now`, which tokio turns into one
//!   `epoll_wait(0)` of its own reactor and a turn of its tasks and
//!   timers before it polls ringkit again;
//! - **idle**: wait, inside tokio's reactor, for the first of: the
//!   driver's readiness fd (an eventfd registered with the ring, which the
//!   kernel signals when it posts completions; the epoll fd itself on
//!   epoll), the next
//!   ringkit timer (a timerfd on the real clock, registered with tokio's
//!   reactor: a tokio `Sleep` would put ringkit's deadline on tokio's
//!   clock, which a test may pause; the paused clock then jumped to it and
//!   the loop spun until real time caught up), or new ringkit work made by tokio's
//!   side on this thread: a task woken, spawned or aborted, a timer added,
//!   an SQE queued ([`kick`] wakes the idle wait; it is called at each of
//!   those places).
//!   Cross-thread wakes write ringkit's remote eventfd, which the driver
//!   watches, so they arrive through the readiness fd.
//!
//! No wake-up is lost: readiness is cleared *before* the zero-timeout park
//! that drains it, so an event after the park is a new edge. A hosted ring
//! is set up without `DEFER_TASKRUN` (`COOP_TASKRUN|TASKRUN_FLAG`, else no flags): with
//! it, completions caused by an eventfd write (cross-thread wakes, signal
//! notifications) signal the registered eventfd through an RCU callback,
//! and on Linux 6.18 only the first such signal ever arrived (the test
//! `hosted_rings_refuse_defer_taskrun` keeps the reason written down:
//! four cross-thread wakes in a row, the first woke after 63 ms, the
//! others never). The tests (`crates/rt/tests/hosted.rs`) end a blocked
//! wait by each cause (a completion, a tokio timer, a tokio socket,
//! cross-thread wakes, a tokio task waking a ringkit task) on epoll and
//! on io_uring with the default, COOP and no flags, check that an idle
//! hosted thread uses no CPU over 2 s, and drop runtimes with tasks of
//! both kinds in flight.
//!
//! # Costs
//! One extra `epoll_wait(0)` per busy turn (tokio's), and on the way from
//! idle to busy an `epoll_wait` wake-up (tokio's) followed by the
//! zero-timeout park, where plain ringkit blocks in the driver itself.
//!
//! # A tokio budget per task
//! tokio lets one poll of a task make 128
//! operations on its resources (a semaphore acquire, a timer, a socket read)
//! before they answer `Pending` and the task must yield. A ringkit turn is
//! one poll of the joint loop's future, so without more every ringkit task of
//! a turn would share those 128: 1 000 tasks doing an acquire and a yield
//! each round took 442 600 polls for 101 000 rounds, and the first tasks of
//! each turn finished long before the last. Each spawned task is polled inside `tokio::task::coop::poll_proceed`,
//! whose guard, dropped without `made_progress`, puts the budget back to what
//! it was: each starts from the turn's budget, less the unit that call
//! takes (`every_task_has_a_tokio_budget_of_its_own`: 101 000 polls). The
//! main future is polled last in a turn (first, it could spend the 128 for
//! good and leave the tasks none) with the budget in force, all 128 units at
//! the start of a poll of the joint loop (the idle
//! wait's readiness poll runs unconstrained so it takes none), as a tokio
//! task's poll has them: tokio's own coop tests count them
//! (`hosted_main_future_gets_tokios_whole_budget`). tokio has no public call
//! that sets a fresh budget, so a spawned ringkit task cannot get exactly
//! 128. A tokio task that polls ringkit I/O spends a unit of tokio's budget per poll of a
//! ringkit operation (`crates/rt/src/coop.rs`).
//!
//! # Dropping
//! Dropping a hosted runtime
//!  keeps every drop inside the contexts it may
//! need, tokio's entered throughout and ringkit's installed: ringkit's tasks
//! first, inside the `LocalSet` (their drops may use tokio resources or call
//! `spawn_local`; what they spawn there never runs), then tokio's local
//! tasks (they may hold ringkit operations, or spawn ringkit tasks), then
//! ringkit's tasks again, then tokio's runtime with its other tasks (waiting,
//! as tokio does, for running `spawn_blocking` jobs), then the driver. A
//! task whose drop panics is caught and logged (`tracing::error!`), as tokio
//! does, and the tear-down goes on: with the `LocalSet` dropped first, a
//! drop that called `spawn_local` panicked, and a second panicking drop
//! aborted the process (`crates/rt/tests/hosted_drop.rs`).
//!
//! # Why this design
//! tokio-uring's (the ring fd as a tokio `AsyncFd`,
//! its operations driven from tokio tasks) puts tokio's scheduler in front
//! of every ringkit task; here ringkit's executor keeps its own queue and
//! wakers, and only the sleep goes through tokio. The alternative was not
//! built, so the choice is not a measured one; what this one costs is.
//!
//! # What is checked, one by one
//! Each on epoll and io_uring:
//!
//!
//! | inside a ringkit task | test |
//! |---|---|
//! | `tokio::spawn`, `task::spawn_local`, `spawn_blocking` | `rt/tests/hosted.rs` `tokio_apis_work_inside_ringkit_tasks` |
//! | `tokio::time` (sleep, timeout, interval) | same, and `tokio_timer_ends_a_blocked_wait` |
//! | `tokio::net` listen and connect | same, and `tokio_socket_event_ends_a_blocked_wait` |
//! | `tokio::fs`, `tokio::sync` (oneshot, mpsc) | same, and `cross_thread_wakes_end_blocked_waits` |
//! | a ringkit socket inside a tokio task | same |
//! | tokio-postgres (deadpool-postgres), redis, reqwest | `bench/tests/app.rs` (the `axum_app` example against real PostgreSQL and Redis; faults) |
//! | tonic (server framing over ringkit-hyper's h2, tonic's client) | `bench/tests/grpc.rs` |
//! | SIGTERM reaching hosted servers; a panicking handler | `hyper/tests/hosted.rs` |

use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::pin;
use std::task::{Context as TaskCx, Poll};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::context::Context;

use crate::kick::{clear_idle, set_idle, take_kicked};

/// [`crate::Builder::host_tokio_configure`]'s function.
#[derive(Clone)]
pub(crate) struct HostConfigure(
    pub(crate) std::sync::Arc<dyn Fn(&mut tokio::runtime::Builder) + Send + Sync>,
);

impl std::fmt::Debug for HostConfigure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostConfigure(..)")
    }
}

/// The driver's readiness fd, borrowed (the driver owns and closes it,
/// after the host is dropped).
struct Readiness(RawFd);

impl AsRawFd for Readiness {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A timerfd on `CLOCK_MONOTONIC` (std's `Instant` clock): readable once
/// ringkit's next deadline has passed.
struct TimerFd(std::os::fd::OwnedFd);

impl TimerFd {
    fn new() -> io::Result<TimerFd> {
        // SAFETY: no pointers; a new fd or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is ours alone.
        Ok(TimerFd(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
    }

    /// Fire at `at` (at once if it has passed).
    fn arm(&self, at: std::time::Instant) -> io::Result<()> {
        // A zero it_value would disarm: at least a nanosecond.
        let after = at
            .saturating_duration_since(std::time::Instant::now())
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid itimerspec; the old value is not asked for.
        let r =
            unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Take the expiry count, if any.
    fn drain(&self) {
        let mut n = 0u64;
        // SAFETY: reads at most 8 bytes into `n`; nonblocking.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The hosted tokio runtime of one ringkit runtime. Field order is drop
/// order: the registration goes first, then tokio's local tasks, then its
/// runtime (which drops the rest of its tasks).
pub(crate) struct Host {
    readiness: AsyncFd<Readiness>,
    timer: AsyncFd<TimerFd>,
    /// `None` once [`shutdown`](Self::shutdown) dropped it.
    local: Option<tokio::task::LocalSet>,
    rt: tokio::runtime::Runtime,
    /// How long the tear-down waits for running `spawn_blocking` jobs
    /// (`None`: until they end).
    shutdown_timeout: Option<Duration>,
}

impl Host {
    /// A current-thread tokio runtime with every driver on (then edited
    /// by `configure`), watching `fd`.
    pub(crate) fn new(
        fd: RawFd,
        shutdown_timeout: Option<Duration>,
        configure: Option<&HostConfigure>,
    ) -> io::Result<Host> {
        let mut b = tokio::runtime::Builder::new_current_thread();
        b.enable_all();
        if let Some(f) = configure {
            (f.0)(&mut b);
        }
        let rt = b.build()?;
        if rt.handle().runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "host_tokio_configure made the hosted tokio runtime multi-thread: \
                 hosted mode runs tokio on this thread only",
            ));
        }
        let (readiness, timer) = {
            let _g = rt.enter();
            // SAFETY: `fd` is the driver's, open until the driver is
            // dropped, which `Runtime::drop` does only after this `Host`
            // (and so this registration) is gone.
            let r = unsafe { AsyncFd::register_with_interest(Readiness(fd), Interest::READABLE) }
                .map_err(io::Error::from)?;
            // SAFETY: the `TimerFd` owns its fd and lives inside the
            // `AsyncFd`, which deregisters it before dropping (closing) it.
            let t = unsafe { AsyncFd::register_with_interest(TimerFd::new()?, Interest::READABLE) }
                .map_err(io::Error::from)?;
            (r, t)
        };
        Ok(Host {
            readiness,
            timer,
            local: Some(tokio::task::LocalSet::new()),
            rt,
            shutdown_timeout,
        })
    }

    /// Run `fut` (ringkit's main future) to completion on the joint loop.
    pub(crate) fn block_on<F: Future>(&self, cx: &Context, fut: F) -> F::Output {
        let local = self
            .local
            .as_ref()
            .expect("hosted runtime already shut down");
        self.rt.block_on(local.run_until(self.run(cx, fut)))
    }

    /// Tear down in the order that keeps every drop inside the contexts it
    /// may need, with tokio's runtime entered throughout and ringkit's
    /// context installed: ringkit's tasks first, inside the `LocalSet`
    /// (their drops may use tokio resources or `spawn_local`; what they
    /// spawn there never runs), then tokio's local tasks (they may hold
    /// ringkit operations, or spawn ringkit tasks), then ringkit's tasks
    /// again (those), then tokio's runtime with its remaining tasks.
    /// Dropping the runtime waits for `spawn_blocking` jobs that are
    /// running, as tokio does, for at most the shutdown timeout if one was
    /// given.
    pub(crate) fn shutdown(self, drain_ringkit: impl Fn()) {
        let Host {
            readiness,
            timer,
            local,
            rt,
            shutdown_timeout,
        } = self;
        {
            let _g = rt.enter();
            drop(readiness);
            drop(timer);
            if let Some(local) = local {
                {
                    let _in = local.enter();
                    drain_ringkit();
                }
                drop(local);
            }
            drain_ringkit();
        }
        match shutdown_timeout {
            Some(limit) => rt.shutdown_timeout(limit),
            None => drop(rt),
        }
        clear_idle();
    }

    async fn run<F: Future>(&self, cx: &Context, fut: F) -> F::Output {
        let mut fut = pin!(fut);
        let waker = cx.main_waker();
        let mut tcx = TaskCx::from_waker(&waker);
        cx.schedule(crate::sched::encode(cx.id, 0, crate::sched::MAIN_KEY));
        loop {
            if let Poll::Ready(v) = cx.run_turn(fut.as_mut(), &mut tcx) {
                return v;
            }
            cx.park(Some(Duration::ZERO));
            if cx.has_runnable() || cx.driver.borrow_mut().may_have_more() {
                tokio::task::yield_now().await;
                continue;
            }
            let deadline = cx.timers.borrow_mut().next_deadline();
            if let Some(d) = deadline {
                if let Err(e) = self.timer.get_ref().arm(d) {
                    // Not expected: rather than miss the deadline, give
                    // tokio a turn and look again.
                    tracing::error!("ringkit: hosted timer could not be armed: {e}");
                    tokio::task::yield_now().await;
                    continue;
                }
            }
            // Unconstrained: the readiness poll must not spend the tokio
            // budget the next turn polls its main future with.
            tokio::task::coop::unconstrained(poll_fn(|t| self.idle(cx, t))).await;
            set_idle(None);
        }
    }

    /// One poll of the idle wait: ready once ringkit has work.
    fn idle(&self, cx: &Context, t: &mut TaskCx<'_>) -> Poll<()> {
        if cx.has_runnable() || take_kicked() {
            return Poll::Ready(());
        }
        match self.readiness.poll_read_ready(t) {
            Poll::Ready(Ok(mut guard)) => {
                // Cleared before the park that drains it: a later event
                // is a new edge.
                guard.clear_ready();
                return Poll::Ready(());
            }
            Poll::Ready(Err(e)) => {
                // Not expected (the fd outlives its registration). Rather
                // than spin, wait in the driver itself for up to 10 ms:
                // ringkit keeps serving, tokio gets a turn every 10 ms.
                tracing::error!("ringkit: hosted readiness wait failed: {e}");
                cx.park(Some(Duration::from_millis(10)));
                if cx.has_runnable() {
                    return Poll::Ready(());
                }
                t.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Pending => {}
        }
        if let Poll::Ready(Ok(mut guard)) = self.timer.poll_read_ready(t) {
            // Expired (this arming or an earlier one: a spare turn at
            // worst); read, so the next expiry is a new edge.
            guard.get_inner().drain();
            guard.clear_ready();
            return Poll::Ready(());
        }
        set_idle(Some(t.waker()));
        Poll::Pending
    }
}
