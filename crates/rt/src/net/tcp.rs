//! TCP listener and stream.

use std::future::{poll_fn, Future};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use super::stream::StreamCore;
use super::{into_raw, socket, with_sock};
use crate::buf::{IoBuf, IoBufMut, RecvBuf};
use crate::driver::op::accept_multi::AcceptMulti;
use crate::driver::op::connect::Connect;
use crate::driver::Op;

fn resolve(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "address resolved to nothing"))
}

/// A TCP listening socket.
///
/// On io_uring, `accept` arms one multishot ACCEPT that keeps posting a
/// completion per connection; a transient error (`EMFILE`, `ENFILE`,
/// `ENOBUFS`, `ENOMEM`) ends it, is returned by that `accept` call, and the
/// next call re-arms it: the listener itself is never lost.
#[derive(Debug)]
pub struct TcpListener {
    fd: RawFd,
    local: SocketAddr,
    accept: AcceptMulti,
}

impl TcpListener {
    /// Bind and listen (backlog 1024, `SO_REUSEADDR`).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        Self::bind_with(resolve(addr)?, false)
    }

    /// Bind with `SO_REUSEPORT` too, so each thread of a thread-per-core
    /// server can have its own listener on the same port.
    pub fn bind_reuseport(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        Self::bind_with(resolve(addr)?, true)
    }

    fn bind_with(addr: SocketAddr, reuseport: bool) -> io::Result<TcpListener> {
        // Every error names the address (`AddrInUse` alone does not say which).
        let named =
            |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"));
        let s = socket(socket2::Domain::for_address(addr), socket2::Type::STREAM).map_err(named)?;
        s.set_reuse_address(true).map_err(named)?;
        if reuseport {
            s.set_reuse_port(true).map_err(named)?;
        }
        s.bind(&addr.into()).map_err(named)?;
        s.listen(1024).map_err(named)?;
        let local = s
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("listener has no IP address"))?;
        let fd = into_raw(s);
        Ok(TcpListener {
            fd,
            local,
            accept: AcceptMulti::new(fd),
        })
    }

    /// Wrap a std listener (it is switched to non-blocking).
    pub fn from_std(l: std::net::TcpListener) -> io::Result<TcpListener> {
        l.set_nonblocking(true)?;
        let local = l.local_addr()?;
        let fd = l.into_raw_fd();
        Ok(TcpListener {
            fd,
            local,
            accept: AcceptMulti::new(fd),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// A stream of incoming connections: `while let Some(s) = incoming.next().await`.
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// Accept a connection and its peer address.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let s = self.accept_stream().await?;
        let peer = s.peer_addr()?;
        Ok((s, peer))
    }

    /// Accept a connection without asking for the peer address (saves a
    /// `getpeername` on io_uring's multishot path).
    pub async fn accept_stream(&self) -> io::Result<TcpStream> {
        Ok(TcpStream::from_fd(self.accept.next().await?))
    }

    /// A server's accept: the next connection, or `None` once `stop`
    /// completes (checked first). An accept error (`EMFILE`, `ENFILE`,
    /// `ENOBUFS`...) is logged and retried after a pause that doubles from
    /// 1 ms to 100 ms, so the server keeps serving through fd exhaustion
    /// without spinning; the pause ends early if `stop` completes.
    pub async fn accept_until<F: Future + ?Sized>(
        &self,
        mut stop: Pin<&mut F>,
    ) -> Option<TcpStream> {
        let mut backoff = Duration::from_millis(1);
        loop {
            let next = {
                let mut accept = std::pin::pin!(self.accept_stream());
                poll_fn(|cx| {
                    if stop.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(None);
                    }
                    accept.as_mut().poll(cx).map(Some)
                })
                .await?
            };
            match next {
                Ok(s) => return Some(s),
                Err(e) => {
                    tracing::warn!("ringkit: accept: {e}; retrying in {backoff:?}");
                    let mut pause = std::pin::pin!(crate::time::sleep(backoff));
                    let stopped = poll_fn(|cx| {
                        if stop.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(true);
                        }
                        pause.as_mut().poll(cx).map(|()| false)
                    })
                    .await;
                    if stopped {
                        return None;
                    }
                    backoff = (backoff * 2).min(Duration::from_millis(100));
                }
            }
        }
    }
}

/// Incoming connections of a [`TcpListener`]; see [`TcpListener::incoming`].
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Incoming<'_> {
    /// The next connection (never `None`; errors such as `EMFILE` are
    /// returned and the next call keeps accepting).
    pub async fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept_stream().await)
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let fd = self.fd;
        // Stop listening first: the kernel refuses new connections from
        // here on and the address can be bound again at once. On io_uring
        // an armed multishot accept holds a reference to the file, and with
        // deferred task work that reference (and with it the listening
        // socket) outlived the close by a few milliseconds: a client got a
        // connection nobody would accept, and a restart got `AddrInUse`.
        // SAFETY: shutdown(2) on the listening socket we own.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        // Before the close: an armed multishot holds the file open.
        self.accept.cancel();
        let done = crate::driver::current::try_driver(|d, m| d.close_now(fd, m));
        if done.is_none() {
            // SAFETY: we own fd.
            unsafe { libc::close(fd) };
        }
    }
}

/// A TCP connection.
#[derive(Debug)]
pub struct TcpStream {
    core: Rc<StreamCore>,
}

impl TcpStream {
    pub(crate) fn from_fd(fd: RawFd) -> TcpStream {
        TcpStream {
            core: Rc::new(StreamCore::new(fd)),
        }
    }

    /// Connect to `addr`.
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let addr = resolve(addr)?;
        let s = socket(socket2::Domain::for_address(addr), socket2::Type::STREAM)?;
        let stream = TcpStream::from_fd(into_raw(s));
        Op::new(Connect::new(stream.core.fd, addr.into())).await?;
        Ok(stream)
    }

    /// Connect to `addr` from the local address `local` (port 0: any):
    /// e.g. a node of a test cluster on its own loopback address, so that
    /// firewall rules can tell its traffic from its neighbours'.
    pub async fn connect_from(
        local: SocketAddr,
        addr: impl ToSocketAddrs,
    ) -> io::Result<TcpStream> {
        let addr = resolve(addr)?;
        let s = socket(socket2::Domain::for_address(addr), socket2::Type::STREAM)?;
        s.bind(&local.into())?;
        let stream = TcpStream::from_fd(into_raw(s));
        Op::new(Connect::new(stream.core.fd, addr.into())).await?;
        Ok(stream)
    }

    /// Wrap a connected std stream (it is switched to non-blocking).
    pub fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        s.set_nonblocking(true)?;
        Ok(TcpStream::from_fd(s.into_raw_fd()))
    }

    /// Read into `buf`, from its start, up to its capacity: `Ok(n)` leaves
    /// exactly the `n` bytes read in it (a `Vec`'s length becomes `n`), so
    /// the buffer can be written back as is. `Ok(0)` is end of stream; a
    /// buffer with no capacity is an `InvalidInput` error.
    ///
    /// ```no_run
    /// # async fn echo(s: ringkit::net::TcpStream) -> std::io::Result<()> {
    /// let mut buf = Vec::with_capacity(4096);
    /// loop {
    ///     let (n, b) = s.read(buf).await;
    ///     if n? == 0 {
    ///         return Ok(()); // the peer closed
    ///     }
    ///     let (r, b) = s.write_all(b).await; // exactly the bytes read
    ///     r?;
    ///     buf = b;
    /// }
    /// # }
    /// ```
    pub fn read<B: IoBufMut>(&self, buf: B) -> impl Future<Output = (io::Result<usize>, B)> + '_ {
        self.core.read(buf)
    }

    /// Fill `buf` from its start to its capacity (`bytes_total`), reading as
    /// often as it takes: a `Vec` comes back with length = capacity. A
    /// `Vec`'s capacity can be more than was asked for (`reserve` and
    /// `with_capacity` may round up, a reused buffer keeps its largest):
    /// to read exactly `n` bytes, pass `buf.slice(..n)` (see
    /// [`crate::buf::Slice`]). The peer closing first is `UnexpectedEof`,
    /// with the bytes that did arrive in the buffer returned.
    ///
    /// Not cancel-safe: dropping the future loses the bytes it has read
    /// (with the buffer), as with tokio's `read_exact`.
    pub fn read_exact<B: IoBufMut>(
        &self,
        buf: B,
    ) -> impl Future<Output = (io::Result<()>, B)> + '_ {
        self.core.read_exact(buf)
    }

    /// Read with a deadline. On timeout the result is `TimedOut` and no byte
    /// is lost: on io_uring the timeout is linked to the receive, so if data
    /// won the race it is returned here; otherwise nothing was read.
    pub fn read_timeout<B: IoBufMut>(
        &self,
        buf: B,
        dur: Duration,
    ) -> impl Future<Output = (io::Result<usize>, B)> + '_ {
        self.core.read_timeout(buf, dur)
    }

    /// The next chunk of received data in a pooled buffer (io_uring: a
    /// provided-buffer ring slot from a multishot receive). Empty means EOF.
    pub fn read_pooled(&self) -> impl Future<Output = io::Result<RecvBuf>> + '_ {
        self.core.read_pooled()
    }

    /// Write some of `buf`; returns how much.
    pub fn write<B: IoBuf>(&self, buf: B) -> impl Future<Output = (io::Result<usize>, B)> + '_ {
        self.core.write(buf)
    }

    /// Write all of `buf`.
    pub fn write_all<B: IoBuf>(&self, buf: B) -> impl Future<Output = (io::Result<()>, B)> + '_ {
        self.core.write_all(buf)
    }

    /// Write all of `buf` with `MSG_MORE`: more data follows at once, so
    /// the kernel holds a last partial segment to fill it (a response head
    /// before a [`TcpStream::send_file`] body, like `TCP_CORK` without the
    /// two `setsockopt` calls). The next write without it pushes.
    pub fn write_all_more<B: IoBuf>(
        &self,
        buf: B,
    ) -> impl Future<Output = (io::Result<()>, B)> + '_ {
        self.core.write_all_flags(buf, libc::MSG_MORE)
    }

    /// Send up to `len` bytes of `file` from `offset` without copying them
    /// through user memory, with `sendfile(2)`: one syscall, made in place
    /// on both backends (io_uring has no sendfile opcode); while the socket
    /// is full the wait is a ring poll (io_uring) or the readiness wait
    /// (epoll). Returns the bytes sent, maybe fewer than `len`; 0 means
    /// `file` ends before `offset`.
    pub async fn send_file<F: AsRawFd>(
        &self,
        file: &F,
        offset: u64,
        len: usize,
    ) -> io::Result<usize> {
        self.core.send_file(file, offset, len).await
    }

    /// Like [`TcpStream::send_file`], through a pipe of this stream's
    /// instead: file -> pipe -> socket (`splice(2)`, tried in place first;
    /// `IORING_OP_SPLICE` on io_uring when it would block), at most one
    /// pipe-full (up to 1 MiB) per call. Two syscalls a pipe-full where
    /// `send_file` makes one; kept to measure against it. The file is kept
    /// alive until the kernel is done with it, even if this future is
    /// dropped.
    pub fn splice_file<F: AsRawFd + 'static>(
        &self,
        file: &Rc<F>,
        offset: u64,
        len: usize,
    ) -> impl Future<Output = io::Result<usize>> + '_ {
        let file = file.clone();
        async move { self.core.splice_file(&file, offset, len).await }
    }

    /// The next pooled chunk if it is already here, without waiting: the
    /// rest of a buffer a `read` took part of, or the next buffer of a
    /// receive bundle ([`crate::Builder::recv_bundle`]). `None`: the next
    /// bytes must be awaited with [`read_pooled`](Self::read_pooled). With
    /// [`write_all_pooled`](Self::write_all_pooled), an echo or proxy sends
    /// everything a bundle brought in one operation.
    pub fn take_pooled(&self) -> Option<RecvBuf> {
        self.core.take_pooled()
    }

    /// Send all of `bufs` in order, continuing after a partial send. On
    /// io_uring one CQE per batch: one vectored `SENDMSG` (with feature
    /// `experiments`, `Builder::send_batch` can ask for a chain of linked
    /// sends or a send bundle instead); on epoll one `sendmsg`.
    pub fn write_all_pooled(
        &self,
        bufs: Vec<RecvBuf>,
    ) -> impl Future<Output = io::Result<()>> + '_ {
        self.core.write_all_pooled(bufs)
    }

    /// Vectored write (`sendmsg`).
    pub fn writev<B: IoBuf>(
        &self,
        bufs: Vec<B>,
    ) -> impl Future<Output = (io::Result<usize>, Vec<B>)> + '_ {
        self.core.writev(bufs)
    }

    /// Poll-based reads and writes over this stream, for readiness-style
    /// traits (hyper, tokio-io): see [`crate::net::PollIo`].
    pub fn into_poll_io(self) -> crate::net::PollIo {
        crate::net::PollIo::new(self.core.clone())
    }

    /// Shut down reading, writing or both.
    pub fn shutdown(&self, how: std::net::Shutdown) -> impl Future<Output = io::Result<()>> + '_ {
        self.core.shutdown(how)
    }

    /// io_uring: the slot of the registered file table this stream's
    /// operations address its socket by, once it has been promoted (see
    /// [`crate::Builder::fixed_files`]); `None` before, on epoll, or when
    /// the table is off or full.
    pub fn registered_file(&self) -> Option<u32> {
        self.core.registered_file()
    }

    /// Bound every write on this stream (`write`, `write_all`, file
    /// sends, `PollIo` flushes) by the time it may wait **without moving
    /// a byte**: a write that makes no progress for `limit` fails with
    /// `ErrorKind::TimedOut` (its buffer comes back). Progress restarts the
    /// clock, so a slow but steady reader is never cut off, while one that
    /// stops reading is (nginx's `send_timeout`). `None` or zero: no limit
    /// (the default). Shared by the halves of `into_split`.
    ///
    /// ```no_run
    /// # async fn f(s: ringkit::net::TcpStream) -> std::io::Result<()> {
    /// use std::time::Duration;
    /// s.set_write_timeout(Some(Duration::from_secs(60)));
    /// let (r, _buf) = s.write_all(vec![0u8; 1 << 20]).await;
    /// if let Err(e) = r {
    ///     assert_eq!(e.kind(), std::io::ErrorKind::TimedOut); // the peer stopped reading
    /// }
    /// # Ok(()) }
    /// ```
    pub fn set_write_timeout(&self, limit: Option<Duration>) {
        self.core.set_write_timeout(limit);
    }

    /// The limit set by [`set_write_timeout`](Self::set_write_timeout).
    pub fn write_timeout(&self) -> Option<Duration> {
        self.core.write_timeout()
    }

    /// `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        with_sock(self.core.fd, |s| s.set_nodelay(on))
    }

    /// `TCP_CORK`: while on, partial segments are held back (up to 200 ms)
    /// so a head and a large body leave in full segments, as nginx's
    /// `tcp_nopush` does for `sendfile`; turning it off sends what is held.
    pub fn set_cork(&self, on: bool) -> io::Result<()> {
        with_sock(self.core.fd, |s| s.set_cork(on))
    }

    /// Detect a peer that vanished (powered off, unplugged, every packet
    /// dropped) within about `limit`, while a live idle peer stays: TCP
    /// keepalive probes start after `limit / 2` of silence and go every
    /// `limit / 8`, and `TCP_USER_TIMEOUT` fails the connection once sent
    /// data or probes stay unacknowledged for `limit`. The pending read or
    /// write then fails (`TimedOut`), so the connection is freed. `None`
    /// turns both off (the kernel's defaults: a silent peer is noticed only
    /// after minutes of retransmissions, or never if nothing is sent).
    pub fn set_dead_peer_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        with_sock(self.core.fd, |s| match limit {
            Some(d) if !d.is_zero() => {
                // The kernel takes keepalive times of 1 to 32 767 s, and a
                // user timeout of 0 to i32::MAX ms, where 0 means none.
                let secs =
                    |x: Duration| x.clamp(Duration::from_secs(1), Duration::from_secs(32_767));
                let ka = socket2::TcpKeepalive::new()
                    .with_time(secs(d / 2))
                    .with_interval(secs(d / 8))
                    .with_retries(4);
                let user = d.clamp(
                    Duration::from_millis(1),
                    Duration::from_millis(i32::MAX as u64),
                );
                s.set_tcp_user_timeout(Some(user))?;
                s.set_tcp_keepalive(&ka)
            }
            _ => {
                s.set_keepalive(false)?;
                s.set_tcp_user_timeout(None)
            }
        })
    }

    /// `SO_LINGER` (`Some(0)` makes close send a RST).
    pub fn set_linger(&self, d: Option<Duration>) -> io::Result<()> {
        with_sock(self.core.fd, |s| s.set_linger(d))
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_sock(self.core.fd, |s| s.peer_addr())?
            .as_socket()
            .ok_or_else(|| io::Error::other("peer has no IP address"))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_sock(self.core.fd, |s| s.local_addr())?
            .as_socket()
            .ok_or_else(|| io::Error::other("socket has no IP address"))
    }

    /// Split into a read half and a write half that can live in different
    /// tasks; the socket closes when both are dropped.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (
            OwnedReadHalf {
                core: self.core.clone(),
            },
            OwnedWriteHalf { core: self.core },
        )
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.core.fd
    }
}

/// The reading half of a [`TcpStream`].
#[derive(Debug)]
pub struct OwnedReadHalf {
    core: Rc<StreamCore>,
}

impl OwnedReadHalf {
    /// See [`TcpStream::read`].
    pub fn read<B: IoBufMut>(&self, buf: B) -> impl Future<Output = (io::Result<usize>, B)> + '_ {
        self.core.read(buf)
    }

    /// See [`TcpStream::read_pooled`].
    pub fn read_pooled(&self) -> impl Future<Output = io::Result<RecvBuf>> + '_ {
        self.core.read_pooled()
    }
}

/// The writing half of a [`TcpStream`].
#[derive(Debug)]
pub struct OwnedWriteHalf {
    core: Rc<StreamCore>,
}

impl OwnedWriteHalf {
    /// See [`TcpStream::write`].
    pub fn write<B: IoBuf>(&self, buf: B) -> impl Future<Output = (io::Result<usize>, B)> + '_ {
        self.core.write(buf)
    }

    /// See [`TcpStream::write_all`].
    pub fn write_all<B: IoBuf>(&self, buf: B) -> impl Future<Output = (io::Result<()>, B)> + '_ {
        self.core.write_all(buf)
    }

    /// Shut down the write side (the peer reads EOF).
    pub fn shutdown(&self) -> impl Future<Output = io::Result<()>> + '_ {
        self.core.shutdown(std::net::Shutdown::Write)
    }
}
