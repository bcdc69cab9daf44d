//! A buffer whose bytes after the first `n` are not mapped, so that a write
//! from it comes back short for real: the kernel copies `n` bytes, faults
//! on the next page and returns what it wrote, as a full disk would make
//! it. A hook's [`Fault::Short`](super::hook::Fault::Short) on a linked
//! write and sync runs through the real operation this way, so the link's
//! own rule (a short write cancels the sync) is the kernel's, not a model
//! of it.

use std::io;
use std::ptr;

use crate::buf::IoBuf;

/// `len` bytes from `map + start`: the first `n` hold the data, the rest
/// lie in pages mapped `PROT_NONE`.
pub(crate) struct ShortBuf {
    map: *mut u8,
    map_len: usize,
    start: usize,
    len: usize,
}

impl ShortBuf {
    /// A buffer as long as `data` whose first `n` bytes are `data`'s and
    /// whose other bytes cannot be read. `n` of 0: every byte unreadable
    /// (the write fails with `EFAULT`).
    pub(crate) fn new(data: &[u8], n: usize) -> io::Result<ShortBuf> {
        let n = n.min(data.len());
        // SAFETY: a plain query.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let head = n.div_ceil(page) * page;
        let tail = (data.len() - n).div_ceil(page).max(1) * page;
        let map_len = head + tail;
        // SAFETY: a new anonymous private mapping; checked below.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = map.cast::<u8>();
        let start = head - n;
        let buf = ShortBuf {
            map,
            map_len,
            start,
            len: data.len(),
        };
        // SAFETY: `start + n = head` bytes of the mapping are writable, and
        // `data` is at least `n` long; the two do not overlap.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), map.add(start), n) };
        // SAFETY: `head..map_len` lies inside the mapping, page aligned.
        let rc = unsafe { libc::mprotect(map.add(head).cast(), tail, libc::PROT_NONE) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(buf)
    }
}

impl Drop for ShortBuf {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

// SAFETY: the pointer stays valid while `self` lives (the mapping is ours
// until drop). Only the kernel reads these bytes: a `ShortBuf` goes
// straight into one write operation (never `init_slice`), and a read of
// the unmapped part ends that write short, which is the point.
unsafe impl IoBuf for ShortBuf {
    fn stable_ptr(&self) -> *const u8 {
        // SAFETY: `start` is inside the mapping.
        unsafe { self.map.add(self.start) }
    }

    fn bytes_init(&self) -> usize {
        self.len
    }

    fn bytes_total(&self) -> usize {
        self.len
    }

    /// Never: the bytes past the first `n` cannot be read.
    fn init_slice(&self) -> &[u8] {
        panic!("a ShortBuf's tail is unmapped: only the kernel reads it")
    }
}
