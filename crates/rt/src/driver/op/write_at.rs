//! `pwrite(2)`: io_uring `IORING_OP_WRITE` at an offset (`IORING_OP_WRITE_FIXED`
//! from a registered buffer); epoll: `pwrite` inline. With `dsync` the
//! write carries `RWF_DSYNC` (`pwritev2(2)` on epoll): the kernel makes
//! the bytes it wrote durable before it answers, as `fdatasync` of that
//! range would (on `O_DIRECT`, a FUA write where the device has one).

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::buf::IoBuf;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct WriteAt<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) offset: u64,
    /// io_uring: the registered buffer `buf` lies in (`WRITE_FIXED`).
    pub(crate) buf_index: Option<u16>,
    /// `RWF_DSYNC`: the bytes written are durable when it completes.
    pub(crate) dsync: bool,
}

/// The most one read's or write's SQE asks for (its length is 32 bits),
/// a whole number of pages: a larger buffer is read or written in part
/// (a short count), never with its length wrapped.
pub(crate) const MAX_WRITE: usize = (u32::MAX as usize) & !4095;

/// `RWF_DSYNC` when `dsync`, else no flags.
pub(crate) fn rw_flags(dsync: bool) -> i32 {
    if dsync {
        libc::RWF_DSYNC
    } else {
        0
    }
}

/// The SQE of a positional write of `len` bytes at `ptr`: `WRITE_FIXED`
/// when the bytes lie in registered buffer `buf_index`.
pub(crate) fn write_entry(
    fd: RawFd,
    ptr: *const u8,
    len: u32,
    offset: u64,
    buf_index: Option<u16>,
    rw_flags: i32,
) -> Entry {
    match buf_index {
        Some(i) => opcode::WriteFixed::new(Target::Fd(fd), ptr, len, i)
            .offset(offset)
            .rw_flags(rw_flags)
            .build(),
        None => opcode::Write::new(Target::Fd(fd), ptr, len)
            .offset(offset)
            .rw_flags(rw_flags)
            .build(),
    }
}

/// `pwrite(2)` of `buf`'s bytes, inline (epoll); `pwritev2(2)` with
/// `rw_flags` when there are any.
pub(crate) fn pwrite<B: IoBuf>(fd: RawFd, buf: &B, offset: u64, rw_flags: i32) -> io::Result<u32> {
    if rw_flags == 0 {
        // SAFETY: the buffer holds `bytes_init` initialised bytes.
        return cvt(unsafe {
            libc::pwrite(fd, buf.stable_ptr().cast(), buf.bytes_init(), offset as i64)
        });
    }
    let iov = libc::iovec {
        iov_base: buf.stable_ptr() as *mut libc::c_void,
        iov_len: buf.bytes_init(),
    };
    // SAFETY: one iovec over the buffer's `bytes_init` initialised bytes,
    // which the kernel only reads.
    cvt(unsafe { libc::pwritev2(fd, &iov, 1, offset as i64, rw_flags) })
}

impl<B: IoBuf> OpCode for WriteAt<B> {
    type Output = (io::Result<usize>, B);

    fn complete(self, res: io::Result<u32>, _from: Source) -> Self::Output {
        (res.map(|n| n as usize), self.buf)
    }
}

impl<B: IoBuf> UringOp for WriteAt<B> {
    fn uring_entry(&mut self) -> Entry {
        // An SQE's length is 32 bits: a larger buffer is written in part
        // (a short write), never with its length wrapped.
        let len = self.buf.bytes_init().min(MAX_WRITE) as u32;
        write_entry(
            self.fd,
            self.buf.stable_ptr(),
            len,
            self.offset,
            self.buf_index,
            rw_flags(self.dsync),
        )
    }
}

impl<B: IoBuf> EpollOp for WriteAt<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        pwrite(self.fd, &self.buf, self.offset, rw_flags(self.dsync))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `RWF_DSYNC` reaches the SQE for both forms of the write: the crash
    /// explorer trusts the op's kind, so only this shows the kernel is
    /// asked for the sync.
    #[test]
    fn dsync_is_in_the_sqe() {
        let buf = [0u8; 8];
        for index in [None, Some(0)] {
            let e = write_entry(3, buf.as_ptr(), 8, 4096, index, rw_flags(true));
            assert_eq!(e.sqe().op_flags, libc::RWF_DSYNC as u32, "{index:?}");
            let e = write_entry(3, buf.as_ptr(), 8, 4096, index, rw_flags(false));
            assert_eq!(e.sqe().op_flags, 0, "{index:?}");
        }
    }
}
