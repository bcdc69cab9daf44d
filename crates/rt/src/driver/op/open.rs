//! `openat(2)`: io_uring `IORING_OP_OPENAT`; epoll: `openat` inline.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use ringkit_uring::opcode::{self, Entry};

use super::cvt;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Open {
    // CString's heap block is what the kernel reads: stable across moves.
    path: CString,
    flags: i32,
    mode: libc::mode_t,
}

impl Open {
    pub(crate) fn new(path: CString, flags: i32, mode: libc::mode_t) -> Open {
        Open { path, flags, mode }
    }
}

impl OpCode for Open {
    type Output = io::Result<OwnedFd>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<OwnedFd> {
        opened(res)
    }
}

impl UringOp for Open {
    fn uring_entry(&mut self) -> Entry {
        opcode::OpenAt::new(libc::AT_FDCWD, self.path.as_ptr())
            .flags(self.flags | libc::O_CLOEXEC)
            .mode(self.mode)
            .build()
    }

    fn orphan_result(self, res: i32, _from: Source) {
        close_late(res);
    }
}

impl EpollOp for Open {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: a NUL-terminated path.
        cvt(unsafe {
            libc::openat(
                libc::AT_FDCWD,
                self.path.as_ptr(),
                self.flags | libc::O_CLOEXEC,
                self.mode as libc::c_uint,
            )
        } as isize)
    }
}

/// `openat2(2)`: io_uring `IORING_OP_OPENAT2`; epoll: `openat2` inline.
pub(crate) struct Open2 {
    dirfd: RawFd,
    // Heap blocks: stable across moves until the kernel has read them.
    path: CString,
    how: Box<opcode::OpenHow>,
}

impl Open2 {
    pub(crate) fn new(dirfd: RawFd, path: CString, flags: i32, resolve: u64) -> Open2 {
        Open2 {
            dirfd,
            path,
            how: Box::new(opcode::OpenHow {
                flags: (flags | libc::O_CLOEXEC) as u64,
                mode: 0,
                resolve,
            }),
        }
    }
}

impl OpCode for Open2 {
    type Output = io::Result<OwnedFd>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<OwnedFd> {
        opened(res)
    }
}

impl UringOp for Open2 {
    fn uring_entry(&mut self) -> Entry {
        opcode::OpenAt2::new(self.dirfd, self.path.as_ptr(), &*self.how).build()
    }

    fn orphan_result(self, res: i32, _from: Source) {
        close_late(res);
    }
}

impl EpollOp for Open2 {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: a NUL-terminated path and a valid `open_how` with its size.
        cvt(unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.dirfd,
                self.path.as_ptr(),
                &*self.how as *const opcode::OpenHow,
                std::mem::size_of::<opcode::OpenHow>(),
            )
        } as isize)
    }
}

/// The fd an open returned, now owned.
fn opened(res: io::Result<u32>) -> io::Result<OwnedFd> {
    // SAFETY: the kernel just gave us this fd, and nothing else owns it.
    res.map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Close what an open returned after its future was dropped.
fn close_late(res: i32) {
    if res >= 0 {
        // SAFETY: a file opened after its future was dropped: nobody owns it.
        unsafe { libc::close(res) };
    }
}
