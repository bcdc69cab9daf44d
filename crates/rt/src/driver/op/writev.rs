//! `pwritev(2)`: io_uring `IORING_OP_WRITEV`; epoll: `pwritev` inline.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::cvt;
use crate::buf::IoBuf;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

pub(crate) struct Writev<B> {
    fd: RawFd,
    bufs: Vec<B>,
    // Heap storage: the kernel reads the iovecs after submission.
    iovecs: Vec<libc::iovec>,
    offset: u64,
}

impl<B: IoBuf> Writev<B> {
    pub(crate) fn new(fd: RawFd, bufs: Vec<B>, offset: u64) -> Self {
        let iovecs = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.stable_ptr() as *mut libc::c_void,
                iov_len: b.bytes_init(),
            })
            .collect();
        Writev {
            fd,
            bufs,
            iovecs,
            offset,
        }
    }
}

impl<B: IoBuf> OpCode for Writev<B> {
    type Output = (io::Result<usize>, Vec<B>);

    fn complete(self, res: io::Result<u32>, _from: Source) -> Self::Output {
        (res.map(|n| n as usize), self.bufs)
    }
}

impl<B: IoBuf> UringOp for Writev<B> {
    fn uring_entry(&mut self) -> Entry {
        opcode::Writev::new(
            Target::Fd(self.fd),
            self.iovecs.as_ptr(),
            self.iovecs.len() as u32,
        )
        .offset(self.offset)
        .build()
    }
}

impl<B: IoBuf> EpollOp for Writev<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        None
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: the iovecs describe initialised buffers owned by self.
        cvt(unsafe {
            libc::pwritev(
                self.fd,
                self.iovecs.as_ptr(),
                self.iovecs.len() as i32,
                self.offset as i64,
            )
        })
    }
}
