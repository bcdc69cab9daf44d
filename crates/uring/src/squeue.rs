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

#[cfg(test)]
mod tests {
    //! The SQ index arithmetic over heap memory laid out like the kernel's SQ
    //! ring, with the test playing the kernel (no syscalls: these run under miri).

    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    // Byte offsets of the fake SQ ring, in the kernel's `sq_off` order.
    const HEAD: usize = 0;
    const TAIL: usize = 4;
    const RING_MASK: usize = 8;
    const RING_ENTRIES: usize = 12;
    const FLAGS: usize = 16;
    const DROPPED: usize = 20;
    const ARRAY: usize = 24;

    /// A fake SQ ring mapping plus SQE array; the test is the kernel.
    struct FakeSq {
        _ring: Vec<u64>,
        // INVARIANT: points at `_ring`'s buffer (never reallocated), which holds
        // the words above and `entries` u32 array slots.
        ring: *mut u8,
        _sqes: Vec<IoUringSqe>,
        // INVARIANT: points at `_sqes`' buffer of `entries << sqe_shift` SQEs.
        sqes: *mut IoUringSqe,
        entries: u32,
        sqe_shift: u32,
    }

    // SAFETY: the kernel thread of `sqpoll_thread_consumes_while_we_push` reads
    // the SQE array only below the tail it load-acquired, which is the protocol
    // under test; miri's race detector checks it.
    unsafe impl Sync for FakeSq {}

    impl FakeSq {
        /// `entries` slots, head and tail both at `start`.
        fn new(entries: u32, sqe_shift: u32, start: u32) -> FakeSq {
            assert!(entries.is_power_of_two());
            let words = ARRAY / 4 + entries as usize;
            let mut ring_mem = vec![0u64; words.div_ceil(2)];
            let ring = ring_mem.as_mut_ptr().cast::<u8>();
            let mut sqes_mem = vec![IoUringSqe::default(); (entries << sqe_shift) as usize];
            let sqes = sqes_mem.as_mut_ptr();
            let fake = FakeSq {
                _ring: ring_mem,
                ring,
                _sqes: sqes_mem,
                sqes,
                entries,
                sqe_shift,
            };
            fake.word(HEAD).store(start, Ordering::Relaxed);
            fake.word(TAIL).store(start, Ordering::Relaxed);
            fake.word(RING_MASK).store(entries - 1, Ordering::Relaxed);
            fake.word(RING_ENTRIES).store(entries, Ordering::Relaxed);
            // Identity index array, as `IoUring` writes it at setup.
            for i in 0..entries {
                fake.word(ARRAY + 4 * i as usize)
                    .store(i, Ordering::Relaxed);
            }
            fake
        }

        fn at<T>(&self, off: usize) -> *mut T {
            debug_assert!(off < self._ring.len() * 8);
            // SAFETY: `off` is inside the ring buffer (INVARIANT of `ring`).
            unsafe { self.ring.add(off).cast() }
        }

        fn word(&self, off: usize) -> &AtomicU32 {
            // SAFETY: every offset used is a 4-aligned word inside the 8-aligned
            // ring buffer, which lives as long as `self`.
            unsafe { &*self.at::<AtomicU32>(off) }
        }

        /// The queue as `IoUring` builds it over a real mapping.
        fn sq(&self, sqpoll: bool) -> SubmissionQueue {
            SubmissionQueue {
                khead: self.at(HEAD),
                ktail: self.at(TAIL),
                kflags: self.at(FLAGS),
                kdropped: self.at(DROPPED),
                sqes: self.sqes,
                mask: self.word(RING_MASK).load(Ordering::Relaxed),
                entries: self.word(RING_ENTRIES).load(Ordering::Relaxed),
                sqe_shift: self.sqe_shift,
                tail: self.word(TAIL).load(Ordering::Relaxed),
                sqpoll,
            }
        }

        /// Kernel side: consume every published SQE (at most `max`), in order,
        /// through the index array, as `io_uring_enter` would.
        fn consume(&self, max: u32) -> Vec<IoUringSqe> {
            let mut head = self.word(HEAD).load(Ordering::Relaxed);
            let tail = self.word(TAIL).load(Ordering::Acquire);
            let mut out = Vec::new();
            while head != tail && (out.len() as u32) < max {
                let slot = ARRAY + 4 * (head & (self.entries - 1)) as usize;
                let idx = self.word(slot).load(Ordering::Relaxed);
                assert!(idx < self.entries);
                // SAFETY: `idx << sqe_shift` is inside the SQE array, and the
                // slot is below the acquired tail, so it is fully written.
                out.push(unsafe { self.sqes.add((idx << self.sqe_shift) as usize).read() });
                head = head.wrapping_add(1);
                self.word(HEAD).store(head, Ordering::Release);
            }
            out
        }

        /// Kernel side: the SQE in raw 64-byte slot `i`.
        fn raw_sqe(&self, i: usize) -> IoUringSqe {
            assert!(i < (self.entries << self.sqe_shift) as usize);
            // SAFETY: in bounds (checked above); no push is in progress.
            unsafe { self.sqes.add(i).read() }
        }
    }

    fn nop(user_data: u64) -> IoUringSqe {
        IoUringSqe {
            user_data,
            ..Default::default()
        }
    }

    fn push(sq: &mut SubmissionQueue, user_data: u64) -> Result<(), SqFull> {
        // SAFETY: the SQE points at no memory.
        unsafe { sq.push(&nop(user_data)) }
    }

    #[test]
    fn pushed_sqes_stay_invisible_until_publish() {
        let k = FakeSq::new(8, 0, 0);
        let mut sq = k.sq(false);
        assert_eq!((sq.capacity(), sq.pending(), sq.space_left()), (8, 0, 8));
        for i in 0..3 {
            push(&mut sq, 100 + i).unwrap();
        }
        assert_eq!((sq.pending(), sq.space_left()), (3, 5));
        assert_eq!(
            k.word(TAIL).load(Ordering::Relaxed),
            0,
            "tail not yet shared"
        );
        assert!(k.consume(u32::MAX).is_empty());
        assert_eq!(sq.publish(), 3);
        assert_eq!(k.word(TAIL).load(Ordering::Relaxed), 3);
        for i in 0..3 {
            assert_eq!(k.raw_sqe(i).user_data, 100 + i as u64);
        }
        let got: Vec<u64> = k.consume(u32::MAX).iter().map(|s| s.user_data).collect();
        assert_eq!(got, [100, 101, 102]);
        assert_eq!((sq.pending(), sq.space_left()), (0, 8));
    }

    #[test]
    fn full_queue_refuses_until_the_kernel_consumes() {
        let k = FakeSq::new(4, 0, 0);
        let mut sq = k.sq(false);
        for i in 0..4 {
            push(&mut sq, i).unwrap();
        }
        assert!(sq.is_full());
        assert_eq!(sq.space_left(), 0);
        assert_eq!(push(&mut sq, 99), Err(SqFull));
        // Full counts published and unpublished SQEs alike.
        assert_eq!(sq.publish(), 4);
        assert_eq!(push(&mut sq, 99), Err(SqFull));
        assert_eq!(k.consume(1)[0].user_data, 0);
        assert!(!sq.is_full());
        assert_eq!(sq.space_left(), 1);
        push(&mut sq, 4).unwrap();
        assert_eq!(k.raw_sqe(0).user_data, 4, "the freed slot is reused");
        assert_eq!(push(&mut sq, 99), Err(SqFull));
        sq.publish();
        let got: Vec<u64> = k.consume(u32::MAX).iter().map(|s| s.user_data).collect();
        assert_eq!(got, [1, 2, 3, 4]);
    }

    #[test]
    fn indices_wrap_around_u32_max() {
        let start = u32::MAX - 5;
        let k = FakeSq::new(4, 0, start);
        let mut sq = k.sq(false);
        let mut next = 0u64;
        let mut seen = Vec::new();
        // 5 rounds of 3 SQEs carry the tail across u32::MAX and the mask around
        // the ring several times.
        for _ in 0..5 {
            for _ in 0..3 {
                push(&mut sq, next).unwrap();
                next += 1;
            }
            assert_eq!(sq.pending(), 3);
            assert_eq!(sq.space_left(), 1);
            let tail = sq.tail;
            assert_eq!(sq.publish(), 3);
            assert_eq!(k.word(TAIL).load(Ordering::Relaxed), tail);
            // The last SQE sits at `(tail - 1) & mask`.
            assert_eq!(
                k.raw_sqe((tail.wrapping_sub(1) & 3) as usize).user_data,
                next - 1
            );
            seen.extend(k.consume(u32::MAX).iter().map(|s| s.user_data));
        }
        assert_eq!(sq.tail, start.wrapping_add(15));
        assert!(sq.tail < start, "the tail wrapped");
        assert_eq!(seen, (0..15).collect::<Vec<_>>());
        assert_eq!(sq.pending(), 0);
    }

    #[test]
    fn full_detection_across_the_wrap() {
        // head = u32::MAX - 1, tail = head + 4 = 2: still exactly full.
        let k = FakeSq::new(4, 0, u32::MAX - 1);
        let mut sq = k.sq(false);
        for i in 0..4 {
            push(&mut sq, i).unwrap();
        }
        assert_eq!(sq.tail, 2);
        assert_eq!(sq.pending(), 4);
        assert_eq!(push(&mut sq, 9), Err(SqFull));
        sq.publish();
        assert_eq!(k.consume(2).len(), 2);
        assert_eq!(k.word(HEAD).load(Ordering::Relaxed), 0);
        assert_eq!(sq.space_left(), 2);
    }

    #[test]
    fn sqe128_slots_are_two_sqes_wide() {
        let k = FakeSq::new(4, 1, u32::MAX - 1);
        let mut sq = k.sq(false);
        for i in 0..4u64 {
            let mut big = IoUringSqe128 {
                sqe: nop(i),
                ..Default::default()
            };
            big.cmd[7] = 0xc0de + i;
            // SAFETY: the SQE points at no memory.
            unsafe { sq.push128(&big) }.unwrap();
        }
        // SAFETY: the SQE points at no memory.
        let full = unsafe { sq.push128(&IoUringSqe128::default()) };
        assert_eq!(full, Err(SqFull));
        sq.publish();
        for i in 0..4u32 {
            // Position u32::MAX - 1 + i lands in slot (2 + i) & 3.
            let slot = (u32::MAX - 1).wrapping_add(i) & 3;
            let first = k.raw_sqe(2 * slot as usize);
            let second = k.raw_sqe(2 * slot as usize + 1);
            assert_eq!(first.user_data, u64::from(i));
            // The last u64 of the command area is the second half's `pad2`.
            assert_eq!(second.pad2, 0xc0de + u64::from(i));
        }
        let got: Vec<u64> = k.consume(u32::MAX).iter().map(|s| s.user_data).collect();
        assert_eq!(got, [0, 1, 2, 3]);
        // A plain push on an SQE128 ring fills the first half of the next slot.
        push(&mut sq, 77).unwrap();
        assert_eq!(
            k.raw_sqe(2 * (sq.tail.wrapping_sub(1) & 3) as usize)
                .user_data,
            77
        );
    }

    #[test]
    #[should_panic(expected = "SQE128")]
    fn push128_needs_an_sqe128_ring() {
        let k = FakeSq::new(4, 0, 0);
        let mut sq = k.sq(false);
        // SAFETY: the SQE points at no memory.
        let _ = unsafe { sq.push128(&IoUringSqe128::default()) };
    }

    #[test]
    fn flag_words_are_read_from_the_ring() {
        let k = FakeSq::new(2, 0, 0);
        let sq = k.sq(true);
        assert!(!sq.cq_overflow() && !sq.taskrun() && !sq.need_wakeup());
        k.word(FLAGS)
            .store(sys::IORING_SQ_CQ_OVERFLOW, Ordering::Relaxed);
        assert!(sq.cq_overflow() && !sq.taskrun() && !sq.need_wakeup());
        k.word(FLAGS).store(
            sys::IORING_SQ_TASKRUN | sys::IORING_SQ_NEED_WAKEUP,
            Ordering::Relaxed,
        );
        assert!(!sq.cq_overflow() && sq.taskrun() && sq.need_wakeup());
        assert_eq!(
            sq.flags(),
            sys::IORING_SQ_TASKRUN | sys::IORING_SQ_NEED_WAKEUP
        );
        k.word(DROPPED).store(3, Ordering::Relaxed);
        assert_eq!(sq.dropped(), 3);
        assert!(format!("{sq:?}").contains("sqpoll: true"));
    }

    /// An SQPOLL-like kernel thread consumes while we push: the acquire of the
    /// head (SQPOLL) and the release of the tail must keep SQE reads and slot
    /// refills apart. Under miri the data-race detector checks exactly that.
    #[test]
    fn sqpoll_thread_consumes_while_we_push() {
        const N: u64 = if cfg!(miri) { 40 } else { 10_000 };
        let k = FakeSq::new(4, 0, u32::MAX - 10);
        let mut sq = k.sq(true);
        std::thread::scope(|s| {
            let kernel = s.spawn(|| {
                let mut got = Vec::new();
                while (got.len() as u64) < N {
                    let batch = k.consume(u32::MAX);
                    if batch.is_empty() {
                        std::thread::yield_now();
                    }
                    got.extend(batch.iter().map(|s| s.user_data));
                }
                got
            });
            let mut i = 0;
            while i < N {
                match push(&mut sq, i) {
                    Ok(()) => i += 1,
                    Err(SqFull) => {
                        sq.publish();
                        std::thread::yield_now();
                    }
                }
            }
            sq.publish();
            assert_eq!(kernel.join().unwrap(), (0..N).collect::<Vec<_>>());
        });
        assert_eq!(sq.pending(), 0);
    }
}
