//! Wait until a socket is writable: io_uring `IORING_OP_POLL_ADD`
//! (`POLLOUT`, single shot); epoll: the readiness wait itself.
//!
//! For operations io_uring does not arm a poll for on its own (a splice
//! into a non-blocking socket returns `EAGAIN` when the socket is full).

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Writable {
    pub(crate) fd: RawFd,
}

impl OpCode for Writable {
    type Output = io::Result<()>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> Self::Output {
        res.map(drop)
    }
}

impl UringOp for Writable {
    fn uring_entry(&mut self) -> Entry {
        opcode::PollAdd::new(Target::Fd(self.fd), libc::POLLOUT as u32).build()
    }
}

impl EpollOp for Writable {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // Reached once epoll said writable (or the fd was never registered:
        // then the caller's next attempt finds out).
        Ok(0)
    }
}
