//! The completion queue: CQEs written by the kernel, consumed by us.
//!
//! # Protocol
//! The kernel owns the tail, we own the head. We load-acquire the tail once per
//! batch, read CQEs up to it from shared memory (no syscall), and store-release
//! the head once when the batch is consumed, which hands the slots back.

use std::fmt;
use std::sync::atomic::AtomicU32;

use crate::barrier::{load_acquire, load_relaxed, store_release};
use crate::sys::{self, IoUringCqe, IoUringCqe32};

/// A completion: `user_data` of the SQE, its result and `IORING_CQE_F_*` flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cqe {
    /// The `user_data` of the SQE this completes.
    pub user_data: u64,
    /// The result: what the mirrored syscall returns, or `-errno`.
    pub res: i32,
    /// `IORING_CQE_F_*`.
    pub flags: u32,
}

impl Cqe {
    /// The result as `io::Result`: `Ok(res)` or the error `-res`.
    pub fn result(&self) -> std::io::Result<u32> {
        if self.res < 0 {
            Err(std::io::Error::from_raw_os_error(-self.res))
        } else {
            Ok(self.res as u32)
        }
    }

    /// More CQEs will follow for this SQE (multishot, or a SEND_ZC notification).
    pub fn more(&self) -> bool {
        self.flags & sys::IORING_CQE_F_MORE != 0
    }

    /// The buffer id picked from a provided-buffer group, if one was.
    pub fn buffer_id(&self) -> Option<u16> {
        (self.flags & sys::IORING_CQE_F_BUFFER != 0)
            .then_some((self.flags >> sys::IORING_CQE_BUFFER_SHIFT) as u16)
    }

    /// The socket had more data queued when this recv completed.
    pub fn sock_nonempty(&self) -> bool {
        self.flags & sys::IORING_CQE_F_SOCK_NONEMPTY != 0
    }

    /// This CQE is a SEND_ZC notification: the buffer may now be reused.
    pub fn notif(&self) -> bool {
        self.flags & sys::IORING_CQE_F_NOTIF != 0
    }
}

impl From<IoUringCqe> for Cqe {
    fn from(c: IoUringCqe) -> Self {
        Cqe {
            user_data: c.user_data,
            res: c.res,
            flags: c.flags,
        }
    }
}

/// Pointers into the CQ ring mapping.
pub struct CompletionQueue {
    // INVARIANT: all `k*` pointers point into the live CQ ring mapping owned by
    // the `IoUring` that owns this queue, aligned for `AtomicU32`; `kflags` may
    // be null on kernels without a CQ flags word.
    pub(crate) khead: *const AtomicU32,
    pub(crate) ktail: *const AtomicU32,
    pub(crate) koverflow: *const AtomicU32,
    pub(crate) kflags: *const AtomicU32,
    // INVARIANT: `cqes` points at `entries << cqe_shift` 16-byte CQEs.
    pub(crate) cqes: *const IoUringCqe,
    pub(crate) mask: u32,
    pub(crate) entries: u32,
    /// 0 for 16-byte CQEs, 1 for 32-byte CQEs (`IORING_SETUP_CQE32`).
    pub(crate) cqe_shift: u32,
}

impl fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("entries", &self.entries)
            .field("ready", &self.ready())
            .finish()
    }
}

impl CompletionQueue {
    #[inline]
    fn head(&self) -> u32 {
        // SAFETY: INVARIANT of `khead`. Relaxed: only we write the head.
        unsafe { load_relaxed(self.khead) }
    }

    #[inline]
    fn tail(&self) -> u32 {
        // SAFETY: INVARIANT of `ktail`. Acquire: pairs with the kernel's
        // store-release of the tail, so the CQEs before it are fully written.
        unsafe { load_acquire(self.ktail) }
    }

    /// Number of CQ entries.
    pub fn capacity(&self) -> u32 {
        self.entries
    }

    /// CQEs ready to be reaped.
    pub fn ready(&self) -> u32 {
        self.tail().wrapping_sub(self.head())
    }

    /// CQEs the kernel dropped because the CQ was full and it could not keep
    /// them (without `IORING_FEAT_NODROP`, or when its overflow allocation failed).
    pub fn overflow(&self) -> u32 {
        // SAFETY: INVARIANT of `koverflow`. Relaxed: a statistic.
        unsafe { load_relaxed(self.koverflow) }
    }

    /// Set or clear `IORING_CQ_EVENTFD_DISABLED`.
    pub fn set_eventfd_disabled(&mut self, disabled: bool) {
        if self.kflags.is_null() {
            return;
        }
        // SAFETY: INVARIANT of `kflags` (checked non-null). Relaxed: the kernel
        // reads this hint when it posts a CQE; no data depends on it.
        let v = unsafe { load_relaxed(self.kflags) };
        let v = if disabled {
            v | sys::IORING_CQ_EVENTFD_DISABLED
        } else {
            v & !sys::IORING_CQ_EVENTFD_DISABLED
        };
        // SAFETY: as above. Release: orders our earlier CQ reads before the kernel sees it.
        unsafe { store_release(self.kflags, v) };
    }

    /// Read the CQE at ring position `pos` (which must be in `head..tail`).
    #[inline]
    fn read(&self, pos: u32) -> Cqe {
        let idx = ((pos & self.mask) << self.cqe_shift) as usize;
        // SAFETY: `idx` is in bounds (INVARIANT of `cqes`); the slot lies between
        // head and an acquired tail, so the kernel finished writing it.
        Cqe::from(unsafe { self.cqes.add(idx).read() })
    }

    /// The oldest CQE, without consuming it.
    #[inline]
    pub fn peek(&self) -> Option<Cqe> {
        let head = self.head();
        (head != self.tail()).then(|| self.read(head))
    }

    /// The oldest CQE of a `CQE32` ring, big part included, without consuming it.
    pub fn peek32(&self) -> Option<IoUringCqe32> {
        assert_eq!(self.cqe_shift, 1, "ring was not set up with CQE32");
        let head = self.head();
        if head == self.tail() {
            return None;
        }
        let idx = ((head & self.mask) << 1) as usize;
        // SAFETY: with CQE32 each slot spans two 16-byte CQEs, both in bounds and
        // written by the kernel (the slot is before the acquired tail).
        Some(unsafe { (self.cqes.add(idx) as *const IoUringCqe32).read_unaligned() })
    }

    /// Mark `n` CQEs as consumed, handing their slots back to the kernel.
    #[inline]
    pub fn advance(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        let head = self.head().wrapping_add(n);
        // SAFETY: INVARIANT of `khead`. Release: our reads of the consumed CQEs
        // must be done before the kernel may overwrite those slots.
        unsafe { store_release(self.khead, head) };
    }

    /// Iterate every CQE ready now; the head is published once, when the
    /// iterator is dropped (unconsumed CQEs stay for the next call).
    #[inline]
    pub fn iter(&mut self) -> Completions<'_> {
        let head = self.head();
        let tail = self.tail();
        Completions {
            cq: self,
            head,
            start: head,
            tail,
        }
    }
}

/// Iterator over ready CQEs; see [`CompletionQueue::iter`].
#[derive(Debug)]
pub struct Completions<'a> {
    cq: &'a mut CompletionQueue,
    start: u32,
    head: u32,
    tail: u32,
}

impl Iterator for Completions<'_> {
    type Item = Cqe;

    #[inline]
    fn next(&mut self) -> Option<Cqe> {
        if self.head == self.tail {
            return None;
        }
        let cqe = self.cq.read(self.head);
        self.head = self.head.wrapping_add(1);
        Some(cqe)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.tail.wrapping_sub(self.head) as usize;
        (n, Some(n))
    }
}

impl Drop for Completions<'_> {
    #[inline]
    fn drop(&mut self) {
        self.cq.advance(self.head.wrapping_sub(self.start));
    }
}
