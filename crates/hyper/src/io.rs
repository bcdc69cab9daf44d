//! [`HyperIo`]: hyper's I/O traits over a ringkit stream.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use ringkit::net::{PollIo, TcpStream, UnixStream};

#[cfg(feature = "tls")]
use crate::tls::TlsIo;

/// A ringkit stream as hyper I/O (see [`ringkit::net::PollIo`]), in the
/// clear or through TLS (`tls::TlsIo`, feature `tls`).
#[derive(Debug)]
pub struct HyperIo(Inner);

#[derive(Debug)]
enum Inner {
    Plain(PollIo),
    #[cfg(feature = "tls")]
    Tls(Box<TlsIo>),
}

impl HyperIo {
    /// Wrap poll-based I/O.
    pub fn new(io: PollIo) -> HyperIo {
        HyperIo(Inner::Plain(io))
    }

    /// Wrap a TLS connection.
    #[cfg(feature = "tls")]
    pub fn tls(io: TlsIo) -> HyperIo {
        HyperIo(Inner::Tls(Box::new(io)))
    }
}

impl From<TcpStream> for HyperIo {
    fn from(s: TcpStream) -> HyperIo {
        HyperIo::new(s.into_poll_io())
    }
}

impl From<UnixStream> for HyperIo {
    fn from(s: UnixStream) -> HyperIo {
        HyperIo::new(s.into_poll_io())
    }
}

impl HyperIo {
    /// Whether a TLS connection has received bytes that gave no plaintext
    /// yet (a handshake under way); false in the clear.
    pub(crate) fn tls_received(&self) -> bool {
        match &self.0 {
            Inner::Plain(_) => false,
            #[cfg(feature = "tls")]
            Inner::Tls(io) => io.has_received(),
        }
    }

    /// Ciphertext a TLS connection has received for a handshake not yet
    /// complete (what rustls may hold of it); 0 in the clear.
    pub(crate) fn tls_handshake_bytes(&self) -> usize {
        match &self.0 {
            Inner::Plain(_) => 0,
            #[cfg(feature = "tls")]
            Inner::Tls(io) => io.handshake_bytes(),
        }
    }

    /// Make the close (when this is dropped) a reset that discards unsent
    /// bytes: for a peer that has stopped reading, which would never see a
    /// FIN queued behind them.
    pub(crate) fn reset_on_close(&self) -> io::Result<()> {
        let zero = Some(std::time::Duration::ZERO);
        match &self.0 {
            Inner::Plain(io) => io.set_linger(zero),
            #[cfg(feature = "tls")]
            Inner::Tls(io) => io.get_ref().set_linger(zero),
        }
    }

    /// Read into `dst`; the count of bytes read (0 at end of stream).
    pub(crate) fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        dst: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.0 {
            Inner::Plain(io) => io.poll_read(cx, dst),
            #[cfg(feature = "tls")]
            Inner::Tls(io) => io.poll_read(cx, dst),
        }
    }
}

impl Read for HyperIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `poll_read_into` only writes initialised bytes into the
        // slice, never de-initialises any, and returns how many it wrote.
        let n = ready!(self.get_mut().poll_read_into(cx, unsafe { buf.as_mut() }))?;
        // SAFETY: the first `n` bytes were just written.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl Write for HyperIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            Inner::Plain(io) => io.poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Inner::Tls(io) => io.poll_write(cx, buf),
        }
    }

    /// Vectored: every slice is copied into the stream's write buffer in
    /// one call. This matters for memory, not only copies: without it hyper
    /// flattens each response into a buffer of its own that keeps the
    /// capacity of the largest response for the life of the connection
    /// (1 MiB per idle keep-alive connection after one 1 MiB response).
    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut total = 0;
        for b in bufs.iter().filter(|b| !b.is_empty()) {
            match self.as_mut().poll_write(cx, b) {
                Poll::Ready(Ok(n)) => {
                    total += n;
                    if n < b.len() {
                        break;
                    }
                }
                Poll::Ready(Err(e)) if total == 0 => return Poll::Ready(Err(e)),
                Poll::Pending if total == 0 => return Poll::Pending,
                // Report what was taken; the error or the wait comes again.
                Poll::Ready(Err(_)) | Poll::Pending => break,
            }
        }
        Poll::Ready(Ok(total))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            Inner::Plain(io) => io.poll_flush(cx),
            #[cfg(feature = "tls")]
            Inner::Tls(io) => io.poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            Inner::Plain(io) => io.poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Inner::Tls(io) => io.poll_shutdown(cx),
        }
    }
}
