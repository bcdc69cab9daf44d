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

#[cfg(test)]
mod tests {
    //! The CQ index arithmetic over heap memory laid out like the kernel's CQ
    //! ring, with the test playing the kernel (no syscalls: these run under miri).

    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    // Byte offsets of the fake CQ ring, in the kernel's `cq_off` order.
    const HEAD: usize = 0;
    const TAIL: usize = 4;
    const RING_MASK: usize = 8;
    const RING_ENTRIES: usize = 12;
    const OVERFLOW: usize = 16;
    const FLAGS: usize = 20;
    const CQES: usize = 64;

    /// A fake CQ ring mapping: header words, then the CQE array; the test is the kernel.
    struct FakeCq {
        mem: Vec<u64>,
        // INVARIANT: points at `mem`'s buffer (never reallocated): the words
        // above, then `entries << cqe_shift` CQEs at byte `CQES`.
        ring: *mut u8,
        entries: u32,
        cqe_shift: u32,
    }

    // SAFETY: the kernel thread of `kernel_thread_posts_while_we_reap` writes a
    // CQE only after load-acquiring a head that freed its slot, which is the
    // protocol under test; miri's race detector checks it.
    unsafe impl Sync for FakeCq {}

    impl FakeCq {
        /// `entries` slots, head and tail both at `start`.
        fn new(entries: u32, cqe_shift: u32, start: u32) -> FakeCq {
            assert!(entries.is_power_of_two());
            let bytes = CQES + ((entries << cqe_shift) as usize) * 16;
            let mut mem = vec![0u64; bytes / 8];
            let ring = mem.as_mut_ptr().cast::<u8>();
            let fake = FakeCq {
                mem,
                ring,
                entries,
                cqe_shift,
            };
            fake.word(HEAD).store(start, Ordering::Relaxed);
            fake.word(TAIL).store(start, Ordering::Relaxed);
            fake.word(RING_MASK).store(entries - 1, Ordering::Relaxed);
            fake.word(RING_ENTRIES).store(entries, Ordering::Relaxed);
            fake
        }

        fn at<T>(&self, off: usize) -> *mut T {
            debug_assert!(off < self.mem.len() * 8);
            // SAFETY: `off` is inside the ring buffer (INVARIANT of `ring`).
            unsafe { self.ring.add(off).cast() }
        }

        fn word(&self, off: usize) -> &AtomicU32 {
            // SAFETY: every offset used is a 4-aligned word inside the 8-aligned
            // buffer, which lives as long as `self`.
            unsafe { &*self.at::<AtomicU32>(off) }
        }

        /// The queue as `IoUring` builds it over a real mapping.
        fn cq(&self, with_flags: bool) -> CompletionQueue {
            CompletionQueue {
                khead: self.at(HEAD),
                ktail: self.at(TAIL),
                koverflow: self.at(OVERFLOW),
                kflags: if with_flags {
                    self.at(FLAGS)
                } else {
                    std::ptr::null()
                },
                cqes: self.at(CQES),
                mask: self.word(RING_MASK).load(Ordering::Relaxed),
                entries: self.word(RING_ENTRIES).load(Ordering::Relaxed),
                cqe_shift: self.cqe_shift,
            }
        }

        /// Kernel side: post a CQE if there is room (the head is acquired so
        /// the consumer's reads of the slot are done before we overwrite it).
        fn post(&self, cqe: IoUringCqe32) -> bool {
            let head = self.word(HEAD).load(Ordering::Acquire);
            let tail = self.word(TAIL).load(Ordering::Relaxed);
            if tail.wrapping_sub(head) >= self.entries {
                return false;
            }
            let idx = ((tail & (self.entries - 1)) << self.cqe_shift) as usize;
            let p = self.at::<IoUringCqe>(CQES).wrapping_add(idx);
            // SAFETY: `idx` is inside the CQE array and the slot is free.
            unsafe {
                if self.cqe_shift == 1 {
                    p.cast::<IoUringCqe32>().write(cqe);
                } else {
                    p.write(cqe.cqe);
                }
            }
            self.word(TAIL)
                .store(tail.wrapping_add(1), Ordering::Release);
            true
        }

        fn post16(&self, user_data: u64, res: i32, flags: u32) -> bool {
            self.post(IoUringCqe32 {
                cqe: IoUringCqe {
                    user_data,
                    res,
                    flags,
                },
                big_cqe: [0; 2],
            })
        }
    }

    #[test]
    fn peek_and_advance_move_the_shared_head() {
        let k = FakeCq::new(4, 0, 0);
        let mut cq = k.cq(true);
        assert_eq!((cq.capacity(), cq.ready()), (4, 0));
        assert_eq!(cq.peek(), None);
        assert!(k.post16(1, 10, 0));
        assert!(k.post16(2, -22, 0));
        assert_eq!(cq.ready(), 2);
        let c = cq.peek().unwrap();
        assert_eq!((c.user_data, c.res), (1, 10));
        assert_eq!(cq.peek(), Some(c), "peek does not consume");
        cq.advance(1);
        assert_eq!(k.word(HEAD).load(Ordering::Relaxed), 1);
        let c = cq.peek().unwrap();
        assert_eq!(c.user_data, 2);
        assert_eq!(c.result().unwrap_err().raw_os_error(), Some(22));
        cq.advance(0);
        assert_eq!(k.word(HEAD).load(Ordering::Relaxed), 1);
        cq.advance(1);
        assert_eq!((cq.ready(), cq.peek()), (0, None));
    }

    #[test]
    fn a_full_cq_stops_the_kernel_until_we_advance() {
        let k = FakeCq::new(2, 0, 0);
        let mut cq = k.cq(false);
        assert!(k.post16(1, 0, 0) && k.post16(2, 0, 0));
        assert!(!k.post16(3, 0, 0), "no room");
        assert_eq!(cq.ready(), 2);
        cq.advance(1);
        assert!(k.post16(3, 0, 0));
        let got: Vec<u64> = cq.iter().map(|c| c.user_data).collect();
        assert_eq!(got, [2, 3]);
        k.word(OVERFLOW).store(5, Ordering::Relaxed);
        assert_eq!(cq.overflow(), 5);
    }

    #[test]
    fn iteration_wraps_around_u32_max() {
        let start = u32::MAX - 2;
        let k = FakeCq::new(4, 0, start);
        let mut cq = k.cq(true);
        let mut next = 0u64;
        let mut seen = Vec::new();
        for round in 0..4 {
            for _ in 0..3 {
                assert!(k.post16(next, next as i32, 0));
                next += 1;
            }
            assert_eq!(cq.ready(), 3);
            let mut it = cq.iter();
            assert_eq!(it.size_hint(), (3, Some(3)));
            seen.extend(it.by_ref().map(|c| c.user_data));
            assert_eq!(it.size_hint(), (0, Some(0)));
            drop(it);
            let head = k.word(HEAD).load(Ordering::Relaxed);
            assert_eq!(head, start.wrapping_add(3 * (round + 1)));
        }
        assert!(
            k.word(HEAD).load(Ordering::Relaxed) < start,
            "the head wrapped"
        );
        assert_eq!(seen, (0..12).collect::<Vec<_>>());
        assert_eq!(cq.ready(), 0);
    }

    #[test]
    fn dropped_iterator_publishes_only_what_it_yielded() {
        let k = FakeCq::new(8, 0, u32::MAX);
        let mut cq = k.cq(true);
        for i in 0..5 {
            assert!(k.post16(i, 0, 0));
        }
        let first: Vec<u64> = cq.iter().take(2).map(|c| c.user_data).collect();
        assert_eq!(first, [0, 1]);
        assert_eq!(k.word(HEAD).load(Ordering::Relaxed), 1, "u32::MAX + 2");
        assert_eq!(cq.ready(), 3);
        // A CQE posted after `iter` started is left for the next call.
        let mut it = cq.iter();
        assert_eq!(it.next().unwrap().user_data, 2);
        assert!(k.post16(5, 0, 0));
        let rest: Vec<u64> = it.map(|c| c.user_data).collect();
        assert_eq!(rest, [3, 4]);
        assert_eq!(cq.ready(), 1);
        assert_eq!(cq.iter().next().unwrap().user_data, 5);
        assert_eq!(cq.ready(), 0);
    }

    #[test]
    fn cqe32_slots_are_two_cqes_wide() {
        let k = FakeCq::new(4, 1, u32::MAX - 1);
        let mut cq = k.cq(true);
        let mut seen = Vec::new();
        for i in 0..10u64 {
            assert!(k.post(IoUringCqe32 {
                cqe: IoUringCqe {
                    user_data: i,
                    res: 0,
                    flags: 0,
                },
                big_cqe: [i * 100, i * 1000],
            }));
            let big = cq.peek32().unwrap();
            assert_eq!(big.big_cqe, [i * 100, i * 1000]);
            assert_eq!(cq.peek().unwrap().user_data, i, "peek sees the small part");
            seen.extend(cq.iter().map(|c| c.user_data));
            assert_eq!(cq.peek32(), None);
        }
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    #[should_panic(expected = "CQE32")]
    fn peek32_needs_a_cqe32_ring() {
        let k = FakeCq::new(4, 0, 0);
        let _ = k.cq(true).peek32();
    }

    #[test]
    fn eventfd_disabled_flips_one_bit() {
        let k = FakeCq::new(2, 0, 0);
        let mut cq = k.cq(true);
        k.word(FLAGS).store(0x80, Ordering::Relaxed);
        cq.set_eventfd_disabled(true);
        assert_eq!(
            k.word(FLAGS).load(Ordering::Relaxed),
            0x80 | sys::IORING_CQ_EVENTFD_DISABLED
        );
        cq.set_eventfd_disabled(false);
        assert_eq!(k.word(FLAGS).load(Ordering::Relaxed), 0x80);
        // Without a flags word (old kernels) it is a no-op.
        k.cq(false).set_eventfd_disabled(true);
        assert_eq!(k.word(FLAGS).load(Ordering::Relaxed), 0x80);
    }

    #[test]
    fn cqe_flag_helpers() {
        let c = Cqe {
            user_data: 0,
            res: 7,
            flags: sys::IORING_CQE_F_BUFFER
                | sys::IORING_CQE_F_MORE
                | (513 << sys::IORING_CQE_BUFFER_SHIFT),
        };
        assert_eq!(c.result().unwrap(), 7);
        assert!(c.more() && !c.notif() && !c.sock_nonempty());
        assert_eq!(c.buffer_id(), Some(513));
        assert_eq!(Cqe::default().buffer_id(), None);
    }

    /// A kernel thread posts while we reap: the acquire of the tail and the
    /// release of the head must keep CQE writes and reads apart. Under miri the
    /// data-race detector checks exactly that.
    #[test]
    fn kernel_thread_posts_while_we_reap() {
        const N: u64 = if cfg!(miri) { 40 } else { 10_000 };
        let k = FakeCq::new(4, 0, u32::MAX - 10);
        let mut cq = k.cq(true);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0;
                while i < N {
                    if k.post16(i, 0, 0) {
                        i += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
            });
            let mut got = Vec::new();
            while (got.len() as u64) < N {
                let before = got.len();
                got.extend(cq.iter().map(|c| c.user_data));
                if got.len() == before {
                    std::thread::yield_now();
                }
            }
            assert_eq!(got, (0..N).collect::<Vec<_>>());
        });
    }
}
