//! Networking: TCP, UDP and Unix-domain sockets on the runtime.
//!
//! Every socket is non-blocking and close-on-exec, on both backends. I/O
//! calls take owned buffers and give them back with the result
//! (see [`crate::buf`]). Sockets are `!Send`: they belong to the runtime
//! thread that made them.

mod poll_io;
#[cfg(feature = "tokio")]
mod poll_io_tokio;
mod stream;
mod tcp;
mod udp;
mod unix;

pub use crate::buf::RecvBuf;
pub use poll_io::PollIo;
pub use tcp::{Incoming, OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixListener, UnixStream};

use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};

/// A new non-blocking, close-on-exec socket.
fn socket(domain: socket2::Domain, ty: socket2::Type) -> io::Result<socket2::Socket> {
    socket2::Socket::new(domain, ty.nonblocking().cloexec(), None)
}

fn into_raw(s: socket2::Socket) -> RawFd {
    s.into_raw_fd()
}

/// Borrow `fd` as a socket2 socket for a synchronous option call.
fn with_sock<R>(fd: RawFd, f: impl FnOnce(&socket2::Socket) -> R) -> R {
    // Every use is one getsockopt/setsockopt/getsockname/getpeername.
    crate::count_syscalls(1);
    // SAFETY: `fd` is open for the duration; ManuallyDrop keeps it from being closed.
    let s = std::mem::ManuallyDrop::new(unsafe { socket2::Socket::from_raw_fd(fd) });
    f(&s)
}
