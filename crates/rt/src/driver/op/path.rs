//! Operations on names: `renameat2(2)`, `unlinkat(2)`, `mkdirat(2)`.
//! io_uring: `IORING_OP_RENAMEAT`/`UNLINKAT`/`MKDIRAT`; epoll: the
//! syscall inline. Paths are relative to the working directory (or
//! absolute); each `CString`'s heap block is what the kernel reads, stable
//! across moves of the operation.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry};

use super::cvt;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

/// One change to a name.
pub(crate) enum PathOp {
    Rename { from: CString, to: CString },
    Unlink { path: CString, dir: bool },
    Mkdir { path: CString, mode: libc::mode_t },
}

impl OpCode for PathOp {
    type Output = io::Result<()>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<()> {
        res.map(|_| ())
    }
}

impl UringOp for PathOp {
    fn uring_entry(&mut self) -> Entry {
        match self {
            PathOp::Rename { from, to } => {
                opcode::RenameAt::new(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr())
                    .build()
            }
            PathOp::Unlink { path, dir } => opcode::UnlinkAt::new(libc::AT_FDCWD, path.as_ptr())
                .flags(if *dir { libc::AT_REMOVEDIR } else { 0 })
                .build(),
            PathOp::Mkdir { path, mode } => opcode::MkdirAt::new(libc::AT_FDCWD, path.as_ptr())
                .mode(*mode)
                .build(),
        }
    }
}

impl EpollOp for PathOp {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: plain syscalls on NUL-terminated paths this op owns.
        let r = unsafe {
            match self {
                PathOp::Rename { from, to } => {
                    libc::renameat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr())
                }
                PathOp::Unlink { path, dir } => libc::unlinkat(
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    if *dir { libc::AT_REMOVEDIR } else { 0 },
                ),
                PathOp::Mkdir { path, mode } => libc::mkdirat(libc::AT_FDCWD, path.as_ptr(), *mode),
            }
        };
        cvt(r as isize)
    }
}
