//! [`PollIo`]: poll-based reads and writes over a completion-based stream,
//! for code written against readiness-style traits (hyper's `rt::Read` and
//! `rt::Write`, tokio's `AsyncRead`/`AsyncWrite`; `ringkit-hyper` adapts
//! them onto this type; with the `tokio` feature `PollIo` implements
//! tokio's traits itself, see `poll_io_tokio.rs`).
//!
//! # How it works
//! - **Reads** are [`TcpStream::read_pooled`]: on io_uring a multishot
//!   receive stays armed and the kernel fills buffers of the runtime's
//!   provided-buffer ring as data arrives. `poll_read` copies from the
//!   filled buffer into the caller's (possibly uninitialised) memory once,
//!   keeps what does not fit for the next call, and returns the ring buffer
//!   as soon as it is consumed. No readiness poll, no syscall per read, and
//!   the caller's buffer is never zero-filled. On epoll the same call waits
//!   for readiness and reads.
//! - **Writes** are copied into an owned buffer and `poll_write` returns at
//!   once; the buffer goes out as one owned-buffer send when it reaches 64
//!   KiB or on `poll_flush`. While a send is in flight new bytes collect in a
//!   second buffer; when that is full too, `poll_write` pends (backpressure).
//!   `poll_flush` returns when every accepted byte has been sent.
//! - **Shutdown** flushes, then shuts down writing (`shutdown(2)` in place on both backends).
//!
//! A read or send in flight lives in a boxed future that owns its buffer and
//! a reference to the stream; dropping the `PollIo` drops them, and the
//! driver's cancellation rules apply unchanged (a buffer the kernel holds is
//! freed only after its completion; received bytes are not lost).
//!
//! The difference from the usual bridges: monoio's poll-io registers the
//! socket for readiness inside io_uring and makes the read syscall itself;
//! compio's hyper wrapper reads into the caller's buffer after zero-filling
//! it. Here the kernel completes reads into ring buffers without being asked
//! per read, and writes are whole owned-buffer sends.
//!
//! [`TcpStream::read_pooled`]: crate::net::TcpStream::read_pooled

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use super::stream::StreamCore;
use crate::buf::RecvBuf;
use crate::coop;

/// Bytes collected before a send is started without waiting for a flush,
/// and the most a second buffer holds while a send is in flight.
const HIGH_WATER: usize = 64 * 1024;

/// A buffer larger than this is given back to the allocator once a flush
/// has emptied it, so an idle connection that once sent a large response
/// keeps at most this much (twice: `out` and `spare`) instead of 2 x 64 KiB.
const KEEP_WHEN_IDLE: usize = 2 * 1024;

type Boxed<T> = Pin<Box<dyn Future<Output = T>>>;

/// Poll-based I/O over a ringkit stream, for code written against
/// readiness-style traits (hyper's `rt::Read`/`rt::Write`; tokio's
/// `AsyncRead`/`AsyncWrite` with the `tokio` feature). Reads copy out of
/// the stream's pooled receives (the buffer ring on io_uring: no syscall
/// per read); writes collect in an owned buffer that leaves as one send at
/// 64 KiB or on `poll_flush`, which returns once every accepted byte is
/// sent; a second full buffer makes `poll_write` pend. Made by
/// `TcpStream::into_poll_io` / `UnixStream::into_poll_io`.
pub struct PollIo {
    core: Rc<StreamCore>,
    reading: Option<Boxed<io::Result<RecvBuf>>>,
    /// A received buffer and how much of it was handed out.
    leftover: Option<(RecvBuf, usize)>,
    /// Accepted bytes not yet handed to a send.
    out: Vec<u8>,
    /// The send in flight; it gives its buffer back.
    sending: Option<Boxed<(io::Result<()>, Vec<u8>)>>,
    /// An emptied buffer kept for the next swap.
    spare: Vec<u8>,
    shutting: Option<Boxed<io::Result<()>>>,
}

impl std::fmt::Debug for PollIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollIo")
            .field("fd", &self.core.fd)
            .field("reading", &self.reading.is_some())
            .field("buffered_out", &self.out.len())
            .field("sending", &self.sending.is_some())
            .finish()
    }
}

impl PollIo {
    pub(crate) fn new(core: Rc<StreamCore>) -> PollIo {
        PollIo {
            core,
            reading: None,
            leftover: None,
            out: Vec::new(),
            sending: None,
            spare: Vec::new(),
            shutting: None,
        }
    }

    /// Read into `dst`: `Ok(0)` is end of stream (or an empty `dst`).
    pub fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        dst: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        if dst.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let (rb, off) = match self.leftover.take() {
            Some(l) => {
                // Bytes already here cost a unit of the task's budget too
                // (`crate::coop`), checked before they are taken.
                if coop::poll_proceed(cx).is_pending() {
                    self.leftover = Some(l);
                    return Poll::Pending;
                }
                coop::spend();
                l
            }
            None => {
                let core = &self.core;
                let fut = self.reading.get_or_insert_with(|| {
                    let core = core.clone();
                    Box::pin(async move { core.read_pooled().await })
                });
                let r = ready!(fut.as_mut().poll(cx));
                self.reading = None;
                (r?, 0)
            }
        };
        let src = &rb[off..];
        let n = src.len().min(dst.len());
        for (d, s) in dst[..n].iter_mut().zip(src) {
            d.write(*s);
        }
        if off + n < rb.len() {
            self.leftover = Some((rb, off + n));
        }
        Poll::Ready(Ok(n))
    }

    /// Wait for the send in flight, if any; its error is this call's.
    fn poll_sending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(fut) = self.sending.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let (r, mut buf) = ready!(fut.as_mut().poll(cx));
        self.sending = None;
        buf.clear();
        self.spare = buf;
        Poll::Ready(r)
    }

    /// Hand `out` to a new send (none may be in flight).
    fn start_send(&mut self) {
        debug_assert!(self.sending.is_none());
        let buf = std::mem::replace(&mut self.out, std::mem::take(&mut self.spare));
        let core = self.core.clone();
        self.sending = Some(Box::pin(async move { core.write_all(buf).await }));
    }

    /// Accept bytes from `src`; pends only while both buffers are full.
    pub fn poll_write(&mut self, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        if src.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            // A finished send frees its buffer (and reports its error).
            if self.sending.is_some() {
                if let Poll::Ready(r) = self.poll_sending(cx) {
                    r?;
                }
            }
            if self.out.len() < HIGH_WATER {
                break;
            }
            if self.sending.is_some() {
                return Poll::Pending;
            }
            self.start_send();
        }
        let n = src.len().min(HIGH_WATER - self.out.len());
        self.out.extend_from_slice(&src[..n]);
        if self.out.len() >= HIGH_WATER && self.sending.is_none() {
            self.start_send();
            // Polled once so it is submitted now; it wakes us when done.
            if let Poll::Ready(r) = self.poll_sending(cx) {
                r?;
            }
        }
        Poll::Ready(Ok(n))
    }

    /// Send everything accepted so far.
    pub fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_sending(cx))?;
            if self.out.is_empty() {
                // Flushed: the connection may now sit idle for long.
                for b in [&mut self.out, &mut self.spare] {
                    if b.capacity() > KEEP_WHEN_IDLE {
                        *b = Vec::new();
                    }
                }
                return Poll::Ready(Ok(()));
            }
            self.start_send();
        }
    }

    /// Bytes of write buffer this stream holds (what an idle connection
    /// costs beyond its socket): at most a few KiB once flushed.
    pub fn buffer_capacity(&self) -> usize {
        self.out.capacity() + self.spare.capacity()
    }

    /// See [`TcpStream::set_write_timeout`](crate::net::TcpStream::set_write_timeout):
    /// a flush that moves no byte for `limit` fails with `TimedOut`.
    pub fn set_write_timeout(&self, limit: Option<std::time::Duration>) {
        self.core.set_write_timeout(limit);
    }

    /// `SO_LINGER` on the socket (`Some(Duration::ZERO)`: when the stream
    /// is dropped, close resets the connection and discards unsent bytes,
    /// rather than queueing a FIN behind them). For a peer that has stopped
    /// reading: a FIN behind bytes it never takes never reaches it.
    pub fn set_linger(&self, d: Option<std::time::Duration>) -> io::Result<()> {
        super::with_sock(self.core.fd, |s| s.set_linger(d))
    }

    /// Flush, then shut down writing.
    pub fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_flush(cx))?;
        let core = &self.core;
        let fut = self.shutting.get_or_insert_with(|| {
            let core = core.clone();
            Box::pin(async move { core.shutdown(std::net::Shutdown::Write).await })
        });
        let r = ready!(fut.as_mut().poll(cx));
        self.shutting = None;
        // Already shut down, or the peer is gone: nothing left to do.
        match r {
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => Poll::Ready(Ok(())),
            r => Poll::Ready(r),
        }
    }
}
