//! The input budget of one server thread: bytes of incomplete requests
//! that all its connections hold, at most [`ServerConfig::max_buffered_bytes`]
//! together.
//!
//! # Fairness
//! A budget that simply refuses whoever would take it over turns away a
//! well-behaved upload whose body arrives in two parts once a few clients
//! sit on almost-complete bodies: they fill the budget and keep it until
//! their header timeout. So a connection that asks for no more than its
//! share is admitted, and the holders that went longest without sending
//! anything are evicted to make room: their bytes leave the count, and each
//! is woken to answer 503 and close. The share is the limit over the number
//! of holders (the newcomer included), but never less than [`MIN_GRANT`]
//! (64 KiB): many small holders cannot shrink it below what an ordinary
//! upload needs. A connection asking for more than its share when the
//! budget is full is refused. Stalest first, not largest: an upload that
//! is still arriving has just sent something, a client sitting on its
//! bytes has not.
//!
//! Evicted connections hold their input until their task next runs (on the
//! same thread, but maybe after many newcomers in a burst); they stay
//! counted until then, and while the count with them is at
//! [`InputBudget::hard_limit`] (a quarter over the limit) nobody more is
//! evicted or admitted past the limit.
//!
//! A connection is charged only while it holds part of a request: the
//! server charges again as soon as a request is complete, before it
//! answers, so a connection downloading a large response holds nothing.
//!
//! [`ServerConfig::max_buffered_bytes`]: crate::ServerConfig::max_buffered_bytes

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::task::Waker;
use std::time::Instant;

/// A newcomer may always ask for this much (or the limit, if smaller),
/// whatever the number of holders.
pub(crate) const MIN_GRANT: usize = 64 * 1024;

/// The count shared by the connections of one server thread.
#[derive(Debug)]
pub(crate) struct InputBudget {
    limit: usize,
    /// Bytes charged: by the holders below, and by evicted connections
    /// that have not yet dropped their input (`leaving`).
    total: Cell<usize>,
    leaving: Cell<usize>,
    /// Connections holding input, by account id.
    holders: RefCell<HashMap<u64, Holder>>,
    next_id: Cell<u64>,
}

#[derive(Debug)]
struct Holder {
    bytes: usize,
    /// When it last grew (sent more).
    since: Instant,
    waker: Waker,
    evicted: Rc<Cell<bool>>,
}

/// One connection's share of the budget.
#[derive(Debug)]
pub(crate) struct Account {
    id: u64,
    charged: usize,
    evicted: Rc<Cell<bool>>,
}

impl Account {
    /// Whether a newcomer evicted this connection while it held part of a
    /// request: it must answer 503 and close.
    pub(crate) fn evicted(&self) -> bool {
        self.evicted.get()
    }

    /// Bytes charged to it now.
    pub(crate) fn charged(&self) -> usize {
        self.charged
    }
}

impl InputBudget {
    pub(crate) fn new(limit: usize) -> InputBudget {
        InputBudget {
            limit,
            total: Cell::new(0),
            leaving: Cell::new(0),
            holders: RefCell::new(HashMap::new()),
            next_id: Cell::new(0),
        }
    }

    /// A fresh account holding nothing.
    pub(crate) fn account(&self) -> Account {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        Account {
            id,
            charged: 0,
            evicted: Rc::new(Cell::new(false)),
        }
    }

    /// Bytes charged now, evicted connections' excluded.
    #[cfg(test)]
    fn total(&self) -> usize {
        self.total.get() - self.leaving.get()
    }

    /// Charge `acc` with `held` bytes in place of what it held, at `now`.
    /// False if that is refused (over the limit and over its share, too
    /// much still held by evicted connections, or it was evicted while it
    /// held part of a request and still does): the connection must answer
    /// 503 and close. `waker` wakes the connection's task if it is evicted
    /// later.
    pub(crate) fn charge(
        &self,
        acc: &mut Account,
        held: usize,
        waker: &Waker,
        now: Instant,
    ) -> bool {
        if acc.evicted.get() {
            self.release(acc);
            if held > 0 {
                return false;
            }
            // Evicted, but the request it held has since been completed
            // (answered): nothing to refuse any more.
            acc.evicted.set(false);
            return true;
        }
        let total = self.total.get() - acc.charged;
        let mut live = total - self.leaving.get();
        let fits = |live: usize| live + held <= self.limit && total + held <= self.hard_limit();
        if held > acc.charged && !fits(live) {
            let mut holders = self.holders.borrow_mut();
            let count = holders.len() + usize::from(!holders.contains_key(&acc.id));
            let share = (self.limit / count).max(MIN_GRANT.min(self.limit));
            if held > share || total + held > self.hard_limit() {
                return false;
            }
            while !fits(live) {
                // The other holder that went longest without sending.
                let victim = holders
                    .iter()
                    .filter(|&(&id, _)| id != acc.id)
                    .min_by_key(|&(&id, h)| (h.since, id))
                    .map(|(&id, _)| id);
                let Some(v) = victim.and_then(|id| holders.remove(&id)) else {
                    return false;
                };
                live -= v.bytes;
                self.leaving.set(self.leaving.get() + v.bytes);
                v.evicted.set(true);
                v.waker.wake();
            }
        }
        self.set(acc, held, waker, now);
        true
    }

    /// Give back all `acc` holds (its connection closes, is idle, or was
    /// evicted and has dropped its input).
    pub(crate) fn release(&self, acc: &mut Account) {
        if acc.charged == 0 {
            return;
        }
        self.total.set(self.total.get() - acc.charged);
        if acc.evicted.get() {
            self.leaving.set(self.leaving.get() - acc.charged);
        } else {
            self.holders.borrow_mut().remove(&acc.id);
        }
        acc.charged = 0;
    }

    /// The most counted at once, evicted connections that have not yet
    /// run to drop their input included: the limit and a quarter more.
    fn hard_limit(&self) -> usize {
        self.limit + self.limit / 4
    }

    fn set(&self, acc: &mut Account, held: usize, waker: &Waker, now: Instant) {
        let grew = held > acc.charged;
        self.total.set(self.total.get() - acc.charged + held);
        acc.charged = held;
        let mut holders = self.holders.borrow_mut();
        if held == 0 {
            holders.remove(&acc.id);
            return;
        }
        let h = holders.entry(acc.id).or_insert_with(|| Holder {
            bytes: held,
            since: now,
            waker: waker.clone(),
            evicted: acc.evicted.clone(),
        });
        h.bytes = held;
        if grew {
            h.since = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;
    use std::time::Duration;

    const K: usize = 1024;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    /// `i` ms after a fixed start.
    fn at(t0: Instant, i: u64) -> Instant {
        t0 + Duration::from_millis(i)
    }

    #[test]
    fn within_the_limit_everyone_is_admitted_and_released() {
        let (b, t0) = (InputBudget::new(100 * K), Instant::now());
        let (_, w) = waker();
        let mut a = b.account();
        let mut c = b.account();
        assert!(b.charge(&mut a, 60 * K, &w, t0));
        assert!(b.charge(&mut c, 40 * K, &w, t0));
        assert_eq!(b.total(), 100 * K);
        // Shrinking is always allowed.
        assert!(b.charge(&mut a, 10 * K, &w, t0));
        assert_eq!(b.total(), 50 * K);
        b.release(&mut a);
        b.release(&mut c);
        assert_eq!(b.total(), 0);
        assert!(b.holders.borrow().is_empty());
    }

    #[test]
    fn a_newcomer_within_its_share_evicts_the_holder_that_went_longest_without_sending() {
        let (b, t0) = (InputBudget::new(1024 * K), Instant::now());
        let (big_wakes, wbig) = waker();
        let (stale_wakes, wstale) = waker();
        let (_, w) = waker();
        let mut stale = b.account();
        let mut big = b.account();
        let mut new = b.account();
        assert!(b.charge(&mut stale, 300 * K, &wstale, at(t0, 0)));
        assert!(b.charge(&mut big, 700 * K, &wbig, at(t0, 1)));
        // Over the limit, and 100 K <= 1 MiB / 3: the stale one goes,
        // though the other holds more.
        assert!(b.charge(&mut new, 100 * K, &w, at(t0, 2)));
        assert!(stale.evicted() && !big.evicted() && !new.evicted());
        assert_eq!(stale_wakes.0.load(Ordering::Relaxed), 1);
        assert_eq!(big_wakes.0.load(Ordering::Relaxed), 0);
        assert_eq!(b.total(), 800 * K);
        // The evicted connection may not grow again, and holds nothing.
        assert!(!b.charge(&mut stale, 400 * K, &wstale, at(t0, 3)));
        assert_eq!(b.total(), 800 * K);
        assert_eq!(b.total.get(), 800 * K);
    }

    #[test]
    fn over_its_share_a_newcomer_is_refused_and_nobody_is_evicted() {
        let (b, t0) = (InputBudget::new(1024 * K), Instant::now());
        let (_, w) = waker();
        let mut x = b.account();
        let mut y = b.account();
        let mut new = b.account();
        assert!(b.charge(&mut x, 512 * K, &w, t0));
        assert!(b.charge(&mut y, 512 * K, &w, t0));
        // 400 K > 1 MiB / 3.
        assert!(!b.charge(&mut new, 400 * K, &w, t0));
        assert!(!x.evicted() && !y.evicted());
        assert_eq!(b.total(), 1024 * K);
    }

    #[test]
    fn many_small_holders_cannot_shrink_the_share_below_the_minimum_grant() {
        let (b, t0) = (InputBudget::new(1024 * K), Instant::now());
        let (_, w) = waker();
        let mut small: Vec<Account> = (0..64).map(|_| b.account()).collect();
        for (i, a) in small.iter_mut().enumerate() {
            assert!(b.charge(a, 16 * K, &w, at(t0, i as u64)));
        }
        // 1 MiB / 65 is under 16 K, but 32 K is within the minimum grant:
        // the two stalest holders make room.
        let mut up = b.account();
        assert!(b.charge(&mut up, 32 * K, &w, at(t0, 100)));
        let evicted: Vec<usize> = (0..64).filter(|&i| small[i].evicted()).collect();
        assert_eq!(evicted, vec![0, 1]);
        assert_eq!(b.total(), 1024 * K);
        // More than the minimum grant is still refused.
        let mut more = b.account();
        assert!(!b.charge(&mut more, 65 * K, &w, at(t0, 101)));
    }

    #[test]
    fn an_evicted_connection_that_completed_its_request_is_not_refused_later() {
        let (b, t0) = (InputBudget::new(1024 * K), Instant::now());
        let (_, w) = waker();
        let mut old = b.account();
        let mut full = b.account();
        let mut new = b.account();
        assert!(b.charge(&mut old, 512 * K, &w, at(t0, 0)));
        assert!(b.charge(&mut full, 512 * K, &w, at(t0, 1)));
        assert!(b.charge(&mut new, 64 * K, &w, at(t0, 2)));
        assert!(old.evicted());
        // Its request was completed and answered before it saw the flag:
        // holding nothing, it goes on, and the flag is gone.
        assert!(b.charge(&mut old, 0, &w, at(t0, 3)));
        assert!(!old.evicted());
        assert_eq!(b.total.get(), 576 * K);
    }

    #[test]
    fn evicted_input_stays_counted_until_dropped_up_to_the_hard_limit() {
        let (b, t0) = (InputBudget::new(1024 * K), Instant::now());
        let (_, w) = waker();
        let mut olds: Vec<Account> = (0..4).map(|_| b.account()).collect();
        for (i, a) in olds.iter_mut().enumerate() {
            assert!(b.charge(a, 256 * K, &w, at(t0, i as u64)));
        }
        let evicted = |olds: &[Account]| olds.iter().filter(|a| a.evicted()).count();
        // A newcomer evicts a holder of 256 K and grows into its room; the
        // evicted one has not run yet, so its 256 K stay counted.
        let mut news: Vec<Account> = (0..3).map(|_| b.account()).collect();
        assert!(b.charge(&mut news[0], 64 * K, &w, at(t0, 10)));
        assert!(b.charge(&mut news[0], 200 * K, &w, at(t0, 11)));
        assert_eq!(evicted(&olds), 1);
        assert!(b.charge(&mut news[1], 56 * K, &w, at(t0, 12)));
        // 1 MiB live + 256 K leaving: at the hard limit (1280 K), the
        // next is refused and nobody more is evicted.
        assert_eq!(b.total.get(), 1280 * K);
        assert!(!b.charge(&mut news[2], 64 * K, &w, at(t0, 13)));
        assert_eq!(evicted(&olds), 1);
        // Once the evicted one drops its input, the next is admitted.
        for a in olds.iter_mut().filter(|a| a.evicted()) {
            b.release(a);
        }
        assert_eq!(b.total.get(), 1024 * K);
        assert!(b.charge(&mut news[2], 64 * K, &w, at(t0, 14)));
        assert_eq!(evicted(&olds), 2);
        assert_eq!(b.total(), 832 * K);
    }
}
