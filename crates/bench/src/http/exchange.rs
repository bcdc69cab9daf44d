//! One exchange on a load connection: write a batch of requests, read and
//! check its responses in order (status, framing, body length and, where
//! asked, content), and count what went wrong in the run's shared state.

use std::cell::{Cell, RefCell};

use hdrhistogram::Histogram;
use ringkit::net::TcpStream;

use super::response::{parse_response, Parse, Response};
use crate::harness::open_loop::Window;

/// What connections ask for: one request, or a mix (requests built once).
pub(super) enum Asks {
    One(Vec<u8>),
    Mix(Vec<(Vec<u8>, Want)>),
}

/// A response's expected body: its length and, when known, its CRC-32C.
pub(super) type Want = (usize, Option<u32>);

/// Largest response the generator buffers.
pub(super) const MAX_RESPONSE: usize = 16 << 20;
/// Bodies up to this size are checked in every response; larger ones in
/// the first response of each connection and every fourth after it (a
/// CRC-32C of a MiB costs the generator about 0.1 ms).
pub const VERIFY_ALL_UP_TO: usize = 256 * 1024;

/// Whether the `nth` response (from 0) of a connection, with a body of
/// `body_len` bytes, has its bytes checked.
pub fn verify(nth: u64, body_len: usize) -> bool {
    body_len <= VERIFY_ALL_UP_TO || nth % 4 == 0
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) connect: Cell<u64>,
    pub(super) read: Cell<u64>,
    pub(super) write: Cell<u64>,
    pub(super) bad_status: Cell<u64>,
    pub(super) bad_body: Cell<u64>,
    pub(super) bad_content: Cell<u64>,
    pub(super) malformed: Cell<u64>,
}

pub(super) struct Shared {
    pub(super) phase: Cell<u8>,
    /// The measured window (open loop).
    pub(super) win: Window,
    /// Open loop: counted requests unanswered, and never sent, at the end.
    pub(super) unanswered: Cell<u64>,
    pub(super) unsent: Cell<u64>,
    /// Open loop: the most requests in flight on one connection.
    pub(super) most_in_flight: Cell<usize>,
    pub(super) requests: Cell<u64>,
    pub(super) responses: Cell<u64>,
    pub(super) bytes: Cell<u64>,
    pub(super) started: Cell<usize>,
    pub(super) busy: Cell<usize>,
    pub(super) errs: Counters,
    pub(super) expect_status: u16,
    pub(super) expect_body: Cell<Option<usize>>,
    pub(super) expect_crc: Option<u32>,
    pub(super) verified: Cell<u64>,
    pub(super) first_error: RefCell<Option<String>>,
    pub(super) hist: RefCell<Histogram<u64>>,
    /// Responses of each connection slot in the window.
    pub(super) per_conn: RefCell<Vec<u64>>,
}

impl Shared {
    pub(super) fn error(&self, c: &Cell<u64>, what: impl FnOnce() -> String) {
        c.set(c.get() + 1);
        let mut f = self.first_error.borrow_mut();
        if f.is_none() {
            *f = Some(what());
        }
    }
}

/// How one request went.
pub(super) enum Outcome {
    /// Response complete and framed; the connection can be reused if `reuse`.
    Done { reuse: bool },
    /// The connection is broken (error already counted).
    Broken,
}

/// A connection's buffers: the requests to write, the read buffer, and
/// the bytes of a response that spans reads.
pub(super) struct Bufs<'a> {
    pub(super) req: &'a mut Vec<u8>,
    pub(super) rbuf: &'a mut Vec<u8>,
    pub(super) acc: &'a mut Vec<u8>,
}

/// Write the batch in `req` (one request per entry of `wants`), then read
/// and check its responses in order (`nth`: responses so far on this
/// connection).
pub(super) async fn exchange(
    s: &TcpStream,
    counting: bool,
    wants: &[Option<Want>],
    bufs: Bufs<'_>,
    nth: &mut u64,
    sh: &Shared,
) -> Outcome {
    let Bufs { req, rbuf, acc } = bufs;
    let (res, r) = s.write_all(std::mem::take(req)).await;
    *req = r;
    if let Err(e) = res {
        sh.error(&sh.errs.write, || format!("write: {e}"));
        return Outcome::Broken;
    }
    if counting {
        sh.requests.set(sh.requests.get() + wants.len() as u64);
    }
    acc.clear();
    let mut done = 0;
    let mut reuse = true;
    loop {
        rbuf.clear();
        let (res, b) = s.read(std::mem::take(rbuf)).await;
        *rbuf = b;
        let n = match res {
            Ok(0) => {
                sh.error(&sh.errs.read, || {
                    "connection closed before the response was complete".into()
                });
                return Outcome::Broken;
            }
            Ok(n) => n,
            Err(e) => {
                sh.error(&sh.errs.read, || format!("read: {e}"));
                return Outcome::Broken;
            }
        };
        if counting && sh.phase.get() == 1 {
            sh.bytes.set(sh.bytes.get() + n as u64);
        }
        // Usually whole responses arrive in one read: parse them in place.
        let took = if acc.is_empty() {
            let took = take_responses(&rbuf[..n], wants, &mut done, &mut reuse, nth, sh);
            if let Some(t) = took {
                acc.extend_from_slice(&rbuf[t..n]);
            }
            took
        } else {
            acc.extend_from_slice(&rbuf[..n]);
            let took = take_responses(acc, wants, &mut done, &mut reuse, nth, sh);
            if let Some(t) = took {
                acc.drain(..t);
            }
            took
        };
        if took.is_none() {
            return Outcome::Broken;
        }
        if done == wants.len() {
            return Outcome::Done { reuse };
        }
        if !reuse {
            sh.error(&sh.errs.read, || {
                "the server closed with pipelined requests unanswered".into()
            });
            return Outcome::Broken;
        }
        if acc.len() > MAX_RESPONSE {
            sh.error(&sh.errs.malformed, || {
                format!("response larger than {MAX_RESPONSE} bytes")
            });
            return Outcome::Broken;
        }
    }
}

/// Check the complete responses at the start of `buf` (`done` of `wants`
/// already checked); how many bytes they took, or `None` on a framing error
/// or bytes after the last response expected.
fn take_responses(
    buf: &[u8],
    wants: &[Option<Want>],
    done: &mut usize,
    reuse: &mut bool,
    nth: &mut u64,
    sh: &Shared,
) -> Option<usize> {
    let mut pos = 0;
    while *done < wants.len() && *reuse {
        match parse_response(&buf[pos..]) {
            Ok(Parse::Partial) => return Some(pos),
            Ok(Parse::Complete(r)) => {
                check_response(&buf[pos..], &r, wants[*done], nth, sh);
                pos += r.len;
                *done += 1;
                *reuse = !r.close;
            }
            Err(e) => {
                sh.error(&sh.errs.malformed, || e.to_string());
                return None;
            }
        }
    }
    if *done == wants.len() && pos != buf.len() {
        sh.error(&sh.errs.malformed, || {
            format!(
                "{} bytes after the last response expected ({} requests were in flight)",
                buf.len() - pos,
                wants.len()
            )
        });
        return None;
    }
    Some(pos)
}

/// Check one complete response framed at the start of `buf` against what
/// it must be (`want`, or the run's expectation), counting what is wrong;
/// `nth` counts the connection's responses (for the content sample).
pub(super) fn check_response(
    buf: &[u8],
    r: &Response,
    want: Option<Want>,
    nth: &mut u64,
    sh: &Shared,
) {
    if r.status != sh.expect_status {
        sh.error(&sh.errs.bad_status, || {
            format!("status {} (expected {})", r.status, sh.expect_status)
        });
    }
    let (want_len, want_crc) = match want {
        Some((len, crc)) => (Some(len), crc),
        None => (sh.expect_body.get(), sh.expect_crc),
    };
    match want_len {
        None => sh.expect_body.set(Some(r.body_len)),
        Some(want) if want != r.body_len => {
            sh.error(&sh.errs.bad_body, || {
                format!("body of {} bytes (expected {want})", r.body_len)
            });
        }
        Some(_) => {}
    }
    if let (Some(crc), Some(at)) = (want_crc, r.body_at) {
        if verify(*nth, r.body_len) {
            let body = &buf[at..at + r.body_len];
            sh.verified.set(sh.verified.get() + 1);
            if crc32c::crc32c(body) != crc {
                sh.error(&sh.errs.bad_content, || {
                    format!(
                        "body bytes differ from the expected ones (CRC-32C {:08x}, expected {crc:08x})",
                        crc32c::crc32c(body)
                    )
                });
            }
        }
    }
    *nth += 1;
}
