//! Acknowledgements: what each append's [`Commit`](crate::Commit) waits
//! for. A log lives on one thread, so instead of a channel per record (an
//! allocation and atomic reference counts for each) every append takes a
//! slot in one table the log and its commits share: a slot is a sequence
//! number, the table a queue of them from the oldest still wanted.
//!
//! A slot is resolved once ([`Ack::send`]); an [`Ack`] dropped unsent
//! resolves its slot as the log closed, as a dropped channel did. A
//! commit takes its result once, or gives its slot up when dropped; the
//! queue drops slots from its front as they are given up, so it holds the
//! appends from the oldest commit still held on.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// The table of slots.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    /// The sequence number of `slots[0]`.
    base: u64,
    slots: VecDeque<Slot>,
}

#[derive(Debug)]
enum Slot {
    /// Not resolved yet; the waker of the commit that polled it last.
    Waiting(Option<Waker>),
    /// Resolved, not taken yet.
    Done(io::Result<u64>),
    /// Taken, or its commit dropped.
    Gone,
}

/// The table, shared by the log and its commits.
pub(crate) type Table = Rc<RefCell<Acks>>;

/// The error of an append whose log closed before it resolved.
fn closed() -> io::Error {
    io::Error::other("the log was closed before the record was durable")
}

impl Acks {
    /// A new slot: the sending half for the flusher, the number for the
    /// commit.
    pub(crate) fn slot(table: &Table) -> (Ack, u64) {
        let mut t = table.borrow_mut();
        let seq = t.base + t.slots.len() as u64;
        t.slots.push_back(Slot::Waiting(None));
        (
            Ack {
                table: Some(table.clone()),
                seq,
            },
            seq,
        )
    }

    fn get(&mut self, seq: u64) -> Option<&mut Slot> {
        let i = seq.checked_sub(self.base)?;
        self.slots.get_mut(usize::try_from(i).ok()?)
    }

    /// Resolve slot `seq`; the waker to wake once the table is let go.
    fn resolve(&mut self, seq: u64, res: io::Result<u64>) -> Option<Waker> {
        let mut wake = None;
        if let Some(slot) = self.get(seq) {
            match std::mem::replace(slot, Slot::Gone) {
                Slot::Waiting(w) => {
                    *slot = Slot::Done(res);
                    wake = w;
                }
                Slot::Done(_) => unreachable!("slot {seq} resolved twice"),
                // Its commit is gone: nobody wants the result.
                Slot::Gone => {}
            }
        }
        self.trim();
        wake
    }

    /// The result of slot `seq`, once resolved.
    pub(crate) fn poll(&mut self, seq: u64, cx: &Context<'_>) -> Poll<io::Result<u64>> {
        let slot = self.get(seq).expect("a commit's slot outlives it");
        let out = match slot {
            Slot::Waiting(w) => {
                if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *w = Some(cx.waker().clone());
                }
                return Poll::Pending;
            }
            Slot::Done(_) => match std::mem::replace(slot, Slot::Gone) {
                Slot::Done(r) => r,
                _ => unreachable!(),
            },
            Slot::Gone => panic!("Commit polled after completion"),
        };
        self.trim();
        Poll::Ready(out)
    }

    /// The commit of slot `seq` is dropped.
    pub(crate) fn forget(&mut self, seq: u64) {
        if let Some(slot) = self.get(seq) {
            *slot = Slot::Gone;
        }
        self.trim();
    }

    fn trim(&mut self) {
        while matches!(self.slots.front(), Some(Slot::Gone)) {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// Slots held, resolved or not (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.len()
    }
}

/// The sending half of one slot: resolved once, by [`Ack::send`] or, as
/// the log closed, by being dropped.
#[derive(Debug)]
pub(crate) struct Ack {
    table: Option<Table>,
    seq: u64,
}

impl Ack {
    /// An ack nobody waits for (a hole the flusher queues itself).
    pub(crate) fn nobody() -> Ack {
        Ack {
            table: None,
            seq: 0,
        }
    }

    /// Resolve the slot with `res`.
    pub(crate) fn send(mut self, res: io::Result<u64>) {
        self.resolve(res);
    }

    fn resolve(&mut self, res: io::Result<u64>) {
        if let Some(t) = self.table.take() {
            // The table is borrowed only inside this module, never across
            // a drop of an `Ack` or a wake.
            let wake = t.borrow_mut().resolve(self.seq, res);
            if let Some(w) = wake {
                w.wake();
            }
        }
    }
}

impl Drop for Ack {
    fn drop(&mut self) {
        self.resolve(Err(closed()));
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

    #[test]
    fn each_slot_resolves_once_and_the_table_drains() {
        let table: Table = Rc::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let cx = Context::from_waker(&waker);
        let (a, sa) = Acks::slot(&table);
        let (b, sb) = Acks::slot(&table);
        let (c, sc) = Acks::slot(&table);
        assert!(table.borrow_mut().poll(sa, &cx).is_pending());
        // Resolved out of order; the waiting commit is woken.
        b.send(Ok(8));
        a.send(Ok(7));
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert_eq!(
            table.borrow_mut().poll(sb, &cx).map(|r| r.unwrap()),
            Poll::Ready(8)
        );
        // `b` is taken but `a` is not: nothing leaves the front yet.
        assert_eq!(table.borrow().len(), 3);
        assert_eq!(
            table.borrow_mut().poll(sa, &cx).map(|r| r.unwrap()),
            Poll::Ready(7)
        );
        assert_eq!(table.borrow().len(), 1);
        // A dropped ack resolves as the log closed.
        drop(c);
        match table.borrow_mut().poll(sc, &cx) {
            Poll::Ready(Err(e)) => assert!(e.to_string().contains("closed"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(table.borrow().len(), 0);
        // A commit dropped before its ack is sent: the send is dropped.
        let (d, sd) = Acks::slot(&table);
        table.borrow_mut().forget(sd);
        d.send(Ok(9));
        assert_eq!(table.borrow().len(), 0);
        Ack::nobody().send(Ok(1));
    }
}
