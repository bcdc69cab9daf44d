//! Timers: `sleep`, `timeout`, `interval`.
//!
//! Timers live in a binary heap in the runtime. They cost no SQE and no
//! syscall: the driver's wait is bounded by the earliest deadline (io_uring:
//! `IORING_ENTER_EXT_ARG` timeout; epoll: the `epoll_wait` timeout), and
//! expired timers are fired after each park. A dropped timer is removed
//! lazily (its heap entry is skipped when it comes up).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::runtime::{try_with_ctx, with_ctx};

#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    wakers: HashMap<u64, Waker>,
    next_id: u64,
}

impl Timers {
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(Reverse((d, id))) = self.heap.peek() {
            if self.wakers.contains_key(id) {
                return Some(*d);
            }
            self.heap.pop();
        }
        None
    }

    fn insert(&mut self, deadline: Instant, waker: Waker) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.heap.push(Reverse((deadline, id)));
        self.wakers.insert(id, waker);
        id
    }

    pub(crate) fn fire(&mut self, now: Instant) {
        while let Some(Reverse((d, id))) = self.heap.peek().copied() {
            if d > now {
                break;
            }
            self.heap.pop();
            if let Some(w) = self.wakers.remove(&id) {
                w.wake();
            }
        }
    }
}

/// Completes at `deadline`. Created by [`sleep`] / [`sleep_until`].
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    id: Option<u64>,
}

impl Sleep {
    /// When it completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Move the deadline.
    pub fn reset(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
    }

    fn cancel(&mut self) {
        if let Some(id) = self.id.take() {
            let _ = try_with_ctx(|cx| cx.timers.borrow_mut().wakers.remove(&id));
        }
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        let id = self.id;
        let new_id = with_ctx(|rt| {
            let mut t = rt.timers.borrow_mut();
            match id.and_then(|id| t.wakers.get_mut(&id).map(|w| (id, w))) {
                Some((id, w)) => {
                    if !w.will_wake(cx.waker()) {
                        *w = cx.waker().clone();
                    }
                    id
                }
                None => t.insert(deadline, cx.waker().clone()),
            }
        });
        self.id = Some(new_id);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// Sleep for `dur`.
pub fn sleep(dur: Duration) -> Sleep {
    sleep_until(Instant::now() + dur)
}

/// Sleep until `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep { deadline, id: None }
}

/// `timeout` expired before the future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, Elapsed)
    }
}

/// Run `fut` for at most `dur`; on expiry it is dropped and `Err(Elapsed)` returned.
///
/// Dropping an I/O future cancels its operation (see [`crate::driver`]): a
/// stream read that completes after the cancel keeps its bytes for the next
/// read on the same stream, so nothing is lost. To learn how many bytes a
/// timed-out read got, use [`crate::net::TcpStream::read_timeout`].
pub async fn timeout<F: Future>(dur: Duration, fut: F) -> Result<F::Output, Elapsed> {
    let mut fut = std::pin::pin!(fut);
    let mut sleep = std::pin::pin!(sleep(dur));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(Elapsed));
        }
        Poll::Pending
    })
    .await
}

/// Ticks every `period`, starting one period from now; missed ticks are skipped.
#[derive(Debug)]
pub struct Interval {
    next: Instant,
    period: Duration,
}

/// An [`Interval`] with this period (must be non-zero).
pub fn interval(period: Duration) -> Interval {
    assert!(!period.is_zero(), "interval period must be non-zero");
    Interval {
        next: Instant::now() + period,
        period,
    }
}

impl Interval {
    /// Wait for the next tick; returns its scheduled instant.
    pub async fn tick(&mut self) -> Instant {
        let at = self.next;
        sleep_until(at).await;
        let now = Instant::now();
        self.next += self.period;
        if self.next <= now {
            // Skip missed ticks instead of bursting.
            let behind = (now - self.next).as_nanos() / self.period.as_nanos() + 1;
            self.next += self.period * behind as u32;
        }
        at
    }
}
