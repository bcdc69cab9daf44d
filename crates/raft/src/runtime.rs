//! ringkit as openraft's [`AsyncRuntime`].
//!
//! | openraft needs | ringkit gives |
//! |---|---|
//! | `spawn`, `JoinHandle` (dropping detaches) | [`ringkit::spawn`], [`ringkit::JoinHandle`] |
//! | `sleep`, `sleep_until`, `Instant` | [`ringkit::time::Sleep`] on `std::time::Instant` (the runtime's timer heap, no SQE) |
//! | `timeout`, `timeout_at` | [`Timeout`]: the future and a [`ringkit::time::Sleep`], the future polled first |
//! | `Mpsc`, `Watch`, `Oneshot`, `Mutex` | tokio's `sync` types, through `openraft-rt-tokio` |
//! | `thread_rng` | `rand::rng()` |
//!
//! The channels and the mutex are tokio's, but **no tokio runtime runs**:
//! tokio's `sync` module is plain data and wakers, with no reactor or
//! timer behind it, so it works on any executor; ringkit's loop polls the
//! tasks and wakes them as any other waker. Hosted mode
//! (`ringkit::Builder::host_tokio`, feature `tokio`) is not needed for openraft itself;
//! a network layer built on tokio sockets would need it.
//!
//! openraft is built with its `single-threaded` feature: ringkit runs one
//! runtime per thread and its tasks are not `Send`, so a `Raft` lives on
//! the thread that made it, as with the monoio and compio adapters.
//! Compared with openraft's adapters: compio and monoio also run
//! single-threaded (the same feature), hold their runtime in the struct,
//! and bring their own channels (flume, `see`, futures' oneshot) or their
//! runtime's; tokio's adapter spawns with `spawn_local` on a `LocalSet`
//! under the feature. This one borrows tokio's `sync` types (plain data
//! and wakers, no tokio runtime behind them), and builds and drops a
//! runtime per `block_on`, because openraft's `new` takes no settings.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use openraft_rt::{AsyncRuntime, OptionalSend};
use ringkit::time::Sleep;
use ringkit::Backend;

/// Which ringkit backend a [`RingkitRuntime`] made by openraft's
/// [`AsyncRuntime::new`] uses (a type, because `new` takes no settings).
pub trait ChooseBackend: 'static {
    /// The backend.
    const BACKEND: Backend;
}

/// io_uring when usable here, else epoll.
#[derive(Debug)]
pub struct Auto;
/// io_uring, or a panic where it cannot run.
#[derive(Debug)]
pub struct Uring;
/// epoll.
#[derive(Debug)]
pub struct Epoll;

impl ChooseBackend for Auto {
    const BACKEND: Backend = Backend::Auto;
}
impl ChooseBackend for Uring {
    const BACKEND: Backend = Backend::Uring;
}
impl ChooseBackend for Epoll {
    const BACKEND: Backend = Backend::Epoll;
}

/// openraft's runtime on ringkit (see the [module docs](self)).
///
/// As a type (`AsyncRuntime = RingkitRuntime` in the type config), it
/// lets openraft spawn, sleep and time out on the ringkit runtime of the
/// thread it runs on: run the `Raft` inside `ringkit::run` or a
/// `ringkit::launch` thread.
///
/// As a value (openraft's [`AsyncRuntime::new`] and
/// [`AsyncRuntime::block_on`], which openraft uses in tests only), each
/// `block_on` builds a ringkit runtime of backend `B` on the calling
/// thread and drops it when the future is done, with any task still
/// pending: ringkit allows one runtime per thread, and openraft's test
/// harness makes a second before it drops the first.
pub struct RingkitRuntime<B: ChooseBackend = Auto> {
    _backend: PhantomData<B>,
}

impl<B: ChooseBackend> fmt::Debug for RingkitRuntime<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingkitRuntime")
            .field("backend", &B::BACKEND)
            .finish()
    }
}

/// A future did not finish before its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// `fut`, or [`Elapsed`] once `sleep` fires first. The future is polled
/// before the timer, so one that is ready at the deadline still wins.
#[derive(Debug)]
pub struct Timeout<F> {
    fut: F,
    sleep: Sleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `fut` is structurally pinned: it is never moved out of
        // `self` nor given out unpinned; `sleep` is `Unpin` and not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above, `this.fut` stays where it is until dropped.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        if let Poll::Ready(v) = fut.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(&mut this.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<B: ChooseBackend> AsyncRuntime for RingkitRuntime<B> {
    type JoinError = ringkit::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = ringkit::JoinHandle<T>;
    type Sleep = Sleep;
    type Instant = Instant;
    type TimeoutError = Elapsed;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = Timeout<T>;
    type ThreadLocalRng = rand::rngs::ThreadRng;

    type Mpsc = openraft_rt_tokio::TokioMpsc;
    type Watch = openraft_rt_tokio::TokioWatch;
    type Oneshot = openraft_rt_tokio::TokioOneshot;
    type Mutex<T: OptionalSend + 'static> = openraft_rt_tokio::TokioMutex<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        ringkit::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        ringkit::time::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        ringkit::time::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        Timeout {
            fut: future,
            sleep: ringkit::time::sleep(duration),
        }
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        Timeout {
            fut: future,
            sleep: ringkit::time::sleep_until(deadline),
        }
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        matches!(join_error, ringkit::JoinError::Panicked(_))
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        rand::rng()
    }

    fn new(_threads: usize) -> Self {
        // One runtime per thread: `threads` does not apply (openraft says
        // single-threaded runtimes may ignore it).
        RingkitRuntime {
            _backend: PhantomData,
        }
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        let rt = ringkit::Runtime::builder()
            .backend(B::BACKEND)
            .build()
            .unwrap_or_else(|e| panic!("ringkit runtime ({:?}): {e}", B::BACKEND));
        rt.block_on(future)
    }
}
