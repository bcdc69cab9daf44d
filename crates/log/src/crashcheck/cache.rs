//! The page cache apart from the disk, as the workload runs: after a
//! failed writeback (a sync that failed) the writes it covered stay in the
//! page cache, which buffered reads see, while the disk keeps what it held
//! before them, which `O_DIRECT` reads see; their pages are clean, so a
//! later sync does not write them, until a write to the same page dirties
//! it again and the whole page goes to the disk. The scratch file system
//! (tmpfs) has no such split: the recorder keeps the disk's bytes for those
//! ranges and shows them to `O_DIRECT` reads ([`FsHook::read_done`]).
//!
//! [`FsHook::read_done`]: ringkit::fs::hook::FsHook::read_done

use std::collections::HashMap;
use std::os::fd::RawFd;

pub const PAGE: u64 = 4096;

/// A file or directory of the trace, numbered in order of creation (0:
/// the root).
pub type Node = usize;

/// Per node, the writes no sync has covered yet, and the ranges lost to a
/// failed writeback.
#[derive(Debug, Default)]
pub struct DiskView {
    /// (the write's event index, offset, the disk's bytes there before it)
    unsynced: HashMap<Node, Vec<(usize, u64, Vec<u8>)>>,
    /// (offset, the bytes the disk holds there)
    lost: HashMap<Node, Vec<(u64, Vec<u8>)>>,
    /// Ranges lost to a failed writeback, in all.
    pub lost_ranges: u64,
    /// `O_DIRECT` reads shown the disk's bytes instead of the cache's.
    pub reads_shown: u64,
}

impl DiskView {
    /// The disk's bytes at `offset..offset + len` of `fd` (node `node`),
    /// read before a write there: the file's bytes, with what a failed
    /// writeback kept off the disk put back.
    pub fn before_write(&self, fd: RawFd, node: Node, offset: u64, len: usize) -> Vec<u8> {
        let mut old = read_file(fd, offset, len);
        self.overlay(node, offset, &mut old);
        old
    }

    /// A write (event `at`) of `len` bytes at `offset` completed over
    /// `old`: its pages are dirty again, so what a failed writeback kept
    /// off the disk there goes with the next writeback.
    pub fn wrote(&mut self, node: Node, at: usize, offset: u64, old: Vec<u8>) {
        let len = old.len() as u64;
        self.dirtied(node, offset, len);
        self.unsynced
            .entry(node)
            .or_default()
            .push((at, offset, old));
    }

    /// A sync of `node` returned: the writes recorded before `upto` are on
    /// the disk.
    pub fn synced(&mut self, node: Node, upto: usize) {
        if let Some(v) = self.unsynced.get_mut(&node) {
            v.retain(|&(at, ..)| at >= upto);
        }
    }

    /// The write at event `at` of `node` is on the disk (`RWF_DSYNC`).
    pub fn synced_write(&mut self, node: Node, at: usize) {
        if let Some(v) = self.unsynced.get_mut(&node) {
            v.retain(|&(w, ..)| w != at);
        }
    }

    /// A sync of `node` failed: every write not yet synced stays in the
    /// cache only.
    pub fn failed(&mut self, node: Node) {
        if let Some(v) = self.unsynced.remove(&node) {
            self.lost_ranges += v.len() as u64;
            let lost = self.lost.entry(node).or_default();
            lost.extend(v.into_iter().map(|(_, off, old)| (off, old)));
        }
    }

    /// A crash: every node is new (the counts stay).
    pub fn forget(&mut self) {
        self.unsynced.clear();
        self.lost.clear();
    }

    /// `node` truncated to nothing.
    pub fn truncated(&mut self, node: Node) {
        self.unsynced.remove(&node);
        self.lost.remove(&node);
    }

    /// Show the disk's bytes in `data` (read from `offset`) where a failed
    /// writeback kept the cache's off the disk.
    pub fn overlay(&self, node: Node, offset: u64, data: &mut [u8]) -> bool {
        let end = offset + data.len() as u64;
        let mut changed = false;
        // Newest first, so that where two lost writes overlap the older's
        // bytes (what the disk holds) are the ones left.
        for (lo, old) in self.lost.get(&node).into_iter().flatten().rev() {
            let hi = lo + old.len() as u64;
            let (a, b) = (offset.max(*lo), end.min(hi));
            if a < b {
                data[(a - offset) as usize..(b - offset) as usize]
                    .copy_from_slice(&old[(a - lo) as usize..(b - lo) as usize]);
                changed = true;
            }
        }
        changed
    }

    /// An `O_DIRECT` read of `node` returned `data` from `offset`.
    pub fn direct_read(&mut self, node: Node, offset: u64, data: &mut [u8]) {
        if self.overlay(node, offset, data) {
            self.reads_shown += 1;
        }
    }

    /// The pages of `offset..offset + len` were written again: the lost
    /// bytes in them reach the disk with the next writeback.
    fn dirtied(&mut self, node: Node, offset: u64, len: u64) {
        let Some(lost) = self.lost.get_mut(&node) else {
            return;
        };
        let (p0, p1) = (offset / PAGE * PAGE, (offset + len).div_ceil(PAGE) * PAGE);
        let mut kept = Vec::new();
        for (lo, old) in lost.drain(..) {
            let hi = lo + old.len() as u64;
            if hi <= p0 || lo >= p1 {
                kept.push((lo, old));
                continue;
            }
            if lo < p0 {
                kept.push((lo, old[..(p0 - lo) as usize].to_vec()));
            }
            if hi > p1 {
                kept.push((p1, old[(p1 - lo) as usize..].to_vec()));
            }
        }
        *lost = kept;
    }
}

/// Whether `fd` was opened (or set) `O_DIRECT`.
pub fn is_direct(fd: RawFd) -> bool {
    // SAFETY: a plain query of a descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}

/// `len` bytes of `fd` from `offset` (zeros past its end), read in
/// 4096-byte aligned blocks into aligned memory, so `O_DIRECT` descriptors
/// work too.
fn read_file(fd: RawFd, offset: u64, len: usize) -> Vec<u8> {
    let (a0, a1) = (
        offset / PAGE * PAGE,
        (offset + len as u64).div_ceil(PAGE) * PAGE,
    );
    let span = (a1 - a0) as usize;
    let mut out = vec![0u8; len];
    if span == 0 {
        return out;
    }
    let layout = std::alloc::Layout::from_size_align(span, PAGE as usize).expect("layout");
    // SAFETY: a non-zero size.
    let mem = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!mem.is_null(), "out of memory");
    // A descriptor opened for writing only is read through a new one.
    // SAFETY: a plain query of a descriptor.
    let mode = unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_ACCMODE;
    let own = (mode == libc::O_WRONLY).then(|| {
        let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL");
        // SAFETY: a plain open of a path we own for the call.
        unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }
    });
    let rfd = own.unwrap_or(fd);
    let mut got = 0usize;
    while got < span {
        // SAFETY: `mem + got .. mem + span` is ours and writable.
        let n = unsafe {
            libc::pread(
                rfd,
                mem.add(got).cast(),
                span - got,
                (a0 + got as u64) as libc::off_t,
            )
        };
        assert!(
            n >= 0,
            "reading the bytes under a write: {}",
            std::io::Error::last_os_error()
        );
        if n == 0 {
            break;
        }
        got += n as usize;
    }
    if let Some(o) = own {
        // SAFETY: the descriptor opened above, closed once.
        unsafe { libc::close(o) };
    }
    let from = (offset - a0) as usize;
    // SAFETY: `span` bytes at `mem`, initialised (zeroed, then read into).
    let all = unsafe { std::slice::from_raw_parts(mem, span) };
    out.copy_from_slice(&all[from..from + len]);
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(mem, layout) };
    out
}
