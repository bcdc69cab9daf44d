//! `shutdown(2)`: the syscall in place on both backends (it never blocks).
//!
//! io_uring has `IORING_OP_SHUTDOWN`, but the kernel hands every one to an
//! io-wq worker thread: two thread switches for a call that never waits,
//! and a worker that could not be created completes it with `ECANCELED`
//! (a torture client under load saw exactly that). So the driver makes the
//! call in place and never submits the SQE.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Shutdown {
    pub(crate) fd: RawFd,
    pub(crate) how: i32,
}

impl OpCode for Shutdown {
    type Output = io::Result<()>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> io::Result<()> {
        res.map(|_| ())
    }
}

impl UringOp for Shutdown {
    fn uring_try_inline(&mut self) -> Option<Option<io::Result<u32>>> {
        // Never blocks on a socket: done in place (module docs).
        Some(Some(self.epoll_attempt()))
    }

    fn uring_entry(&mut self) -> Entry {
        opcode::Shutdown::new(Target::Fd(self.fd), self.how).build()
    }
}

impl EpollOp for Shutdown {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: plain syscall on a socket fd.
        cvt(unsafe { libc::shutdown(self.fd, self.how) } as isize)
    }
}
