//! `Op`, the future that drives one `OpCode` on the runtime's backend, and
//! `op_within`, an operation bounded by time without progress.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use super::{Driver, OpCode, INLINE, NOT_SUBMITTED};
use crate::coop;
use crate::driver::current;
use crate::metrics::Metrics;

#[derive(Debug, Clone, Copy)]
enum State {
    Init,
    Uring(usize),
    Epoll,
    Done,
}

/// The future of one operation.
pub(crate) struct Op<T: OpCode> {
    data: Option<T>,
    state: State,
    /// Its deadline passed and a cancel was queued ([`Op::expire`]).
    expired: bool,
}

// `Op` never relies on being pinned: the kernel only sees heap memory owned
// by `data` (the `OpCode` contract), which does not move with the `Op`.
impl<T: OpCode> Unpin for Op<T> {}

impl<T: OpCode> Op<T> {
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
                Some(data.complete(Err(timed_out()), 0))
            }
            State::Uring(key) => {
                self.expired = true;
                let members = self.data.as_ref().map_or(0, T::uring_chain_len);
                current::try_with(|rt| {
                    if let Driver::Uring(u) = &mut *rt.driver.borrow_mut() {
                        u.cancel_live(key, members, rt.metrics);
                    }
                });
                None
            }
            State::Done => None,
        }
    }

    /// Whether the kernel holds it with a linked timeout of its own
    /// ([`OpCode::uring_link_timeout`]): then no runtime timer is needed.
    pub(crate) fn kernel_bounded(&self) -> bool {
        matches!(self.state, State::Uring(_))
            && self
                .data
                .as_ref()
                .is_some_and(|d| d.uring_link_timeout().is_some())
    }
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
pub(crate) fn op_within<T: OpCode>(op: T, limit: Option<Duration>) -> Within<T> {
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
pub(crate) struct Within<T: OpCode> {
    op: Op<T>,
    limit: Option<Duration>,
    /// Made only once the operation has to wait (an epoll write to a socket
    /// with room completes in its first poll), from the loop turn's clock:
    /// a send timeout is set on every write, and needs no precision.
    deadline: Option<current::Deadline>,
}

impl<T: OpCode> Future for Within<T> {
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

impl<T: OpCode> Future for Op<T> {
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

impl<T: OpCode> Op<T> {
    fn poll_op(&mut self, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = self;
        let data = this.data.as_mut().expect("Op polled after completion");
        if let State::Init = this.state {
            match data.before(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(r)) => {
                    this.state = State::Done;
                    let data = this.data.take().expect("data present");
                    return Poll::Ready(data.complete(r, 0));
                }
                Poll::Ready(None) => {}
            }
        }
        let res = current::with(|rt| {
            let mut drv = rt.driver.borrow_mut();
            match &mut *drv {
                Driver::Uring(u) => match this.state {
                    State::Init => {
                        if let Some(tried) = data.uring_try_inline() {
                            // Made in place: counted here, done or not.
                            Metrics::add(&rt.metrics.syscalls, 1);
                            if let Some(r) = tried {
                                return Poll::Ready((r, INLINE));
                            }
                        }
                        let chain = data.uring_chain();
                        let key = if chain.is_empty() {
                            u.submit(data.uring_entry(), data.uring_link_timeout(), rt.metrics)
                        } else {
                            u.submit_chain(chain, data.uring_entry(), rt.metrics)
                        };
                        match key {
                            Ok(key) => {
                                this.state = State::Uring(key);
                                u.set_waker(key, cx.waker());
                                Poll::Pending
                            }
                            Err(e) => Poll::Ready((Err(e), NOT_SUBMITTED)),
                        }
                    }
                    State::Uring(key) => match u.poll_op(key, cx) {
                        Poll::Ready((res, flags)) => Poll::Ready((to_result(res), flags)),
                        Poll::Pending => Poll::Pending,
                    },
                    _ => unreachable!("uring op in epoll state"),
                },
                Driver::Epoll(e) => {
                    this.state = State::Epoll;
                    let ready = data.epoll_ready();
                    if let Some((fd, dir)) = ready {
                        if !e.is_ready(fd, dir) {
                            return match e.wait_ready(fd, dir, cx.waker(), rt.metrics) {
                                Ok(()) => Poll::Pending,
                                Err(err) => Poll::Ready((Err(err), 0)),
                            };
                        }
                    }
                    loop {
                        Metrics::add(&rt.metrics.syscalls, 1);
                        match data.epoll_attempt() {
                            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                                let Some((fd, dir)) = ready else {
                                    return Poll::Ready((Err(err), 0));
                                };
                                e.clear_ready(fd, dir);
                                return match e.wait_ready(fd, dir, cx.waker(), rt.metrics) {
                                    Ok(()) => Poll::Pending,
                                    Err(err) => Poll::Ready((Err(err), 0)),
                                };
                            }
                            Ok(n) => {
                                if let Some((fd, dir)) = ready {
                                    if data.epoll_drained(n) {
                                        e.clear_ready(fd, dir);
                                    }
                                }
                                return Poll::Ready((Ok(n), 0));
                            }
                            Err(err) => return Poll::Ready((Err(err), 0)),
                        }
                    }
                }
            }
        });
        match res {
            Poll::Ready((r, flags)) => {
                let r = match r {
                    Err(e) if this.expired && e.raw_os_error() == Some(libc::ECANCELED) => {
                        Err(timed_out())
                    }
                    r => r,
                };
                this.state = State::Done;
                let data = this.data.take().expect("data present");
                Poll::Ready(data.complete(r, flags))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: OpCode> Drop for Op<T> {
    fn drop(&mut self) {
        let State::Uring(key) = self.state else {
            return;
        };
        let Some(data) = self.data.take() else {
            return;
        };
        let mut data = Some(data);
        let _ = current::try_with(|rt| {
            if let Ok(mut drv) = rt.driver.try_borrow_mut() {
                if let Driver::Uring(u) = &mut *drv {
                    u.orphan(key, data.take().expect("data present"), rt.metrics);
                }
            }
        });
        if let Some(d) = data {
            // No driver to hand it to: the kernel may still use its memory,
            // so leak it rather than free it under the kernel's feet.
            std::mem::forget(d);
        }
    }
}
