//! `close(2)`: io_uring `IORING_OP_CLOSE`; epoll: the syscall.
//!
//! Used when the caller wants the result of the close (`File::close`);
//! dropping a file or socket closes it through the driver without waiting.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Close {
    pub(crate) fd: RawFd,
}

impl OpCode for Close {
    type Output = io::Result<()>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<()> {
        res.map(|_| ())
    }
}

impl UringOp for Close {
    fn uring_entry(&mut self) -> Entry {
        opcode::Close::new(Target::Fd(self.fd)).build()
    }
}

impl EpollOp for Close {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: the caller gave up ownership of fd to this op.
        cvt(unsafe { libc::close(self.fd) } as isize)
    }
}
