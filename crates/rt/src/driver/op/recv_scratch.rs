//! A receive that holds no buffer while it waits: wait until the socket is
//! readable, then `recv` into the thread's scratch buffer and hand over an
//! exact-size copy of what arrived.
//!
//! This is epoll's pooled receive. With a buffer owned by the waiting
//! operation, every idle connection would hold one (4 KiB, the figure of
//! readiness runtimes such as tokio); here an idle connection holds none,
//! and a connection that got one short message holds only that message,
//! until its owner drops it. The price is one copy of what arrived (from
//! the scratch buffer), small next to the `recv` itself.
//!
//! On io_uring the wait is `IORING_OP_POLL_ADD` (`POLLIN`, single shot) and
//! the `recv` runs in place on its completion; the runtime's io_uring
//! pooled reads use the multishot receive instead, so this is a fallback.
//! Nothing is in the kernel's hands but the poll, so a dropped operation
//! loses no data: the bytes stay in the socket.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::{cvt, raw};
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

/// Bytes one `recv` may take: what a peer pipelining requests can have
/// queued, so that one syscall usually drains the socket.
const SCRATCH: usize = 64 * 1024;

thread_local! {
    /// The scratch buffer of this thread's receives. Only touched inside
    /// [`recv_into_scratch`], which neither awaits nor re-enters.
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// One non-blocking `recv` of `fd` into the scratch buffer; the bytes are
/// appended to `out` (allocated to exactly their length).
fn recv_into_scratch(fd: RawFd, out: &mut Vec<u8>) -> io::Result<u32> {
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < SCRATCH {
            b.resize(SCRATCH, 0);
        }
        // SAFETY: `b` is `SCRATCH` initialised, writable bytes.
        let n = cvt(unsafe { raw::recv(fd, b.as_mut_ptr().cast(), SCRATCH, 0) })?;
        out.reserve_exact(n as usize);
        out.extend_from_slice(&b[..n as usize]);
        Ok(n)
    })
}

pub(crate) struct RecvScratch {
    fd: RawFd,
    got: Vec<u8>,
    /// The `recv` ran (epoll); on io_uring it runs on completion.
    received: bool,
}

impl RecvScratch {
    pub(crate) fn new(fd: RawFd) -> RecvScratch {
        RecvScratch {
            fd,
            got: Vec::new(),
            received: false,
        }
    }
}

impl OpCode for RecvScratch {
    /// What arrived (empty: end of stream). `WouldBlock` on io_uring when
    /// the poll fired but another reader took the bytes: wait again.
    type Output = io::Result<Vec<u8>>;

    fn complete(mut self, res: io::Result<u32>, _from: Source) -> Self::Output {
        res?;
        if !self.received {
            // The poll said readable (or hung up): take what is there now.
            recv_into_scratch(self.fd, &mut self.got)?;
        }
        Ok(self.got)
    }
}

impl UringOp for RecvScratch {
    fn uring_entry(&mut self) -> Entry {
        opcode::PollAdd::new(Target::Fd(self.fd), libc::POLLIN as u32).build()
    }
}

impl EpollOp for RecvScratch {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Read))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        let n = recv_into_scratch(self.fd, &mut self.got)?;
        self.received = true;
        Ok(n)
    }

    fn epoll_drained(&self, n: u32) -> bool {
        (n as usize) < SCRATCH && n > 0
    }
}
