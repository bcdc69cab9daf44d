//! One connection: hyper-util's auto builder under ringkit's deadlines.
//!
//! hyper times only an HTTP/1 request head (`header_read_timeout`). Nothing
//! in hyper bounds the wait for the protocol preface (the auto builder reads
//! it with no timer), a TLS handshake, or an HTTP/2 connection with no
//! stream open; 10 000 sockets that connect and say nothing would hold
//! every connection slot for good. So each connection is watched here:
//!
//! - **Before the first request**: the first byte must come within
//!   [`ConnLimits::idle_timeout`] of the accept, and the first request
//!   (TLS handshake, preface and head included) must start within
//!   [`ConnLimits::header_timeout`] of that first byte.
//! - **Between requests**: with no request in flight, the connection
//!   closes [`ConnLimits::idle_timeout`] after the last one ended, whatever
//!   bytes move (HTTP/2 pings or a frame trickled a byte at a time do not
//!   keep it open).
//! - **While a handler runs**: no deadline here; how long a handler may
//!   run is the application's to say (a tower timeout layer). HTTP/2 sends
//!   keep-alive pings meanwhile and closes when the peer stops answering.
//! - **While a response body is being sent**: the connection must write
//!   body bytes at least every [`ConnLimits::send_timeout`] (an HTTP/2 peer
//!   that opens streams and never grants window holds their bodies; a
//!   download that moves, however slowly, is never cut). On HTTP/2 only
//!   the payload of DATA frames counts ([`FrameWalk`]): a peer that grants
//!   no window but answers PINGs makes no progress; and only while body
//!   bytes wait to be sent: a quiet stream (server-sent events between
//!   events) is the application's to bound. A body dropped before its end
//!   (a stream the peer reset) leaves nothing waiting.
//!
//! At a deadline the connection is asked to shut down gracefully (HTTP/2:
//! GOAWAY), and dropped [`CLOSE_GRACE`] later if it has not finished.
//! Then it closes lingering (see [`linger`]), unless a write failed (the
//! write timeout: a response its peer stopped reading): then it is reset,
//! as a FIN queued behind bytes the peer never takes would never reach it.
//!
//! Bytes a connection receives while it is idle (no request in flight and
//! no response on its way: a request head arriving, HTTP/2 frames that
//! have not made a request yet) are charged to one count per thread, given
//! back when a request starts or the connection ends. A read that would
//! take the count past [`ConnLimits::max_buffered_bytes`] closes that
//! connection, unless it holds no more than an ordinary head (16 KiB);
//! past twice the limit only a minimal head (1 KiB) is still let through,
//! so many small holders cannot push the total up without bound (at most
//! twice the limit plus 1 KiB a connection). Bytes read while a request is
//! in flight are the handler's (axum's `DefaultBodyLimit`, 2 MB a
//! request), and those read while a response is on its way are the
//! frames of its flow control (an HTTP/2 download's WINDOW_UPDATEs and
//! PINGs), which hyper consumes as they come. An idle HTTP/2 connection
//! (known by the whole client preface) is charged at most an ordinary head
//! (16 KiB, a partial frame): a stream of control frames is consumed as it
//! comes, and a flood of them is the runtime's cooperative budget's to
//! bound, not this count's. Over TLS the ciphertext of a handshake not yet
//! complete is charged the same way (rustls collects a ClientHello of up
//! to 64 KiB, trickled as slowly as the peer likes).
//!
//! A closing connection lingers over at most 1 MiB, or 64 KiB after a
//! protocol error: a peer that floods frames after a GOAWAY gets little
//! more in.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::{Request, Response};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use ringkit::sync::DrainGuard;

use crate::frames::FrameWalk;
use crate::service::{ConnLimits, HttpBody, HttpService};
use crate::{HyperIo, LocalExec};

/// Bytes before a request that a connection may receive over the thread's
/// budget, while the count is under twice the budget: an ordinary request
/// head.
const FREE_HEAD: usize = 16 * 1024;

/// What a connection may receive before a request however full the count
/// is: a minimal request head.
const MIN_HEAD: usize = 1024;

/// What a TLS handshake may hold however full the count is: a large
/// ordinary ClientHello (browsers' with a post-quantum key share are about
/// 1.8 KiB; a long ALPN or session ticket adds more).
const MIN_HANDSHAKE: usize = 4 * 1024;

/// What an HTTP/2 connection with no request is charged at most: a partial
/// frame (16 KiB, the default largest), as much as an ordinary HTTP/1 head,
/// so it is never the one closed while the count is under twice the
/// budget (what waits in hyper beyond that, a header block being
/// collected, is bounded by hyper's 16 KiB header list).
const H2_HOLD: usize = FREE_HEAD;

/// The HTTP/2 client preface, whole (as hyper-util's auto builder compares
/// it: a request `PRI /x HTTP/1.1` is HTTP/1).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A closing connection's lingering: at most this long, this many bytes
/// (enough for the rest of an upload its handler answered without reading
/// it, a 401 or 413, so the client still sees the answer).
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;

/// The lingering of a connection that ended in a protocol error (an
/// HTTP/2 GOAWAY with an error code): the peer is misbehaving, and a peer
/// flooding frames after the GOAWAY got 1 MiB in at the limit above
/// (`tests/goaway.rs`). 64 KiB still covers what a client sends while it
/// reads the end of a response (WINDOW_UPDATEs: 13 bytes a frame read).
const LINGER_BYTES_AFTER_ERROR: usize = 64 * 1024;

/// Half-close, then read and discard what the peer still sends until it
/// closes too, for a while (a lingering close, as nginx does). Closed with
/// unread input, the socket would be reset, and a reset makes the peer's
/// kernel drop what it has received and not yet handed to the client: the
/// end of a download still being read (an HTTP/2 client keeps sending
/// window updates as it reads).
///
/// The half-close flushes first; if that fails (the write timeout: the
/// peer has taken nothing for the send timeout), the connection is reset
/// instead.
async fn linger(mut io: HyperIo, max_bytes: usize) {
    if poll_fn(|cx| Pin::new(&mut io).poll_shutdown(cx))
        .await
        .is_err()
    {
        reset(io);
        return;
    }
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut discarded = 0;
    let _ = ringkit::time::timeout(LINGER_TIME, async {
        while discarded < max_bytes {
            match poll_fn(|cx| io.poll_read_into(cx, &mut buf)).await {
                Ok(n) if n > 0 => discarded += n,
                _ => return,
            }
        }
    })
    .await;
}

/// Close `io` with a reset, for a peer that stopped reading: a FIN would
/// queue behind bytes it never takes, so it would never see the close, and
/// the socket would hold its full send buffer for minutes of zero-window
/// probes. A reset ends both at once.
fn reset(io: HyperIo) {
    if let Err(e) = io.reset_on_close() {
        tracing::debug!("ringkit-hyper: SO_LINGER 0 before a reset: {e}");
    }
}

/// How long a connection asked to close at a deadline may take to do so.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What a connection's deadlines watch.
#[derive(Debug)]
struct Activity {
    accepted: Instant,
    first_byte: Cell<Option<Instant>>,
    in_flight: Cell<usize>,
    started: Cell<u64>,
    last_end: Cell<Instant>,
    /// Response bodies being sent (their handlers have returned).
    sending: Cell<usize>,
    /// When a byte was last written.
    last_write: Cell<Instant>,
    /// Body bytes the responses have yielded, and bytes written: while the
    /// first is ahead, a response is still on its way (hyper's HTTP/2 layer
    /// takes a whole body at once and sends it as the peer grants window,
    /// long after the body itself is gone).
    yielded: Cell<u64>,
    written: Cell<u64>,
    /// A write or flush failed (the write timeout: the peer took nothing
    /// for the send timeout).
    write_failed: Cell<bool>,
    /// The first bytes received, until it is known whether they are an
    /// HTTP/2 preface; then whether they were.
    sniffed: RefCell<Vec<u8>>,
    h2: Cell<Option<bool>>,
    /// The frames written so far, on HTTP/2.
    frames: Cell<FrameWalk>,
    /// Bytes received since a request last started (charged to `budget`).
    unstarted: Cell<usize>,
    /// Of those, the TLS handshake's ciphertext (see `Watched::poll_read`).
    handshake_charged: Cell<usize>,
    /// The thread's count of such bytes, and its limit.
    budget: Rc<Cell<usize>>,
    limit: usize,
}

impl Activity {
    /// Charge `n` bytes received with no request in flight; false if that
    /// would take the thread's count past the limit and this connection
    /// holds more than an ordinary request head ([`FREE_HEAD`]): clients
    /// that fill the budget cannot shut out one that sends a small request.
    fn charge(&self, n: usize) -> bool {
        self.charge_as(n, MIN_HEAD)
    }

    /// [`Activity::charge`], with `min` what the connection may always
    /// hold ([`MIN_HEAD`] for a head, [`MIN_HANDSHAKE`] for a handshake).
    fn charge_as(&self, n: usize, min: usize) -> bool {
        if self.in_flight.get() > 0 || self.response_on_its_way() {
            return true;
        }
        let before = self.unstarted.get();
        let mut holds = before + n;
        if self.h2.get() == Some(true) {
            // HTTP/2 frames are consumed as they come: what can wait is a
            // partial frame and a header block, never the stream of
            // control frames before it.
            holds = holds.min(H2_HOLD).max(before);
        }
        let n = holds - before;
        let total = self.budget.get() + n;
        if total > self.limit && holds > FREE_HEAD {
            return false;
        }
        if total > self.limit.saturating_mul(2) && holds > min {
            return false;
        }
        self.budget.set(total);
        self.unstarted.set(self.unstarted.get() + n);
        true
    }

    /// Give back what this connection has charged.
    fn uncharge(&self) {
        self.budget.set(self.budget.get() - self.unstarted.take());
        self.handshake_charged.set(0);
    }

    /// The TLS handshake now holds `now` bytes of ciphertext (0 once it is
    /// done): charge the growth, give back what it no longer holds. False
    /// if the growth is refused.
    fn handshake_holds(&self, now: usize) -> bool {
        let was = self.handshake_charged.get();
        if now > was {
            if !self.charge_as(now - was, MIN_HANDSHAKE) {
                return false;
            }
        } else if now < was {
            // Done (or smaller): the plaintext that follows is charged on
            // its own, and an HTTP/2 preface's cap applies to it alone.
            let back = (was - now).min(self.unstarted.get());
            self.unstarted.set(self.unstarted.get() - back);
            self.budget.set(self.budget.get() - back);
        }
        self.handshake_charged.set(now);
        true
    }

    /// A response body is still being sent (hyper's HTTP/2 layer takes a
    /// whole body at once and sends it as the peer grants window, long
    /// after the body itself is gone).
    fn response_on_its_way(&self) -> bool {
        self.sending.get() > 0 || self.yielded.get() > self.written.get()
    }

    /// Note received bytes until the protocol is known.
    fn sniff(&self, got: &[u8]) {
        if self.h2.get().is_some() || got.is_empty() {
            return;
        }
        let mut s = self.sniffed.borrow_mut();
        let take = (H2_PREFACE.len() - s.len()).min(got.len());
        s.extend_from_slice(&got[..take]);
        // Decided at the first byte that differs, or the preface's last.
        if !H2_PREFACE.starts_with(&s) {
            self.h2.set(Some(false));
        } else if s.len() == H2_PREFACE.len() {
            self.h2.set(Some(true));
        }
        if self.h2.get().is_some() {
            *s = Vec::new();
        }
    }

    /// `bytes` were written: the progress they make. On HTTP/2 only DATA
    /// payload counts; on HTTP/1 every byte written does.
    fn wrote(&self, bytes: &[u8]) {
        let body = if self.h2.get() == Some(true) {
            let mut walk = self.frames.get();
            let n = walk.data_in(bytes);
            self.frames.set(walk);
            n
        } else {
            bytes.len() as u64
        };
        if body > 0 {
            self.last_write.set(ringkit::time::coarse_now());
            self.written.set(self.written.get() + body);
        }
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        self.uncharge();
        // hyper's read and write buffers go back to the allocator now;
        // what it wrote says how large they may have grown.
        ringkit::alloc::freed(self.written.get().min(1 << 20) as usize);
    }
}

impl Activity {
    /// When the connection is to close if nothing changes; `None` while a
    /// handler runs.
    fn deadline(&self, l: &ConnLimits) -> Option<Instant> {
        if self.in_flight.get() > 0 {
            return None;
        }
        let waiting = self.yielded.get() > self.written.get();
        if waiting || (self.sending.get() > 0 && self.h2.get() != Some(true)) {
            // A response body on its way must keep moving (an HTTP/2 peer
            // that opens streams and never grants them window holds their
            // bodies; a slow reader that does grant it is progress). On
            // HTTP/2 only while body bytes wait to be sent: a stream whose
            // application is quiet (server-sent events, a long poll) is the
            // application's to bound, as a handler's running time is.
            return Some(self.last_write.get() + l.send_timeout);
        }
        if self.sending.get() > 0 {
            return None;
        }
        if self.started.get() > 0 {
            return Some(self.last_end.get() + l.idle_timeout);
        }
        let silent = self.accepted + l.idle_timeout;
        Some(match self.first_byte.get() {
            Some(t) => silent.min(t + l.header_timeout),
            None => silent,
        })
    }
}

/// Ends one request's time in flight when dropped (the handler's future
/// finished, or hyper dropped it).
struct InFlight(Rc<Activity>);

impl InFlight {
    fn begin(a: &Rc<Activity>) -> InFlight {
        a.in_flight.set(a.in_flight.get() + 1);
        a.started.set(a.started.get() + 1);
        a.uncharge();
        InFlight(a.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        a.in_flight.set(a.in_flight.get() - 1);
        a.last_end.set(ringkit::time::coarse_now());
    }
}

/// One response body being sent, until hyper drops it (sent, or the
/// stream ended).
struct Sending {
    a: Rc<Activity>,
    /// Body bytes this response yielded.
    yielded: u64,
    /// It yielded its end.
    ended: bool,
}

impl Sending {
    fn begin(a: &Rc<Activity>) -> Sending {
        a.sending.set(a.sending.get() + 1);
        a.last_write.set(ringkit::time::coarse_now());
        Sending {
            a: a.clone(),
            yielded: 0,
            ended: false,
        }
    }

    /// The body yielded `n` bytes. The send timeout's clock starts now if
    /// nothing was waiting to be sent.
    fn yielded(&mut self, n: u64) {
        let a = &self.a;
        if a.yielded.get() <= a.written.get() {
            a.last_write.set(ringkit::time::coarse_now());
        }
        a.yielded.set(a.yielded.get() + n);
        self.yielded += n;
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        let a = &self.a;
        a.sending.set(a.sending.get() - 1);
        a.last_end.set(ringkit::time::coarse_now());
        if !self.ended {
            // Dropped before its end (an HTTP/2 stream the peer reset):
            // what it yielded and was not sent never will be.
            let gap = a.yielded.get().saturating_sub(a.written.get());
            a.yielded.set(a.yielded.get() - gap.min(self.yielded));
        }
    }
}

pin_project_lite::pin_project! {
    /// A response body, counted as being sent until it is dropped: the
    /// request is in progress until its last byte has gone.
    pub(crate) struct TrackedBody<B> {
        #[pin]
        inner: B,
        sending: Sending,
    }
}

impl<B: http_body::Body> http_body::Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let r = this.inner.as_mut().poll_frame(cx);
        match &r {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.sending.yielded(bytes::Buf::remaining(d) as u64);
                }
            }
            Poll::Ready(None) => this.sending.ended = true,
            _ => {}
        }
        if this.inner.is_end_stream() {
            this.sending.ended = true;
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A hyper service that counts its requests in flight.
struct Tracked<S> {
    inner: S,
    activity: Rc<Activity>,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>,
{
    type Response = Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let guard = InFlight::begin(&self.activity);
        TrackedFuture {
            inner: self.inner.call(req),
            guard: Some(guard),
        }
    }
}

pin_project_lite::pin_project! {
    /// A handler's future, in flight until it is dropped; its response's
    /// body is then counted as being sent.
    struct TrackedFuture<F> {
        #[pin]
        inner: F,
        guard: Option<InFlight>,
    }
}

impl<F, B, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<TrackedBody<B>>, E>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = ready!(this.inner.poll(cx));
        let activity = this.guard.as_ref().map(|g| g.0.clone());
        // The handler is done (its guard drops), the body is on its way.
        let sending = activity.as_ref().map(Sending::begin);
        this.guard.take();
        Poll::Ready(out.map(|resp| {
            resp.map(|inner| TrackedBody {
                inner,
                sending: sending.expect("a future polled to completion once"),
            })
        }))
    }
}

/// The connection's I/O, noting when the first byte arrives.
struct Watched {
    /// Shared with [`serve`], which takes it back to close it lingering.
    io: Rc<RefCell<HyperIo>>,
    activity: Rc<Activity>,
}

impl Read for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut io = this.io.borrow_mut();
        // SAFETY: `poll_read_into` only writes initialised bytes into the
        // slice, never de-initialises any, and returns how many it wrote.
        let r = io.poll_read_into(cx, unsafe { buf.as_mut() });
        let got = matches!(r, Poll::Ready(Ok(n)) if n > 0);
        if this.activity.first_byte.get().is_none() && (got || io.tls_received()) {
            this.activity.first_byte.set(Some(Instant::now()));
        }
        // A TLS handshake's ciphertext waits in rustls as a partial head
        // waits in hyper: charged alike (given back when a request starts).
        if !this.activity.handshake_holds(io.tls_handshake_bytes()) {
            tracing::debug!(
                "ringkit-hyper: closing a TLS handshake over the thread's input budget"
            );
            return Poll::Ready(Err(over_budget()));
        }
        let n = ready!(r)?;
        // SAFETY: the first `n` bytes were just written by `poll_read_into`.
        let got = unsafe { std::slice::from_raw_parts(buf.as_mut().as_ptr().cast::<u8>(), n) };
        this.activity.sniff(got);
        if !this.activity.charge(n) {
            tracing::debug!("ringkit-hyper: closing a connection over the thread's input budget");
            return Poll::Ready(Err(over_budget()));
        }
        // SAFETY: the first `n` bytes were just written.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

/// The error that closes a connection over the thread's input budget.
fn over_budget() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "over the thread's budget of bytes received before a request",
    )
}

impl Watched {
    /// A write that took body bytes is progress (stamped with the loop
    /// turn's clock: deadlines here are seconds, and a write is the hot
    /// path); `bufs` are what was offered, of which the write took `n`.
    fn note_write<'b>(&self, r: &Poll<io::Result<usize>>, bufs: impl Iterator<Item = &'b [u8]>) {
        match r {
            Poll::Ready(Ok(n)) if *n > 0 => {
                let mut left = *n;
                for b in bufs {
                    if left == 0 {
                        break;
                    }
                    let t = b.len().min(left);
                    self.activity.wrote(&b[..t]);
                    left -= t;
                }
            }
            Poll::Ready(Err(_)) => self.activity.write_failed.set(true),
            _ => {}
        }
    }

    /// A flush or shutdown that failed.
    fn note_failure<T>(&self, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(_)) = &r {
            self.activity.write_failed.set(true);
        }
        r
    }
}

impl Write for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut *this.io.borrow_mut()).poll_write(cx, buf);
        this.note_write(&r, std::iter::once(buf));
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.borrow().is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut *this.io.borrow_mut()).poll_write_vectored(cx, bufs);
        this.note_write(&r, bufs.iter().map(|b| &b[..]));
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut *self.io.borrow_mut()).poll_flush(cx);
        self.note_failure(r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut *self.io.borrow_mut()).poll_shutdown(cx);
        self.note_failure(r)
    }
}

/// Serve one connection until it ends, a deadline closes it, or the drain
/// asks it to finish.
pub(crate) async fn serve<S, B>(
    builder: Rc<auto::Builder<LocalExec>>,
    io: HyperIo,
    service: S,
    limits: ConnLimits,
    budget: Rc<Cell<usize>>,
    guard: DrainGuard,
) where
    S: HttpService<B>,
    B: HttpBody,
{
    let now = Instant::now();
    let activity = Rc::new(Activity {
        accepted: now,
        first_byte: Cell::new(None),
        in_flight: Cell::new(0),
        started: Cell::new(0),
        last_end: Cell::new(now),
        sending: Cell::new(0),
        last_write: Cell::new(now),
        yielded: Cell::new(0),
        written: Cell::new(0),
        write_failed: Cell::new(false),
        sniffed: RefCell::new(Vec::new()),
        h2: Cell::new(None),
        frames: Cell::new(FrameWalk::default()),
        unstarted: Cell::new(0),
        handshake_charged: Cell::new(0),
        budget,
        limit: limits.max_buffered_bytes,
    });
    let io = Rc::new(RefCell::new(io));
    let watched = Watched {
        io: io.clone(),
        activity: activity.clone(),
    };
    let svc = Tracked {
        inner: TowerToHyperService::new(service),
        activity: activity.clone(),
    };
    // The connection ended in an error (a protocol error: HTTP/2 sent a
    // GOAWAY with an error code).
    let mut failed = false;
    {
        // The connection ends with this block (so the io is ours again).
        let mut conn = pin!(builder.serve_connection(watched, svc));
        let mut timer = ringkit::time::sleep_until(now + limits.idle_timeout);
        let (mut asked, mut hard_stop) = (false, None::<Instant>);
        poll_fn(|cx| {
            if !asked && guard.poll_draining(cx).is_ready() {
                asked = true;
                conn.as_mut().graceful_shutdown();
            }
            if let Poll::Ready(r) = conn.as_mut().poll(cx) {
                failed = r.is_err();
                return Poll::Ready(());
            }
            loop {
                let Some(due) = hard_stop.or_else(|| activity.deadline(&limits)) else {
                    return Poll::Pending;
                };
                if Instant::now() < due {
                    if timer.deadline() != due {
                        timer.reset(due);
                    }
                    if Pin::new(&mut timer).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    continue;
                }
                if hard_stop.is_some() {
                    // It missed a deadline and ignored the request to
                    // close: linger over as little as after an error.
                    failed = true;
                    return Poll::Ready(());
                }
                tracing::debug!("ringkit-hyper: closing a connection at its deadline");
                hard_stop = Some(Instant::now() + CLOSE_GRACE);
                if !asked {
                    asked = true;
                    conn.as_mut().graceful_shutdown();
                    if let Poll::Ready(r) = conn.as_mut().poll(cx) {
                        failed = r.is_err();
                        return Poll::Ready(());
                    }
                }
            }
        })
        .await;
    }
    drop(guard);
    let Ok(io) = Rc::try_unwrap(io) else {
        return;
    };
    let io = io.into_inner();
    if activity.write_failed.get() {
        reset(io);
        return;
    }
    // Only a connection that answered something can have a peer still
    // reading; one that never made a request (silent, a preface, a
    // handshake) closes at once and frees its fd.
    if activity.started.get() > 0 {
        let max = if failed {
            LINGER_BYTES_AFTER_ERROR
        } else {
            LINGER_BYTES
        };
        linger(io, max).await;
    }
}
