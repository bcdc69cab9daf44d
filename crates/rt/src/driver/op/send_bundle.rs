//! A batch of buffers sent as one io_uring send bundle
//! (`SendBatch::Bundle`): the buffers are published into a send ring the
//! op borrows from the thread's pool, and one `IORING_OP_SEND` with
//! `IORING_RECVSEND_BUNDLE` takes them all (one SQE, one CQE).
//!
//! The ring is published when the SQE is built, that is when the kernel is
//! about to see it; the buffers stay with the op (or the driver, if the
//! future is dropped) until the CQE. The CQE's byte count is exact: the
//! kernel takes every entry at issue, retries a short send from where it
//! stopped, and on a failure reports what went before it. The ring goes
//! back to the pool only if the CQE has `F_BUFFER` (every entry taken);
//! see `ringkit_uring::SendRing`. Never built on epoll (the plan there is
//! vectored); its epoll form is one `sendmsg` all the same.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};
use ringkit_uring::SendRing;

use super::sendmsg::sendmsg_bufs;
use crate::buf::IoBuf;
use crate::driver::uring::PooledSendRing;
use crate::driver::{Dir, OpCode};

pub(crate) struct SendBundle<B> {
    fd: RawFd,
    bufs: Vec<B>,
    ring: PooledSendRing,
    iovecs: Vec<libc::iovec>,
}

impl<B: IoBuf> SendBundle<B> {
    /// `Err(bufs)` when the batch does not fit one bundle (empty, more than
    /// [`SendRing::MAX_BATCH`] buffers, an empty buffer, or one of 4 GiB):
    /// send it another way.
    pub(crate) fn new(fd: RawFd, bufs: Vec<B>, ring: PooledSendRing) -> Result<Self, Vec<B>> {
        let fits = !bufs.is_empty()
            && bufs.len() <= SendRing::MAX_BATCH
            && bufs
                .iter()
                .all(|b| b.bytes_init() > 0 && b.bytes_init() <= u32::MAX as usize);
        if !fits {
            return Err(bufs);
        }
        Ok(SendBundle {
            fd,
            bufs,
            ring,
            iovecs: Vec::new(),
        })
    }
}

impl<B: IoBuf> OpCode for SendBundle<B> {
    type Output = (io::Result<usize>, Vec<B>);

    fn uring_entry(&mut self) -> Entry {
        let iov: Vec<(*const u8, u32)> = self
            .bufs
            .iter()
            .map(|b| (b.stable_ptr(), b.bytes_init() as u32))
            .collect();
        let sr = self.ring.get();
        let bgid = sr.bgid();
        // SAFETY: a pooled ring is empty (it went back to the pool only
        // after an F_BUFFER CQE, or is new); the buffers are heap memory
        // owned by this op, kept until the CQE (the `OpCode` contract). The
        // batch was checked to fit in `new`, so this cannot fail.
        unsafe { sr.publish(&iov) }.expect("a checked batch fits its send ring");
        self.ring.published();
        opcode::SendBundle::new(Target::Fd(self.fd), bgid)
            .flags(libc::MSG_NOSIGNAL)
            .build()
    }

    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        sendmsg_bufs(self.fd, &self.bufs, &mut self.iovecs)
    }

    fn complete(mut self, res: io::Result<u32>, flags: u32) -> Self::Output {
        self.ring.completed(flags);
        (res.map(|n| n as usize), self.bufs)
    }

    fn orphan_result(mut self, _res: i32, flags: u32) {
        self.ring.completed(flags);
    }
}
