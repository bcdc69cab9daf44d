//! Timers: `sleep`, `timeout`, `interval`.
//!
//! Timers live in a binary heap in the runtime. They cost no SQE and no
//! syscall: the driver's wait is bounded by the earliest deadline (io_uring:
//! `IORING_ENTER_EXT_ARG` timeout; epoll: the `epoll_wait` timeout), and
//! expired timers are fired after each park. A dropped timer is removed
//! lazily (its heap entry is skipped when it comes up), and the heap is
//! compacted once dead entries outnumber live ones, so its memory follows
//! the live timers (a server that drops a 30 s header timeout per request
//! would otherwise keep every one of them until its deadline).
//!
//! A timer belongs to the runtime it was first polled in: dropping or
//! resetting a [`Sleep`] inside another runtime never touches that one's
//! timers. A deadline too far to represent (`Duration::MAX`) means never.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::context::{try_with_ctx, with_ctx};

/// Completes at `deadline`. Created by [`sleep`] / [`sleep_until`].
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    /// The deadline could not be represented: never completes.
    never: bool,
    /// `(runtime serial, timer id)` once registered.
    id: Option<(u64, u64)>,
}

/// Far enough to mean "never" for any program, near enough for `Instant`.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl Sleep {
    fn new(deadline: Option<Instant>) -> Sleep {
        let now = Instant::now();
        Sleep {
            deadline: deadline.unwrap_or_else(|| later(now, FAR)),
            never: deadline.is_none(),
            id: None,
        }
    }

    /// When it completes (for a sleep too long to represent, a deadline a
    /// century away; it never completes).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Move the deadline.
    pub fn reset(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
        self.never = false;
    }

    fn cancel(&mut self) {
        cancel_timer(&mut self.id);
    }
}

/// Forget the timer `id` names, if it is this thread's runtime's.
fn cancel_timer(id: &mut Option<(u64, u64)>) {
    if let Some((serial, id)) = id.take() {
        let _ = try_with_ctx(|cx| {
            if cx.serial == serial {
                cx.timers.borrow_mut().cancel(id);
            }
        });
    }
}

/// The driver's deadlines (bounded operations) run on these timers.
pub(crate) fn driver_clock() -> crate::driver::current::Clock {
    crate::driver::current::Clock {
        poll: |d, cx| poll_timer(d.at, &mut d.id, cx),
        cancel: |d| cancel_timer(&mut d.id),
        coarse_now,
    }
}

/// Far enough ahead that the loop turn's clock ([`coarse_now`]) can say
/// "not due" without reading the clock again.
const SURELY_LATER: Duration = Duration::from_secs(1);

/// The clock as of the end of this thread's last loop turn (no clock read;
/// `Instant::now()` outside a runtime). Behind the real clock by at most
/// one turn: for deadlines that need no precision, such as a 60 s send
/// timeout set on every write.
pub fn coarse_now() -> Instant {
    try_with_ctx(|cx| cx.now.get()).unwrap_or_else(Instant::now)
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.never {
            return Poll::Pending;
        }
        let deadline = self.deadline;
        poll_timer(deadline, &mut self.id, cx)
    }
}

/// Poll a timer for `deadline` whose registration is `id`: `Ready` once
/// due (the registration gone), else registered to wake `cx`.
fn poll_timer(deadline: Instant, id: &mut Option<(u64, u64)>, cx: &mut Context<'_>) -> Poll<()> {
    let cur = *id;
    // Registered here and not fired: not due (the runtime fires it by the
    // real clock). Otherwise check the clock, or the turn's clock when the
    // deadline is surely ahead of it.
    let (new_id, due) = with_ctx(|rt| {
        let mut t = rt.timers.borrow_mut();
        let mine = cur.filter(|&(serial, _)| serial == rt.serial);
        if let Some((tid, w)) = mine.and_then(|(_, tid)| t.waker_mut(tid).map(|w| (tid, w))) {
            if !w.will_wake(cx.waker()) {
                *w = cx.waker().clone();
            }
            return (Some((rt.serial, tid)), false);
        }
        let ahead = deadline
            .checked_duration_since(rt.now.get())
            .is_some_and(|d| d > SURELY_LATER);
        if !ahead && Instant::now() >= deadline {
            return (None, true);
        }
        // Not registered, fired, or registered in another runtime (a
        // `Sleep` moved between threads): register here.
        (
            Some((rt.serial, t.insert(deadline, cx.waker().clone()))),
            false,
        )
    });
    if due {
        cancel_timer(id);
        return Poll::Ready(());
    }
    *id = new_id;
    Poll::Pending
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// Sleep for `dur` (`Duration::MAX`, or any span past what `Instant` can
/// hold, sleeps forever).
///
/// ```
/// use std::time::Duration;
/// ringkit::run(async {
///     ringkit::time::sleep(Duration::from_millis(5)).await;
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn sleep(dur: Duration) -> Sleep {
    Sleep::new(Instant::now().checked_add(dur))
}

/// Sleep until `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(Some(deadline))
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

/// Run `fut` for at most `dur`; on expiry it is dropped and `Err(Elapsed)`
/// returned. `Duration::MAX` waits as long as `fut` takes.
///
/// ```
/// use std::time::Duration;
/// use ringkit::time::{sleep, timeout, Elapsed};
/// ringkit::run(async {
///     let slow = sleep(Duration::from_secs(60));
///     assert_eq!(timeout(Duration::from_millis(5), slow).await, Err(Elapsed));
///     assert_eq!(timeout(Duration::MAX, async { 7 }).await, Ok(7));
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
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
///
/// ```
/// use std::time::Duration;
/// ringkit::run(async {
///     let mut every = ringkit::time::interval(Duration::from_millis(2));
///     for _ in 0..3 {
///         every.tick().await;
///     }
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn interval(period: Duration) -> Interval {
    assert!(!period.is_zero(), "interval period must be non-zero");
    Interval {
        next: later(Instant::now(), period),
        period,
    }
}

/// `at + d`, or a century from `at` when that is past what `Instant` holds.
fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

impl Interval {
    /// Wait for the next tick; returns its scheduled instant.
    pub async fn tick(&mut self) -> Instant {
        let at = self.next;
        sleep_until(at).await;
        let now = Instant::now();
        self.next = later(self.next, self.period);
        if self.next <= now {
            // Skip missed ticks instead of bursting.
            let behind = (now - self.next).as_nanos() / self.period.as_nanos() + 1;
            self.next = later(self.next, self.period * behind as u32);
        }
        at
    }
}
