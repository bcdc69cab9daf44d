//! `fallocate(2)`: io_uring `IORING_OP_FALLOCATE`; epoll: the syscall inline.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Fallocate {
    pub(crate) fd: RawFd,
    pub(crate) mode: i32,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

impl OpCode for Fallocate {
    type Output = io::Result<()>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<()> {
        res.map(|_| ())
    }
}

impl UringOp for Fallocate {
    fn uring_entry(&mut self) -> Entry {
        opcode::Fallocate::new(Target::Fd(self.fd), self.offset, self.len)
            .mode(self.mode)
            .build()
    }
}

impl EpollOp for Fallocate {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: a plain syscall on a file descriptor.
        let r = unsafe { libc::fallocate(self.fd, self.mode, self.offset as i64, self.len as i64) };
        cvt(r as isize)
    }
}
