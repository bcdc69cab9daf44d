//! A connection's transport: a TCP stream in the clear, or TLS over it
//! (rustls through `ringkit-tls`; `ServerConfig`'s `tls`).
//!
//! TLS is completion-based like the rest: ciphertext arrives through the
//! stream's pooled reads (the buffer ring on io_uring), rustls decrypts it
//! in place in memory, and the records it produces leave as one owned send
//! per write. No kTLS here, so a TLS connection cannot send file bodies
//! with `sendfile`: they are read and sent through the ring ([`Transport::
//! zero_copy`] says false). rustls is never borrowed across an await; a
//! read or write dropped midway (a timeout, a shutdown) leaves the TLS
//! session unusable, and the connection is closed right after anyway.

#[cfg(feature = "tls")]
use std::cell::RefCell;
use std::io;
#[cfg(feature = "tls")]
use std::io::{Read, Write};

use ringkit::buf::IoBuf;
use ringkit::net::{RecvBuf, TcpStream};
#[cfg(feature = "tls")]
use ringkit_tls::rustls::ServerConnection;

use crate::TlsConfig;

/// The stream a connection reads and writes.
#[derive(Debug)]
pub(crate) enum Transport {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream>),
}

/// TLS over a TCP stream.
#[cfg(feature = "tls")]
#[derive(Debug)]
pub(crate) struct TlsStream {
    stream: TcpStream,
    conn: RefCell<ServerConnection>,
}

impl Transport {
    /// `stream`, through TLS if `tls` is given.
    pub(crate) fn new(stream: TcpStream, tls: Option<&TlsConfig>) -> io::Result<Transport> {
        Ok(match tls {
            None => Transport::Plain(stream),
            #[cfg(not(feature = "tls"))]
            Some(cfg) => match *cfg {},
            #[cfg(feature = "tls")]
            Some(cfg) => Transport::Tls(Box::new(TlsStream {
                stream,
                conn: RefCell::new(ServerConnection::new(cfg.clone()).map_err(io::Error::other)?),
            })),
        })
    }

    /// Whether file bodies may leave by `sendfile`/`splice` (not under TLS).
    pub(crate) fn zero_copy(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }

    /// The TCP stream underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => &t.stream,
        }
    }

    /// The next chunk of received (plaintext) data; empty at end of stream.
    pub(crate) async fn read_pooled(&self) -> io::Result<RecvBuf> {
        match self {
            Transport::Plain(s) => s.read_pooled().await,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => t.read().await.map(RecvBuf::heap),
        }
    }

    /// Read into `buf` (replacing its contents); `Ok(0)`: end of stream.
    #[cfg_attr(not(feature = "tls"), allow(unused_mut))]
    pub(crate) async fn read(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        match self {
            Transport::Plain(s) => s.read(buf).await,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => match t.read().await {
                Ok(v) => {
                    buf.clear();
                    buf.extend_from_slice(&v);
                    (Ok(v.len()), buf)
                }
                Err(e) => (Err(e), buf),
            },
        }
    }

    /// Write all of `buf`.
    pub(crate) async fn write_all<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        match self {
            Transport::Plain(s) => s.write_all(buf).await,
            #[cfg(feature = "tls")]
            Transport::Tls(t) => {
                let r = t.write(buf.init_slice()).await;
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

    /// Shut down (under TLS: close_notify first).
    pub(crate) async fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        #[cfg(feature = "tls")]
        if let Transport::Tls(t) = self {
            t.conn.borrow_mut().send_close_notify();
            t.send_records().await?;
        }
        self.tcp().shutdown(how).await
    }
}

#[cfg(feature = "tls")]
impl TlsStream {
    /// Move every record rustls has queued into one buffer.
    fn take_records(&self) -> io::Result<Vec<u8>> {
        let mut c = self.conn.borrow_mut();
        let mut out = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut out)?;
        }
        Ok(out)
    }

    /// Send every record rustls has queued.
    async fn send_records(&self) -> io::Result<()> {
        let out = self.take_records()?;
        if !out.is_empty() {
            self.stream.write_all(out).await.0?;
        }
        Ok(())
    }

    /// Encrypt `data` and send it, however long it is. rustls takes
    /// plaintext only while its outgoing buffer has room (64 KiB by
    /// default) and says `Ok(0)` when full: so encrypt what it takes, send
    /// those records (the send's completion is the backpressure), repeat.
    async fn write(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.conn.borrow_mut().writer().write(data)?;
            if n == 0 && !self.conn.borrow().wants_write() {
                // Nothing taken and nothing to send: rustls will never
                // take more (it refuses plaintext, e.g. after close_notify).
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "TLS session refuses more data",
                ));
            }
            data = &data[n..];
            self.send_records().await?;
        }
        self.send_records().await
    }

    /// Plaintext rustls has decrypted, appended to `out`. `Ok(true)`: the
    /// peer sent close_notify.
    fn take_plaintext(&self, out: &mut Vec<u8>) -> io::Result<bool> {
        let mut c = self.conn.borrow_mut();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match c.reader().read(&mut chunk) {
                Ok(0) => return Ok(true),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }

    /// The next plaintext; empty at the end of the stream. Runs the
    /// handshake as needed.
    async fn read(&self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            if self.take_plaintext(&mut out)? || !out.is_empty() {
                return Ok(out);
            }
            // Handshake messages (or alerts) to send before waiting.
            self.send_records().await?;
            let rb = self.stream.read_pooled().await?;
            if rb.is_empty() {
                if self.conn.borrow().is_handshaking() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "TLS handshake ended early",
                    ));
                }
                // Closed without close_notify: end of stream, as most
                // servers treat it.
                return Ok(out);
            }
            let mut input: &[u8] = &rb;
            while !input.is_empty() {
                let processed = {
                    let mut c = self.conn.borrow_mut();
                    c.read_tls(&mut input)
                        .and_then(|_| c.process_new_packets().map_err(io::Error::other))
                };
                if let Err(e) = processed {
                    // Tell the peer why (the alert rustls queued), then fail.
                    let _ = self.send_records().await;
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
                // Keep rustls's plaintext buffer from filling while a large
                // chunk is fed.
                self.take_plaintext(&mut out)?;
            }
        }
    }
}
