//! The submission queue: SQEs written by us, consumed by the kernel.
//!
//! # Protocol
//! We own the tail, the kernel owns the head. SQEs are filled at the local
//! `tail` (not yet visible to the kernel) and published in one store-release of
//! the shared tail by [`SubmissionQueue::publish`], so a batch costs one
//! ordered store. The SQ index array (when the kernel has one) is filled with
//! the identity mapping once at setup and never touched again.

use std::fmt;
use std::sync::atomic::AtomicU32;

use crate::barrier::{full_fence, load_acquire, load_relaxed, store_release};
use crate::sys::{self, IoUringSqe, IoUringSqe128};

/// The SQ is full: reap completions or submit, then push again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqFull;

impl fmt::Display for SqFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("submission queue is full")
    }
}

impl std::error::Error for SqFull {}

/// Pointers into the SQ ring mapping and the SQE array.
pub struct SubmissionQueue {
    // INVARIANT: all `k*` pointers point into the live SQ ring mapping owned by
    // the `IoUring` that owns this queue, aligned for `AtomicU32`.
    pub(crate) khead: *const AtomicU32,
    pub(crate) ktail: *const AtomicU32,
    pub(crate) kflags: *const AtomicU32,
    pub(crate) kdropped: *const AtomicU32,
    // INVARIANT: `sqes` points at `entries << sqe_shift` 64-byte slots.
    pub(crate) sqes: *mut IoUringSqe,
    pub(crate) mask: u32,
    pub(crate) entries: u32,
    /// 0 for 64-byte SQEs, 1 for 128-byte SQEs (`IORING_SETUP_SQE128`).
    pub(crate) sqe_shift: u32,
    /// Next slot to fill; `tail - published` SQEs are filled but not yet visible.
    pub(crate) tail: u32,
    pub(crate) sqpoll: bool,
}

impl fmt::Debug for SubmissionQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubmissionQueue")
            .field("entries", &self.entries)
            .field("pending", &self.pending())
            .field("sqpoll", &self.sqpoll)
            .finish()
    }
}

impl SubmissionQueue {
    /// The kernel's head: how far it has consumed.
    #[inline]
    fn head(&self) -> u32 {
        if self.sqpoll {
            // SAFETY: INVARIANT of `khead`. Acquire: the SQPOLL thread reads SQEs
            // concurrently; we must not refill a slot before its read is done.
            unsafe { load_acquire(self.khead) }
        } else {
            // SAFETY: INVARIANT of `khead`. Relaxed: without SQPOLL the kernel only
            // moves the head inside our own io_uring_enter, which already ordered it.
            unsafe { load_relaxed(self.khead) }
        }
    }

    /// Number of entries in the SQ.
    pub fn capacity(&self) -> u32 {
        self.entries
    }

    /// SQEs filled locally or published but not yet consumed by the kernel.
    pub fn pending(&self) -> u32 {
        self.tail.wrapping_sub(self.head())
    }

    /// Free slots.
    pub fn space_left(&self) -> u32 {
        self.entries - self.pending()
    }

    /// True when no slot is free.
    pub fn is_full(&self) -> bool {
        self.pending() >= self.entries
    }

    /// Invalid SQEs the kernel dropped (`sq_off.dropped`).
    pub fn dropped(&self) -> u32 {
        // SAFETY: INVARIANT of `kdropped`. Relaxed: a statistic, no data hangs off it.
        unsafe { load_relaxed(self.kdropped) }
    }

    /// The SQ ring flags word (`IORING_SQ_*`), as last written by the kernel.
    pub fn flags(&self) -> u32 {
        // SAFETY: INVARIANT of `kflags`. Relaxed: a hint re-read before acting on it.
        unsafe { load_relaxed(self.kflags) }
    }

    /// The kernel has completions it could not post (the CQ was full): enter
    /// with `IORING_ENTER_GETEVENTS` to flush them.
    pub fn cq_overflow(&self) -> bool {
        self.flags() & sys::IORING_SQ_CQ_OVERFLOW != 0
    }

    /// Task work is pending (`IORING_SETUP_TASKRUN_FLAG`): enter to run it.
    pub fn taskrun(&self) -> bool {
        self.flags() & sys::IORING_SQ_TASKRUN != 0
    }

    /// After [`publish`](Self::publish) under SQPOLL: does the poller sleep?
    pub fn need_wakeup(&self) -> bool {
        // The tail store must be visible before we read NEED_WAKEUP, or the
        // thread could go to sleep after missing our tail while we miss its flag
        // (store->load ordering needs a full fence; liburing does the same).
        full_fence();
        self.flags() & sys::IORING_SQ_NEED_WAKEUP != 0
    }

    /// Copy `sqe` into the next free slot. Not visible to the kernel until
    /// [`publish`](Self::publish).
    ///
    /// # Safety
    /// Every buffer, path, iovec, msghdr, timespec or other memory the SQE points
    /// to must stay valid (and, for reads, unaliased) until its CQE arrives (or,
    /// for `CQE_SKIP_SUCCESS`, until the operation is known to be done).
    #[inline]
    pub unsafe fn push(&mut self, sqe: &IoUringSqe) -> Result<(), SqFull> {
        if self.pending() >= self.entries {
            return Err(SqFull);
        }
        let idx = ((self.tail & self.mask) << self.sqe_shift) as usize;
        // SAFETY: `idx` is within the SQE array (INVARIANT of `sqes`), and the
        // slot is free: it lies between the kernel's head and our tail.
        unsafe { self.sqes.add(idx).write(*sqe) };
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    /// Copy a 128-byte SQE into the next slot of an `IORING_SETUP_SQE128` ring.
    ///
    /// # Safety
    /// As for [`push`](Self::push). Panics if the ring does not have 128-byte SQEs.
    pub unsafe fn push128(&mut self, sqe: &IoUringSqe128) -> Result<(), SqFull> {
        assert_eq!(self.sqe_shift, 1, "ring was not set up with SQE128");
        if self.pending() >= self.entries {
            return Err(SqFull);
        }
        let idx = ((self.tail & self.mask) << 1) as usize;
        // SAFETY: with SQE128 every slot spans two 64-byte SQEs, both in bounds.
        unsafe { (self.sqes.add(idx) as *mut IoUringSqe128).write_unaligned(*sqe) };
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    /// Make every pushed SQE visible to the kernel. Returns how many SQEs the
    /// kernel has yet to consume.
    #[inline]
    pub fn publish(&mut self) -> u32 {
        // SAFETY: INVARIANT of `ktail`. Release: the SQE contents written by
        // `push` must be visible before the kernel (or the SQPOLL thread) sees
        // the new tail and reads them.
        unsafe { store_release(self.ktail, self.tail) };
        self.pending()
    }
}
