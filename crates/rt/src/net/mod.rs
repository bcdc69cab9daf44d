//! Networking: TCP, UDP and Unix-domain sockets on the runtime.
//!
//! Every socket is non-blocking and close-on-exec, on both backends. I/O
//! calls take owned buffers and give them back with the result
//! (see [`crate::buf`]). Sockets are `!Send`: they belong to the runtime
//! thread that made them.
//!
//! ```
//! use ringkit::net::{TcpListener, TcpStream, UdpSocket};
//! ringkit::run(async {
//!     // TCP: a listener, a client, one round trip.
//!     let l = TcpListener::bind("127.0.0.1:0")?;
//!     let c = TcpStream::connect(l.local_addr()?).await?;
//!     let (s, _peer) = l.accept().await?;
//!     c.write_all(&b"ping"[..]).await.0?;
//!     let (n, buf) = s.read(Vec::with_capacity(64)).await;
//!     assert_eq!(&buf[..n?], b"ping");
//!     // UDP: a datagram and its sender.
//!     let a = UdpSocket::bind("127.0.0.1:0")?;
//!     let b = UdpSocket::bind("127.0.0.1:0")?;
//!     b.send_to(&b"hi"[..], a.local_addr()?).await.0?;
//!     let (got, buf) = a.recv_from(Vec::with_capacity(64)).await;
//!     let (n, from) = got?;
//!     assert_eq!((&buf[..n], from), (&b"hi"[..], b.local_addr()?));
//!     Ok::<_, std::io::Error>(())
//! })??;
//! # Ok::<(), std::io::Error>(())
//! ```

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

/// Whether [`TcpStream::read_pooled`] hands out received bytes without a
/// copy on this thread's runtime: they land in a buffer ring the kernel
/// fills, and the reader gets that buffer. Where it is `false`, a pooled
/// read copies out of the thread's scratch buffer, and a read into the
/// caller's own buffer costs the same copy with no allocation, so a
/// protocol that keeps a buffer per connection should read into it.
/// `false` outside a runtime. Ask this, not which backend runs.
pub fn pooled_reads_are_copy_free() -> bool {
    crate::driver::current::try_driver(|d, _| d.pooled_reads_are_copy_free()).unwrap_or(false)
}

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
    crate::driver::current::count_syscalls(1);
    // SAFETY: `fd` is open for the duration; ManuallyDrop keeps it from being closed.
    let s = std::mem::ManuallyDrop::new(unsafe { socket2::Socket::from_raw_fd(fd) });
    f(&s)
}
