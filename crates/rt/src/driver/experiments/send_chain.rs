//! A batch of buffers sent as a chain of `IORING_OP_SEND`s, linked in order,
//! every member but the last with `IOSQE_CQE_SKIP_SUCCESS`: one CQE for the
//! batch (`SendBatch::Linked`, the A/B lever against one vectored
//! `SENDMSG`).
//!
//! # Why releasing the buffers at that one CQE is sound
//! A link starts only after the one before it has completed, so when the
//! tail completes every member has completed too; and a member that fails
//! posts its own CQE and the kernel cancels the links after it without a
//! CQE (checked per process by `ringkit_uring::skipped_chain_posts_one_cqe`
//! before any chain is built). Either way exactly one CQE ends the chain,
//! and after it the kernel holds no member: the buffers are released then,
//! and not before (a dropped future hands them to the driver until that
//! CQE, like any op).
//!
//! Each member sends with `MSG_WAITALL`, so on a stream socket it completes
//! only when all of its buffer has gone, or with what it sent before an
//! error (such as `EAGAIN` on the non-blocking socket). The CQE names the
//! member (`Source::ChainMember`), so the bytes sent are known
//! exactly and the caller continues from there. On epoll it is one
//! `sendmsg` of the whole batch.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::sendmsg_bufs;
use crate::buf::IoBuf;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct SendChain<B> {
    fd: RawFd,
    bufs: Vec<B>,
    /// epoll: the iovecs of `bufs` (heap memory that `bufs` keeps alive).
    iovecs: Vec<libc::iovec>,
}

impl<B: IoBuf> SendChain<B> {
    /// `bufs` must hold at least two buffers (one is a plain send) and no
    /// more than the driver's chain cap.
    pub(crate) fn new(fd: RawFd, bufs: Vec<B>) -> Self {
        debug_assert!(bufs.len() >= 2);
        SendChain {
            fd,
            bufs,
            iovecs: Vec::new(),
        }
    }

    /// A member says `MSG_MORE` (TCP holds a partial segment for the next
    /// one, as a cork would); the tail does not, so the batch goes out.
    fn send(&self, b: &B, more: bool) -> Entry {
        let more = if more { libc::MSG_MORE } else { 0 };
        opcode::Send::new(Target::Fd(self.fd), b.stable_ptr(), b.bytes_init() as u32)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL | more)
            .build()
    }

    /// Bytes sent by the members before `index`, all of which completed.
    fn before(&self, index: usize) -> usize {
        self.bufs[..index].iter().map(|b| b.bytes_init()).sum()
    }
}

impl<B: IoBuf> OpCode for SendChain<B> {
    type Output = (io::Result<usize>, Vec<B>);

    fn complete(self, res: io::Result<u32>, from: Source) -> Self::Output {
        // Which SQE this CQE is from: a failing member, or the tail.
        let index = match from {
            Source::ChainMember { index } => usize::from(index),
            Source::Ring { .. } => self.bufs.len() - 1,
            // epoll's one sendmsg, or a chain that never reached the ring.
            _ => return (res.map(|n| n as usize), self.bufs),
        };
        let before = self.before(index);
        let r = match res {
            Ok(n) => Ok(before + n as usize),
            // Part of the batch went before the socket filled or the call
            // was interrupted: report that much; the caller goes on.
            Err(e)
                if before > 0
                    && matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
            {
                Ok(before)
            }
            Err(e) => Err(e),
        };
        (r, self.bufs)
    }
}

impl<B: IoBuf> UringOp for SendChain<B> {
    fn uring_chain(&mut self) -> Vec<Entry> {
        let n = self.bufs.len() - 1;
        self.bufs[..n].iter().map(|b| self.send(b, true)).collect()
    }

    fn uring_chain_len(&self) -> usize {
        self.bufs.len() - 1
    }

    fn uring_entry(&mut self) -> Entry {
        self.send(&self.bufs[self.bufs.len() - 1], false)
    }
}

impl<B: IoBuf> EpollOp for SendChain<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        sendmsg_bufs(self.fd, &self.bufs, &mut self.iovecs)
    }
}
