//! A connection's transport: a TCP stream in the clear, or TLS over it
//! (`ServerConfig`'s `tls`, feature `tls`).
//!
//! TLS goes through `ringkit_tls::TlsIo`, the one adapter ringkit-http and
//! ringkit-hyper share: rustls over the stream's `PollIo`, so ciphertext
//! arrives through the same pooled reads (the buffer ring on io_uring) and
//! records leave as owned sends. A write of any size is encrypted and sent
//! in turns as rustls's buffer allows. No kTLS here, so a TLS connection
//! cannot send file bodies with `sendfile`: they are read and sent through
//! the ring ([`Transport::zero_copy`] says false). The adapter is borrowed
//! only inside each poll, never across an await; a read or write dropped
//! midway (a timeout, a shutdown) leaves the TLS session unusable, and the
//! connection is closed right after anyway.

#[cfg(feature = "tls")]
use std::cell::RefCell;
use std::io;

use ringkit::buf::IoBuf;
use ringkit::net::{RecvBuf, TcpStream};

use crate::TlsConfig;

/// The stream a connection reads and writes.
#[derive(Debug)]
pub(crate) enum Transport {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<RefCell<ringkit_tls::TlsIo>>),
}

/// Plaintext a TLS read asks for at most.
#[cfg(feature = "tls")]
const TLS_READ: usize = 16 * 1024;

impl Transport {
    /// `stream`, through TLS if `tls` is given.
    pub(crate) fn new(stream: TcpStream, tls: Option<&TlsConfig>) -> io::Result<Transport> {
        Ok(match tls {
            None => Transport::Plain(stream),
            #[cfg(not(feature = "tls"))]
            Some(cfg) => match *cfg {},
            #[cfg(feature = "tls")]
            Some(cfg) => Transport::Tls(Box::new(RefCell::new(ringkit_tls::TlsIo::new(
                stream.into_poll_io(),
                cfg.clone(),
            )?))),
        })
    }

    /// Whether file bodies may leave by `sendfile`/`splice` (not under TLS).
    pub(crate) fn zero_copy(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }

    /// While a TLS handshake is under way, when its first byte arrived.
    pub(crate) fn handshake_since(&self) -> Option<std::time::Instant> {
        match self {
            Transport::Plain(_) => None,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => t.borrow().handshake_since(),
        }
    }

    /// Ciphertext received for a TLS handshake not yet complete (what
    /// rustls may hold of it); 0 in the clear.
    pub(crate) fn tls_handshake_bytes(&self) -> usize {
        match self {
            Transport::Plain(_) => 0,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => t.borrow().handshake_bytes(),
        }
    }

    /// Make the close (when this is dropped) a reset that discards unsent
    /// bytes: for a peer that has stopped reading, which would never see a
    /// FIN queued behind them.
    pub(crate) fn reset_on_close(&self) -> io::Result<()> {
        let zero = Some(std::time::Duration::ZERO);
        match self {
            Transport::Plain(s) => s.set_linger(zero),
            #[cfg(feature = "tls")]
            Transport::Tls(t) => t.borrow().get_ref().set_linger(zero),
        }
    }

    /// The TCP stream, for the zero-copy paths (`None` under TLS, where
    /// [`zero_copy`](Self::zero_copy) is false).
    pub(crate) fn plain(&self) -> Option<&TcpStream> {
        match self {
            Transport::Plain(s) => Some(s),
            #[cfg(feature = "tls")]
            Transport::Tls(_) => None,
        }
    }

    /// The next chunk of received (plaintext) data; empty at end of stream.
    pub(crate) async fn read_pooled(&self) -> io::Result<RecvBuf> {
        match self {
            Transport::Plain(s) => s.read_pooled().await,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => {
                let (r, buf) = tls_read(t, Vec::with_capacity(TLS_READ)).await;
                r.map(|_| RecvBuf::heap(buf))
            }
        }
    }

    /// Read into `buf` (replacing its contents); `Ok(0)`: end of stream.
    pub(crate) async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        match self {
            Transport::Plain(s) => s.read(buf).await,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => tls_read(t, buf).await,
        }
    }

    /// Write all of `buf`.
    pub(crate) async fn write_all<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        match self {
            Transport::Plain(s) => s.write_all(buf).await,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => {
                let r = tls_write_all(t, buf.init_slice()).await;
                (r, buf)
            }
        }
    }

    /// Write all of `buf`, more following at once (`MSG_MORE` in the clear;
    /// under TLS an ordinary write).
    pub(crate) async fn write_all_more(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        match self {
            Transport::Plain(s) => s.write_all_more(buf).await,
            #[cfg(feature = "tls")]
            Transport::Tls(_) => self.write_all(buf).await,
        }
    }

    /// Shut down writing (under TLS: close_notify, then the records, then
    /// the TCP shutdown).
    pub(crate) async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.shutdown(how).await,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => std::future::poll_fn(|cx| t.borrow_mut().poll_shutdown(cx)).await,
        }
    }
}

/// Read plaintext into `buf` (from its start, up to its capacity).
#[cfg(feature = "tls")]
async fn tls_read(
    t: &RefCell<ringkit_tls::TlsIo>,
    mut buf: Vec<u8>,
) -> (io::Result<usize>, Vec<u8>) {
    buf.clear();
    if buf.capacity() == 0 {
        buf.reserve(TLS_READ);
    }
    let r = std::future::poll_fn(|cx| t.borrow_mut().poll_read(cx, buf.spare_capacity_mut())).await;
    if let Ok(n) = r {
        // SAFETY: `poll_read` initialised the first `n` bytes of the spare
        // capacity (and never reports more than it was given).
        unsafe { buf.set_len(n) };
    }
    (r, buf)
}

/// Encrypt and send all of `data`, then flush.
#[cfg(feature = "tls")]
async fn tls_write_all(t: &RefCell<ringkit_tls::TlsIo>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let n = std::future::poll_fn(|cx| t.borrow_mut().poll_write(cx, data)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        data = &data[n..];
    }
    std::future::poll_fn(|cx| t.borrow_mut().poll_flush(cx)).await
}
