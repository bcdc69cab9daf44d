//! The pieces of a true open loop, shared by the echo and HTTP generators.
//!
//! A connection's requests leave at their scheduled moments whether or not
//! earlier replies are back: a writer sends on the [`Schedule`], a reader
//! takes replies in order off the [`InFlight`] queue, so a slow reply never
//! holds back the next send (several requests in flight per connection,
//! pipelined). Latency counts from the scheduled moment.
//!
//! The measured [`Window`] decides what counts: a request counts when its
//! scheduled moment falls inside it. At the window's end nothing is
//! dropped: each counted request still unanswered, and each one scheduled
//! but not yet sent (a writer held up by a full socket), is recorded with
//! its latency up to the window's end ([`settle`]), a lower bound, and
//! counted as such.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// The measured window: when it opened and closed, and who waits for its end.
#[derive(Debug, Default)]
pub struct Window {
    start: Cell<Option<Instant>>,
    end: Cell<Option<Instant>>,
    waiters: RefCell<Vec<Option<Waker>>>,
}

impl Window {
    /// The window opens now.
    pub fn open(&self, at: Instant) {
        self.start.set(Some(at));
    }

    /// The window closes now; every [`Window::closed`] future resolves.
    pub fn close(&self, at: Instant) {
        self.end.set(Some(at));
        for w in self.waiters.borrow_mut().drain(..).flatten() {
            w.wake();
        }
    }

    /// Whether a request scheduled at `due` counts.
    pub fn counts(&self, due: Instant) -> bool {
        self.start.get().is_some_and(|s| due >= s) && self.end.get().is_none_or(|e| due < e)
    }

    /// When it closed, if it has.
    pub fn end(&self) -> Option<Instant> {
        self.end.get()
    }

    /// Resolves once the window has closed. Each such future keeps one
    /// waker slot, replaced when its task's waker changes (polled on every
    /// wake of a connection's task, it must not add one per poll).
    pub async fn closed(&self) {
        let mut slot: Option<usize> = None;
        poll_fn(|cx| {
            if self.end.get().is_some() {
                return Poll::Ready(());
            }
            let mut w = self.waiters.borrow_mut();
            match slot {
                Some(i) => match &mut w[i] {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    entry => *entry = Some(cx.waker().clone()),
                },
                None => {
                    slot = Some(w.len());
                    w.push(Some(cx.waker().clone()));
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Waker slots held (for tests).
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }
}

/// One connection's send moments: every `interval`, first after `offset`.
#[derive(Debug)]
pub struct Schedule {
    next: Instant,
    interval: Duration,
}

impl Schedule {
    /// `(interval, offset)`, from now.
    pub fn new((interval, offset): (Duration, Duration)) -> Schedule {
        Schedule {
            next: Instant::now() + offset,
            interval,
        }
    }

    /// Wait for the next scheduled moment and return it. A writer that is
    /// late sends at once (its lateness counts in the latency).
    pub async fn next(&mut self) -> Instant {
        let due = self.next;
        if Instant::now() < due {
            ringkit::time::sleep_until(due).await;
        }
        self.next += self.interval;
        due
    }

    /// The moments scheduled before `end` that were never reached.
    pub fn unsent_before(&self, end: Instant) -> impl Iterator<Item = Instant> + '_ {
        let interval = self.interval.max(Duration::from_nanos(1));
        (0u32..)
            .map(move |i| self.next + interval * i)
            .take_while(move |t| *t < end)
    }
}

/// Requests sent and not yet answered, oldest first: their scheduled
/// moments and a tag the reader needs (a sequence number, an expectation).
#[derive(Debug)]
pub struct InFlight<T> {
    queue: RefCell<VecDeque<(Instant, T)>>,
    most: Cell<usize>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight {
            queue: RefCell::new(VecDeque::new()),
            most: Cell::new(0),
        }
    }
}

impl<T: Copy> InFlight<T> {
    /// A request leaves (push before writing it: its reply may come back
    /// while the write is still going).
    pub fn push(&self, due: Instant, tag: T) {
        let mut q = self.queue.borrow_mut();
        q.push_back((due, tag));
        self.most.set(self.most.get().max(q.len()));
    }

    /// The oldest unanswered request, if any.
    pub fn front(&self) -> Option<(Instant, T)> {
        self.queue.borrow().front().copied()
    }

    /// Its reply is complete.
    pub fn pop(&self) -> Option<(Instant, T)> {
        self.queue.borrow_mut().pop_front()
    }

    /// The most ever in flight at once.
    pub fn most(&self) -> usize {
        self.most.get()
    }

    /// Scheduled moments still unanswered.
    pub fn dues(&self) -> Vec<Instant> {
        self.queue.borrow().iter().map(|(d, _)| *d).collect()
    }
}

/// What [`settle`] found at a connection's end.
#[derive(Debug, Default, Clone, Copy)]
pub struct Settled {
    /// Counted requests sent and not answered by the window's end.
    pub unanswered: u64,
    /// Counted requests scheduled but never sent.
    pub unsent: u64,
}

/// At the window's end: record every counted request that has no reply,
/// sent (`unanswered`) or not (`schedule`'s missed moments), with its
/// latency up to the end.
pub fn settle(
    win: &Window,
    unanswered: &[Instant],
    schedule: &Schedule,
    hist: &mut Histogram<u64>,
) -> Settled {
    let Some(end) = win.end() else {
        return Settled::default();
    };
    let mut out = Settled::default();
    let mut record = |due: Instant| {
        let ns = end.saturating_duration_since(due).as_nanos() as u64;
        let _ = hist.record(ns.max(1));
    };
    for &due in unanswered.iter().filter(|d| win.counts(**d)) {
        record(due);
        out.unanswered += 1;
    }
    for due in schedule.unsent_before(end).filter(|d| win.counts(*d)) {
        record(due);
        out.unsent += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_unanswered_or_unsent_at_the_end_is_recorded_not_dropped() {
        let t0 = Instant::now();
        let win = Window::default();
        win.open(t0);
        let mut s = Schedule {
            next: t0 + Duration::from_millis(70),
            interval: Duration::from_millis(10),
        };
        win.close(t0 + Duration::from_millis(100));
        let before = t0 - Duration::from_millis(5);
        let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        // Sent at 50 and 60 ms, unanswered; one sent before the window.
        let sent = [
            before,
            t0 + Duration::from_millis(50),
            t0 + Duration::from_millis(60),
        ];
        let got = settle(&win, &sent, &s, &mut h);
        // 70, 80 and 90 ms were never sent.
        assert_eq!((got.unanswered, got.unsent), (2, 3));
        assert_eq!(h.len(), 5);
        // Latency up to the end: 50 ms for the oldest, 10 ms for the newest.
        assert!((h.max() as f64 - 50e6).abs() < 0.01 * 50e6, "{}", h.max());
        assert!((h.min() as f64 - 10e6).abs() < 0.01 * 10e6, "{}", h.min());
        s.next = t0 + Duration::from_millis(200);
        assert_eq!(s.unsent_before(t0 + Duration::from_millis(100)).count(), 0);
    }

    #[test]
    fn a_closed_future_keeps_one_waker_however_often_it_is_polled() {
        use std::future::Future;
        let win = Window::default();
        let mut f = std::pin::pin!(win.closed());
        let mut cx = std::task::Context::from_waker(Waker::noop());
        for _ in 0..1000 {
            assert!(f.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(win.waiters(), 1);
        win.close(Instant::now());
        assert!(f.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_request_counts_when_scheduled_inside_the_window() {
        let t0 = Instant::now();
        let win = Window::default();
        assert!(!win.counts(t0));
        win.open(t0);
        assert!(win.counts(t0) && !win.counts(t0 - Duration::from_millis(1)));
        win.close(t0 + Duration::from_secs(1));
        assert!(!win.counts(t0 + Duration::from_secs(1)));
    }
}
