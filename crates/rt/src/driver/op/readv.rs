//! `preadv(2)`: io_uring `IORING_OP_READV`; epoll: `preadv` inline.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::buf::IoBufMut;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Readv<B> {
    fd: RawFd,
    bufs: Vec<B>,
    // Heap storage: the kernel reads the iovecs after submission.
    iovecs: Vec<libc::iovec>,
    offset: u64,
}

impl<B: IoBufMut> Readv<B> {
    pub(crate) fn new(fd: RawFd, mut bufs: Vec<B>, offset: u64) -> Self {
        let iovecs = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.stable_mut_ptr().cast(),
                iov_len: b.bytes_total(),
            })
            .collect();
        Readv {
            fd,
            bufs,
            iovecs,
            offset,
        }
    }
}

impl<B: IoBufMut> OpCode for Readv<B> {
    type Output = (io::Result<usize>, Vec<B>);

    fn complete(mut self, res: io::Result<u32>, _from: Source) -> Self::Output {
        if let Ok(n) = res {
            let mut left = n as usize;
            for b in &mut self.bufs {
                let take = left.min(b.bytes_total());
                // SAFETY: the kernel filled the iovecs in order, `n` bytes in all.
                unsafe { b.set_init(take) };
                left -= take;
            }
        }
        (res.map(|n| n as usize), self.bufs)
    }
}

impl<B: IoBufMut> UringOp for Readv<B> {
    fn uring_entry(&mut self) -> Entry {
        opcode::Readv::new(
            Target::Fd(self.fd),
            self.iovecs.as_ptr(),
            self.iovecs.len() as u32,
        )
        .offset(self.offset)
        .build()
    }
}

impl<B: IoBufMut> EpollOp for Readv<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: the iovecs describe writable buffers owned by self.
        cvt(unsafe {
            libc::preadv(
                self.fd,
                self.iovecs.as_ptr(),
                self.iovecs.len() as i32,
                self.offset as i64,
            )
        })
    }
}
