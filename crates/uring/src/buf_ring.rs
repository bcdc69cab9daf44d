//! Provided-buffer rings (`IORING_REGISTER_PBUF_RING`).
//!
//! # Protocol
//! A ring of `io_uring_buf` entries shared with the kernel. We own the tail
//! (a `u16` overlaid on entry 0's `resv`), the kernel owns the head, which it
//! keeps to itself. We write entries at `tail + i`, then publish them with one
//! store-release of the tail. When a request picks a buffer, its CQE carries
//! `IORING_CQE_F_BUFFER` and the buffer id; that buffer belongs to the
//! application until it is added back ([`BufRing::recycle`]). When the ring is
//! empty, a request that selects a buffer fails with `ENOBUFS` (a multishot
//! one ends, without `F_MORE`).
//!
//! # Bundles
//! A receive with `IORING_RECVSEND_BUNDLE` takes several buffers at once:
//! its CQE names only the first buffer id and the byte count, and the
//! kernel took the entries that follow the first one's in ring order (the
//! buffers are all full but the last). [`BufRing::bundle`] names them: we
//! keep, for every ring slot, the buffer id we wrote there, and for every
//! buffer the ring position we last wrote it at. A slot is not rewritten
//! before the kernel has consumed it (the ring never holds more than
//! `entries` published buffers), so the ids read back are the ones taken.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::AtomicU16;
use std::sync::Arc;

use crate::barrier::store_release_u16;
use crate::ring::IoUring;
use crate::sys;

/// A registered provided-buffer ring with its own slab of equal-sized buffers.
///
/// Drop it only after every request selecting from group `bgid` has ended;
/// dropping unregisters the group from the ring it was made for. It keeps
/// that ring's fd open (shared, not duplicated) until then, so a group that
/// outlives its [`IoUring`] unregisters from that ring, never from a later
/// ring that got the same fd number.
#[derive(Debug)]
pub struct BufRing {
    // Declared first, so dropped first: the group is unregistered before
    // the slab its entries point into is freed.
    reg: Registered,
    bufs: Bufs,
}

/// Ring memory registered as one buffer group: a page-aligned anonymous
/// mapping of `io_uring_buf` entries, unregistered and unmapped on drop.
/// Shared by [`BufRing`] and [`crate::SendRing`].
#[derive(Debug)]
pub(crate) struct Registered {
    // INVARIANT: a page-aligned private anonymous mapping of `len >= entries
    // * 16` bytes, registered with the kernel as group `bgid` of `ring`
    // until drop.
    ptr: *mut sys::IoUringBuf,
    len: usize,
    entries: u16,
    bgid: u16,
    /// The ring this group is registered on, held open until the group is
    /// unregistered.
    ring: Arc<OwnedFd>,
}

impl Registered {
    /// Map and register `entries` (a power of two up to 32768) entries as
    /// group `bgid` of `ring`.
    pub(crate) fn new(ring: &IoUring, bgid: u16, entries: u16) -> io::Result<Registered> {
        if !entries.is_power_of_two() || entries > 32768 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer ring entries must be a power of two <= 32768",
            ));
        }
        let len = (entries as usize * std::mem::size_of::<sys::IoUringBuf>())
            .next_multiple_of(page_size());
        // SAFETY: a fresh private anonymous mapping that we own.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let reg = sys::IoUringBufReg {
            ring_addr: ptr as u64,
            ring_entries: u32::from(entries),
            bgid,
            ..Default::default()
        };
        // SAFETY: `reg` describes the page-aligned mapping above.
        let res = unsafe {
            sys::io_uring_register(
                ring.as_raw_fd(),
                sys::IORING_REGISTER_PBUF_RING,
                (&reg as *const sys::IoUringBufReg).cast(),
                1,
            )
        };
        if let Err(e) = res {
            // SAFETY: the mapping is ours and unregistered.
            unsafe { libc::munmap(ptr, len) };
            return Err(e);
        }
        Ok(Registered {
            ptr: ptr.cast(),
            len,
            entries,
            bgid,
            ring: ring.shared_fd(),
        })
    }

    /// The entries (valid, aligned, for reads and writes while `self` lives).
    pub(crate) fn ring(&self) -> *mut sys::IoUringBuf {
        self.ptr
    }

    pub(crate) fn entries(&self) -> u16 {
        self.entries
    }

    pub(crate) fn bgid(&self) -> u16 {
        self.bgid
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let reg = sys::IoUringBufReg {
            bgid: self.bgid,
            ..Default::default()
        };
        // SAFETY: unregistering our own group from our own ring, whose fd
        // `self.ring` keeps open (so the number cannot belong to another
        // ring). Then the mapping, which nothing else points into, goes.
        unsafe {
            let _ = sys::io_uring_register(
                self.ring.as_raw_fd(),
                sys::IORING_UNREGISTER_PBUF_RING,
                (&reg as *const sys::IoUringBufReg).cast(),
                1,
            );
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// The bookkeeping of a buffer ring, apart from its mapping and registration:
/// the entries we write, our tail, and the slab they point into. Pure memory
/// work, so it is tested over plain memory (under miri too).
struct Bufs {
    // INVARIANT: `ring` points at `entries` `IoUringBuf`s, aligned, valid for
    // reads and writes while this value lives; the kernel reads them and the
    // tail at byte 14.
    ring: *mut sys::IoUringBuf,
    entries: u16,
    mask: u16,
    /// Local tail: entries below it are written; published on `sync`.
    tail: u16,
    // INVARIANT: `slab` holds `entries * buf_len` bytes; buffer `bid` starts at
    // `bid * buf_len`. The Vec is never resized, so the addresses are stable.
    slab: Vec<u8>,
    buf_len: u32,
    /// The buffer id written at each ring slot (our copy: the ring memory
    /// is shared with the kernel).
    slot_bid: Vec<u16>,
    /// The ring position (tail counter) each buffer was last written at.
    bid_pos: Vec<u16>,
}

// Not derived: formatting the slab would read every buffer, including those
// the kernel may be writing.
impl std::fmt::Debug for Bufs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bufs")
            .field("entries", &self.entries)
            .field("tail", &self.tail)
            .field("buf_len", &self.buf_len)
            .finish_non_exhaustive()
    }
}

impl BufRing {
    /// Register group `bgid` with `entries` buffers of `buf_len` bytes (entries:
    /// a power of two up to 32768), all handed to the kernel at once.
    pub fn new(ring: &IoUring, bgid: u16, entries: u16, buf_len: u32) -> io::Result<BufRing> {
        let reg = Registered::new(ring, bgid, entries)?;
        // SAFETY: the mapping holds `entries` aligned entries and lives
        // until `reg` drops, which is after `bufs` is last used.
        let mut bufs = unsafe { Bufs::new(reg.ring(), entries, buf_len) };
        bufs.fill();
        Ok(BufRing { reg, bufs })
    }

    /// The buffer group id to put in `buf_group`.
    pub fn bgid(&self) -> u16 {
        self.reg.bgid()
    }

    /// Size of each buffer.
    pub fn buf_len(&self) -> u32 {
        self.bufs.buf_len
    }

    /// Number of buffers.
    pub fn entries(&self) -> u16 {
        self.bufs.entries
    }

    /// The bytes of buffer `bid`, first `len` of them (as a CQE reported).
    ///
    /// The kernel does not write a buffer between its CQE and its recycle, so
    /// reading it here is race-free as long as the caller recycles only after.
    pub fn buffer(&self, bid: u16, len: usize) -> &[u8] {
        self.bufs.buffer(bid, len)
    }

    /// The buffers a bundle CQE took (its first buffer `first`, `res`
    /// bytes in all), in the order the bytes fill them, each as (buffer id,
    /// bytes in it). Call it only while the kernel is done with these
    /// entries and before any later buffer is recycled: when the CQE is
    /// reaped. See the module docs.
    pub fn bundle(&self, first: u16, res: u32) -> impl Iterator<Item = (u16, u32)> + '_ {
        self.bufs.bundle(first, res)
    }

    /// Give buffer `bid` back to the kernel.
    pub fn recycle(&mut self, bid: u16) {
        self.bufs.recycle(bid);
    }

    /// Give several buffers back with one tail update.
    pub fn recycle_many(&mut self, bids: &[u16]) {
        self.bufs.recycle_many(bids);
    }
}

impl Bufs {
    /// Bookkeeping over `entries` (a power of two) ring entries at `ring`, with
    /// a fresh slab of `buf_len`-byte buffers. Nothing is added yet.
    ///
    /// # Safety
    /// `ring` must point at `entries` `IoUringBuf`s, aligned, valid for reads
    /// and writes for the life of the returned value.
    unsafe fn new(ring: *mut sys::IoUringBuf, entries: u16, buf_len: u32) -> Bufs {
        debug_assert!(entries.is_power_of_two());
        Bufs {
            ring,
            entries,
            mask: entries - 1,
            tail: 0,
            slab: vec![0u8; entries as usize * buf_len as usize],
            buf_len,
            slot_bid: vec![0; entries as usize],
            bid_pos: vec![0; entries as usize],
        }
    }

    /// Hand every buffer to the kernel, in bid order.
    fn fill(&mut self) {
        for bid in 0..self.entries {
            self.add(bid, bid);
        }
        self.sync(self.entries);
    }

    /// Write entry `tail + offset` to describe buffer `bid` (not yet visible).
    fn add(&mut self, bid: u16, offset: u16) {
        debug_assert!(bid < self.entries);
        let pos = self.tail.wrapping_add(offset);
        let slot = (pos & self.mask) as usize;
        self.slot_bid[slot] = bid;
        self.bid_pos[bid as usize] = pos;
        let addr = self.slab.as_ptr() as u64 + u64::from(bid) * u64::from(self.buf_len);
        // SAFETY: `slot < entries` (INVARIANT of `ring`). We write only addr,
        // len and bid: entry 0's `resv` is the shared tail and stays untouched.
        unsafe {
            let e = self.ring.add(slot);
            (&raw mut (*e).addr).write(addr);
            (&raw mut (*e).len).write(self.buf_len);
            (&raw mut (*e).bid).write(bid);
        }
    }

    /// Publish `count` added entries.
    fn sync(&mut self, count: u16) {
        self.tail = self.tail.wrapping_add(count);
        // SAFETY: the tail lives at byte 14 of the ring (INVARIANT of `ring`),
        // 2-byte aligned. Release: the entries written by `add` must be visible
        // before the kernel sees the tail that covers them.
        unsafe {
            let tail = self.ring.cast::<u8>().add(sys::BUF_RING_TAIL_OFFSET) as *const AtomicU16;
            store_release_u16(tail, self.tail);
        }
    }

    fn buffer(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * self.buf_len as usize;
        let len = len.min(self.buf_len as usize);
        assert!(bid < self.entries, "buffer id {bid} out of range");
        // SAFETY: `start + len <= slab.len()` (INVARIANT of `slab`, `bid`
        // checked). Only this buffer's bytes are borrowed: `&self.slab[..]`
        // would borrow the whole slab, and so race with the kernel writing the
        // buffers it holds. `Vec::as_ptr` borrows nothing.
        unsafe { std::slice::from_raw_parts(self.slab.as_ptr().add(start), len) }
    }

    /// The buffers a bundle starting at `first` took to hold `res` bytes:
    /// `first` and the entries written after it in ring order, each with
    /// the bytes it holds. An entry's length is read back from the ring:
    /// the kernel may have shortened an entry it peeked (and left) earlier,
    /// so the buffers are not all `buf_len` long.
    fn bundle(&self, first: u16, res: u32) -> impl Iterator<Item = (u16, u32)> + '_ {
        assert!(first < self.entries, "buffer id {first} out of range");
        let pos = self.bid_pos[first as usize];
        let mut left = res;
        (0..self.entries).map_while(move |i| {
            if left == 0 && i > 0 {
                return None;
            }
            let p = pos.wrapping_add(i);
            let slot = p & self.mask;
            let bid = self.slot_bid[slot as usize];
            debug_assert_eq!(self.bid_pos[bid as usize], p, "ring slot rewritten");
            // SAFETY: `slot < entries` (INVARIANT of `ring`); the kernel
            // is done with this consumed entry, so reading its `len` (a
            // field the kernel may have written) races with nothing.
            let len = unsafe { (&raw const (*self.ring.add(slot as usize)).len).read_volatile() };
            let n = left.min(len.min(self.buf_len).max(1));
            left -= n.min(left);
            Some((bid, n))
        })
    }

    fn recycle(&mut self, bid: u16) {
        self.add(bid, 0);
        self.sync(1);
    }

    fn recycle_many(&mut self, bids: &[u16]) {
        for (i, &bid) in bids.iter().enumerate() {
            self.add(bid, i as u16);
        }
        self.sync(bids.len() as u16);
    }
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    //! Buffer-ring bookkeeping over plain memory, with the test playing the
    //! kernel (no mapping, no registration: these run under miri).

    use std::sync::atomic::Ordering;

    use super::*;

    /// A fake `io_uring_buf` ring and the kernel's private head into it.
    struct FakeRing {
        _mem: Vec<sys::IoUringBuf>,
        // INVARIANT: points at `_mem`'s buffer (never reallocated) of `entries` entries.
        ring: *mut sys::IoUringBuf,
        entries: u16,
        head: u16,
    }

    impl FakeRing {
        fn new(entries: u16) -> FakeRing {
            let mut mem = vec![sys::IoUringBuf::default(); entries as usize];
            let ring = mem.as_mut_ptr();
            FakeRing {
                _mem: mem,
                ring,
                entries,
                head: 0,
            }
        }

        fn bufs(&self, buf_len: u32) -> Bufs {
            // SAFETY: `ring` holds `entries` aligned entries and outlives the
            // `Bufs` in every test (declared first, dropped last).
            unsafe { Bufs::new(self.ring, self.entries, buf_len) }
        }

        /// The shared tail, as the kernel reads it.
        fn tail(&self) -> u16 {
            // SAFETY: byte 14 of entry 0, 2-aligned, inside the ring.
            let t = unsafe { &*(self.ring.cast::<u8>().add(BUF_TAIL) as *const AtomicU16) };
            t.load(Ordering::Acquire)
        }

        /// Kernel side: entry `pos & mask` as (addr, len, bid).
        fn entry(&self, pos: u16) -> (u64, u32, u16) {
            let slot = (pos & (self.entries - 1)) as usize;
            // SAFETY: `slot < entries`; only the non-tail fields are read.
            unsafe {
                let e = self.ring.add(slot);
                (
                    (&raw const (*e).addr).read(),
                    (&raw const (*e).len).read(),
                    (&raw const (*e).bid).read(),
                )
            }
        }

        /// Kernel side: pick the next published buffer, if any.
        fn pick(&mut self) -> Option<(u64, u32, u16)> {
            if self.head == self.tail() {
                return None;
            }
            let e = self.entry(self.head);
            self.head = self.head.wrapping_add(1);
            Some(e)
        }
    }

    // SAFETY: only `kernel_thread_fills_buffers_we_recycle` sends one, a view
    // without memory of its own, used by the buffer-ring protocol under test.
    unsafe impl Send for FakeRing {}

    const BUF_TAIL: usize = sys::BUF_RING_TAIL_OFFSET;

    fn addr_of(b: &Bufs, bid: u16) -> u64 {
        b.slab.as_ptr() as u64 + u64::from(bid) * u64::from(b.buf_len)
    }

    #[test]
    fn fill_hands_every_buffer_over_in_bid_order() {
        let mut k = FakeRing::new(8);
        let mut b = k.bufs(64);
        assert_eq!(k.tail(), 0);
        b.fill();
        assert_eq!((b.tail, k.tail()), (8, 8));
        for bid in 0..8 {
            assert_eq!(k.pick(), Some((addr_of(&b, bid), 64, bid)));
        }
        assert_eq!(k.pick(), None);
    }

    #[test]
    fn add_never_touches_the_tail_in_entry_zero() {
        let k = FakeRing::new(4);
        let mut b = k.bufs(16);
        b.tail = 0x1234;
        b.sync(0);
        assert_eq!(k.tail(), 0x1234);
        // 0x1234 & 3 == 0: this writes entry 0, around the tail.
        b.add(3, 0);
        assert_eq!(k.tail(), 0x1234);
        assert_eq!(k.entry(0), (addr_of(&b, 3), 16, 3));
        b.sync(1);
        assert_eq!(k.tail(), 0x1235);
    }

    #[test]
    fn recycle_returns_one_buffer_at_the_tail() {
        let mut k = FakeRing::new(4);
        let mut b = k.bufs(32);
        b.fill();
        let picked: Vec<u16> = (0..4).map(|_| k.pick().unwrap().2).collect();
        assert_eq!(picked, [0, 1, 2, 3]);
        assert_eq!(k.pick(), None, "empty: a request would get ENOBUFS");
        b.recycle(2);
        assert_eq!(k.tail(), 5);
        assert_eq!(k.pick(), Some((addr_of(&b, 2), 32, 2)));
        b.recycle(0);
        b.recycle(3);
        assert_eq!(k.pick().unwrap().2, 0);
        assert_eq!(k.pick().unwrap().2, 3);
        assert_eq!(k.pick(), None);
    }

    #[test]
    fn bundle_names_the_buffers_the_kernel_took_in_order() {
        let mut k = FakeRing::new(8);
        let mut b = k.bufs(16);
        b.fill();
        let ids = |b: &Bufs, first, res| b.bundle(first, res).collect::<Vec<_>>();
        // The kernel takes 3 buffers as one bundle of 40 bytes: 0, 1, 2.
        let first = k.pick().unwrap().2;
        k.pick();
        k.pick();
        assert_eq!(ids(&b, first, 40), [(0, 16), (1, 16), (2, 8)]);
        // Recycled out of order, then taken again across the wrap: a bundle
        // starting at buffer 6 covers what follows it in the ring.
        b.recycle_many(&[2, 0]);
        b.recycle(1);
        let took: Vec<u16> = (0..5).map(|_| k.pick().unwrap().2).collect();
        assert_eq!(took, [3, 4, 5, 6, 7]);
        let took: Vec<u16> = (0..3).map(|_| k.pick().unwrap().2).collect();
        assert_eq!(took, [2, 0, 1]);
        assert_eq!(ids(&b, 6, 64), [(6, 16), (7, 16), (2, 16), (0, 16)]);
        assert_eq!(ids(&b, 0, 17), [(0, 16), (1, 1)]);
        // One buffer, or none filled (end of stream): the first alone.
        assert_eq!(ids(&b, 3, 5), [(3, 5)]);
        assert_eq!(ids(&b, 3, 0), [(3, 0)]);
        // Never more entries than the ring has.
        assert_eq!(b.bundle(3, 10_000).count(), 8);
    }

    #[test]
    fn bundle_follows_entries_the_kernel_shortened() {
        let k = FakeRing::new(4);
        let mut b = k.bufs(16);
        b.fill();
        // The kernel peeked entry 1, wrote a shorter length into it and
        // left it; a later bundle from entry 0 fills it only that far.
        // SAFETY: entry 1 of the fake ring, which the test owns.
        unsafe { (&raw mut (*k.ring.add(1)).len).write(5) };
        assert_eq!(
            b.bundle(0, 16 + 5 + 10).collect::<Vec<_>>(),
            [(0, 16), (1, 5), (2, 10)]
        );
    }

    #[test]
    fn recycle_many_publishes_once() {
        let mut k = FakeRing::new(8);
        let mut b = k.bufs(8);
        b.fill();
        for _ in 0..8 {
            k.pick().unwrap();
        }
        b.recycle_many(&[5, 1, 7]);
        assert_eq!((b.tail, k.tail()), (11, 11));
        let got: Vec<u16> = (0..3).map(|_| k.pick().unwrap().2).collect();
        assert_eq!(got, [5, 1, 7]);
        b.recycle_many(&[]);
        assert_eq!(k.tail(), 11);
    }

    #[test]
    fn tail_wraps_around_u16_max() {
        let mut k = FakeRing::new(4);
        let mut b = k.bufs(8);
        let start = u16::MAX - 5;
        b.tail = start;
        k.head = start;
        b.sync(0);
        // Keep two buffers in the ring and cycle the others many times over
        // the u16 wrap; every pick must return what was recycled, in order.
        b.recycle_many(&[0, 1]);
        let mut held = vec![2u16, 3];
        for round in 0..20u16 {
            let bid = held.remove(0);
            b.recycle(bid);
            let (addr, len, got) = k.pick().unwrap();
            assert_eq!((addr, len), (addr_of(&b, got), 8));
            assert_eq!(got, [0, 1, 2, 3][round as usize % 4]);
            held.push(got);
        }
        assert_eq!(b.tail, start.wrapping_add(22));
        assert!(b.tail < start, "the tail wrapped");
        assert_eq!(k.tail(), b.tail);
        assert_eq!(b.tail.wrapping_sub(k.head), 2);
    }

    #[test]
    fn buffer_slices_the_slab_by_bid() {
        let k = FakeRing::new(4);
        let mut b = k.bufs(10);
        b.slab[25] = 0xab;
        assert_eq!(b.buffer(2, 10).len(), 10);
        assert_eq!(b.buffer(2, 10)[5], 0xab);
        assert_eq!(b.buffer(2, 6), &[0, 0, 0, 0, 0, 0xab][..]);
        assert_eq!(b.buffer(3, 1000).len(), 10, "clamped to buf_len");
        assert!(b.buffer(0, 0).is_empty());
        assert!(!format!("{b:?}").contains("slab"), "Debug reads no buffer");
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn buffer_rejects_an_unknown_bid() {
        let k = FakeRing::new(4);
        let b = k.bufs(10);
        let _ = b.buffer(4, 1);
    }

    /// A kernel thread picks buffers, writes into them through the address in
    /// the entry and posts a "CQE" (channel message); we read the buffer and
    /// recycle it. Under miri the data-race detector checks that the tail
    /// release/acquire and the CQE hand-off keep every access apart.
    #[test]
    fn kernel_thread_fills_buffers_we_recycle() {
        const N: u32 = if cfg!(miri) { 30 } else { 5_000 };
        let k = FakeRing::new(4);
        let mut b = k.bufs(8);
        b.fill();
        let (tx, rx) = std::sync::mpsc::channel::<(u16, usize)>();
        // The kernel's view of the same ring; `k` keeps owning the memory.
        let mut kernel = FakeRing {
            _mem: Vec::new(),
            ring: k.ring,
            entries: k.entries,
            head: 0,
        };
        std::thread::scope(|s| {
            s.spawn(move || {
                let k = &mut kernel;
                let mut sent = 0;
                while sent < N {
                    let Some((addr, len, bid)) = k.pick() else {
                        std::thread::yield_now();
                        continue;
                    };
                    let n = (sent % len) as usize + 1;
                    // SAFETY: the entry describes `len` bytes of the slab that
                    // belong to the kernel until the CQE below.
                    unsafe { std::ptr::write_bytes(addr as usize as *mut u8, sent as u8, n) };
                    tx.send((bid, n)).unwrap();
                    sent += 1;
                }
            });
            for i in 0..N {
                let (bid, n) = rx.recv().unwrap();
                assert_eq!(b.buffer(bid, n), vec![i as u8; n]);
                b.recycle(bid);
            }
        });
    }
}
