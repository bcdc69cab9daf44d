//! The timer heap of one runtime: deadlines, their wakers, lazy removal.
//!
//! Plain data with no runtime access: [`crate::time`] registers and cancels
//! through the current runtime's [`crate::context::Context`], which owns one
//! `Timers`. A dropped timer is removed lazily (its heap entry is skipped
//! when it comes up), and the heap is compacted once dead entries outnumber
//! live ones, so its memory follows the live timers.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::task::Waker;
use std::time::Instant;

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

    pub(crate) fn insert(&mut self, deadline: Instant, waker: Waker) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.heap.push(Reverse((deadline, id)));
        self.wakers.insert(id, waker);
        // Hosted mode: a timer added by tokio's side while the loop waits
        // idle (its sleep set for a later deadline) must end that wait.
        crate::kick::kick_host();
        id
    }

    /// Forget timer `id`; its heap entry is dropped lazily when it comes up.
    /// False if it already fired or was cancelled.
    pub(crate) fn cancel(&mut self, id: u64) -> bool {
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

    /// The waker registered for timer `id`, if it has not fired or been
    /// cancelled.
    pub(crate) fn waker_mut(&mut self, id: u64) -> Option<&mut Waker> {
        self.wakers.get_mut(&id)
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

#[cfg(test)]
mod tests {
    //! The timer heap alone: no runtime, no clock reads beyond one base
    //! instant (these run under miri).

    use std::sync::{Arc, Mutex};
    use std::task::Wake;

    use std::time::Duration;

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
