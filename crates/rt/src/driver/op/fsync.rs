//! `fsync(2)` / `fdatasync(2)` (`IORING_OP_FSYNC`) and `sync_file_range(2)`
//! (`IORING_OP_SYNC_FILE_RANGE`); epoll: the syscall inline.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};
use ringkit_uring::sys;

use super::cvt;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) enum Fsync {
    All(RawFd),
    Data(RawFd),
    Range {
        fd: RawFd,
        offset: u64,
        len: u32,
        flags: u32,
    },
}

impl OpCode for Fsync {
    type Output = io::Result<()>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<()> {
        res.map(|_| ())
    }
}

impl UringOp for Fsync {
    fn uring_entry(&mut self) -> Entry {
        match *self {
            Fsync::All(fd) => opcode::Fsync::new(Target::Fd(fd)).build(),
            Fsync::Data(fd) => opcode::Fsync::new(Target::Fd(fd))
                .flags(sys::IORING_FSYNC_DATASYNC)
                .build(),
            Fsync::Range {
                fd,
                offset,
                len,
                flags,
            } => opcode::SyncFileRange::new(Target::Fd(fd), len)
                .offset(offset)
                .flags(flags)
                .build(),
        }
    }
}

impl EpollOp for Fsync {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: plain syscalls on a file descriptor.
        let r = unsafe {
            match *self {
                Fsync::All(fd) => libc::fsync(fd),
                Fsync::Data(fd) => libc::fdatasync(fd),
                Fsync::Range {
                    fd,
                    offset,
                    len,
                    flags,
                } => libc::sync_file_range(fd, offset as i64, i64::from(len), flags),
            }
        };
        cvt(r as isize)
    }
}
