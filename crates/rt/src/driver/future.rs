//! `Op`, the future that drives one `OpCode` on the runtime's backend, and
//! `op_within`, an operation bounded by time without progress.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use super::epoll::EpollDriver;
use super::uring::UringDriver;
use super::{Driver, Operation, Source};
use crate::coop;
use crate::driver::current;
use crate::metrics::Metrics;

#[derive(Debug, Clone, Copy)]
enum State {
    Init,
    /// In flight on io_uring: its slot key, and the number of the runtime
    /// whose driver holds it (`current::id`).
    Uring(usize, u64),
    Epoll,
    Done,
}

/// The future of one operation.
pub(crate) struct Op<T: Operation> {
    data: Option<T>,
    state: State,
    /// Its deadline passed and a cancel was queued ([`Op::expire`]).
    expired: bool,
}

// `Op` never relies on being pinned: the kernel only sees heap memory owned
// by `data` (the `OpCode` contract), which does not move with the `Op`.
impl<T: Operation> Unpin for Op<T> {}

impl<T: Operation> Op<T> {
    pub(crate) fn new(data: T) -> Op<T> {
        Op {
            data: Some(data),
            state: State::Init,
            expired: false,
        }
    }

    /// The operation's deadline passed. Not started, or on epoll (nothing
    /// in flight between polls): it completes now, with `TimedOut`, and
    /// must not be polled again. In flight on io_uring: a cancel is queued
    /// and `None` returned; keep polling: the CQE completes it, `TimedOut`
    /// if the cancel won, its own result if the operation finished first.
    pub(crate) fn expire(&mut self) -> Option<T::Output> {
        match self.state {
            State::Init | State::Epoll => {
                self.state = State::Done;
                let data = self.data.take()?;
                Some(data.complete(Err(timed_out()), Source::Early))
            }
            State::Uring(key, owner) => {
                self.expired = true;
                if current::id() != Some(owner) {
                    // Its runtime is gone: nothing to cancel there.
                    return None;
                }
                let members = self.data.as_ref().map_or(0, T::uring_chain_len);
                current::try_driver(|d, m| {
                    if let Driver::Uring(u) = d {
                        u.cancel_live(key, members, m);
                    }
                });
                None
            }
            State::Done => None,
        }
    }

    /// Whether the kernel holds it with a linked timeout of its own
    /// ([`super::UringOp::uring_link_timeout`]): then no runtime timer is needed.
    pub(crate) fn kernel_bounded(&self) -> bool {
        matches!(self.state, State::Uring(..))
            && self
                .data
                .as_ref()
                .is_some_and(|d| d.uring_link_timeout().is_some())
    }
}

fn runtime_gone() -> io::Error {
    io::Error::other("the runtime this operation was submitted on was dropped")
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "no progress within the operation's time limit",
    )
}

/// Limits from this long up count from the loop turn's clock.
const COARSE_FROM: Duration = Duration::from_secs(5);

/// Run `op`, bounded by `limit` (`None`: unbounded): an operation that has
/// not completed when `limit` passes fails with `TimedOut` and its buffers
/// come back (see [`Op::expire`]). A write that moves any byte completes,
/// so a loop of such writes, each bounded, is bounded by the time without
/// progress (nginx's `send_timeout`), not by the total.
pub(crate) fn op_within<T: Operation>(op: T, limit: Option<Duration>) -> Within<T> {
    Within {
        op: Op::new(op),
        // No limit, or one past the clock's range: unbounded.
        limit: limit.filter(|l| std::time::Instant::now().checked_add(*l).is_some()),
        deadline: None,
    }
}

/// The future of [`op_within`]: the operation and, once it has had to wait,
/// its deadline. Written out by hand so it holds the operation once (an
/// `async fn` kept the argument and the `Op` side by side, and a task
/// awaiting a bounded write was sized by both).
pub(crate) struct Within<T: Operation> {
    op: Op<T>,
    limit: Option<Duration>,
    /// Made only once the operation has to wait (an epoll write to a socket
    /// with room completes in its first poll), from the loop turn's clock:
    /// a send timeout is set on every write, and needs no precision.
    deadline: Option<current::Deadline>,
}

impl<T: Operation> Future for Within<T> {
    type Output = T::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        // Unpin: `Op` is, and so are the rest.
        let this = self.get_mut();
        if let Poll::Ready(out) = Pin::new(&mut this.op).poll(cx) {
            return Poll::Ready(out);
        }
        let Some(limit) = this.limit else {
            return Poll::Pending;
        };
        if this.op.expired || this.op.kernel_bounded() {
            // Cancelled already, or bounded by its own linked timeout on
            // io_uring (one completion then says which came first).
            return Poll::Pending;
        }
        let clock = current::clock();
        let d = this.deadline.get_or_insert_with(|| {
            // A long limit counts from the turn's clock (early by at most
            // the current turn's length, nothing next to seconds); a short
            // one from the real clock.
            let from = if limit >= COARSE_FROM {
                (clock.coarse_now)()
            } else {
                std::time::Instant::now()
            };
            // In range: checked when the op began, and `from` is no later.
            let at = from.checked_add(limit).unwrap_or(from);
            current::Deadline::new(&clock, at)
        });
        if (clock.poll)(d, cx).is_ready() {
            if let Some(out) = this.op.expire() {
                return Poll::Ready(out);
            }
        }
        Poll::Pending
    }
}

fn to_result(res: i32) -> io::Result<u32> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as u32)
    }
}

impl<T: Operation> Future for Op<T> {
    type Output = T::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        // The task's cooperative budget, checked before anything is taken
        // (a completion left in the driver waits there for the next poll).
        ready!(coop::poll_proceed(cx));
        let out = self.poll_op(cx);
        if out.is_ready() {
            coop::spend();
        }
        out
    }
}

/// A result and where it came from, before the op turns it into its output.
type Done = (io::Result<u32>, Source);

impl<T: Operation> Op<T> {
    fn poll_op(&mut self, cx: &mut Context<'_>) -> Poll<T::Output> {
        let Op { data, state, .. } = self;
        let data = data.as_mut().expect("Op polled after completion");
        if let State::Init = state {
            match data.before(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(r)) => return Poll::Ready(self.finish((r, Source::Early))),
                Poll::Ready(None) => {}
            }
        }
        let polled = current::try_driver_of_runtime(|d, m, runtime| match d {
            Driver::Uring(u) => poll_uring(u, m, runtime, state, data, cx),
            Driver::Epoll(e) => {
                *state = State::Epoll;
                poll_epoll(e, m, data, cx)
            }
        })
        .expect("not inside a ringkit runtime (build a Runtime on this thread first)");
        match polled {
            Poll::Ready(done) => Poll::Ready(self.finish(done)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The op is over: its output, from its result. A cancel that won the
    /// race against the op's time limit is the limit's `TimedOut`.
    fn finish(&mut self, (r, from): Done) -> T::Output {
        let r = match r {
            Err(e) if self.expired && e.raw_os_error() == Some(libc::ECANCELED) => Err(timed_out()),
            r => r,
        };
        self.state = State::Done;
        let data = self.data.take().expect("data present");
        data.complete(r, from)
    }
}

/// io_uring: on the first poll, make the op in place if it asks to, else
/// submit its SQEs (its chain, then its own); then wait for its CQE.
fn poll_uring<T: Operation>(
    u: &mut UringDriver,
    m: &Metrics,
    runtime: u64,
    state: &mut State,
    data: &mut T,
    cx: &mut Context<'_>,
) -> Poll<Done> {
    match *state {
        State::Init => {}
        State::Uring(key, owner) if owner == runtime => {
            return u.poll_op(key, cx).map(|(res, from)| (to_result(res), from))
        }
        // Polled under a later runtime than the one it was submitted on,
        // which was dropped (and waited for its operations) first: its key
        // means nothing here.
        State::Uring(..) => return Poll::Ready((Err(runtime_gone()), Source::Early)),
        State::Epoll | State::Done => unreachable!("an epoll or finished op polled on io_uring"),
    }
    if let Some(tried) = data.uring_try_inline() {
        // Made in place: counted here, done or not.
        Metrics::add(&m.syscalls, 1);
        if let Some(r) = tried {
            return Poll::Ready((r, Source::Inline));
        }
    }
    let chain = data.uring_chain();
    let key = if chain.is_empty() {
        u.submit(data.uring_entry(), data.uring_link_timeout(), m)
    } else {
        u.submit_chain(chain, data.uring_entry(), m)
    };
    match key {
        Ok(key) => {
            *state = State::Uring(key, runtime);
            u.set_waker(key, cx.waker());
            Poll::Pending
        }
        Err(e) => Poll::Ready((Err(e), Source::NotSubmitted)),
    }
}

/// epoll: wait until the fd is ready (if the op waits on one), then make
/// the syscall in place; `WouldBlock` clears the readiness and waits again.
fn poll_epoll<T: Operation>(
    e: &mut EpollDriver,
    m: &Metrics,
    data: &mut T,
    cx: &mut Context<'_>,
) -> Poll<Done> {
    let ready = data.epoll_ready();
    let wait = |e: &mut EpollDriver, (fd, dir)| match e.wait_ready(fd, dir, cx.waker(), m) {
        Ok(()) => Poll::Pending,
        Err(err) => Poll::Ready((Err(err), Source::Epoll)),
    };
    if let Some((fd, dir)) = ready {
        if !e.is_ready(fd, dir) {
            return wait(e, (fd, dir));
        }
    }
    loop {
        Metrics::add(&m.syscalls, 1);
        match data.epoll_attempt() {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                let Some((fd, dir)) = ready else {
                    return Poll::Ready((Err(err), Source::Epoll));
                };
                e.clear_ready(fd, dir);
                return wait(e, (fd, dir));
            }
            Ok(n) => {
                if let Some((fd, dir)) = ready {
                    if data.epoll_drained(n) {
                        e.clear_ready(fd, dir);
                    }
                }
                return Poll::Ready((Ok(n), Source::Epoll));
            }
            Err(err) => return Poll::Ready((Err(err), Source::Epoll)),
        }
    }
}

impl<T: Operation> Drop for Op<T> {
    fn drop(&mut self) {
        let State::Uring(key, owner) = self.state else {
            return;
        };
        let Some(data) = self.data.take() else {
            return;
        };
        if current::id() != Some(owner) {
            // Dropped after its runtime (under a later one, or none): the
            // key means nothing to this thread's driver, and whether the
            // kernel is done with the data is unknown. Leak it, counted.
            current::try_metrics(|m| Metrics::add(&m.ops_leaked, 1));
            tracing::warn!(
                "ringkit: an operation dropped in flight after its runtime; its buffers are leaked"
            );
            std::mem::forget(data);
            return;
        }
        let mut data = Some(data);
        let handed = current::hand_off(|d, m| {
            if let Driver::Uring(u) = d {
                u.orphan(key, data.take().expect("data present"), m);
            }
        });
        if let Some(d) = data {
            // No driver to hand it to (the runtime is gone, or its driver
            // is held further up: a drop from inside the driver, which no
            // path makes): the kernel may still use its memory, so leak it
            // rather than free it under the kernel's feet, and count it
            // (`MetricsSnapshot::ops_leaked`).
            debug_assert_eq!(handed.err(), Some(current::Away::InUse));
            current::try_metrics(|m| Metrics::add(&m.ops_leaked, 1));
            std::mem::forget(d);
        }
    }
}
