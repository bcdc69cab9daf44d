//! `pread(2)`: io_uring `IORING_OP_READ` at an offset (`IORING_OP_READ_FIXED`
//! into a registered buffer); epoll: `pread` inline (files have no
//! readiness).

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::buf::IoBufMut;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct ReadAt<B> {
    pub(crate) fd: RawFd,
    pub(crate) buf: B,
    pub(crate) offset: u64,
    /// io_uring: the registered buffer `buf` lies in (`READ_FIXED`).
    pub(crate) buf_index: Option<u16>,
}

impl<B: IoBufMut> OpCode for ReadAt<B> {
    type Output = (io::Result<usize>, B);

    fn before(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<io::Result<u32>>> {
        if self.buf.bytes_total() == 0 {
            return std::task::Poll::Ready(Some(Err(super::no_room())));
        }
        std::task::Poll::Ready(None)
    }

    fn complete(mut self, res: io::Result<u32>, _from: Source) -> Self::Output {
        if let Ok(n) = res {
            // SAFETY: the kernel initialised `n` bytes.
            unsafe { self.buf.set_init(n as usize) };
        }
        (res.map(|n| n as usize), self.buf)
    }
}

impl<B: IoBufMut> UringOp for ReadAt<B> {
    fn uring_entry(&mut self) -> Entry {
        let len = self.buf.bytes_total().min(super::write_at::MAX_WRITE) as u32;
        let (fd, ptr) = (Target::Fd(self.fd), self.buf.stable_mut_ptr());
        match self.buf_index {
            Some(i) => opcode::ReadFixed::new(fd, ptr, len, i)
                .offset(self.offset)
                .build(),
            None => opcode::Read::new(fd, ptr, len).offset(self.offset).build(),
        }
    }
}

impl<B: IoBufMut> EpollOp for ReadAt<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        let len = self.buf.bytes_total();
        // SAFETY: the buffer is writable for `len` bytes.
        cvt(unsafe {
            libc::pread(
                self.fd,
                self.buf.stable_mut_ptr().cast(),
                len,
                self.offset as i64,
            )
        })
    }
}
