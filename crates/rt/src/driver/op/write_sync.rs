//! A positional write made durable by `fdatasync(2)`, as one submission:
//! on io_uring a `WRITE` (or `WRITE_FIXED`) linked to an `FSYNC` with
//! `IORING_FSYNC_DATASYNC`, the write's success CQE skipped, so the pair
//! posts one CQE; on epoll `pwrite` then `fdatasync`, inline.
//!
//! # A short write is never acknowledged
//! The kernel counts a write that moves fewer bytes than asked as failed
//! for its link: the fsync after it is cancelled, and the write's own CQE
//! (with the short count) is the pair's one CQE (checked against the real
//! kernel by `ringkit-uring`'s `short_linked_write_cancels_its_fsync`). So
//! the output is `Ok(n)` with `n < len` and nothing synced: the caller
//! writes the rest and syncs again. On epoll a short `pwrite` skips the
//! `fdatasync` the same way. `Ok(len)` means every byte was written and
//! the sync that followed succeeded; an error from either is the error.
//!
//! The driver posts a chain only where skipped chains hold (one CQE per
//! chain, `Driver::links_hold`); elsewhere `fs::File::write_at_sync` issues
//! the two operations one after the other.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};
use ringkit_uring::sys;

use super::cvt;
use super::write_at::{pwrite, write_entry};
use crate::buf::IoBuf;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct WriteSync<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) offset: u64,
    /// io_uring: the registered buffer `buf` lies in (`WRITE_FIXED`).
    pub(crate) buf_index: Option<u16>,
}

/// The most one linked write submits (an SQE's length is 32 bits): a
/// larger buffer is written in part, and the sync after it vouches for
/// that part only, which is what the caller is told.
const MAX_LINKED: usize = (u32::MAX as usize) & !4095;

impl<B: IoBuf> OpCode for WriteSync<B> {
    type Output = (io::Result<usize>, B);

    fn complete(self, res: io::Result<u32>, from: Source) -> Self::Output {
        // What the linked write submitted (epoll writes the whole buffer).
        let linked = self.buf.bytes_init().min(MAX_LINKED);
        let out = match (res, from) {
            // io_uring, the write's own CQE: it came up short (or failed,
            // below) and the fsync was cancelled.
            (Ok(n), Source::ChainMember { .. }) if (n as usize) < linked => Ok(n as usize),
            (Ok(_), Source::ChainMember { .. }) => Err(io::Error::other(
                "a linked write posted its CQE without a failure; its sync did not run",
            )),
            // io_uring: the fsync's CQE, after a write that moved every byte.
            (Ok(_), Source::Ring { .. }) => Ok(linked),
            // epoll: the bytes written (synced when all of them).
            (Ok(n), _) => Ok(n as usize),
            (Err(e), _) => Err(e),
        };
        (out, self.buf)
    }
}

impl<B: IoBuf> UringOp for WriteSync<B> {
    fn uring_chain(&mut self) -> Vec<Entry> {
        let len = self.buf.bytes_init().min(MAX_LINKED) as u32;
        vec![write_entry(
            self.fd,
            self.buf.stable_ptr(),
            len,
            self.offset,
            self.buf_index,
            0,
        )]
    }

    fn uring_chain_len(&self) -> usize {
        1
    }

    fn uring_entry(&mut self) -> Entry {
        opcode::Fsync::new(Target::Fd(self.fd))
            .flags(sys::IORING_FSYNC_DATASYNC)
            .build()
    }
}

impl<B: IoBuf> EpollOp for WriteSync<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        let n = pwrite(self.fd, &self.buf, self.offset, 0)?;
        if n as usize == self.buf.bytes_init() {
            // SAFETY: a plain syscall on a file descriptor.
            cvt(unsafe { libc::fdatasync(self.fd) } as isize)?;
        }
        Ok(n)
    }
}
