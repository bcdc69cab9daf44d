//! UDP sockets.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};

use super::{into_raw, socket, with_sock};
use crate::buf::{IoBuf, IoBufMut};
use crate::driver::op::recvmsg::RecvMsg;
use crate::driver::op::sendmsg::SendMsg;
use crate::driver::Op;

/// A UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    fd: RawFd,
}

impl UdpSocket {
    /// Bind to `addr`.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let addr = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address"))?;
        let s = socket(socket2::Domain::for_address(addr), socket2::Type::DGRAM)?;
        s.bind(&addr.into())?;
        Ok(UdpSocket { fd: into_raw(s) })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_sock(self.fd, |s| s.local_addr())?
            .as_socket()
            .ok_or_else(|| io::Error::other("no IP address"))
    }

    /// Send one datagram to `addr`.
    pub async fn send_to<B: IoBuf>(&self, buf: B, addr: SocketAddr) -> (io::Result<usize>, B) {
        let (res, mut bufs) = Op::new(SendMsg::new(self.fd, vec![buf], Some(addr.into()))).await;
        (res, bufs.pop().expect("one buffer"))
    }

    /// Receive one datagram and its sender.
    pub async fn recv_from<B: IoBufMut>(&self, buf: B) -> (io::Result<(usize, SocketAddr)>, B) {
        Op::new(RecvMsg::new(self.fd, buf)).await
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let fd = self.fd;
        if crate::driver::current::try_driver(|d, m| d.close_now(fd, m)).is_none() {
            // SAFETY: we own fd.
            unsafe { libc::close(fd) };
        }
    }
}
