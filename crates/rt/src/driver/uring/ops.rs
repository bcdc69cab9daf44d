//! The owner's side of operations in flight: wakers, results, multishot
//! CQE queues, orphans (a future dropped in flight) and cancels.

use std::task::{Context, Poll, Waker};

use ringkit_uring::opcode::{self, SqeFlags};
use ringkit_uring::{sys, Cqe};

use super::lifecycle::{discard, Lifecycle, MultiKind};
use super::{UringDriver, CANCEL_UD, CHAIN_TAG};
use crate::driver::{Source, UringOp};
use crate::metrics::Metrics;

impl UringDriver {
    pub(crate) fn set_waker(&mut self, key: usize, w: &Waker) {
        if let Some(slot) = self.ops.get_mut(key) {
            match slot {
                Lifecycle::Submitted => *slot = Lifecycle::Waiting(w.clone()),
                Lifecycle::Waiting(old) if !old.will_wake(w) => *old = w.clone(),
                _ => {}
            }
        }
    }

    /// Poll a single-shot operation: its result and where it came from,
    /// once the CQE is in.
    pub(crate) fn poll_op(&mut self, key: usize, cx: &mut Context<'_>) -> Poll<(i32, Source)> {
        match self.ops.get_mut(key) {
            Some(Lifecycle::Completed(res, from)) => {
                let r = (*res, *from);
                self.ops.remove(key);
                Poll::Ready(r)
            }
            Some(_) => {
                self.set_waker(key, cx.waker());
                Poll::Pending
            }
            None => Poll::Ready((-libc::ECANCELED, Source::Ring { cqe_flags: 0 })),
        }
    }

    /// The next CQE of multishot `key` if one is queued and it carries
    /// received bytes in a buffer (anything else stays for `poll_multi`).
    pub(crate) fn try_multi_buffer(&mut self, key: usize) -> Option<(i32, u32)> {
        let Some(Lifecycle::Multi { queue, done, .. }) = self.ops.get_mut(key) else {
            return None;
        };
        let &(res, flags) = queue.peek()?;
        if res <= 0 || flags & sys::IORING_CQE_F_BUFFER == 0 {
            return None;
        }
        let item = queue.pop_front();
        if *done && queue.is_empty() {
            // As in `poll_multi`: the last CQE takes the slot with it.
            self.ops.remove(key);
        }
        item
    }

    /// Poll a multishot operation: the next CQE, or `None` once it ended
    /// (the last CQE, without `F_MORE`, has been returned).
    ///
    /// Handing out the last CQE frees the slot: the owner must not poll
    /// `key` again after a CQE without `F_MORE` (the key may be reused).
    pub(crate) fn poll_multi(
        &mut self,
        key: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Option<(i32, u32)>> {
        match self.ops.get_mut(key) {
            Some(Lifecycle::Multi {
                queue,
                wakers,
                done,
                ..
            }) => {
                if let Some(item) = queue.pop_front() {
                    if *done && queue.is_empty() {
                        // The last CQE (no F_MORE) goes out now: its owner
                        // forgets the key on seeing it, so the slot must go
                        // too (it leaked one slab entry per stream before).
                        self.ops.remove(key);
                    }
                    return Poll::Ready(Some(item));
                }
                if *done {
                    self.ops.remove(key);
                    return Poll::Ready(None);
                }
                // Every waiter is kept (two tasks accepting on one
                // listener): a CQE wakes them all, one takes it, the
                // others wait again.
                wakers.add(cx.waker());
                Poll::Pending
            }
            _ => Poll::Ready(None),
        }
    }

    /// The owner of a multishot operation is gone: cancel it and clean up
    /// every CQE it still produces.
    pub(crate) fn drop_multi(&mut self, key: usize, kind: MultiKind, m: &Metrics) {
        let Some(slot) = self.ops.get_mut(key) else {
            return;
        };
        let Lifecycle::Multi { queue, done, .. } = slot else {
            return;
        };
        let queued: Vec<(i32, u32)> = std::iter::from_fn(|| queue.pop_front()).collect();
        let done = *done;
        if done {
            self.ops.remove(key);
        } else {
            *slot = Lifecycle::MultiIgnored(kind);
            self.cancel(key, m);
        }
        for (res, flags) in queued {
            discard(
                kind,
                Cqe {
                    user_data: 0,
                    res,
                    flags,
                },
                &self.bufs,
            );
        }
    }

    /// The future of `key` was dropped: keep `data` until the CQE, cancel.
    pub(crate) fn orphan<T: UringOp>(&mut self, key: usize, mut data: T, m: &Metrics) {
        match self.ops.get_mut(key) {
            Some(Lifecycle::Completed(res, from)) => {
                let (res, from) = (*res, *from);
                self.ops.remove(key);
                data.orphan_result(res, from);
            }
            Some(slot @ (Lifecycle::Submitted | Lifecycle::Waiting(_))) => {
                data.on_orphan();
                let members = data.uring_chain_len();
                *slot = Lifecycle::Ignored(Box::new(data));
                self.cancel(key, m);
                // Which member runs is unknown: cancel each (a cancel that
                // finds nothing fails, and its CQE is ignored).
                for i in 0..members {
                    self.cancel_ud(CHAIN_TAG | (i as u64) << 32 | key as u64, m);
                }
            }
            _ => {
                // Unknown key: cannot tell whether the kernel is done; leak,
                // counted (`MetricsSnapshot::ops_leaked`).
                Metrics::add(&m.ops_leaked, 1);
                std::mem::forget(data);
            }
        }
    }

    pub(super) fn cancel(&mut self, key: usize, m: &Metrics) {
        self.cancel_ud(key as u64, m)
    }

    /// Cancel the live operation `key` (and each member of its chain, if
    /// it has `members`) while its owner keeps waiting: its CQE still
    /// comes, with `ECANCELED` if the cancel won, and completes it.
    pub(crate) fn cancel_live(&mut self, key: usize, members: usize, m: &Metrics) {
        if !matches!(
            self.ops.get(key),
            Some(Lifecycle::Submitted | Lifecycle::Waiting(_))
        ) {
            return;
        }
        self.cancel(key, m);
        for i in 0..members {
            self.cancel_ud(CHAIN_TAG | (i as u64) << 32 | key as u64, m);
        }
    }

    pub(super) fn cancel_ud(&mut self, ud: u64, m: &Metrics) {
        let mut e = opcode::AsyncCancel::new(ud).build().user_data(CANCEL_UD);
        if self.skip_success {
            e = e.flags(SqeFlags::CQE_SKIP_SUCCESS);
        }
        if let Err(err) = self.push(e, m) {
            tracing::error!("ringkit: could not queue a cancel: {err}");
        }
    }
}
