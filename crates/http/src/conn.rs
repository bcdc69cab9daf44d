//! One connection: read, decode, call the handler, write; until it closes.
//!
//! # The loop
//! 1. Wait for bytes, bounded by a deadline (idle keep-alive timeout
//!    between requests, header timeout inside one) and, between requests,
//!    by shutdown. On io_uring with [`TcpStream::read_pooled`]: a multishot
//!    receive into the runtime's provided-buffer ring, so an idle connection
//!    holds no buffer. On epoll with a plain read into a buffer the
//!    connection keeps (epoll has no buffer ring: a pooled read there would
//!    allocate a buffer per read).
//! 2. Decode every complete request in those bytes straight out of the
//!    receive buffer (a request's head is copied once, into recycled
//!    storage). Only bytes of an incomplete request are copied into the
//!    connection's own `pending` buffer, to be completed by later reads. A
//!    ring buffer goes back to the kernel before any handler runs.
//! 3. Call the handler for each request in order; append each response to
//!    one output buffer.
//! 4. One `write_all` for the whole batch of pipelined responses (large
//!    bodies and files are written after the heads that precede them).
//!    Then every buffer over [`KEEP_BUF`] is given up (large output and
//!    file buffers are lent to the thread's next connection that needs one:
//!    `spare.rs`), so a connection that once pipelined a burst of large
//!    responses holds, once idle, what a fresh connection holds.
//!
//! # Memory held for input
//! Bytes of an incomplete head, a body being read and anything received
//! after them are charged to one count per server thread
//! ([`ServerConfig::max_buffered_bytes`]); a connection whose input would
//! take it over is answered 503 and closed, unless it asks for no more than
//! its share: then the largest holders are (`budget.rs` says what that
//! promises and what it does not).
//!
//! # Closing
//! After a response with `Connection: close` (client asked, HTTP/1.0
//! without keep-alive, handler asked, handler panicked, or shutdown), the
//! rest of the batch is dropped and the connection closes. After a request
//! error or a 408, during shutdown, and whenever input is left unanswered,
//! the server half-closes, then reads and discards what the
//! client still sends for a short while before closing (a "lingering close",
//! as nginx does): closing with unread bytes would make the kernel send a
//! reset, which can destroy the error response before the client reads it.
//! A connection whose send timed out (its peer took nothing for
//! `send_timeout`) is reset on purpose: a FIN queued behind bytes the peer
//! never takes would never reach it.

use std::future::{poll_fn, Future};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use ringkit::net::TcpStream;
use ringkit::sync::{Drain, DrainGuard};
use ringkit::time::Sleep;

use crate::budget::{Account, Handshakes, InputBudget};
use crate::decode::RequestDecoder;
use crate::encode::{self, write_head};
use crate::response::FileBody;
use crate::transport::Transport;
use crate::{
    Body, Error, FileSend, Handler, Method, Parsed, Request, Response, ServerConfig, StatusCode,
    Version,
};
use input::{Chunk, Input};

mod input;

/// Most requests decoded from the input before their responses are written.
const MAX_BATCH: usize = 64;
/// Bodies up to this size are copied into the output buffer (one write
/// with the head); larger ones are written on their own.
const INLINE_BODY: usize = 16 * 1024;
/// File bodies are read in pieces of this size.
const FILE_CHUNK: usize = 64 * 1024;
/// Lingering close: at most this long, and this many bytes discarded.
const LINGER_TIME: Duration = Duration::from_secs(2);
/// Lingering close of an idle keep-alive connection at shutdown: long
/// enough for a request already on its way to be read and dropped rather
/// than reset, short enough that a drain never waits on idle clients
/// (hyper waits 20 ms; this was the full `LINGER_TIME` per connection).
const IDLE_LINGER_TIME: Duration = Duration::from_millis(100);
/// A buffer whose capacity is over this after a batch is freed (the next
/// batch allocates what it needs): what a connection keeps between bursts.
const KEEP_BUF: usize = 4096;
/// Decoded requests a connection keeps room for between batches.
const KEEP_BATCH: usize = 8;
/// Room asked for a response head besides its body.
const HEAD_ROOM: usize = 512;
/// Pipelined responses are written once this many bytes wait in the
/// output buffer, before the next is made: a connection holds at most
/// this plus one inlined response, not a whole batch (64 pipelined 16 KiB
/// files were 1 MiB each: 1 000 such connections at once took 450 MiB;
/// now 320 MiB), and a client that does not read stops being served at
/// the socket's limit. 64 KiB held less (125 MiB) but cost 12% of the
/// 16-deep pipelined 16 KiB file rate (four writes a batch, not one).
const FLUSH_AT: usize = 256 * 1024;
/// The output buffer's largest size in a batch of inlined responses.
const OUT_MAX: usize = FLUSH_AT + INLINE_BODY + HEAD_ROOM;

/// State shared by the accept loop and the connections of one server on one
/// thread.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: ServerConfig,
    /// Serve TLS with this (see [`crate::Server::tls`]).
    pub(crate) tls: Option<crate::TlsConfig>,
    /// Read with `read_pooled` where it copies nothing, rather than into a
    /// buffer of the connection's own.
    pooled_reads: bool,
    /// Open connections, and the shutdown broadcast they watch.
    pub(crate) drain: Rc<Drain>,
    /// Bytes of input all connections hold (see the module docs).
    budget: InputBudget,
    /// Ciphertext of TLS handshakes under way (see [`Handshakes`]).
    handshakes: Handshakes,
}

impl Shared {
    pub(crate) fn new(config: ServerConfig, tls: Option<crate::TlsConfig>) -> Shared {
        Shared {
            budget: InputBudget::new(config.max_buffered_bytes),
            handshakes: Handshakes::default(),
            config,
            tls,
            pooled_reads: ringkit::net::pooled_reads_are_copy_free(),
            drain: Drain::new(),
        }
    }

    fn shutting_down(&self) -> bool {
        self.drain.is_draining()
    }
}

/// One item of a decoded batch.
enum Item {
    Request(Request),
    Refused(Error),
}

/// The file ended before its `Content-Length`: the connection must close.
fn truncated() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "file shorter than its Content-Length",
    )
}

/// Per-connection state.
struct Conn<H> {
    stream: Transport,
    handler: Rc<H>,
    shared: Rc<Shared>,
    decoder: RequestDecoder,
    /// Bytes of a request that spans reads (not yet consumed by the decoder).
    pending: Vec<u8>,
    out: Vec<u8>,
    batch: Vec<Item>,
    /// Scratch buffer for file bodies, kept once allocated.
    file_buf: Option<Vec<u8>>,
    /// The read buffer of the epoll path, between reads.
    read_buf: Option<Vec<u8>>,
    /// io_uring: read with `read_pooled` (multishot into the buffer ring).
    pooled: bool,
    /// The one timer of this connection; re-armed lazily (see `wait_input`).
    timer: Sleep,
    last_active: Instant,
    request_since: Option<Instant>,
    /// This connection's share of the thread's input budget.
    account: Account,
    /// What its TLS handshake is charged in [`Shared::handshakes`].
    handshake: usize,
    /// Wakes this connection's task (when a newcomer evicts it).
    waker: Waker,
}

impl<H> Drop for Conn<H> {
    fn drop(&mut self) {
        self.shared.budget.release(&mut self.account);
        let limit = self.shared.config.max_buffered_bytes;
        self.shared.handshakes.charge(&mut self.handshake, 0, limit);
    }
}

/// Serve one connection until it closes.
pub(crate) async fn serve<H: Handler>(
    stream: TcpStream,
    handler: Rc<H>,
    shared: Rc<Shared>,
    guard: DrainGuard,
) {
    // Register this task's waker once, so shutdown can wake it when idle.
    let waker = poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
    guard.set_waker(waker.clone());
    let stream = match Transport::new(stream, shared.tls.as_ref()) {
        Ok(t) => t,
        Err(e) => {
            tracing::debug!("ringkit-http: TLS session: {e}");
            return;
        }
    };
    let now = Instant::now();
    let account = shared.budget.account();
    let mut c = Conn {
        // Under TLS a pooled read would hold a plaintext buffer of its own
        // (16 KiB) through every idle wait: the connection's 4 KiB one is
        // cheaper.
        pooled: shared.pooled_reads && shared.tls.is_none(),
        stream,
        handler,
        decoder: RequestDecoder::new(shared.config.limits.clone()),
        timer: ringkit::time::sleep_until(now + shared.config.idle_timeout),
        shared,
        pending: Vec::new(),
        out: Vec::new(),
        batch: Vec::new(),
        file_buf: None,
        read_buf: None,
        last_active: now,
        request_since: None,
        account,
        handshake: 0,
        waker,
    };
    if let Err(e) = c.run().await {
        tracing::debug!("ringkit-http: connection ended: {e}");
        if e.kind() == io::ErrorKind::TimedOut {
            // The send timeout: the peer took nothing for that long. A FIN
            // would queue behind the bytes it never takes and never reach
            // it (and the socket would hold its send buffer for minutes of
            // zero-window probes); a reset ends both.
            if let Err(e) = c.stream.reset_on_close() {
                tracing::debug!("ringkit-http: SO_LINGER 0 before a reset: {e}");
            }
        }
    }
    drop(guard);
}

impl<H: Handler> Conn<H> {
    fn mid_request(&self) -> bool {
        self.pending_request() || self.decoder.in_body()
    }

    /// Whether `pending` holds part of a request: not when all it holds is
    /// the empty line or two a client may send after a request (RFC 9112
    /// 2.2: a server ignores them before a request line). Such a line was
    /// charged, timed out as a request in progress (408), and under a full
    /// budget answered 503.
    fn pending_request(&self) -> bool {
        let blank =
            self.pending.len() <= 4 && self.pending.iter().all(|&b| b == b'\r' || b == b'\n');
        !blank
    }

    async fn run(&mut self) -> io::Result<()> {
        let mut more = false;
        loop {
            let chunk = if more {
                None
            } else {
                self.shared.budget.set_waiting(&self.account, true);
                let input = self.wait_input().await;
                self.shared.budget.set_waiting(&self.account, false);
                match input {
                    Input::Data(rb) => Some(rb),
                    Input::Eof | Input::Failed => return Ok(()),
                    Input::Shutdown => {
                        // A request may be in flight towards us: closing
                        // with unread bytes would reset the connection.
                        self.linger(IDLE_LINGER_TIME).await;
                        return Ok(());
                    }
                    Input::TimedOut => {
                        if self.mid_request() {
                            self.refuse(StatusCode::REQUEST_TIMEOUT).await?;
                        }
                        return Ok(());
                    }
                    Input::Evicted => {
                        tracing::debug!(
                            "ringkit-http: evicted from the input budget by a smaller request"
                        );
                        self.refuse(StatusCode::SERVICE_UNAVAILABLE).await?;
                        return Ok(());
                    }
                }
            };
            more = self.decode_batch(chunk);
            self.charge_early(more);
            let mut completed = false;
            let mut close = false;
            let mut linger = false;
            let mut batch = std::mem::take(&mut self.batch);
            let mut unanswered = batch.len();
            for item in batch.drain(..) {
                unanswered -= 1;
                match item {
                    Item::Request(req) => {
                        completed = true;
                        if self.respond(req).await? {
                            close = true;
                            break;
                        }
                        if self.out.len() >= FLUSH_AT {
                            self.flush().await?;
                        }
                    }
                    Item::Refused(e) => {
                        tracing::debug!("ringkit-http: refused request: {e}");
                        self.error_response(e.status());
                        close = true;
                        linger = true;
                        break;
                    }
                }
            }
            batch.clear();
            self.batch = batch;
            // With `more`, what is left are requests complete but past the
            // batch, decoded next without a read: not charged.
            if !close && !more && !self.charge() {
                // Over the thread's input budget: this connection's partial
                // request goes unanswered (503) rather than grow the server.
                self.drop_input();
                self.error_response(StatusCode::SERVICE_UNAVAILABLE);
                close = true;
                linger = true;
            }
            if !close && self.decoder.take_continue() {
                self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            self.flush().await?;
            self.trim();
            if close {
                // Input we will not answer (pipelined requests after this
                // one, or anything still arriving during shutdown) must be
                // drained, or the close resets the connection and can
                // destroy the responses just written.
                let unread =
                    unanswered > 0 || more || !self.pending.is_empty() || self.decoder.in_body();
                if linger || unread || self.shared.shutting_down() {
                    self.linger(LINGER_TIME).await;
                }
                return Ok(());
            }
            let now = Instant::now();
            self.last_active = now;
            if completed {
                self.request_since = None;
            }
            if self.mid_request() {
                self.request_since.get_or_insert(now);
            } else if self.shared.shutting_down() && !more {
                return Ok(());
            }
        }
    }

    /// Charge the input this connection holds to the thread's count.
    /// Returns false (and charges nothing more) when that would take the
    /// count over [`ServerConfig::max_buffered_bytes`].
    fn charge(&mut self) -> bool {
        // The memory the input takes: the buffers' capacities, up to twice
        // what was received as they grow by doubling (charging only the
        // bytes let 300 holders of ~110 KiB take 75 MiB under a 32 MiB
        // budget). A body is never reserved in full up front, so a head
        // that announces a large body costs little until the body comes
        // (when that was reserved, heads alone filled the budget and turned
        // every upload away).
        let held = self.held();
        self.shared
            .budget
            .charge(&mut self.account, held, &self.waker)
    }

    /// Memory held for input: see [`charge`](Self::charge).
    fn held(&self) -> usize {
        let pending = if self.pending_request() {
            self.pending.capacity()
        } else {
            0
        };
        pending + self.decoder.allocated()
    }

    /// Charge what the input holds once requests are decoded, before they
    /// are answered: a body just completed belongs to its request, and a
    /// connection writing a large response for as long as its client reads
    /// must neither keep its old charge (eviction could not free it) nor
    /// hold a pipelined partial request uncharged. Refused, it keeps its
    /// old charge; the charge after the batch decides.
    fn charge_early(&mut self, more: bool) {
        let held = self.held();
        // `more`: the batch is full and what is left of the input are
        // requests complete but not yet decoded (they are decoded next,
        // without a read): only ever charge less for them.
        if held < self.account.charged() || (!more && held > self.account.charged()) {
            let _ = self.charge();
        }
    }

    /// Give up the input held and its charge: for a connection that will
    /// read nothing more to decode (refused, evicted, lingering). Before a
    /// refusal is written, since that write can block for the send timeout
    /// (an evicted connection's 503 to a client that reads nothing kept
    /// its input counted, and refused others at the hard limit).
    fn drop_input(&mut self) {
        self.pending = Vec::new();
        self.decoder = RequestDecoder::new(self.decoder.limits().clone());
        self.shared.budget.release(&mut self.account);
    }

    /// Give up every buffer grown past [`KEEP_BUF`] by the batch just
    /// written (the output and the file scratch to the thread's spares, an
    /// emptied input buffer to the allocator), so memory per connection
    /// falls back once a burst is over.
    fn trim(&mut self) {
        if self.out.capacity() > KEEP_BUF {
            crate::spare::give(std::mem::take(&mut self.out));
        }
        if self
            .file_buf
            .as_ref()
            .is_some_and(|b| b.capacity() > KEEP_BUF)
        {
            if let Some(b) = self.file_buf.take() {
                crate::spare::give(b);
            }
        }
        if self.pending.is_empty() && self.pending.capacity() > KEEP_BUF {
            ringkit::alloc::freed(self.pending.capacity());
            self.pending = Vec::new();
            self.charge();
        }
        if self.batch.capacity() > KEEP_BATCH {
            self.batch = Vec::new();
        }
    }

    /// Decode complete requests into `self.batch`. Returns whether the
    /// input may hold more complete requests (the batch was full).
    fn decode_batch(&mut self, chunk: Option<Chunk>) -> bool {
        let more = match &chunk {
            Some(rb) if self.pending.is_empty() => {
                // The fast path: decode straight out of the received buffer.
                let (used, more) = decode_into(&mut self.decoder, rb, &mut self.batch);
                if used < rb.len() {
                    self.pending.extend_from_slice(&rb[used..]);
                }
                more
            }
            chunk => {
                if let Some(rb) = chunk {
                    self.pending.extend_from_slice(rb);
                }
                let (used, more) = decode_into(&mut self.decoder, &self.pending, &mut self.batch);
                self.pending.drain(..used);
                more
            }
        };
        // A ring slot goes back to the kernel here; an own buffer is kept.
        if let Some(Chunk::Owned(mut v)) = chunk {
            v.clear();
            self.read_buf = Some(v);
        }
        more
    }

    /// Call the handler and append the response. Returns whether the
    /// connection closes after it.
    async fn respond(&mut self, req: Request) -> io::Result<bool> {
        let head_only = req.method() == Method::Head;
        let keep_alive = req.keep_alive();
        let http10 = req.version() == Version::Http10;
        let (resp, panicked) = match call(&*self.handler, req).await {
            Some(r) => (r, false),
            None => (
                Response::text(StatusCode::INTERNAL_SERVER_ERROR, "internal server error\n"),
                true,
            ),
        };
        let close = !keep_alive || resp.wants_close() || panicked || self.shared.shutting_down();
        let framing = encode::Framing {
            content_length: resp.body_ref().len(),
            close,
            keep_alive_10: http10 && !close,
        };
        // A body that will be copied in: room for it before the head goes in.
        let n = framing.content_length;
        if !head_only && n <= INLINE_BODY as u64 {
            self.reserve(n as usize + HEAD_ROOM);
        }
        let head_at = self.out.len();
        write_head(&mut self.out, &resp, framing);
        if head_only || resp.status().is_bodiless() {
            return Ok(close);
        }
        match resp.into_body() {
            Body::Empty => {}
            Body::Static(b) if b.len() <= INLINE_BODY => self.append(b),
            Body::Static(b) => {
                self.flush().await?;
                self.stream.write_all(b).await.0?;
            }
            Body::Bytes(b) if b.len() <= INLINE_BODY => self.append(&b),
            Body::Bytes(b) => {
                self.flush().await?;
                self.stream.write_all(b).await.0?;
            }
            Body::File(f) => self.send_file(f, head_at).await?,
        }
        Ok(close)
    }

    /// Append a file body (small: into the output buffer; large: in pieces
    /// after flushing what precedes it, as [`FileSend`] says). `head_at`:
    /// where this response's head starts in the output buffer.
    async fn send_file(&mut self, f: FileBody, head_at: usize) -> io::Result<()> {
        let inline = f.len <= INLINE_BODY as u64;
        match self.shared.config.file_send {
            // No kTLS: under TLS a body is read and encrypted like any other.
            _ if inline || !self.stream.zero_copy() => {}
            FileSend::SendFile => {
                // The head waits (MSG_MORE) to share a segment with the body.
                if !self.out.is_empty() {
                    let out = std::mem::take(&mut self.out);
                    let (r, mut v) = self.stream.write_all_more(out).await;
                    v.clear();
                    self.out = v;
                    r?;
                }
                return self.zero_copy(f, FileSend::SendFile).await;
            }
            FileSend::Splice => {
                // Corked (nginx's tcp_nopush): the head and the spliced body
                // leave in full segments, not one short segment per splice.
                let cork = |on| self.stream.plain().is_some_and(|s| s.set_cork(on).is_ok());
                let corked = cork(true);
                let mut res = self.flush().await;
                if res.is_ok() {
                    res = self.zero_copy(f, FileSend::Splice).await;
                }
                if corked {
                    let _ = self.stream.plain().map(|s| s.set_cork(false));
                }
                return res;
            }
            FileSend::Copy => {}
        }
        // A small file gets a buffer its size, not a whole chunk.
        let need = f.len.min(FILE_CHUNK as u64) as usize;
        let mut buf = match self.file_buf.take() {
            Some(b) if b.capacity() >= need => b,
            small => {
                if let Some(b) = small {
                    crate::spare::give(b);
                }
                crate::spare::take(need)
            }
        };
        if !inline {
            self.flush().await?;
        }
        let (mut off, end) = (f.offset, f.offset.saturating_add(f.len));
        let res = async {
            while off < end {
                buf.clear();
                let want = (end - off).min(FILE_CHUNK as u64) as usize;
                let (r, b) = f.file.read_at(std::mem::take(&mut buf), off).await;
                buf = b;
                let n = r?.min(want);
                if n == 0 {
                    return Err(truncated());
                }
                buf.truncate(n);
                if inline {
                    self.append(&buf);
                } else {
                    let (r, b) = self.stream.write_all(std::mem::take(&mut buf)).await;
                    buf = b;
                    r?;
                }
                off += n as u64;
            }
            Ok(())
        }
        .await;
        buf.clear();
        self.file_buf = Some(buf);
        if res.is_err() && inline {
            // The file shrank: this response goes (its head promised more
            // than there is), the complete responses before it still leave,
            // then the connection closes.
            self.out.truncate(head_at);
            let _ = self.flush().await;
        }
        res
    }

    /// A large file body without a user-space copy (the head is flushed),
    /// by `sendfile` or through the pipe.
    async fn zero_copy(&mut self, f: FileBody, how: FileSend) -> io::Result<()> {
        let Some(tcp) = self.stream.plain() else {
            return Err(io::Error::other("a zero-copy body on a TLS connection"));
        };
        let (mut off, end) = (f.offset, f.offset.saturating_add(f.len));
        while off < end {
            let want = (end - off).min(usize::MAX as u64) as usize;
            let n = match how {
                FileSend::Splice => tcp.splice_file(&f.file, off, want).await?,
                _ => tcp.send_file(&*f.file, off, want).await?,
            };
            if n == 0 {
                return Err(truncated());
            }
            off += n as u64;
        }
        Ok(())
    }

    /// Append an error response (with `Connection: close`).
    fn error_response(&mut self, status: StatusCode) {
        let resp = Response::text(status, status.reason());
        let framing = encode::Framing {
            content_length: resp.body_ref().len(),
            close: true,
            keep_alive_10: false,
        };
        write_head(&mut self.out, &resp, framing);
        self.out.extend_from_slice(status.reason().as_bytes());
    }

    /// Answer `status`, then close lingering.
    async fn refuse(&mut self, status: StatusCode) -> io::Result<()> {
        self.drop_input();
        self.error_response(status);
        self.flush().await?;
        self.linger(LINGER_TIME).await;
        Ok(())
    }

    /// Room for `more` bytes in the output buffer: one that has to grow
    /// past [`KEEP_BUF`] is swapped for a spare of the thread's first.
    fn reserve(&mut self, more: usize) {
        let need = self.out.len() + more;
        if need > self.out.capacity() && need > KEEP_BUF {
            // Doubling, but not past what a batch needs (`OUT_MAX`).
            let grown = (2 * self.out.capacity()).min(OUT_MAX);
            let mut big = crate::spare::take(need.max(grown));
            big.extend_from_slice(&self.out);
            let small = std::mem::replace(&mut self.out, big);
            if small.capacity() > KEEP_BUF {
                crate::spare::give(small);
            }
        }
    }

    /// Append `bytes` to the output buffer (see [`Conn::reserve`]).
    fn append(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        self.out.extend_from_slice(bytes);
    }

    /// Write the output buffer, if it holds anything.
    async fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let (r, mut v) = self.stream.write_all(std::mem::take(&mut self.out)).await;
        v.clear();
        self.out = v;
        r
    }
}

/// Decode complete requests from `input` into `batch` (stopping after an
/// error, a request that closes the connection, or a full batch). Returns
/// the bytes consumed and whether the batch was full.
fn decode_into(decoder: &mut RequestDecoder, input: &[u8], batch: &mut Vec<Item>) -> (usize, bool) {
    let mut used = 0;
    loop {
        match decoder.decode(&input[used..]) {
            Ok((n, Parsed::Complete(req))) => {
                used += n;
                let last = !req.keep_alive();
                batch.push(Item::Request(req));
                if last {
                    return (used, false);
                }
                if batch.len() >= MAX_BATCH {
                    return (used, true);
                }
            }
            Ok((n, Parsed::Partial)) => return (used + n, false),
            Err(e) => {
                batch.push(Item::Refused(e));
                return (input.len(), false);
            }
        }
    }
}

/// Run the handler, turning a panic (while building or polling its future)
/// into `None`.
async fn call<H: Handler>(handler: &H, req: Request) -> Option<Response> {
    let fut = catch_unwind(AssertUnwindSafe(|| handler.call(req))).ok()?;
    let mut fut = pin!(fut);
    poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(r)) => Poll::Ready(Some(r)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        },
    )
    .await
}
