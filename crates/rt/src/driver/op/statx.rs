//! `statx(2)`: io_uring `IORING_OP_STATX`; epoll: `statx` inline.
//!
//! On io_uring a stat of an open descriptor (`AT_EMPTY_PATH`) runs in place
//! too: the kernel always hands `IORING_OP_STATX` to an io-wq worker thread
//! (it has no non-blocking attempt), so through the ring each one costs two
//! thread switches, while the call itself only copies the in-memory inode's
//! attributes (no path walk; a network filesystem may ask its server, as
//! `fstat` would). A static server stats its cached descriptor on every
//! request, so that hop was on every request's path. A stat by path (a walk
//! that may read directories from disk) stays on the ring.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry};

use super::cvt;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Statx {
    dirfd: RawFd,
    path: CString,
    flags: i32,
    /// What it asks for (`STATX_BASIC_STATS` unless [`Statx::mask`]).
    mask: u32,
    // Boxed: the kernel writes it after submission.
    buf: Box<libc::statx>,
}

impl Statx {
    /// Stat `fd` itself (`AT_EMPTY_PATH`).
    pub(crate) fn fd(fd: RawFd) -> Statx {
        Statx {
            dirfd: fd,
            path: CString::default(),
            flags: libc::AT_EMPTY_PATH,
            mask: libc::STATX_BASIC_STATS,
            // SAFETY: statx is plain data; all-zero is valid.
            buf: Box::new(unsafe { std::mem::zeroed() }),
        }
    }

    /// Ask for `mask` instead (a field the kernel may compute at a cost,
    /// such as `STATX_DIOALIGN`, only where wanted).
    pub(crate) fn mask(mut self, mask: u32) -> Statx {
        self.mask = mask;
        self
    }

    /// The fd form (`AT_EMPTY_PATH` with an empty path).
    fn of_descriptor(&self) -> bool {
        self.flags & libc::AT_EMPTY_PATH != 0 && self.path.as_bytes().is_empty()
    }

    fn call(&mut self) -> io::Result<u32> {
        loop {
            // SAFETY: valid path and writable statx buffer.
            let r = cvt(unsafe {
                libc::statx(
                    self.dirfd,
                    self.path.as_ptr(),
                    self.flags,
                    self.mask,
                    &mut *self.buf,
                )
            } as isize);
            match r {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }

    /// Stat a path.
    pub(crate) fn path(path: CString) -> Statx {
        Statx {
            dirfd: libc::AT_FDCWD,
            path,
            flags: 0,
            mask: libc::STATX_BASIC_STATS,
            // SAFETY: statx is plain data; all-zero is valid.
            buf: Box::new(unsafe { std::mem::zeroed() }),
        }
    }
}

impl OpCode for Statx {
    type Output = io::Result<libc::statx>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<libc::statx> {
        res.map(|_| *self.buf)
    }
}

impl UringOp for Statx {
    fn uring_try_inline(&mut self) -> Option<Option<io::Result<u32>>> {
        // A descriptor's stat never waits for I/O on a local filesystem:
        // done in place, never handed to an io-wq thread (module docs).
        self.of_descriptor().then(|| Some(self.call()))
    }

    fn uring_entry(&mut self) -> Entry {
        opcode::Statx::new(self.dirfd, self.path.as_ptr(), &mut *self.buf)
            .flags(self.flags)
            .mask(self.mask)
            .build()
    }
}

impl EpollOp for Statx {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        self.call()
    }
}
