//! `accept4(2)`: io_uring `IORING_OP_ACCEPT`; epoll: wait readable, then
//! `accept4(SOCK_NONBLOCK|SOCK_CLOEXEC)`. The multishot form, which a
//! listener keeps armed, is [`super::accept_multi`].

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use ringkit_uring::opcode::{self, Entry, Target};

use super::{cvt, raw};
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

/// Accept one connection. The address storage is boxed: the kernel writes it
/// after submission, wherever this value has moved.
pub(crate) struct Accept {
    fd: RawFd,
    addr: Box<(libc::sockaddr_storage, libc::socklen_t)>,
}

impl Accept {
    pub(crate) fn new(fd: RawFd) -> Accept {
        Accept {
            fd,
            addr: Box::new((
                // SAFETY: sockaddr_storage is plain data; all-zero is valid.
                unsafe { std::mem::zeroed() },
                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
            )),
        }
    }
}

impl OpCode for Accept {
    type Output = io::Result<(OwnedFd, Option<std::net::SocketAddr>)>;

    fn complete(self, res: io::Result<u32>, _from: Source) -> Self::Output {
        let fd = res? as RawFd;
        // SAFETY: the kernel just gave us this fd.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let (storage, len) = *self.addr;
        // SAFETY: the kernel filled `len` bytes of `storage`.
        let addr = unsafe { socket2::SockAddr::new(storage, len) }.as_socket();
        Ok((fd, addr))
    }
}

impl UringOp for Accept {
    fn uring_entry(&mut self) -> Entry {
        let (storage, len) = &mut *self.addr;
        opcode::Accept::new(
            Target::Fd(self.fd),
            (storage as *mut libc::sockaddr_storage).cast(),
            len,
        )
        .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
        .build()
    }

    fn orphan_result(self, res: i32, _from: Source) {
        if res >= 0 {
            // SAFETY: a connection accepted after its future was dropped: close it.
            unsafe { libc::close(res) };
        }
    }
}

impl EpollOp for Accept {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Read))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        let (storage, len) = &mut *self.addr;
        // SAFETY: valid listener fd and writable address storage.
        cvt(unsafe {
            raw::accept4(
                self.fd,
                (storage as *mut libc::sockaddr_storage).cast(),
                len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        } as isize)
    }
}
