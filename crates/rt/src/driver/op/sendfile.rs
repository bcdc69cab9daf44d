//! `sendfile(2)`: file bytes to a socket without a copy through user
//! memory, in one syscall (no pipe of ours: the kernel splices through its
//! own). io_uring has no sendfile opcode, so on both backends the call is
//! made in place on the non-blocking socket; when the socket is full, the
//! wait for room is a ring `IORING_OP_POLL_ADD` (`POLLOUT`) on io_uring and
//! the readiness wait on epoll, and the caller tries again.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

/// One `sendfile` of up to `len` bytes of `file` at `offset` to `sock`.
/// The caller keeps both fds open across the await; the ring only ever
/// holds a poll on `sock`.
pub(crate) struct SendFile {
    pub(crate) sock: RawFd,
    pub(crate) file: RawFd,
    pub(crate) offset: u64,
    pub(crate) len: usize,
    /// On io_uring the socket was full and the ring polls it instead.
    polled: bool,
}

/// What a [`SendFile`] did.
pub(crate) enum Sent {
    /// Bytes sent (0: the file ends at or before `offset`).
    Bytes(usize),
    /// io_uring: the socket was full and now has room; try again.
    Writable,
}

impl SendFile {
    pub(crate) fn new(sock: RawFd, file: RawFd, offset: u64, len: usize) -> SendFile {
        SendFile {
            sock,
            file,
            offset,
            // sendfile moves at most 0x7ffff000 bytes a call anyway.
            len: len.min(0x7fff_f000),
            polled: false,
        }
    }

    fn attempt(&mut self) -> io::Result<u32> {
        let mut off = self.offset as libc::off_t;
        // SAFETY: `off` is a live local for the call; both fds are kept
        // open by the caller.
        cvt(unsafe { libc::sendfile(self.sock, self.file, &mut off, self.len) })
    }
}

impl OpCode for SendFile {
    type Output = io::Result<Sent>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> Self::Output {
        match res {
            Ok(_) if self.polled => Ok(Sent::Writable),
            Ok(n) => Ok(Sent::Bytes(n as usize)),
            Err(e) => Err(e),
        }
    }
}

impl UringOp for SendFile {
    /// io_uring: the sendfile itself, in place; only a full socket goes to
    /// the ring, as a poll.
    fn uring_try_inline(&mut self) -> Option<Option<io::Result<u32>>> {
        Some(match self.attempt() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            r => Some(r),
        })
    }

    fn uring_entry(&mut self) -> Entry {
        self.polled = true;
        opcode::PollAdd::new(Target::Fd(self.sock), libc::POLLOUT as u32).build()
    }
}

impl EpollOp for SendFile {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.sock, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        self.attempt()
    }
}
