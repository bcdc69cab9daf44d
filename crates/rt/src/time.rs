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

    /// Heap entries, live and dead (for tests).
    #[cfg(test)]
    fn heap_len(&self) -> usize {
        self.heap.len()
    }

    fn insert(&mut self, deadline: Instant, waker: Waker) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.heap.push(Reverse((deadline, id)));
        self.wakers.insert(id, waker);
        // Hosted mode: a timer added by tokio's side while the loop waits
        // idle (its sleep set for a later deadline) must end that wait.
        crate::runtime::kick_host();
        id
    }

    /// Forget timer `id`; its heap entry is dropped lazily when it comes up.
    /// False if it already fired or was cancelled.
    fn cancel(&mut self, id: u64) -> bool {
        let was = self.wakers.remove(&id).is_some();
        if was {
            self.compact_if_mostly_dead();
        }
        was
    }

    /// Drop the dead heap entries once they outnumber the live ones (and
    /// give memory back once the heap is mostly empty): amortised O(1) per
    /// cancel, and the heap is never more than about twice the live timers.
    fn compact_if_mostly_dead(&mut self) {
        const SLACK: usize = 64;
        let live = self.wakers.len();
        if self.heap.len() <= 2 * live + SLACK {
            return;
        }
        let wakers = &self.wakers;
        self.heap.retain(|Reverse((_, id))| wakers.contains_key(id));
        if self.heap.capacity() > 4 * (self.heap.len() + SLACK) {
            self.heap.shrink_to(2 * (self.heap.len() + SLACK));
        }
        if self.wakers.capacity() > 4 * (live + SLACK) {
            self.wakers.shrink_to(2 * (live + SLACK));
        }
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
        if let Some((tid, w)) = mine.and_then(|(_, tid)| t.wakers.get_mut(&tid).map(|w| (tid, w))) {
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

#[cfg(test)]
mod tests {
    //! The timer heap alone: no runtime, no clock reads beyond one base
    //! instant (these run under miri).

    use std::sync::{Arc, Mutex};
    use std::task::Wake;

    use super::*;

    /// Wakers that log their timer's label when woken.
    #[derive(Default)]
    struct Log(Arc<Mutex<Vec<u32>>>);

    struct Tag(u32, Arc<Mutex<Vec<u32>>>);

    impl Wake for Tag {
        fn wake(self: Arc<Self>) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    impl Log {
        fn waker(&self, label: u32) -> Waker {
            Waker::from(Arc::new(Tag(label, self.0.clone())))
        }

        fn take(&self) -> Vec<u32> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn fires_due_timers_in_deadline_order() {
        let log = Log::default();
        let mut t = Timers::default();
        let base = Instant::now();
        assert_eq!(t.next_deadline(), None);
        for (label, at) in [(1, 30), (2, 10), (3, 50), (4, 20), (5, 40)] {
            t.insert(base + ms(at), log.waker(label));
        }
        assert_eq!(t.next_deadline(), Some(base + ms(10)));
        t.fire(base + ms(5));
        assert!(log.take().is_empty());
        // A deadline equal to `now` is due.
        t.fire(base + ms(30));
        assert_eq!(log.take(), [2, 4, 1]);
        assert_eq!(t.next_deadline(), Some(base + ms(40)));
        t.fire(base + ms(1000));
        assert_eq!(log.take(), [5, 3]);
        assert_eq!(t.next_deadline(), None);
        assert!(t.heap.is_empty() && t.wakers.is_empty());
    }

    #[test]
    fn ties_fire_in_insertion_order() {
        let log = Log::default();
        let mut t = Timers::default();
        let at = Instant::now() + ms(7);
        for label in [9, 3, 5, 1] {
            t.insert(at, log.waker(label));
        }
        assert_eq!(t.next_deadline(), Some(at));
        t.fire(at - ms(1));
        assert!(log.take().is_empty());
        t.fire(at);
        assert_eq!(log.take(), [9, 3, 5, 1]);
    }

    #[test]
    fn cancelled_timers_never_fire_and_leave_lazily() {
        let log = Log::default();
        let mut t = Timers::default();
        let base = Instant::now();
        let a = t.insert(base + ms(10), log.waker(1));
        let b = t.insert(base + ms(20), log.waker(2));
        let c = t.insert(base + ms(30), log.waker(3));
        assert!(t.cancel(a));
        assert!(!t.cancel(a), "cancel twice");
        assert_eq!(t.heap.len(), 3, "removed lazily");
        assert_eq!(t.next_deadline(), Some(base + ms(20)));
        assert_eq!(t.heap.len(), 2, "next_deadline drops the dead top");
        assert!(t.cancel(c));
        t.fire(base + ms(100));
        assert_eq!(log.take(), [2]);
        assert!(!t.cancel(b), "cancel after fire");
        assert_eq!(t.next_deadline(), None);
        assert!(t.heap.is_empty() && t.wakers.is_empty());
    }

    /// A server drops a long timeout per request: the heap must follow the
    /// live timers, not every timer created before the first deadline.
    #[test]
    fn cancelled_timers_do_not_pile_up() {
        const N: u64 = if cfg!(miri) { 2_000 } else { 200_000 };
        let log = Log::default();
        let mut t = Timers::default();
        let base = Instant::now();
        let keep = t.insert(base + ms(5), log.waker(7));
        for i in 0..N {
            let id = t.insert(base + ms(30_000 + i), log.waker(1));
            assert!(t.cancel(id));
            assert!(
                t.heap_len() <= 2 * t.wakers.len() + 64 + 1,
                "{} heap entries for {} live timers after {i} cancels",
                t.heap_len(),
                t.wakers.len()
            );
        }
        assert!(
            t.heap.capacity() < 1024,
            "heap capacity {}",
            t.heap.capacity()
        );
        assert_eq!(t.next_deadline(), Some(base + ms(5)));
        t.fire(base + ms(5));
        assert_eq!(log.take(), [7]);
        assert!(!t.cancel(keep));
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn ids_are_never_reused() {
        let log = Log::default();
        let mut t = Timers::default();
        let at = Instant::now();
        let a = t.insert(at, log.waker(1));
        t.fire(at);
        let b = t.insert(at, log.waker(2));
        assert_ne!(a, b);
        // Cancelling the fired id must not touch the new timer.
        assert!(!t.cancel(a));
        t.fire(at);
        assert_eq!(log.take(), [1, 2]);
    }

    /// Many timers, pseudo-random deadlines with ties, every third cancelled,
    /// fired in steps: checked against a sorted model.
    #[test]
    fn many_timers_against_a_model() {
        const N: u32 = if cfg!(miri) { 200 } else { 5_000 };
        let log = Log::default();
        let mut t = Timers::default();
        let base = Instant::now();
        let mut model = Vec::new(); // (deadline ms, id, label), live only
        let mut x = 12345u32;
        for label in 0..N {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let at = u64::from(x >> 16) % 500;
            let id = t.insert(base + ms(at), log.waker(label));
            if label % 3 == 0 {
                assert!(t.cancel(id));
            } else {
                model.push((at, id, label));
            }
        }
        model.sort();
        let mut fired = Vec::new();
        for step in (0..=500).step_by(37) {
            t.fire(base + ms(step));
            let got = log.take();
            let due: Vec<u32> = model
                .iter()
                .filter(|(at, _, _)| *at <= step && *at + 37 > step)
                .map(|&(_, _, l)| l)
                .collect();
            assert_eq!(got, due, "at {step} ms");
            fired.extend(got);
            if let Some(next) = model.iter().find(|(at, _, _)| *at > step) {
                assert_eq!(t.next_deadline(), Some(base + ms(next.0)));
            }
        }
        t.fire(base + ms(10_000));
        fired.extend(log.take());
        let all: Vec<u32> = model.iter().map(|&(_, _, l)| l).collect();
        assert_eq!(fired, all);
        assert_eq!(t.next_deadline(), None);
    }
}
