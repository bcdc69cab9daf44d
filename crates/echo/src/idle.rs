//! Idle timeouts for every connection of a thread, with one timer.
//!
//! A timer per connection costs each idle connection its timer's box and
//! an entry in the runtime's timer heap and waker map (about 200 bytes,
//! a fifth of what an idle connection holds on io_uring). Here each
//! connection has a slot in one per-thread table instead: when it last
//! received, and the waker of its pending read. One sweeper task per thread
//! wakes every `limit / 4` (at least 10 ms, at most 1 s), marks the slots
//! idle past the limit as expired and wakes their connections, which close.
//! A connection is thus closed between `limit` and `limit` plus one sweep
//! period after its last message; a message only writes a clock reading.

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// One thread's table of connection slots and its limit.
pub(crate) struct IdleSweep {
    limit: Duration,
    slots: RefCell<slab::Slab<Slot>>,
}

struct Slot {
    last: Instant,
    waker: Option<Waker>,
    expired: bool,
}

/// A connection's slot; removed on drop.
pub(crate) struct IdleSlot {
    sweep: Rc<IdleSweep>,
    key: usize,
}

impl IdleSweep {
    /// The table for `limit`, and its sweeper spawned on this thread's
    /// runtime (it runs as long as the runtime does).
    pub(crate) fn start(limit: Duration) -> Rc<IdleSweep> {
        let sweep = Rc::new(IdleSweep {
            limit,
            slots: RefCell::new(slab::Slab::new()),
        });
        ringkit::spawn(sweep.clone().run());
        sweep
    }

    /// A slot for a new connection, its last message now.
    pub(crate) fn register(self: &Rc<Self>) -> IdleSlot {
        let key = self.slots.borrow_mut().insert(Slot {
            last: ringkit::time::coarse_now(),
            waker: None,
            expired: false,
        });
        IdleSlot {
            sweep: self.clone(),
            key,
        }
    }

    /// Time between sweeps.
    fn period(&self) -> Duration {
        (self.limit / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }

    async fn run(self: Rc<Self>) {
        loop {
            ringkit::time::sleep(self.period()).await;
            // The real clock: the turn's clock is as old as this turn.
            let now = Instant::now();
            let mut slots = self.slots.borrow_mut();
            // Unused capacity left by a burst of connections goes back.
            if slots.capacity() > 4 * slots.len() + 64 {
                slots.shrink_to_fit();
            }
            for (_, s) in slots.iter_mut() {
                if !s.expired && now.saturating_duration_since(s.last) >= self.limit {
                    s.expired = true;
                    if let Some(w) = s.waker.take() {
                        w.wake();
                    }
                }
            }
        }
    }
}

impl IdleSlot {
    /// A message came.
    pub(crate) fn touch(&self) {
        if let Some(s) = self.sweep.slots.borrow_mut().get_mut(self.key) {
            s.last = ringkit::time::coarse_now();
        }
    }

    /// Ready once the connection has been idle for the limit.
    pub(crate) fn poll_expired(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut slots = self.sweep.slots.borrow_mut();
        let Some(s) = slots.get_mut(self.key) else {
            return Poll::Ready(());
        };
        if s.expired {
            return Poll::Ready(());
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for IdleSlot {
    fn drop(&mut self) {
        let mut slots = self.sweep.slots.borrow_mut();
        if slots.contains(self.key) {
            slots.remove(self.key);
        }
    }
}
