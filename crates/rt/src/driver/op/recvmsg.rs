//! `recvmsg(2)`: `recv_from` on datagram sockets. io_uring
//! `IORING_OP_RECVMSG`; epoll: wait readable, then `recvmsg`.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::{cvt, raw};
use crate::buf::IoBufMut;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

struct Msg {
    hdr: libc::msghdr,
    iov: libc::iovec,
    addr: libc::sockaddr_storage,
}

pub(crate) struct RecvMsg<B> {
    fd: RawFd,
    buf: B,
    msg: Box<Msg>,
}

impl<B: IoBufMut> RecvMsg<B> {
    pub(crate) fn new(fd: RawFd, mut buf: B) -> Self {
        let iov = libc::iovec {
            iov_base: buf.stable_mut_ptr().cast(),
            iov_len: buf.bytes_total(),
        };
        let mut msg = Box::new(Msg {
            // SAFETY: msghdr and sockaddr_storage are plain data; zero is valid.
            hdr: unsafe { std::mem::zeroed() },
            iov,
            // SAFETY: as above.
            addr: unsafe { std::mem::zeroed() },
        });
        msg.hdr.msg_iov = &mut msg.iov;
        msg.hdr.msg_iovlen = 1;
        msg.hdr.msg_name = (&mut msg.addr as *mut libc::sockaddr_storage).cast();
        msg.hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        RecvMsg { fd, buf, msg }
    }
}

impl<B: IoBufMut> OpCode for RecvMsg<B> {
    type Output = (io::Result<(usize, SocketAddr)>, B);

    fn complete(mut self, res: io::Result<u32>, _from: Source) -> Self::Output {
        let res = res.and_then(|n| {
            // SAFETY: the kernel initialised `n` bytes.
            unsafe { self.buf.set_init(n as usize) };
            // SAFETY: the kernel filled `msg_namelen` bytes of the address.
            let addr = unsafe { socket2::SockAddr::new(self.msg.addr, self.msg.hdr.msg_namelen) };
            let addr = addr.as_socket().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "datagram from a non-IP address")
            })?;
            Ok((n as usize, addr))
        });
        (res, self.buf)
    }
}

impl<B: IoBufMut> UringOp for RecvMsg<B> {
    fn uring_entry(&mut self) -> Entry {
        opcode::RecvMsg::new(Target::Fd(self.fd), &mut self.msg.hdr).build()
    }
}

impl<B: IoBufMut> EpollOp for RecvMsg<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Read))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: the msghdr points at live storage owned by self.
        cvt(unsafe { raw::recvmsg(self.fd, &mut self.msg.hdr, 0) })
    }
}
