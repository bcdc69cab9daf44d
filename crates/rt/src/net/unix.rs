//! Unix-domain stream sockets.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use super::stream::StreamCore;
use super::{into_raw, socket};
use crate::buf::{IoBuf, IoBufMut};
use crate::driver::op::accept::Accept;
use crate::driver::op::connect::Connect;
use crate::driver::Op;

/// `e`, with the same kind, its message naming what was done to `path`.
fn naming(path: &Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// A listening Unix-domain stream socket.
#[derive(Debug)]
pub struct UnixListener {
    fd: RawFd,
}

impl UnixListener {
    /// Bind to `path` (which must not exist) and listen. An error keeps
    /// its kind and names the path.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let path = path.as_ref();
        let bind = || {
            let s = socket(socket2::Domain::UNIX, socket2::Type::STREAM)?;
            s.bind(&socket2::SockAddr::unix(path)?)?;
            s.listen(1024)?;
            Ok(UnixListener { fd: into_raw(s) })
        };
        bind().map_err(|e| naming(path, "bind", e))
    }

    /// Accept a connection.
    pub async fn accept(&self) -> io::Result<UnixStream> {
        let (fd, _) = Op::new(Accept::new(self.fd)).await?;
        Ok(UnixStream {
            core: Rc::new(StreamCore::new(fd.into_raw_fd())),
        })
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for UnixListener {
    fn drop(&mut self) {
        let fd = self.fd;
        if crate::driver::current::try_driver(|d, m| d.close_now(fd, m)).is_none() {
            // SAFETY: we own fd.
            unsafe { libc::close(fd) };
        }
    }
}

/// A connected Unix-domain stream socket.
#[derive(Debug)]
pub struct UnixStream {
    core: Rc<StreamCore>,
}

impl UnixStream {
    /// Connect to the socket at `path`.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let path = path.as_ref();
        let addr = socket2::SockAddr::unix(path).map_err(|e| naming(path, "connect to", e))?;
        let s = socket(socket2::Domain::UNIX, socket2::Type::STREAM)?;
        let stream = UnixStream {
            core: Rc::new(StreamCore::new(into_raw(s))),
        };
        Op::new(Connect::new(stream.core.fd, addr))
            .await
            .map_err(|e| naming(path, "connect to", e))?;
        Ok(stream)
    }

    /// A connected pair.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = socket2::Socket::pair(
            socket2::Domain::UNIX,
            socket2::Type::STREAM.nonblocking().cloexec(),
            None,
        )?;
        let wrap = |s: socket2::Socket| UnixStream {
            core: Rc::new(StreamCore::new(into_raw(s))),
        };
        Ok((wrap(a), wrap(b)))
    }

    /// Read into `buf`, from its start, up to its capacity: `Ok(n)` leaves
    /// exactly the `n` bytes read in it (a `Vec`'s length becomes `n`), so
    /// the buffer can be written back as is. `Ok(0)` is end of stream; a
    /// buffer with no capacity is an `InvalidInput` error.
    ///
    /// ```no_run
    /// # async fn echo(s: ringkit::net::UnixStream) -> std::io::Result<()> {
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

    /// Fill `buf` from its start to its capacity; see
    /// [`TcpStream::read_exact`](crate::net::TcpStream::read_exact).
    pub fn read_exact<B: IoBufMut>(
        &self,
        buf: B,
    ) -> impl Future<Output = (io::Result<()>, B)> + '_ {
        self.core.read_exact(buf)
    }

    /// Write some of `buf`.
    pub fn write<B: IoBuf>(&self, buf: B) -> impl Future<Output = (io::Result<usize>, B)> + '_ {
        self.core.write(buf)
    }

    /// Write all of `buf`.
    pub fn write_all<B: IoBuf>(&self, buf: B) -> impl Future<Output = (io::Result<()>, B)> + '_ {
        self.core.write_all(buf)
    }

    /// Bound every write on this stream (`write`, `write_all`, file
    /// sends, `PollIo` flushes) by the time it may wait **without moving
    /// a byte**: a write that makes no progress for `limit` fails with
    /// `ErrorKind::TimedOut` (its buffer comes back). Progress restarts the
    /// clock, so a slow but steady reader is never cut off, while one that
    /// stops reading is (nginx's `send_timeout`). `None` or zero: no limit
    /// (the default).
    ///
    /// ```no_run
    /// # async fn f(s: ringkit::net::UnixStream) -> std::io::Result<()> {
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

    /// Poll-based reads and writes over this stream, for readiness-style
    /// traits (hyper, tokio-io): see [`crate::net::PollIo`].
    pub fn into_poll_io(self) -> crate::net::PollIo {
        crate::net::PollIo::new(self.core.clone())
    }

    /// Shut down reading, writing or both.
    pub fn shutdown(&self, how: std::net::Shutdown) -> impl Future<Output = io::Result<()>> + '_ {
        self.core.shutdown(how)
    }
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.core.fd
    }
}
