//! `send(2)` / `write(2)` on a stream: io_uring `IORING_OP_SEND` (sockets,
//! with `MSG_NOSIGNAL`: a reset peer gives `EPIPE`, never `SIGPIPE`) or
//! `IORING_OP_WRITE`; epoll: wait writable, then the non-blocking syscall.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::{cvt, raw, target};
use crate::buf::IoBuf;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Send<B> {
    fd: RawFd,
    /// io_uring: the registered-file slot of `fd`, if it has one.
    fixed: Option<u32>,
    socket: bool,
    buf: B,
    /// Send `buf[start..bytes_init]` (used by `write_all`).
    start: usize,
    /// `send` flags besides `MSG_NOSIGNAL` (sockets only).
    flags: i32,
}

impl<B: IoBuf> Send<B> {
    pub(crate) fn new(fd: RawFd, socket: bool, buf: B, start: usize) -> Self {
        Send {
            fd,
            fixed: None,
            socket,
            buf,
            start,
            flags: 0,
        }
    }

    /// Add `send` flags (e.g. `MSG_MORE`); sockets only.
    pub(crate) fn flags(mut self, flags: i32) -> Self {
        self.flags = flags;
        self
    }

    /// io_uring: address the fd by its registered-file slot.
    pub(crate) fn fixed(mut self, slot: Option<u32>) -> Self {
        self.fixed = slot;
        self
    }

    fn slice(&self) -> (*const u8, usize) {
        let init = self.buf.bytes_init();
        let start = self.start.min(init);
        // SAFETY: `start <= bytes_init`, inside the buffer.
        (unsafe { self.buf.stable_ptr().add(start) }, init - start)
    }
}

impl<B: IoBuf> OpCode for Send<B> {
    type Output = (io::Result<usize>, B);

    fn complete(self, res: io::Result<u32>, _from: Source) -> Self::Output {
        (res.map(|n| n as usize), self.buf)
    }
}

impl<B: IoBuf> UringOp for Send<B> {
    fn uring_entry(&mut self) -> Entry {
        let (ptr, len) = self.slice();
        let len = len.min(super::write_at::MAX_WRITE);
        if self.socket {
            opcode::Send::new(target(self.fd, self.fixed), ptr, len as u32)
                .flags(libc::MSG_NOSIGNAL | self.flags)
                .build()
        } else {
            opcode::Write::new(Target::Fd(self.fd), ptr, len as u32)
                .offset(u64::MAX)
                .build()
        }
    }
}

impl<B: IoBuf> EpollOp for Send<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        let (ptr, len) = self.slice();
        // SAFETY: `ptr` is readable for `len` initialised bytes (IoBuf contract).
        let r = unsafe {
            if self.socket {
                raw::send(self.fd, ptr.cast(), len, libc::MSG_NOSIGNAL | self.flags)
            } else {
                raw::write(self.fd, ptr.cast(), len)
            }
        };
        cvt(r)
    }
}
