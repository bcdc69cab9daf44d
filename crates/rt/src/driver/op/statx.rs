//! `statx(2)`: io_uring `IORING_OP_STATX`; epoll: `statx` inline.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry};

use super::cvt;
use crate::driver::{Dir, OpCode};

pub(crate) struct Statx {
    dirfd: RawFd,
    path: CString,
    flags: i32,
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
            // SAFETY: statx is plain data; all-zero is valid.
            buf: Box::new(unsafe { std::mem::zeroed() }),
        }
    }

    /// Stat a path.
    pub(crate) fn path(path: CString) -> Statx {
        Statx {
            dirfd: libc::AT_FDCWD,
            path,
            flags: 0,
            // SAFETY: statx is plain data; all-zero is valid.
            buf: Box::new(unsafe { std::mem::zeroed() }),
        }
    }
}

impl OpCode for Statx {
    type Output = io::Result<libc::statx>;

    fn uring_entry(&mut self) -> Entry {
        opcode::Statx::new(self.dirfd, self.path.as_ptr(), &mut *self.buf)
            .flags(self.flags)
            .mask(libc::STATX_BASIC_STATS)
            .build()
    }

    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: valid path and writable statx buffer.
        cvt(unsafe {
            libc::statx(
                self.dirfd,
                self.path.as_ptr(),
                self.flags,
                libc::STATX_BASIC_STATS,
                &mut *self.buf,
            )
        } as isize)
    }

    fn complete(self, res: io::Result<u32>, _flags: u32) -> io::Result<libc::statx> {
        res.map(|_| *self.buf)
    }
}
