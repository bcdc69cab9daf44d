//! `shutdown(2)`: io_uring `IORING_OP_SHUTDOWN`; epoll: the syscall (never blocks).

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::driver::{Dir, OpCode};

pub(crate) struct Shutdown {
    pub(crate) fd: RawFd,
    pub(crate) how: i32,
}

impl OpCode for Shutdown {
    type Output = io::Result<()>;

    fn uring_entry(&mut self) -> Entry {
        opcode::Shutdown::new(Target::Fd(self.fd), self.how).build()
    }

    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: plain syscall on a socket fd.
        cvt(unsafe { libc::shutdown(self.fd, self.how) } as isize)
    }

    fn complete(self, res: io::Result<u32>, _flags: u32) -> io::Result<()> {
        res.map(|_| ())
    }
}
