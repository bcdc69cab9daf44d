//! The life of one operation's slab slot in the uring driver, and how a
//! CQE moves it on (see the state diagram in the parent module).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Waker;

use ringkit_uring::{sys, BufRing, Cqe};

use crate::driver::waiters::Waiters;
use crate::driver::{Orphan, Source};

/// What to do with CQEs of a dropped multishot operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MultiKind {
    /// Close accepted fds.
    Accept,
    /// Recycle selected buffers.
    Recv,
}

/// The CQEs of a multishot operation not yet taken by its owner. Almost
/// always zero or one: the first lives inline, in the op's slab entry, so
/// the common case touches no other cache line (a `VecDeque` alone kept
/// its entries on the heap, one more line per CQE per connection).
#[derive(Debug, Default)]
pub(super) struct CqeQueue {
    head: Option<(i32, u32)>,
    rest: VecDeque<(i32, u32)>,
}

impl CqeQueue {
    pub(super) fn push_back(&mut self, item: (i32, u32)) {
        if self.head.is_none() {
            // `rest` is empty whenever `head` is (pop_front refills head).
            self.head = Some(item);
        } else {
            self.rest.push_back(item);
        }
    }

    pub(super) fn pop_front(&mut self) -> Option<(i32, u32)> {
        let item = self.head.take()?;
        self.head = self.rest.pop_front();
        if self.rest.is_empty() && self.rest.capacity() > 4 {
            // A long bundle grew it; an idle connection should not keep that.
            self.rest = VecDeque::new();
        }
        Some(item)
    }

    pub(super) fn peek(&self) -> Option<&(i32, u32)> {
        self.head.as_ref()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    pub(super) fn len(&self) -> usize {
        usize::from(self.head.is_some()) + self.rest.len()
    }
}

pub(super) enum Lifecycle {
    Submitted,
    Waiting(Waker),
    Completed(i32, Source),
    Ignored(Box<dyn Orphan>),
    Multi {
        queue: CqeQueue,
        wakers: Waiters,
        done: bool,
        /// Pause (cancel) the operation once this many CQEs wait unread
        /// (0: never); see `UringDriver::submit_multi`.
        cap: u32,
        /// A pause was asked for: its cancel is on its way.
        pausing: bool,
    },
    MultiIgnored(MultiKind),
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lifecycle::Submitted => "Submitted",
            Lifecycle::Waiting(_) => "Waiting",
            Lifecycle::Completed(..) => "Completed",
            Lifecycle::Ignored(_) => "Ignored",
            Lifecycle::Multi { .. } => "Multi",
            Lifecycle::MultiIgnored(_) => "MultiIgnored",
        })
    }
}

/// Hand `cqe` to the operation `key`; `member`: it is the CQE of that
/// member of the op's chain, not of its own SQE. A receive bundle (one CQE for several
/// provided buffers) is split here into one entry per buffer, in order:
/// which buffers it took must be read from the buffer ring's bookkeeping
/// now, before any buffer consumed after them can be recycled and its ring
/// slot rewritten (CQEs arrive in the order the kernel took buffers, so at
/// this point none of those later buffers has been handed out yet). Returns
/// the provided buffers delivered to a live receive, and how many of them
/// came after the first of a bundle, and whether the operation is to be
/// paused now (its owner has left its cap of CQEs unread: the caller
/// cancels it).
pub(super) fn dispatch(
    ops: &mut slab::Slab<Lifecycle>,
    bufs: &Option<Rc<RefCell<BufRing>>>,
    key: usize,
    cqe: Cqe,
    member: Option<u16>,
) -> (u64, u64, bool) {
    let Some(slot) = ops.get_mut(key) else {
        return (0, 0, false);
    };
    let from = match member {
        Some(index) => Source::ChainMember { index },
        None => Source::Ring {
            cqe_flags: cqe.flags,
        },
    };
    match slot {
        Lifecycle::Submitted => *slot = Lifecycle::Completed(cqe.res, from),
        Lifecycle::Waiting(_) => {
            let old = std::mem::replace(slot, Lifecycle::Completed(cqe.res, from));
            if let Lifecycle::Waiting(w) = old {
                w.wake();
            }
        }
        Lifecycle::Completed(..) => {}
        Lifecycle::Ignored(_) => {
            if let Lifecycle::Ignored(data) = ops.remove(key) {
                data.late(cqe.res, from);
            }
        }
        Lifecycle::Multi {
            queue,
            wakers,
            done,
            cap,
            pausing,
        } => {
            let mut buffers = 0;
            let extra = for_each_buffer(cqe, bufs, |res, flags| {
                buffers += u64::from(flags & sys::IORING_CQE_F_BUFFER != 0);
                queue.push_back((res, flags));
            });
            if !cqe.more() {
                *done = true;
            }
            wakers.wake_all();
            let pause = !*done && !*pausing && *cap > 0 && queue.len() >= *cap as usize;
            *pausing |= pause;
            return (buffers, extra, pause);
        }
        Lifecycle::MultiIgnored(kind) => {
            let kind = *kind;
            if !cqe.more() {
                ops.remove(key);
            }
            // Collected first: discarding recycles into the ring that
            // `for_each_buffer` borrows. (Rare: an owner dropped mid-stream.)
            let mut parts = Vec::new();
            for_each_buffer(cqe, bufs, |res, flags| parts.push((res, flags)));
            for (res, flags) in parts {
                let part = Cqe {
                    user_data: cqe.user_data,
                    res,
                    flags,
                };
                discard(kind, part, bufs);
            }
        }
    }
    (0, 0, false)
}

/// Call `f(res, flags)` once for `cqe`, or, for a receive bundle, once per
/// buffer it took: `res` that buffer's byte count, `flags` naming it, with
/// `F_MORE` on all but the last (which keeps the CQE's own). Returns the
/// number of buffers beyond the first. `f` runs while the buffer ring is
/// borrowed: it must not recycle into it (`MultiIgnored` collects first).
fn for_each_buffer(
    cqe: Cqe,
    bufs: &Option<Rc<RefCell<BufRing>>>,
    mut f: impl FnMut(i32, u32),
) -> u64 {
    let (Some(first), Some(ring)) = (cqe.buffer_id(), bufs) else {
        f(cqe.res, cqe.flags);
        return 0;
    };
    let ring = ring.borrow();
    let mut it = ring.bundle(first, cqe.res.max(0) as u32).peekable();
    let Some(head) = it.next() else {
        f(cqe.res, cqe.flags);
        return 0;
    };
    if it.peek().is_none() {
        f(cqe.res, cqe.flags);
        return 0;
    }
    let id_mask = (u16::MAX as u32) << sys::IORING_CQE_BUFFER_SHIFT;
    let base = cqe.flags & !id_mask & !sys::IORING_CQE_F_MORE;
    let mut extra = 0;
    let mut cur = Some(head);
    while let Some((bid, len)) = cur {
        cur = it.next();
        let more = if cur.is_some() {
            sys::IORING_CQE_F_MORE
        } else {
            cqe.flags & sys::IORING_CQE_F_MORE
        };
        f(
            len as i32,
            base | more | (u32::from(bid) << sys::IORING_CQE_BUFFER_SHIFT),
        );
        extra += u64::from(cur.is_some());
    }
    extra
}

/// Clean up a CQE of a multishot operation whose owner is gone: close a
/// late accepted fd, recycle a late buffer.
pub(super) fn discard(kind: MultiKind, cqe: Cqe, bufs: &Option<Rc<RefCell<BufRing>>>) {
    match kind {
        MultiKind::Accept => {
            if cqe.res >= 0 {
                // SAFETY: a late accepted fd nobody owns; we close it.
                unsafe { libc::close(cqe.res) };
            }
        }
        MultiKind::Recv => {
            // One buffer per entry: `dispatch` has split bundles.
            if let (Some(bid), Some(b)) = (cqe.buffer_id(), bufs) {
                b.borrow_mut().recycle(bid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CqeQueue;

    #[test]
    fn cqe_queue_keeps_order_across_the_inline_slot() {
        let mut q = CqeQueue::default();
        assert!(q.is_empty() && q.pop_front().is_none());
        q.push_back((1, 0));
        q.push_back((2, 0));
        assert_eq!(q.pop_front(), Some((1, 0)));
        q.push_back((3, 0));
        q.push_back((4, 0));
        assert!(!q.is_empty());
        let got: Vec<i32> = std::iter::from_fn(|| q.pop_front()).map(|c| c.0).collect();
        assert_eq!(got, [2, 3, 4]);
        assert!(q.is_empty());
        q.push_back((5, 1));
        assert_eq!(q.pop_front(), Some((5, 1)));
    }
}
