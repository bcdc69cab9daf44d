//! The input budget of one server thread: bytes of incomplete requests
//! that all its connections hold, at most [`ServerConfig::max_buffered_bytes`]
//! together.
//!
//! # Fairness
//! A budget that simply refuses whoever would take it over turns away a
//! well-behaved upload whose body arrives in two parts once a few clients
//! sit on almost-complete large bodies: they fill the budget and keep it
//! until their header timeout. So a connection that asks for no more than
//! its share is admitted, and the largest holders are evicted to make room:
//! their bytes leave the count, and each is woken to answer 503 and close.
//! The share is the limit over the number of holders (the newcomer
//! included), but never less than [`MIN_GRANT`] (64 KiB). A victim must
//! hold more than the newcomer asks and more than [`MIN_GRANT`], and be
//! waiting for input (one blocked writing a response could not drop its
//! input until its send timeout).
//!
//! What that promises: a connection holding at most 64 KiB is never
//! evicted, and while fewer than `limit / 64 KiB` connections hold input
//! (512 at the default 32 MiB), a request asking for at most 64 KiB is
//! never refused (some holder waiting for input must then hold more than
//! 64 KiB, unless the rest are blocked writing responses). What it does
//! not: a client with more connections than that, each sitting on up to
//! 64 KiB and renewed every header timeout, fills the budget and turns
//! uploads away; and when the budget is full, the largest upload is the
//! first evicted. (A rule that evicted the holder that went longest
//! without sending was broken by a review: one byte per attacking
//! connection made it fresher than an upload pausing between writes.)
//!
//! Evicted connections hold their input until their task next runs (on the
//! same thread, but maybe after many newcomers in a burst); they stay
//! counted until then, and while the count with them is at
//! [`InputBudget::hard_limit`] (a quarter over the limit) nobody more is
//! evicted or admitted past the limit.
//!
//! A connection is charged only while it holds part of a request: bytes
//! of a head not yet complete, then the storage of its parsed head and the
//! body buffer, by capacity. "64 KiB" is charged memory, not bytes sent:
//! buffers grow by doubling, so a body of 33 000 bytes is charged 64 KiB
//! (about 32 KiB of body is what a request can always get). The server
//! charges again as soon as requests are decoded, before it answers, so a
//! connection downloading a large response holds nothing, and a pipelined
//! partial request behind it is charged. A refused or evicted connection
//! gives up its input before its 503 is written (that write can block for
//! the send timeout). The ciphertext of TLS handshakes under way is
//! counted apart, under the same limit ([`Handshakes`]). Not counted:
//! rustls's buffers once the handshake is done (up to ~16 KiB of decrypted
//! input and a record per connection) and the thread's pool of recycled
//! head storage (at most 256 entries).
//!
//! [`ServerConfig::max_buffered_bytes`]: crate::ServerConfig::max_buffered_bytes

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::task::Waker;

/// What a TLS handshake may hold however full [`Handshakes`] is, while it
/// is under twice the limit: a large ClientHello.
pub(crate) const HANDSHAKE_FREE: usize = 16 * 1024;

/// What a TLS handshake may always hold: an ordinary ClientHello
/// (browsers' with a post-quantum key share are about 1.8 KiB).
pub(crate) const HANDSHAKE_MIN: usize = 4 * 1024;

/// The ciphertext that TLS handshakes not yet complete hold on one server
/// thread (rustls collects a ClientHello of up to 64 KiB), counted against
/// the same limit as [`InputBudget`] but apart from it: charged to the
/// input budget, a few hundred unfinished 64 KiB ClientHellos (each under
/// [`MIN_GRANT`], so never evicted) filled it and every upload was
/// answered 503. A handshake that would take the count over the limit is
/// refused (its connection closes, with nothing to answer) unless it holds
/// at most [`HANDSHAKE_FREE`] and the count is under twice the limit, or
/// at most [`HANDSHAKE_MIN`]; so handshakes hold at most twice the limit
/// plus 16 KiB a connection, and an ordinary one always gets through.
#[derive(Debug, Default)]
pub(crate) struct Handshakes {
    total: Cell<usize>,
}

impl Handshakes {
    /// Move a connection's charge from `*charged` to `now` bytes. False
    /// (and nothing changed) if that is refused.
    pub(crate) fn charge(&self, charged: &mut usize, now: usize, limit: usize) -> bool {
        let total = self.total.get() - *charged + now;
        let over = total > limit
            && now > HANDSHAKE_MIN
            && (now > HANDSHAKE_FREE || total > limit.saturating_mul(2));
        if now > *charged && over {
            return false;
        }
        self.total.set(total);
        *charged = now;
        true
    }

    /// Bytes counted now.
    #[cfg(test)]
    fn total(&self) -> usize {
        self.total.get()
    }
}

/// A newcomer may always ask for this much (or the limit, if smaller),
/// whatever the number of holders; a holder of no more is never evicted.
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
    /// Waiting for input: it sees an eviction as soon as it runs.
    waiting: bool,
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

    /// Charge `acc` with `held` bytes in place of what it held. False if
    /// that is refused (over the limit and over its share, nobody to
    /// evict, too much still held by evicted connections, or it was
    /// evicted while it held part of a request and still does): the
    /// connection must answer 503 and close. `waker` wakes the connection's
    /// task if it is evicted later.
    pub(crate) fn charge(&self, acc: &mut Account, held: usize, waker: &Waker) -> bool {
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
            let floor = held.max(MIN_GRANT);
            while !fits(live) {
                // The largest other holder waiting for input, if it holds
                // more than asked and more than the minimum grant.
                let victim = holders
                    .iter()
                    .filter(|&(&id, h)| id != acc.id && h.waiting && h.bytes > floor)
                    .max_by_key(|&(&id, h)| (h.bytes, std::cmp::Reverse(id)))
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

    /// Whether `acc`'s connection is waiting for input (only such holders
    /// are evicted).
    pub(crate) fn set_waiting(&self, acc: &Account, waiting: bool) {
        // Called around every read: a connection holding nothing (most of
        // them) is in no table, so skip the lookup.
        if acc.charged == 0 {
            return;
        }
        if let Some(h) = self.holders.borrow_mut().get_mut(&acc.id) {
            h.waiting = waiting;
        }
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
            return;
        }
        let h = holders.entry(acc.id).or_insert_with(|| Holder {
            bytes: held,
            waiting: false,
            waker: waker.clone(),
            evicted: acc.evicted.clone(),
        });
        h.bytes = held;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshakes_are_held_to_the_limit_but_small_ones_pass() {
        const K: usize = 1024;
        let h = Handshakes::default();
        let limit = 256 * K;
        let mut big = vec![0usize; 4];
        for c in &mut big {
            assert!(h.charge(c, 64 * K, limit));
        }
        // Full: a large one is refused, and keeps what it had.
        let mut late = 0;
        assert!(h.charge(&mut late, 12 * K, limit), "small: let through");
        assert!(!h.charge(&mut late, 64 * K, limit));
        assert_eq!(late, 12 * K);
        // An ordinary ClientHello still passes, up to twice the limit.
        let mut small = 0;
        assert!(h.charge(&mut small, 2 * K, limit));
        let mut smalls = vec![0usize; 200];
        let admitted = smalls
            .iter_mut()
            .map(|c| h.charge(c, 16 * K, limit))
            .filter(|&ok| ok)
            .count();
        assert!(admitted < 200, "{admitted}");
        assert!(h.total() <= 2 * limit + 16 * K, "{}", h.total());
        // Past twice the limit, an ordinary ClientHello still gets through
        // (a browser's with a post-quantum key share: about 1.8 KiB; with
        // more extensions 3 KB).
        assert!(h.total() + 3000 > 2 * limit, "full: {}", h.total());
        let mut browser = 0;
        assert!(h.charge(&mut browser, 3000, limit));
        assert!(h.charge(&mut browser, 0, limit));
        // Done or closed: given back.
        for c in big
            .iter_mut()
            .chain(&mut smalls)
            .chain([&mut small, &mut late])
        {
            assert!(h.charge(c, 0, limit));
        }
        assert_eq!(h.total(), 0);
    }
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

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

    /// Charge and mark waiting for input, as a connection does.
    fn hold(b: &InputBudget, a: &mut Account, n: usize, w: &Waker) -> bool {
        let ok = b.charge(a, n, w);
        b.set_waiting(a, true);
        ok
    }

    #[test]
    fn within_the_limit_everyone_is_admitted_and_released() {
        let b = InputBudget::new(100 * K);
        let (_, w) = waker();
        let mut a = b.account();
        let mut c = b.account();
        assert!(hold(&b, &mut a, 60 * K, &w));
        assert!(hold(&b, &mut c, 40 * K, &w));
        assert_eq!(b.total(), 100 * K);
        // Shrinking is always allowed.
        assert!(hold(&b, &mut a, 10 * K, &w));
        assert_eq!(b.total(), 50 * K);
        b.release(&mut a);
        b.release(&mut c);
        assert_eq!(b.total(), 0);
        assert!(b.holders.borrow().is_empty());
    }

    #[test]
    fn a_newcomer_within_its_share_evicts_the_largest_holder_waiting_for_input() {
        let b = InputBudget::new(1024 * K);
        let (big_wakes, wbig) = waker();
        let (_, w) = waker();
        let mut busy = b.account();
        let mut big = b.account();
        let mut mid = b.account();
        let mut new = b.account();
        // The largest is writing a response, not waiting: not evicted.
        assert!(b.charge(&mut busy, 400 * K, &w));
        assert!(hold(&b, &mut big, 400 * K, &wbig));
        assert!(hold(&b, &mut mid, 224 * K, &w));
        assert!(hold(&b, &mut new, 100 * K, &w));
        assert!(big.evicted() && !busy.evicted() && !mid.evicted() && !new.evicted());
        assert_eq!(big_wakes.0.load(Ordering::Relaxed), 1);
        assert_eq!(b.total(), 724 * K);
        // The evicted connection may not grow again, and holds nothing.
        assert!(!hold(&b, &mut big, 500 * K, &wbig));
        assert_eq!(b.total.get(), 724 * K);
    }

    #[test]
    fn over_its_share_a_newcomer_is_refused_and_nobody_is_evicted() {
        let b = InputBudget::new(1024 * K);
        let (_, w) = waker();
        let mut x = b.account();
        let mut y = b.account();
        let mut new = b.account();
        assert!(hold(&b, &mut x, 512 * K, &w));
        assert!(hold(&b, &mut y, 512 * K, &w));
        // 400 K > 1 MiB / 3.
        assert!(!hold(&b, &mut new, 400 * K, &w));
        assert!(!x.evicted() && !y.evicted());
        assert_eq!(b.total(), 1024 * K);
    }

    #[test]
    fn holders_of_at_most_the_minimum_grant_are_never_evicted() {
        let b = InputBudget::new(1024 * K);
        let (_, w) = waker();
        // 15 holders of 64 K and one of 64 K: full, nobody over the grant.
        let mut small: Vec<Account> = (0..16).map(|_| b.account()).collect();
        for a in small.iter_mut() {
            assert!(hold(&b, a, 64 * K, &w));
        }
        let mut new = b.account();
        assert!(!hold(&b, &mut new, 4 * K, &w));
        assert!(small.iter().all(|a| !a.evicted()));
        // With one holder over the grant, a 64 K request gets in.
        b.release(&mut small[0]);
        b.release(&mut small[1]);
        let mut big = b.account();
        assert!(hold(&b, &mut big, 128 * K, &w));
        assert!(hold(&b, &mut new, 64 * K, &w));
        assert!(big.evicted());
        assert!(small.iter().all(|a| !a.evicted()));
    }

    #[test]
    fn under_limit_over_grant_holders_a_small_request_is_never_refused() {
        // Fewer than limit / 64 K holders: some hold more than 64 K.
        let b = InputBudget::new(1024 * K);
        let (_, w) = waker();
        let mut holders: Vec<Account> = (0..12).map(|_| b.account()).collect();
        for a in holders.iter_mut() {
            assert!(hold(&b, a, 85 * K, &w));
        }
        for _ in 0..20 {
            let mut up = b.account();
            assert!(hold(&b, &mut up, 32 * K, &w));
            assert!(hold(&b, &mut up, 64 * K, &w));
            b.release(&mut up);
            for a in holders.iter_mut().filter(|a| a.evicted()) {
                b.release(a);
            }
        }
    }

    #[test]
    fn an_evicted_connection_that_completed_its_request_is_not_refused_later() {
        let b = InputBudget::new(1024 * K);
        let (_, w) = waker();
        let mut old = b.account();
        let mut full = b.account();
        let mut new = b.account();
        assert!(hold(&b, &mut old, 600 * K, &w));
        assert!(hold(&b, &mut full, 424 * K, &w));
        assert!(hold(&b, &mut new, 64 * K, &w));
        assert!(old.evicted());
        // Its request was completed and answered before it saw the flag:
        // holding nothing, it goes on, and the flag is gone.
        assert!(b.charge(&mut old, 0, &w));
        assert!(!old.evicted());
        assert_eq!(b.total.get(), 488 * K);
    }

    #[test]
    fn evicted_input_stays_counted_until_dropped_up_to_the_hard_limit() {
        let b = InputBudget::new(1024 * K);
        let (_, w) = waker();
        let mut olds: Vec<Account> = (0..4).map(|_| b.account()).collect();
        for a in olds.iter_mut() {
            assert!(hold(&b, a, 256 * K, &w));
        }
        let evicted = |olds: &[Account]| olds.iter().filter(|a| a.evicted()).count();
        // A newcomer evicts a holder of 256 K and grows into its room; the
        // evicted one has not run yet, so its 256 K stay counted.
        let mut news: Vec<Account> = (0..3).map(|_| b.account()).collect();
        assert!(hold(&b, &mut news[0], 64 * K, &w));
        assert!(hold(&b, &mut news[0], 200 * K, &w));
        assert_eq!(evicted(&olds), 1);
        assert!(hold(&b, &mut news[1], 56 * K, &w));
        // 1 MiB live + 256 K leaving: at the hard limit (1280 K), the
        // next is refused and nobody more is evicted.
        assert_eq!(b.total.get(), 1280 * K);
        assert!(!hold(&b, &mut news[2], 64 * K, &w));
        assert_eq!(evicted(&olds), 1);
        // Once the evicted one drops its input, the next is admitted.
        for a in olds.iter_mut().filter(|a| a.evicted()) {
            b.release(a);
        }
        assert_eq!(b.total.get(), 1024 * K);
        assert!(hold(&b, &mut news[2], 64 * K, &w));
        assert_eq!(evicted(&olds), 2);
        assert_eq!(b.total(), 832 * K);
    }
}
