//! `sendmsg(2)`: vectored writes and `send_to` on datagram sockets.
//! io_uring `IORING_OP_SENDMSG`; epoll: wait writable, then `sendmsg`.

use std::io;
use std::os::fd::RawFd;

use ringkit_uring::opcode::{self, Entry, Target};

use super::{cvt, raw};
use crate::buf::IoBuf;
use crate::driver::{Dir, EpollOp, OpCode, Source, UringOp};

/// The msghdr and what it points to, boxed so that moving the op moves nothing
/// the kernel reads.
struct Msg {
    hdr: libc::msghdr,
    iovecs: Vec<libc::iovec>,
    addr: Option<socket2::SockAddr>,
}

pub(crate) struct SendMsg<B> {
    fd: RawFd,
    bufs: Vec<B>,
    msg: Box<Msg>,
}

impl<B: IoBuf> SendMsg<B> {
    pub(crate) fn new(fd: RawFd, bufs: Vec<B>, addr: Option<socket2::SockAddr>) -> Self {
        let iovecs = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.stable_ptr() as *mut libc::c_void,
                iov_len: b.bytes_init(),
            })
            .collect();
        let mut msg = Box::new(Msg {
            // SAFETY: msghdr is plain data; all-zero is valid.
            hdr: unsafe { std::mem::zeroed() },
            iovecs,
            addr,
        });
        msg.hdr.msg_iov = msg.iovecs.as_mut_ptr();
        msg.hdr.msg_iovlen = msg.iovecs.len();
        if let Some(a) = &msg.addr {
            msg.hdr.msg_name = a.as_ptr() as *mut libc::c_void;
            msg.hdr.msg_namelen = a.len();
        }
        SendMsg { fd, bufs, msg }
    }
}

impl<B: IoBuf> OpCode for SendMsg<B> {
    type Output = (io::Result<usize>, Vec<B>);

    fn complete(self, res: io::Result<u32>, _from: Source) -> Self::Output {
        (res.map(|n| n as usize), self.bufs)
    }
}

impl<B: IoBuf> UringOp for SendMsg<B> {
    fn uring_entry(&mut self) -> Entry {
        opcode::SendMsg::new(Target::Fd(self.fd), &self.msg.hdr)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build()
    }
}

impl<B: IoBuf> EpollOp for SendMsg<B> {
    fn epoll_ready(&self) -> Option<(RawFd, Dir)> {
        Some((self.fd, Dir::Write))
    }

    fn epoll_attempt(&mut self) -> io::Result<u32> {
        // SAFETY: the msghdr points at live iovecs/buffers owned by self.
        cvt(unsafe { raw::sendmsg(self.fd, &self.msg.hdr, libc::MSG_NOSIGNAL) })
    }
}
