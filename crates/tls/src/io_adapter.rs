//! [`TlsIo`]: a rustls server connection over [`PollIo`], the one TLS
//! stream adapter of ringkit's servers (ringkit-http and ringkit-hyper).
//!
//! rustls is sans-I/O: ciphertext is read from the stream's pooled receives
//! and handed to rustls, and the records rustls produces are written into
//! the stream's owned-buffer sends, exactly as plaintext would be. The
//! handshake happens inside the first reads and writes. A write takes as
//! much plaintext as rustls buffers (64 KiB by default) and moves records
//! out before taking more, so a write of any size goes through with the
//! stream's backpressure; the stream's write timeout bounds every send.
//!
//! A write waits for the peer only when rustls takes nothing *and* had
//! nothing to send (the handshake's turn); when it had records, moving
//! them out makes room and the write tries again. Taking the first case
//! for the second lost a wakeup after a cooperative-budget yield on epoll
//! (a response stalled until a timer fired:
//! `tls_writes_resume_after_the_budget_runs_out` in
//! `crates/http/tests/tls.rs`).

use std::io::{self, Read as _, Write as _};
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::task::{Context, Poll};

use ringkit::net::PollIo;
use rustls::{ServerConfig, ServerConnection};

/// A TLS server connection over poll-based ringkit I/O.
#[derive(Debug)]
pub struct TlsIo {
    io: PollIo,
    conn: ServerConnection,
    /// The peer's transport has ended.
    eof: bool,
    /// When the first ciphertext arrived.
    received_at: Option<std::time::Instant>,
    /// Plaintext bytes taken to encrypt (capped at 1 MiB): how much of
    /// rustls's buffers this connection may have grown and will free.
    sent: usize,
    /// Ciphertext received while the handshake is not complete: what
    /// rustls may hold of a handshake message being collected (up to
    /// 64 KiB a message). Zero once the handshake is done.
    handshake_bytes: usize,
    /// The most `handshake_bytes` reached (for the allocator on drop).
    handshake_peak: usize,
}

impl Drop for TlsIo {
    fn drop(&mut self) {
        // rustls's record and handshake buffers go back to the allocator
        // now.
        ringkit::alloc::freed(self.sent + self.handshake_peak);
    }
}

/// `io::Read`/`io::Write` over `PollIo` for rustls: `Pending` becomes
/// `WouldBlock` (the waker is registered by the poll call).
struct Sync<'a, 'b> {
    io: &'a mut PollIo,
    cx: &'a mut Context<'b>,
}

impl io::Read for Sync<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout, and
        // poll_read only writes initialised bytes into it.
        let dst = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
        match self.io.poll_read(self.cx, dst) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl io::Write for Sync<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.io.poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self.io.poll_flush(self.cx) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl TlsIo {
    /// Start a server connection on `io`.
    pub fn new(io: PollIo, config: Arc<ServerConfig>) -> io::Result<TlsIo> {
        let conn = ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(TlsIo {
            io,
            conn,
            eof: false,
            received_at: None,
            sent: 0,
            handshake_bytes: 0,
            handshake_peak: 0,
        })
    }

    /// The stream under the TLS layer (for its socket options).
    pub fn get_ref(&self) -> &PollIo {
        &self.io
    }

    /// Whether any byte has arrived from the peer (a handshake under way
    /// counts, though it yields no plaintext yet).
    pub fn has_received(&self) -> bool {
        self.received_at.is_some()
    }

    /// While a handshake is under way (its first byte has arrived and it is
    /// not complete), when it began: a server bounds a handshake as it
    /// bounds a request head.
    pub fn handshake_since(&self) -> Option<std::time::Instant> {
        self.received_at.filter(|_| self.conn.is_handshaking())
    }

    /// Ciphertext received since the handshake began, while it is not
    /// complete (0 once it is): what rustls may be holding of a handshake
    /// message still being collected. A server charges it to its input
    /// budget as it charges a partial request head (rustls takes a
    /// ClientHello of up to 64 KiB, in records trickled as slowly as the
    /// peer likes).
    pub fn handshake_bytes(&self) -> usize {
        self.handshake_bytes
    }

    /// The protocol ALPN chose, once the handshake is done.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// Hand every record rustls has to the stream (buffered there), and
    /// start sending them. Pending only if the stream's buffers are full.
    fn write_records(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            let mut s = Sync {
                io: &mut self.io,
                cx,
            };
            match self.conn.write_tls(&mut s) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        // Start the send now; its completion is awaited by a later flush.
        match self.io.poll_flush(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }

    /// Read ciphertext and process it. `Ok(false)`: end of stream.
    fn read_records(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        let mut s = Sync {
            io: &mut self.io,
            cx,
        };
        let n = match self.conn.read_tls(&mut s) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if n == 0 {
            self.eof = true;
            return Poll::Ready(Ok(false));
        }
        self.received_at.get_or_insert_with(std::time::Instant::now);
        if self.conn.is_handshaking() {
            self.handshake_bytes += n;
            self.handshake_peak = self.handshake_peak.max(self.handshake_bytes);
        }
        let processed = self.conn.process_new_packets();
        if !self.conn.is_handshaking() {
            self.handshake_bytes = 0;
        }
        if let Err(e) = processed {
            // Send the alert rustls queued, then fail.
            let _ = self.write_records(cx);
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
        }
        Poll::Ready(Ok(true))
    }

    /// Read plaintext into `dst`; `Ok(0)` at the end of the stream.
    pub fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        dst: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        loop {
            if let Poll::Ready(Err(e)) = self.write_records(cx) {
                return Poll::Ready(Err(e));
            }
            // SAFETY: rustls only writes into the slice (initialising what
            // it returns); the bytes it reports are initialised.
            let buf = unsafe { &mut *(dst as *mut [MaybeUninit<u8>] as *mut [u8]) };
            match self.conn.reader().read(buf) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify: end of stream if
                // the handshake was done (as most servers treat it).
                Err(e)
                    if e.kind() == io::ErrorKind::UnexpectedEof && !self.conn.is_handshaking() =>
                {
                    return Poll::Ready(Ok(0));
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
            if self.eof {
                return Poll::Ready(if self.conn.is_handshaking() {
                    Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "TLS handshake ended early",
                    ))
                } else {
                    Ok(0)
                });
            }
            match self.read_records(cx) {
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Encrypt `src` (as much as rustls buffers) and queue the records.
    pub fn poll_write(&mut self, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let n = self.conn.writer().write(src)?;
            self.sent = (self.sent + n).min(1 << 20);
            if n > 0 || src.is_empty() {
                if let Poll::Ready(Err(e)) = self.write_records(cx) {
                    return Poll::Ready(Err(e));
                }
                return Poll::Ready(Ok(n));
            }
            // rustls took nothing: move its records out and try again, or
            // wait.
            let had_records = self.conn.wants_write();
            match self.write_records(cx) {
                // Records moved out (a write the budget or a full stream
                // interrupted before, finished now): room to try again.
                Poll::Ready(Ok(())) if had_records => {}
                Poll::Ready(Ok(())) => {
                    // Nothing accepted with nothing to write: the
                    // handshake needs the peer first.
                    match self.read_records(cx) {
                        Poll::Ready(Ok(true)) => {}
                        Poll::Ready(Ok(false)) => {
                            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()))
                        }
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Send every queued record.
    pub fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn.writer().flush()?;
        loop {
            match self.write_records(cx) {
                Poll::Ready(Ok(())) if !self.conn.wants_write() => break,
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        self.io.poll_flush(cx)
    }

    /// Send close_notify, flush, shut down writing.
    pub fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn.send_close_notify();
        match self.poll_flush(cx) {
            Poll::Ready(Ok(())) => self.io.poll_shutdown(cx),
            other => other,
        }
    }
}
