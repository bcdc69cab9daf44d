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
//!
//! The send says `MSG_DONTWAIT` (see `uring_entry`). Left to wait for room
//! inside the kernel, a bundle send was seen (CI, Linux 6.18.44) to end
//! with `ECANCELED` although no one cancelled it, while the peer shut down.
//! Whether bytes went before such an end is unknown, so it is never sent
//! again: a zero-length `send` asks the socket for its pending error
//! (`ECONNRESET`, `EPIPE`), which is returned instead; a healthy socket gets
//! an error saying the stream's state is unknown.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};
use ringkit_uring::SendRing;

use super::send_rings::PooledSendRing;
use super::sendmsg_bufs;
use crate::buf::IoBuf;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct SendBundle<B> {
    fd: RawFd,
    bufs: Vec<B>,
    ring: PooledSendRing,
    iovecs: Vec<libc::iovec>,
}

impl<B: IoBuf> SendBundle<B> {
    /// `Err(bufs)` when the kernel might not take the whole batch in one
    /// round (see [`fits_one_round`]): send it another way.
    pub(crate) fn new(fd: RawFd, bufs: Vec<B>, ring: PooledSendRing) -> Result<Self, Vec<B>> {
        if !fits_one_round(bufs.iter().map(|b| b.bytes_init())) {
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

/// Whether one bundle send takes every one of these buffers in its first
/// round, which the one-CQE protocol needs: at least one buffer, none
/// empty, at most [`SendRing::MAX_BATCH`], at most `INT_MAX` bytes in all,
/// and no more than `ceil(INT_MAX / first length)` buffers (the kernel sizes
/// a round by its first entry: `io_ring_buffers_peek`).
pub(crate) fn fits_one_round(lens: impl Iterator<Item = usize>) -> bool {
    const INT_MAX: usize = i32::MAX as usize;
    let (mut count, mut total, mut first) = (0usize, 0usize, None);
    for n in lens {
        if n == 0 {
            return false;
        }
        count += 1;
        total = total.saturating_add(n);
        first.get_or_insert(n);
    }
    let Some(first) = first else {
        return false;
    };
    count <= SendRing::MAX_BATCH && total <= INT_MAX && count <= INT_MAX.div_ceil(first)
}

impl<B> SendBundle<B> {
    /// The error to report for a live send the kernel cancelled (module
    /// docs): the socket's own, if it has one.
    fn why_cancelled(&self) -> io::Error {
        crate::driver::current::count_syscalls(1);
        // SAFETY: a zero-length send reads no memory; `fd` is open (the
        // stream outlives its operations).
        let r = unsafe {
            libc::send(
                self.fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if r < 0 {
            io::Error::last_os_error()
        } else {
            io::Error::other(
                "the kernel cancelled a send bundle on a healthy socket; \
                 how much of it was sent is unknown",
            )
        }
    }
}

impl<B: IoBuf> OpCode for SendBundle<B> {
    type Output = (io::Result<usize>, Vec<B>);

    fn complete(mut self, res: io::Result<u32>, from: Source) -> Self::Output {
        if let Source::Ring { cqe_flags } = from {
            self.ring.completed(cqe_flags);
        }
        let res = match res {
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => Err(self.why_cancelled()),
            r => r.map(|n| n as usize),
        };
        (res, self.bufs)
    }
}

impl<B: IoBuf> UringOp for SendBundle<B> {
    fn uring_entry(&mut self) -> Entry {
        let sr = self.ring.get();
        let bgid = sr.bgid();
        let iov = self
            .bufs
            .iter()
            .map(|b| (b.stable_ptr(), b.bytes_init() as u32));
        // SAFETY: a pooled ring is empty (it went back to the pool only
        // after an F_BUFFER CQE, or is new); the buffers are heap memory
        // owned by this op, kept until the CQE (the `OpCode` contract). The
        // batch was checked to fit in `new`, so this cannot fail.
        unsafe { sr.publish(iov) }.expect("a checked batch fits its send ring");
        self.ring.published();
        // MSG_DONTWAIT: a full socket ends the send with what went (or
        // EAGAIN) instead of parking it in the kernel's poll, where a
        // bundle send (a multishot request to the kernel) was seen to end
        // with ECANCELED when the peer shut down meanwhile; the caller
        // waits for room with a poll of its own and sends the rest.
        opcode::SendBundle::new(Target::Fd(self.fd), bgid)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
            .build()
    }

    fn orphan_result(mut self, _res: i32, from: Source) {
        if let Source::Ring { cqe_flags } = from {
            self.ring.completed(cqe_flags);
        }
    }
}

impl<B: IoBuf> EpollOp for SendBundle<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        sendmsg_bufs(self.fd, &self.bufs, &mut self.iovecs)
    }
}

#[cfg(test)]
mod tests {
    use super::fits_one_round;

    #[test]
    fn one_round_limits() {
        let fits = |lens: &[usize]| fits_one_round(lens.iter().copied());
        assert!(fits(&[1, 2, 3]));
        assert!(!fits(&[]));
        assert!(!fits(&[4, 0, 4]));
        assert!(fits(&[1; 256]));
        assert!(!fits(&[1; 257]));
        // A first buffer of 1 GiB: a round takes at most 2 entries.
        let gib = 1 << 30;
        assert!(fits(&[gib, 1]));
        assert!(!fits(&[gib, 1, 1]));
        assert!(!fits(&[gib, gib, gib]));
    }
}
