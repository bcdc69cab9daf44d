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

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::AtomicU16;

use crate::barrier::store_release_u16;
use crate::ring::IoUring;
use crate::sys;

/// A registered provided-buffer ring with its own slab of equal-sized buffers.
///
/// Drop it only after every request selecting from group `bgid` has ended;
/// dropping unregisters the group from the ring it was made for (which must
/// still be open).
#[derive(Debug)]
pub struct BufRing {
    // INVARIANT: `ring` is a page-aligned anonymous mapping of `entries`
    // `IoUringBuf`s, registered with the kernel as group `bgid` of `ring_fd`.
    ring: *mut sys::IoUringBuf,
    ring_len: usize,
    entries: u16,
    mask: u16,
    bgid: u16,
    /// Local tail: entries below it are written; published on `sync`.
    tail: u16,
    // INVARIANT: `slab` holds `entries * buf_len` bytes; buffer `bid` starts at
    // `bid * buf_len`. The Vec is never resized, so the addresses are stable.
    slab: Vec<u8>,
    buf_len: u32,
    ring_fd: RawFd,
}

impl BufRing {
    /// Register group `bgid` with `entries` buffers of `buf_len` bytes (entries:
    /// a power of two up to 32768), all handed to the kernel at once.
    pub fn new(ring: &IoUring, bgid: u16, entries: u16, buf_len: u32) -> io::Result<BufRing> {
        if !entries.is_power_of_two() || entries > 32768 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer ring entries must be a power of two <= 32768",
            ));
        }
        let ring_len = (entries as usize * std::mem::size_of::<sys::IoUringBuf>())
            .next_multiple_of(page_size());
        // SAFETY: a fresh private anonymous mapping that we own.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
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
            unsafe { libc::munmap(ptr, ring_len) };
            return Err(e);
        }
        let mut br = BufRing {
            ring: ptr.cast(),
            ring_len,
            entries,
            mask: entries - 1,
            bgid,
            tail: 0,
            slab: vec![0u8; entries as usize * buf_len as usize],
            buf_len,
            ring_fd: ring.as_raw_fd(),
        };
        for bid in 0..entries {
            br.add(bid, bid);
        }
        br.sync(entries);
        Ok(br)
    }

    /// The buffer group id to put in `buf_group`.
    pub fn bgid(&self) -> u16 {
        self.bgid
    }

    /// Size of each buffer.
    pub fn buf_len(&self) -> u32 {
        self.buf_len
    }

    /// Number of buffers.
    pub fn entries(&self) -> u16 {
        self.entries
    }

    /// Write entry `tail + offset` to describe buffer `bid` (not yet visible).
    fn add(&mut self, bid: u16, offset: u16) {
        debug_assert!(bid < self.entries);
        let slot = (self.tail.wrapping_add(offset) & self.mask) as usize;
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
        // SAFETY: the tail lives at byte 14 of the mapping (INVARIANT of `ring`),
        // 2-byte aligned. Release: the entries written by `add` must be visible
        // before the kernel sees the tail that covers them.
        unsafe {
            let tail = self.ring.cast::<u8>().add(sys::BUF_RING_TAIL_OFFSET) as *const AtomicU16;
            store_release_u16(tail, self.tail);
        }
    }

    /// The bytes of buffer `bid`, first `len` of them (as a CQE reported).
    ///
    /// The kernel does not write a buffer between its CQE and its recycle, so
    /// reading it here is race-free as long as the caller recycles only after.
    pub fn buffer(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * self.buf_len as usize;
        &self.slab[start..start + len.min(self.buf_len as usize)]
    }

    /// Give buffer `bid` back to the kernel.
    pub fn recycle(&mut self, bid: u16) {
        self.add(bid, 0);
        self.sync(1);
    }

    /// Give several buffers back with one tail update.
    pub fn recycle_many(&mut self, bids: &[u16]) {
        for (i, &bid) in bids.iter().enumerate() {
            self.add(bid, i as u16);
        }
        self.sync(bids.len() as u16);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        let reg = sys::IoUringBufReg {
            bgid: self.bgid,
            ..Default::default()
        };
        // SAFETY: unregistering our own group; if the ring is already closed
        // this fails with EBADF and the kernel has released the group anyway.
        unsafe {
            let _ = sys::io_uring_register(
                self.ring_fd,
                sys::IORING_UNREGISTER_PBUF_RING,
                (&reg as *const sys::IoUringBufReg).cast(),
                1,
            );
            libc::munmap(self.ring.cast(), self.ring_len);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}
