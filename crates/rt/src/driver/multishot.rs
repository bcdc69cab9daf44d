//! The owner's side of a multishot operation (io_uring): one SQE that keeps
//! posting CQEs, each taken by a later call.
//!
//! # The slot rule
//! A multishot operation holds one slot of the uring driver's slab for as
//! long as the kernel may post CQEs for it. Its owner keeps the key here and:
//! - forgets the key when it is handed the last CQE (one without
//!   `IORING_CQE_F_MORE`): the driver freed the slot as it handed it out, and
//!   the key may already belong to another operation;
//! - forgets the key when the driver says the operation ended
//!   (`Ready(None)`): the slot was freed then too;
//! - on [`Multishot::cancel`] (and on drop) hands the slot back to the
//!   driver, which queues an `ASYNC_CANCEL` and cleans up whatever CQEs still
//!   come (closing late accepted fds, recycling late buffers) until the last.
//!
//! Cancel before closing the fd the operation works on: a queued multishot
//! holds a reference to the file, so a close alone would leave it armed.
//!
//! The per-operation files [`super::op::accept_multi`] and
//! [`super::op::recv_multi`] build on this. Whether a multishot operation
//! is made at all is the driver's choice, not theirs: on a backend without
//! them (epoll) [`Multishot::poll_next`] answers [`Shot::Single`], and the
//! caller makes progress with the single-shot operation instead.

use std::cell::Cell;
use std::io;
use std::task::{ready, Context, Poll};

use ringkit_uring::opcode::Entry;

use super::uring::MultiKind;
use super::Driver;
use crate::coop;
use crate::driver::current;

/// What [`Multishot::poll_next`] gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shot {
    /// A CQE: `(res, flags)`.
    Cqe(i32, u32),
    /// The operation ended without another CQE (the next call arms a new
    /// one).
    Ended,
    /// This backend has no multishot operations: make progress with the
    /// single-shot one.
    Single,
}

/// The key of an armed multishot operation, if any.
#[derive(Debug)]
pub(crate) struct Multishot {
    key: Cell<Option<usize>>,
    kind: MultiKind,
}

impl Multishot {
    pub(crate) const fn new(kind: MultiKind) -> Multishot {
        Multishot {
            key: Cell::new(None),
            kind,
        }
    }

    pub(crate) fn is_armed(&self) -> bool {
        self.key.get().is_some()
    }

    /// The next CQE, arming the operation with `entry()` if it is not
    /// armed; see [`Shot`].
    pub(crate) fn poll_next(
        &self,
        cx: &mut Context<'_>,
        entry: impl FnOnce() -> Entry,
    ) -> Poll<io::Result<Shot>> {
        // The task's budget, before a CQE is taken (see `crate::coop`).
        ready!(coop::poll_proceed(cx));
        let shot = self.poll_shot(cx, entry);
        if let Poll::Ready(Ok(Shot::Cqe(..))) = shot {
            coop::spend();
        }
        shot
    }

    fn poll_shot(
        &self,
        cx: &mut Context<'_>,
        entry: impl FnOnce() -> Entry,
    ) -> Poll<io::Result<Shot>> {
        current::driver(|d, m| {
            let Driver::Uring(u) = d else {
                return Poll::Ready(Ok(Shot::Single));
            };
            let key = match self.key.get() {
                Some(k) => k,
                None => match u.submit_multi(entry(), self.kind, m) {
                    Ok(k) => {
                        self.key.set(Some(k));
                        k
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                },
            };
            match u.poll_multi(key, cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(None) => {
                    self.key.set(None);
                    Poll::Ready(Ok(Shot::Ended))
                }
                Poll::Ready(Some((res, flags))) => {
                    if flags & ringkit_uring::sys::IORING_CQE_F_MORE == 0 {
                        // The slot went with this last CQE (the slot rule).
                        self.key.set(None);
                    }
                    Poll::Ready(Ok(Shot::Cqe(res, flags)))
                }
            }
        })
    }

    /// The next CQE if one is already queued and carries received bytes in
    /// a buffer; never waits, never arms.
    pub(crate) fn try_next_buffer(&self) -> Option<(i32, u32)> {
        let key = self.key.get()?;
        if !coop::has_budget() {
            // The caller waits through `poll_next`, which yields.
            return None;
        }
        let got = current::try_driver(|d, _| match d {
            Driver::Uring(u) => u.try_multi_buffer(key),
            Driver::Epoll(_) => None,
        })
        .flatten()?;
        if got.1 & ringkit_uring::sys::IORING_CQE_F_MORE == 0 {
            // The slot went with this last CQE (the slot rule).
            self.key.set(None);
        }
        coop::spend();
        Some(got)
    }

    /// Cancel the armed operation, if any (see the module docs).
    pub(crate) fn cancel(&self) {
        let Some(key) = self.key.take() else { return };
        let kind = self.kind;
        current::try_driver(|d, m| {
            if let Driver::Uring(u) = d {
                u.drop_multi(key, kind, m);
            }
        });
    }
}

impl Drop for Multishot {
    fn drop(&mut self) {
        self.cancel();
    }
}
