//! HTTP chaos clients against `ringkit serve DIR`, where DIR holds files
//! whose bytes the clients can regenerate ([`ByteGen`]).
//!
//! # A session
//! One connection; 1–12 rounds, each a pipelined burst of 1–8 random
//! requests written together (in up to 6 pieces split at random points,
//! by a writer task while the session reads the responses in order):
//! - `GET /fN` (200, `Content-Length` = file size, body = the file),
//! - `HEAD /fN` (200, `Content-Length` = file size, no body),
//! - `GET /missing…` (404),
//! - `POST /fN` with a body by `Content-Length` or chunked (405: the
//!   server must still consume the body exactly, or the next pipelined
//!   request would be misread),
//! - at random, the session's last request carries `Connection: close`
//!   and the server must close after answering it;
//! - one session in ten vanishes (RST) in the middle of a request.
//!
//! Every status, `Content-Length` and body byte is checked. Across a
//! faulty link a 408 (Request Timeout) is also the server's right, for a
//! request the link held back past the server's timeout ([`sendq`]);
//! never for one the server's kernel had whole.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit::net::TcpStream;
use serde::Serialize;

use super::sendq;
use super::slots::{run_slots, Chaos, Common};
use super::tally::Tally;

use crate::harness::rng::{ByteGen, Rng};

/// Files in the served directory.
pub const FILES: usize = 32;
/// Largest file.
const MAX_FILE: usize = 256 * 1024;
/// Largest request body.
const MAX_POST: usize = 64 * 1024;

/// The stream id of file `i`'s bytes.
pub fn file_id(i: usize) -> u64 {
    0xF11E_0000 + i as u64
}

/// The size of file `i` for `seed`.
pub fn file_size(seed: u64, i: usize) -> usize {
    if i == 0 {
        return 0;
    }
    Rng::for_stream(seed, 0xF11E, i as u64).size(MAX_FILE)
}

/// Write the files the clients will ask for into `dir`.
pub fn make_files(dir: &Path, seed: u64) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for i in 0..FILES {
        let data = ByteGen::message(file_id(i), 0, file_size(seed, i));
        std::fs::write(dir.join(format!("f{i}.bin")), data)?;
    }
    Ok(())
}

/// What the HTTP clients did and saw.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct HttpCounts {
    /// What every chaos client counts.
    #[serde(flatten)]
    pub tally: Tally,
    /// Requests written whole.
    pub requests: u64,
    /// Responses received and verified.
    pub responses_verified: u64,
    /// Requests with a body by `Content-Length` / chunked.
    pub posts_length: u64,
    /// Chunked-body requests.
    pub posts_chunked: u64,
    /// HEAD requests.
    pub heads: u64,
    /// 404s asked for.
    pub not_found: u64,
    /// Sessions ended by `Connection: close` (the server's close verified).
    pub closes: u64,
    /// Clients that vanished (RST) mid-request.
    pub vanished: u64,
    /// After a graceful shutdown began: connections the server closed
    /// (FIN) between two responses with pipelined requests still unanswered
    /// (requests it had not started; a client retries them, RFC 9112 §9.3.1).
    pub closed_between_requests_at_shutdown: u64,
    /// Responses with `Connection: close` the client did not ask for (the
    /// rest of that burst is unanswered, as the server said).
    pub server_closes: u64,
    /// Requests left unanswered after a `Connection: close` response or a
    /// close between requests during shutdown.
    pub unanswered_after_close: u64,
    /// Requests answered 408 (Request Timeout) that the link had held back
    /// past the server's request timeout ([`sendq::Held`]): only across a
    /// faulty link ([`super::ChaosConfig::request_timeout`]).
    #[serde(default)]
    pub timed_out: u64,
}

/// Settings of one HTTP chaos run (the seed also picks the file sizes).
pub type HttpChaos = super::ChaosConfig;

struct Ctx {
    cfg: HttpChaos,
    common: Common<HttpCounts>,
}

impl Ctx {
    fn count(&self, f: impl FnOnce(&mut HttpCounts)) {
        self.common.count(f);
    }
}

/// Run until `cfg.stop_at`, then let every session finish its burst.
pub fn run(
    cfg: HttpChaos,
    backend: ringkit::Backend,
    on_stop: &mut dyn FnMut(),
    tick: &mut dyn FnMut(&HttpCounts),
) -> io::Result<HttpCounts> {
    let ctx = Rc::new(Ctx {
        common: Common::new(cfg.conns, cfg.stop_at),
        cfg,
    });
    run_slots(ctx, backend, on_stop, tick)
}

impl Chaos for Ctx {
    type Counts = HttpCounts;

    fn common(&self) -> &Common<HttpCounts> {
        &self.common
    }

    async fn session(self: Rc<Self>, slot: usize, n: u64) {
        let rng = Rng::for_stream(self.cfg.seed ^ 0x4854_5450, slot as u64, n);
        session(&self, rng).await
    }
}

/// A request and what its response must be.
struct Req {
    bytes: Vec<u8>,
    want: Want,
    close: bool,
}

enum Want {
    /// 200 with file `i` (body unless HEAD).
    File { i: usize, head: bool },
    /// This status, any body.
    Status(u16),
}

fn make_request(ctx: &Ctx, rng: &mut Rng, close: bool) -> Req {
    let conn_hdr = if close { "Connection: close\r\n" } else { "" };
    let i = rng.range(0, FILES as u64 - 1) as usize;
    match rng.range(0, 99) {
        0..=69 => Req {
            bytes: format!("GET /f{i}.bin HTTP/1.1\r\nHost: t\r\n{conn_hdr}\r\n").into_bytes(),
            want: Want::File { i, head: false },
            close,
        },
        70..=79 => {
            ctx.count(|c| c.heads += 1);
            Req {
                bytes: format!("HEAD /f{i}.bin HTTP/1.1\r\nHost: t\r\n{conn_hdr}\r\n").into_bytes(),
                want: Want::File { i, head: true },
                close,
            }
        }
        80..=84 => {
            ctx.count(|c| c.not_found += 1);
            Req {
                bytes: format!(
                    "GET /missing-{}.bin HTTP/1.1\r\nHost: t\r\n{conn_hdr}\r\n",
                    rng.next_u64()
                )
                .into_bytes(),
                want: Want::Status(404),
                close,
            }
        }
        85..=92 => {
            ctx.count(|c| c.posts_length += 1);
            let body = ByteGen::message(rng.next_u64(), 0, rng.size(MAX_POST));
            let mut bytes = format!(
                "POST /f{i}.bin HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n{conn_hdr}\r\n",
                body.len()
            )
            .into_bytes();
            bytes.extend_from_slice(&body);
            Req {
                bytes,
                want: Want::Status(405),
                close,
            }
        }
        _ => {
            ctx.count(|c| c.posts_chunked += 1);
            let body = ByteGen::message(rng.next_u64(), 0, rng.size(MAX_POST));
            let mut bytes = format!(
                "POST /f{i}.bin HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n{conn_hdr}\r\n"
            )
            .into_bytes();
            let mut rest = &body[..];
            while !rest.is_empty() {
                let n = (rng.size(16 * 1024)).min(rest.len());
                bytes.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                bytes.extend_from_slice(&rest[..n]);
                bytes.extend_from_slice(b"\r\n");
                rest = &rest[n..];
            }
            bytes.extend_from_slice(b"0\r\n\r\n");
            Req {
                bytes,
                want: Want::Status(405),
                close,
            }
        }
    }
}

/// How a connection failed.
enum End {
    /// Bytes that are no response: a mismatch (a reset cuts a stream
    /// short but never garbles it, so no reset excuses it).
    Garbage(String),
    /// End of stream in the middle of a response.
    Eof,
    /// End of stream where a response would start.
    EofBetween,
    Error(String),
    Mismatch,
    Stall,
}

async fn session(ctx: &Rc<Ctx>, mut rng: Rng) {
    let Some(s) = super::slots::connect(&ctx.common, &ctx.cfg, |c| &mut c.tally).await else {
        return;
    };
    let s = Rc::new(s);
    let _ = s.set_nodelay(true);
    ctx.count(|c| c.tally.connects += 1);
    // Where this connection's bytes start in the acknowledged count, and
    // how many its bursts have written so far.
    let acked_base = sendq::sent(s.as_raw_fd()).map_or(0, |x| x.acked);
    let mut sent_before = 0u64;
    let mut rd = Reader {
        s: s.clone(),
        buf: Vec::new(),
        pos: 0,
    };
    let mut answered = 0u64;
    let vanish = rng.chance(0.1);
    let end_with_close = rng.chance(0.3);
    let rounds = rng.range(1, 12);
    for round in 0..rounds {
        if ctx.common.stopping.get() {
            break;
        }
        if vanish && round + 1 == rounds {
            // Half a request, then a RST.
            let r = make_request(ctx, &mut rng, false);
            let cut = rng.range(1, r.bytes.len() as u64 - 1) as usize;
            let _ = s.write_all(r.bytes[..cut].to_vec()).await;
            let _ = s.set_linger(Some(Duration::ZERO));
            ctx.count(|c| c.vanished += 1);
            return;
        }
        let n = rng.range(1, 8) as usize;
        if n > 1 {
            ctx.count(|c| c.tally.bursts += 1);
        }
        let last_round = round + 1 == rounds;
        let reqs: Vec<Req> = (0..n)
            .map(|k| make_request(ctx, &mut rng, end_with_close && last_round && k + 1 == n))
            .collect();
        let mut wire = Vec::new();
        let mut ends = Vec::new();
        for r in &reqs {
            wire.extend_from_slice(&r.bytes);
            ends.push(wire.len());
        }
        let pieces = split_points(&mut rng, wire.len());
        let burst = Burst {
            began: Instant::now(),
            at: acked_base + sent_before,
        };
        sent_before += wire.len() as u64;
        let writer = {
            let s = s.clone();
            ringkit::spawn(async move {
                let mut at = 0;
                for p in pieces {
                    let (res, _) = s.write_all(wire[at..p].to_vec()).await;
                    res?;
                    at = p;
                    ringkit::yield_now().await;
                }
                io::Result::Ok(())
            })
        };
        ctx.count(|c| c.requests += n as u64);
        let mut server_closed = false;
        for (k, r) in reqs.iter().enumerate() {
            match check_response(ctx, &mut rd, r, (&burst, ends[k])).await {
                Ok(Answer { close, timed_out }) => {
                    answered += 1;
                    // A 408 closes, and the writer may still be blocked on
                    // the request it timed out: stop it here too.
                    if close && (!r.close || timed_out) {
                        // The server said it closes: the rest of the burst
                        // stays unanswered, as announced.
                        ctx.count(|c| {
                            c.server_closes += 1;
                            c.unanswered_after_close += (n - k - 1) as u64;
                        });
                        server_closed = true;
                        break;
                    }
                }
                Err(End::EofBetween)
                    if ctx.common.stopping.get() && ctx.cfg.graceful_stop && answered > 0 =>
                {
                    writer.abort();
                    ctx.count(|c| {
                        c.closed_between_requests_at_shutdown += 1;
                        c.unanswered_after_close += (n - k) as u64;
                    });
                    return;
                }
                Err(e) => {
                    writer.abort();
                    judge(ctx, answered, e);
                    return;
                }
            }
        }
        if server_closed {
            writer.abort();
            let _ = writer.await;
            return;
        }
        match writer.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                judge(ctx, answered, End::Error(format!("write: {e}")));
                return;
            }
            Err(_) => {}
        }
        if reqs.iter().any(|r| r.close) {
            match ringkit::time::timeout(ctx.cfg.stall, rd.fill()).await {
                Ok(Ok(0)) => ctx.count(|c| c.closes += 1),
                Ok(Ok(_)) => {
                    ctx.count(|c| {
                        c.tally.mismatches += 1;
                        c.tally
                            .error("bytes after the response to Connection: close".into());
                    });
                }
                Ok(Err(e)) => judge(ctx, answered, e),
                Err(_) => judge(ctx, answered, End::Stall),
            }
            return;
        }
    }
}

fn split_points(rng: &mut Rng, len: usize) -> Vec<usize> {
    let mut v: Vec<usize> = if len > 1 && rng.chance(0.3) {
        (0..rng.range(1, 5))
            .map(|_| rng.range(1, len as u64 - 1) as usize)
            .collect()
    } else {
        Vec::new()
    };
    v.push(len);
    v.sort_unstable();
    v.dedup();
    v
}

fn judge(ctx: &Ctx, answered: u64, e: End) {
    match e {
        End::Mismatch => {}
        End::Garbage(msg) => ctx.count(|c| {
            c.tally.mismatches += 1;
            c.tally.error(format!("{msg} after {answered} responses"));
        }),
        End::Stall => ctx.count(|c| {
            c.tally.stalls += 1;
            c.tally.error(format!("stalled after {answered} responses"));
        }),
        End::Eof | End::EofBetween | End::Error(_) => {
            if ctx.common.stopping.get() && ctx.cfg.graceful_stop && answered == 0 {
                ctx.count(|c| c.tally.unserved_at_shutdown += 1);
                return;
            }
            let what = match e {
                End::Error(m) => m,
                End::EofBetween => "EOF where a response was due".into(),
                _ => "EOF inside a response".into(),
            };
            ctx.count(|c| {
                c.tally.losses += 1;
                c.tally.error(format!("{what} after {answered} responses"));
            });
        }
    }
}

/// Buffered response reader.
struct Reader {
    s: Rc<TcpStream>,
    buf: Vec<u8>,
    pos: usize,
}

impl Reader {
    /// Read more; `Ok(0)` at EOF.
    async fn fill(&mut self) -> Result<usize, End> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let (res, b) = self.s.read(Vec::with_capacity(64 * 1024)).await;
        match res {
            Ok(n) => {
                self.buf.extend_from_slice(&b[..n]);
                Ok(n)
            }
            Err(e) => Err(End::Error(format!("read: {e}"))),
        }
    }

    async fn fill_some(&mut self, stall: Duration) -> Result<(), End> {
        match ringkit::time::timeout(stall, self.fill()).await {
            Ok(Ok(0)) => Err(End::Eof),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(End::Stall),
        }
    }
}

/// Parsed response head: status, Content-Length, whether chunked or close.
struct Head {
    status: u16,
    len: Option<usize>,
    chunked: bool,
    close: bool,
}

async fn read_head(rd: &mut Reader, stall: Duration) -> Result<Head, End> {
    loop {
        let mut hdrs = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut hdrs);
        match resp.parse(&rd.buf[rd.pos..]) {
            Ok(httparse::Status::Complete(n)) => {
                let mut head = Head {
                    status: resp.code.unwrap_or(0),
                    len: None,
                    chunked: false,
                    close: false,
                };
                for h in resp.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        head.len = std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.trim().parse().ok());
                    } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                        head.chunked = true;
                    } else if h.name.eq_ignore_ascii_case("connection") {
                        head.close = h.value.eq_ignore_ascii_case(b"close");
                    }
                }
                rd.pos += n;
                return Ok(head);
            }
            Ok(httparse::Status::Partial) => {
                let between = rd.pos == rd.buf.len();
                match rd.fill_some(stall).await {
                    Err(End::Eof) if between => return Err(End::EofBetween),
                    r => r?,
                }
            }
            Err(e) => return Err(End::Garbage(format!("bad response head: {e}"))),
        }
    }
}

/// A burst being written.
struct Burst {
    /// When its first byte was handed to the socket.
    began: Instant,
    /// Its first byte's place in what the socket has had acknowledged
    /// (`tcpi_bytes_acked`, [`sendq::sent`]).
    at: u64,
}

impl Burst {
    /// What the socket says of the request ending at offset `end`, now.
    fn held(&self, s: &TcpStream, end: usize) -> io::Result<sendq::Held> {
        sendq::Held::now(s.as_raw_fd(), self.began, self.at + end as u64)
    }
}

/// Verify the response to `r` (of `burst`, ending at offset `end` in it).
async fn check_response(
    ctx: &Ctx,
    rd: &mut Reader,
    r: &Req,
    (burst, end): (&Burst, usize),
) -> Result<Answer, End> {
    let stall = ctx.cfg.stall;
    let head = read_head(rd, stall).await?;
    let bad = |msg: String| {
        ctx.count(|c| {
            c.tally.mismatches += 1;
            c.tally.error(msg);
        });
        End::Mismatch
    };
    if head.chunked {
        return Err(bad(
            "chunked response (the server always sends Content-Length)".into(),
        ));
    }
    // A 408 is the server's right only for a request the link held back
    // past the server's timeout ([`sendq`]).
    let timed_out = match ctx.cfg.request_timeout {
        Some(t) if head.status == 408 => {
            let held = burst
                .held(&rd.s, end)
                .map_err(|e| End::Error(format!("{e}")))?;
            if !held.may_time_out(t) {
                return Err(bad(format!(
                    "408 for {:?}, a request not held back past the server's {t:?} ({held:?})",
                    String::from_utf8_lossy(&r.bytes[..r.bytes.len().min(40)])
                )));
            }
            ctx.count(|c| c.timed_out += 1);
            true
        }
        _ => false,
    };
    let (want_status, body_len, file) = match r.want {
        _ if timed_out => (408, head.len.unwrap_or(0), None),
        Want::File { i, head: is_head } => {
            let size = file_size(ctx.cfg.seed, i);
            if head.len != Some(size) {
                return Err(bad(format!(
                    "f{i}.bin: Content-Length {:?}, want {size}",
                    head.len
                )));
            }
            (200, if is_head { 0 } else { size }, Some(i))
        }
        Want::Status(s) => (s, head.len.unwrap_or(0), None),
    };
    if head.status != want_status {
        return Err(bad(format!(
            "status {} for {:?}, want {want_status}",
            head.status,
            String::from_utf8_lossy(&r.bytes[..r.bytes.len().min(40)])
        )));
    }
    while rd.buf.len() - rd.pos < body_len {
        rd.fill_some(stall).await?;
    }
    let body = &rd.buf[rd.pos..rd.pos + body_len];
    if let Some(i) = file {
        let mut want = vec![0u8; body_len];
        ByteGen::new(file_id(i), 0).fill(&mut want);
        if body != &want[..] {
            let at = body
                .iter()
                .zip(&want)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(bad(format!("f{i}.bin: body byte {at} differs")));
        }
        ctx.count(|c| c.tally.bytes_verified += body_len as u64);
    }
    rd.pos += body_len;
    ctx.count(|c| c.responses_verified += 1);
    if r.close && !head.close {
        return Err(bad(
            "no Connection: close in the answer to a request with it".into(),
        ));
    }
    if head.close && rd.pos < rd.buf.len() {
        return Err(bad(format!(
            "{} bytes after a response that said Connection: close",
            rd.buf.len() - rd.pos
        )));
    }
    Ok(Answer {
        close: head.close,
        timed_out,
    })
}

/// A response verified.
struct Answer {
    /// It said `Connection: close`.
    close: bool,
    /// A 408 the server had the right to send.
    timed_out: bool,
}

/// Fresh connections after the chaos: a few files, each on its own
/// connection with `Connection: close`, must come back intact.
pub fn final_check(addr: SocketAddr, seed: u64, limit: Duration) -> io::Result<()> {
    use std::io::{Read, Write};
    for i in [0, 1, FILES / 2, FILES - 1] {
        let mut s = std::net::TcpStream::connect_timeout(&addr, limit)?;
        s.set_read_timeout(Some(limit))?;
        s.write_all(
            format!("GET /f{i}.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
        )?;
        let mut all = Vec::new();
        s.read_to_end(&mut all)?;
        let mut hdrs = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut hdrs);
        let n = match resp.parse(&all) {
            Ok(httparse::Status::Complete(n)) => n,
            _ => return Err(crate::harness::err::invalid_data("bad response head")),
        };
        let want = ByteGen::message(file_id(i), 0, file_size(seed, i));
        if resp.code != Some(200) || all[n..] != want[..] {
            return Err(crate::harness::err::invalid_data(format!(
                "GET /f{i}.bin: status {:?}, {} body bytes (want 200, {})",
                resp.code,
                all.len() - n,
                want.len()
            )));
        }
    }
    Ok(())
}
