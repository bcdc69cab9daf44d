//! `pwrite(2)`: io_uring `IORING_OP_WRITE` at an offset; epoll: `pwrite` inline.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::buf::IoBuf;
use crate::driver::{Dir, OpCode};

pub(crate) struct WriteAt<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) offset: u64,
}

impl<B: IoBuf> OpCode for WriteAt<B> {
    type Output = (io::Result<usize>, B);

    fn uring_entry(&mut self) -> Entry {
        let len = self.buf.bytes_init() as u32;
        opcode::Write::new(Target::Fd(self.fd), self.buf.stable_ptr(), len)
            .offset(self.offset)
            .build()
    }

    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        let len = self.buf.bytes_init();
        // SAFETY: the buffer holds `len` initialised bytes.
        cvt(unsafe {
            libc::pwrite(
                self.fd,
                self.buf.stable_ptr().cast(),
                len,
                self.offset as i64,
            )
        })
    }

    fn complete(self, res: io::Result<u32>, _flags: u32) -> Self::Output {
        (res.map(|n| n as usize), self.buf)
    }
}
