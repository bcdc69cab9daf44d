//! A positional write made durable by `fdatasync(2)`, as one submission:
//! a [`Link`] of the write (`WRITE`, or `WRITE_FIXED` from a registered
//! buffer) and an `FSYNC` with `IORING_FSYNC_DATASYNC`, one CQE on
//! io_uring; on epoll `pwrite` then `fdatasync`, inline.
//!
//! # A short write is never acknowledged
//! The kernel counts a write that moves fewer bytes than asked as failed
//! for its link: the fsync after it is cancelled, and the write's own CQE
//! (with the short count) is the pair's one CQE (checked against the real
//! kernel by `ringkit-uring`'s `short_linked_write_cancels_its_fsync`). So
//! the answer is `Ok(n)` with `n < len` and nothing synced: the caller
//! writes the rest and syncs again. On epoll a short `pwrite` skips the
//! `fdatasync` the same way. `Ok(len)` means every byte was written and
//! the sync that followed succeeded; an error from either is the error.
//!
//! The driver posts a link only where skipped links hold (one CQE per
//! chain, `Driver::links_hold`); elsewhere `fs::File::write_at_sync` issues
//! the two operations one after the other.

use std::io;
use std::os::fd::RawFd;

use super::fsync::Fsync;
use super::link::{Link, Linked, Whole};
use super::write_at::{WriteAt, MAX_WRITE};
use crate::buf::IoBuf;

/// The most one linked write submits ([`MAX_WRITE`]): a larger buffer is
/// written in part, and the sync after it vouches for that part only,
/// which is what the caller is told.
const MAX_LINKED: usize = MAX_WRITE;

impl<B: IoBuf> Whole for WriteAt<B> {
    fn whole(&self) -> u32 {
        self.buf.bytes_init().min(MAX_LINKED) as u32
    }
}

/// `buf` written at `offset` on `fd`, then `fdatasync` if all of it was.
pub(crate) fn write_sync<B: IoBuf>(
    fd: RawFd,
    buf: B,
    offset: u64,
    buf_index: Option<u16>,
) -> Link<WriteAt<B>, Fsync> {
    let write = WriteAt {
        fd,
        buf,
        offset,
        buf_index,
        dsync: false,
    };
    Link::new(write, Fsync::Data(fd))
}

/// The caller's answer from the link's: the bytes written and synced
/// (all of them), a short count (none synced), or the error.
pub(crate) fn synced<B: IoBuf>(
    out: Linked<(io::Result<usize>, B), io::Result<()>>,
) -> (io::Result<usize>, B) {
    match out {
        Linked::Both((written, buf), synced) => (written.and_then(|n| synced.map(|()| n)), buf),
        Linked::Broken((written, buf)) => {
            let whole = buf.bytes_init().min(MAX_LINKED);
            let res = match written {
                Ok(n) if n < whole => Ok(n),
                Ok(_) => Err(io::Error::other(
                    "a linked write posted its CQE without a failure; its sync did not run",
                )),
                Err(e) => Err(e),
            };
            (res, buf)
        }
    }
}
