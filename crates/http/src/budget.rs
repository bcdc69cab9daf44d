//! The input budget of one server thread: bytes of incomplete requests
//! that all its connections hold, at most [`ServerConfig::max_buffered_bytes`]
//! together.
//!
//! # Fairness
//! A budget that simply refuses whoever would take it over turns away a
//! well-behaved upload whose body arrives in two parts once a few clients
//! sit on almost-complete large bodies: they fill the budget and keep it
//! until their body timeout. So a connection that asks for no more than
//! its fair share (the limit over the number of holders, itself included)
//! is admitted, and the connection holding the most, which must hold more
//! than the newcomer asks for, is evicted instead: its bytes leave the
//! count at once, and it is woken to answer 503 and close. A connection
//! asking for more than its fair share when the budget is full is refused
//! as before. Evicted connections hold their input until their task next
//! runs (on the same thread, but maybe after many newcomers in a burst);
//! they stay counted until then, and while the count with them is at
//! [`InputBudget::hard_limit`] (a quarter over the limit) nobody
//! more is evicted or admitted past the limit.
//!
//! [`ServerConfig::max_buffered_bytes`]: crate::ServerConfig::max_buffered_bytes

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::task::Waker;

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
    /// Whether a newcomer evicted this connection: it must answer 503 and
    /// close. Its bytes are no longer counted.
    pub(crate) fn evicted(&self) -> bool {
        self.evicted.get()
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

    /// Charge `acc` with `held` bytes in place of what it held. False if
    /// that is refused (over the limit and over its fair share, too much
    /// still held by evicted connections, or it was evicted itself): the
    /// connection must answer 503 and close. `waker` wakes the
    /// connection's task if it is evicted later.
    pub(crate) fn charge(&self, acc: &mut Account, held: usize, waker: &Waker) -> bool {
        if acc.evicted.get() {
            self.release(acc);
            return held == 0;
        }
        let total = self.total.get() - acc.charged;
        let mut live = total - self.leaving.get();
        let fits = |live: usize| live + held <= self.limit && total + held <= self.hard_limit();
        if held > acc.charged && !fits(live) {
            let mut holders = self.holders.borrow_mut();
            let count = holders.len() + usize::from(!holders.contains_key(&acc.id));
            if held > self.limit / count || total + held > self.hard_limit() {
                return false;
            }
            while !fits(live) {
                // The largest other holder, if it holds more than asked.
                let victim = holders
                    .iter()
                    .filter(|&(&id, h)| id != acc.id && h.bytes > held)
                    .max_by_key(|&(_, h)| h.bytes)
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
        self.set(acc, held, waker);
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

    fn set(&self, acc: &mut Account, held: usize, waker: &Waker) {
        self.total.set(self.total.get() - acc.charged + held);
        acc.charged = held;
        let mut holders = self.holders.borrow_mut();
        if held == 0 {
            holders.remove(&acc.id);
        } else {
            match holders.get_mut(&acc.id) {
                Some(h) => h.bytes = held,
                None => {
                    holders.insert(
                        acc.id,
                        Holder {
                            bytes: held,
                            waker: waker.clone(),
                            evicted: acc.evicted.clone(),
                        },
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

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

    #[test]
    fn within_the_limit_everyone_is_admitted_and_released() {
        let b = InputBudget::new(100);
        let (_, w) = waker();
        let mut a = b.account();
        let mut c = b.account();
        assert!(b.charge(&mut a, 60, &w));
        assert!(b.charge(&mut c, 40, &w));
        assert_eq!(b.total(), 100);
        // Shrinking is always allowed.
        assert!(b.charge(&mut a, 10, &w));
        assert_eq!(b.total(), 50);
        b.release(&mut a);
        b.release(&mut c);
        assert_eq!(b.total(), 0);
        assert!(b.holders.borrow().is_empty());
    }

    #[test]
    fn a_newcomer_within_its_fair_share_evicts_the_largest_holder() {
        let b = InputBudget::new(100);
        let (big_wakes, wbig) = waker();
        let (_, w) = waker();
        let mut big = b.account();
        let mut mid = b.account();
        let mut new = b.account();
        assert!(b.charge(&mut big, 70, &wbig));
        assert!(b.charge(&mut mid, 30, &w));
        // Over the limit, and 10 <= 100 / 3.
        assert!(b.charge(&mut new, 10, &w));
        assert!(big.evicted() && !mid.evicted() && !new.evicted());
        assert_eq!(big_wakes.0.load(Ordering::Relaxed), 1);
        assert_eq!(b.total(), 40);
        // The evicted connection holds nothing and may not grow again.
        assert!(!b.charge(&mut big, 80, &wbig));
        b.release(&mut big);
        assert_eq!(b.total(), 40);
    }

    #[test]
    fn over_its_fair_share_a_newcomer_is_refused_and_nobody_is_evicted() {
        let b = InputBudget::new(100);
        let (_, w) = waker();
        let mut x = b.account();
        let mut y = b.account();
        let mut new = b.account();
        assert!(b.charge(&mut x, 50, &w));
        assert!(b.charge(&mut y, 50, &w));
        // 34 > 100 / 3.
        assert!(!b.charge(&mut new, 34, &w));
        assert!(!x.evicted() && !y.evicted());
        assert_eq!(b.total(), 100);
    }

    #[test]
    fn nobody_holding_less_than_asked_is_evicted() {
        let b = InputBudget::new(100);
        let (_, w) = waker();
        let mut accounts: Vec<Account> = (0..10).map(|_| b.account()).collect();
        for a in &mut accounts {
            assert!(b.charge(a, 10, &w));
        }
        // 10 > 100 / 11: refused. 9 is within the fair share and less
        // than each holds: one holder of 10 makes room.
        let mut new = b.account();
        assert!(!b.charge(&mut new, 10, &w));
        assert!(b.charge(&mut new, 9, &w));
        assert_eq!(accounts.iter().filter(|a| a.evicted()).count(), 1);
        assert_eq!(b.total(), 99);
    }

    #[test]
    fn evicted_input_stays_counted_until_dropped_up_to_the_hard_limit() {
        let b = InputBudget::new(100);
        let (_, w) = waker();
        let mut olds: Vec<Account> = (0..4).map(|_| b.account()).collect();
        for a in &mut olds {
            assert!(b.charge(a, 25, &w));
        }
        let evicted = |olds: &[Account]| olds.iter().filter(|a| a.evicted()).count();
        // A newcomer evicts a holder of 25 and grows into its room; the
        // evicted one has not run yet, so its 25 stay counted.
        let mut news: Vec<Account> = (0..3).map(|_| b.account()).collect();
        assert!(b.charge(&mut news[0], 5, &w));
        assert!(b.charge(&mut news[0], 20, &w));
        assert_eq!(evicted(&olds), 1);
        assert!(b.charge(&mut news[1], 5, &w));
        // 100 live + 25 leaving: at the hard limit (125), the next is
        // refused and nobody more is evicted.
        assert_eq!(b.total.get(), 125);
        assert!(!b.charge(&mut news[2], 5, &w));
        assert_eq!(evicted(&olds), 1);
        // Once the evicted one drops its input, the next is admitted.
        for a in olds.iter_mut().filter(|a| a.evicted()) {
            b.release(a);
        }
        assert_eq!(b.total.get(), 100);
        assert!(b.charge(&mut news[2], 5, &w));
        assert_eq!(evicted(&olds), 2);
        assert_eq!(b.total(), 80);
    }
}
