//! Waiting for a connection's input (with its deadlines, shutdown and
//! eviction from the input budget), and the lingering close.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use ringkit::net::RecvBuf;

use super::Conn;
use crate::Handler;

/// Lingering close: at most this many bytes discarded.
const LINGER_BYTES: usize = 1 << 20;

/// Received bytes: a pooled buffer (io_uring: a provided-buffer ring slot,
/// recycled on drop), or, on epoll, the connection's own read buffer (which
/// goes back to the connection after decoding: epoll has no buffer ring,
/// and a pooled read there would allocate a buffer per read).
pub(super) enum Chunk {
    Pooled(RecvBuf),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Chunk {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Chunk::Pooled(b) => b,
            Chunk::Owned(v) => v,
        }
    }
}

/// Capacity of a connection's own read buffer (epoll).
pub(super) const READ_BUF: usize = 4096;

/// What waiting for input gave.
pub(super) enum Input {
    Data(Chunk),
    Eof,
    Failed,
    TimedOut,
    Shutdown,
    /// A newcomer took this connection's share of the input budget.
    Evicted,
}

impl<H: Handler> Conn<H> {
    /// Half-close, then discard input for a while (see the module docs).
    pub(super) async fn linger(&mut self, time: Duration) {
        // Nothing read from here on is decoded: what the connection holds
        // of a request goes now, not after the linger.
        self.drop_input();
        let _ = self.stream.shutdown(std::net::Shutdown::Write).await;
        let until = Instant::now() + time;
        let mut discarded = 0;
        while discarded < LINGER_BYTES {
            let left = until.saturating_duration_since(Instant::now());
            match ringkit::time::timeout(left, self.stream.read_pooled()).await {
                Ok(Ok(rb)) if !rb.is_empty() => discarded += rb.len(),
                _ => return,
            }
        }
    }

    /// Wait for input, a deadline or (between requests) shutdown.
    ///
    /// The deadline moves with every request, but the timer is only re-armed
    /// when it fires early (then to the current deadline) or when the
    /// deadline moved earlier: in steady keep-alive traffic that is once per
    /// timeout period, not once per request.
    pub(super) async fn wait_input(&mut self) -> Input {
        let mid = self.mid_request();
        let deadline = match (mid, self.request_since) {
            (true, Some(t)) => t + self.shared.config.header_timeout,
            (true, None) => Instant::now() + self.shared.config.header_timeout,
            (false, _) => self.last_active + self.shared.config.idle_timeout,
        };
        if self.timer.deadline() > deadline {
            self.timer.reset(deadline);
        }
        let shared = &self.shared;
        let timer = &mut self.timer;
        let stream = &self.stream;
        let own_buf = if self.pooled {
            None
        } else {
            Some(
                self.read_buf
                    .take()
                    .unwrap_or_else(|| Vec::with_capacity(READ_BUF)),
            )
        };
        let mut read = pin!(async move {
            match own_buf {
                None => stream.read_pooled().await.map(Chunk::Pooled),
                Some(buf) => {
                    let (r, buf) = stream.read(buf).await;
                    r.map(|_| Chunk::Owned(buf))
                }
            }
        });
        let header_timeout = shared.config.header_timeout;
        let mut deadline = deadline;
        let account = &self.account;
        let charged = &mut self.handshake;
        poll_fn(|cx| {
            if !mid && shared.shutting_down() {
                return Poll::Ready(Input::Shutdown);
            }
            if mid && account.evicted() {
                return Poll::Ready(Input::Evicted);
            }
            let polled = read.as_mut().poll(cx);
            // A TLS handshake's ciphertext waits in rustls: counted under
            // the input limit (see `Handshakes`); a handshake refused just
            // closes (nothing to answer), and one done gives it back at
            // once (its last read may also bring the first request).
            let handshake = stream.tls_handshake_bytes();
            if handshake != *charged {
                let limit = shared.config.max_buffered_bytes;
                if !shared.handshakes.charge(charged, handshake, limit) {
                    tracing::debug!("ringkit-http: a TLS handshake over the input budget");
                    return Poll::Ready(Input::Failed);
                }
            }
            if let Poll::Ready(r) = polled {
                return Poll::Ready(match r {
                    Ok(rb) if rb.is_empty() => Input::Eof,
                    Ok(rb) => Input::Data(rb),
                    Err(_) => Input::Failed,
                });
            }
            // A TLS handshake under way is bounded as a request head is.
            if let Some(t) = stream.handshake_since() {
                if t + header_timeout < deadline {
                    deadline = t + header_timeout;
                    timer.reset(deadline);
                }
            }
            loop {
                if std::pin::Pin::new(&mut *timer).poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if Instant::now() >= deadline {
                    return Poll::Ready(Input::TimedOut);
                }
                timer.reset(deadline);
            }
        })
        .await
    }
}
