//! The hostile clients, one function each. Every attack runs against a
//! fresh server (see `run_attack`), beside the well-behaved probe, and
//! fills in what it saw; the budgets are checked by the caller.

use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use super::ctx::{Ctx, Outcome};
use super::ctx::{HOLD, SLACK};
use super::h2::Frames;
use super::held::Held;
use super::target::{self, Conn, Target};

/// One hostile client's behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Attack {
    /// Connections that say nothing, up to and past the connection cap.
    IdleFlood,
    /// Connect, then close with `SO_LINGER` 0 (a reset), as fast as possible.
    ResetFlood,
    /// The opening (request head, ClientHello, record) a byte a second.
    SlowOpening,
    /// A request head, then the body a byte a second (HTTP).
    SlowBody,
    /// A whole opening (one request, a TLS handshake, the h2 preface, a
    /// record), then silence.
    OpenThenSilent,
    /// Requests pipelined into a full socket; replies never read.
    NeverRead,
    /// 64 pipelined ~16 KiB replies read in full, then idleness: memory
    /// per connection must fall back.
    BurstThenIdle,
    /// Almost-maximal request bodies or records, never finished.
    MaxBodies,
    /// More connections than the server has fds (its limit lowered).
    FdExhaustion,
    /// HTTP/2: WINDOW_UPDATE frames back to back, never reading.
    H2WindowFlood,
    /// HTTP/2: PING frames back to back, reading the answers.
    H2PingFlood,
    /// HTTP/2: streams with no window, on connections that keep sending
    /// PINGs.
    H2ZeroWindow,
    /// HTTP/2: each request reset as soon as it is sent, on new streams.
    H2RapidReset,
    /// HTTP/2: a header block continued without end.
    H2Continuation,
    /// HTTP/2: SETTINGS frames back to back, their ACKs never read.
    H2SettingsFlood,
    /// HTTP/2: empty DATA frames on an open request stream.
    H2EmptyFrames,
    /// HTTP/2: requests each followed by a frame the server must answer
    /// with RST_STREAM (CVE-2025-8671).
    H2MadeYouReset,
    /// HTTP/2: header blocks that name one 4 KB dynamic-table entry
    /// thousands of times (each decodes to tens of MB).
    H2HpackBomb,
    /// TLS: all but the last 100 bytes of a 64 KiB ClientHello (the
    /// largest rustls collects), on many connections.
    TlsBigHello,
    /// TLS: full handshakes back to back, each connection then closed.
    TlsHandshakeFlood,
    /// HTTP/1.1: small GETs pipelined back to back, replies read.
    H1PipelineFlood,
    /// HTTP/2: WINDOW_UPDATE frames, whatever the server sends read.
    H2WindowFloodRead,
    /// HTTP/2: PING frames whose answers are never read.
    H2PingFloodUnread,
    /// HTTP/2: the input budget filled by unfinished HTTP/1.1 heads while
    /// another client downloads 16 MiB over h2; every byte must arrive.
    H2BudgetDownload,
    /// HTTP/2: window granted a byte at a time on 100 streams
    /// (CVE-2019-9511).
    H2DataDribble,
    /// HTTP/2: PRIORITY frames reordering ever new streams
    /// (CVE-2019-9513).
    H2PriorityChurn,
    /// HTTP/2: requests the server must reset, its resets never read
    /// (CVE-2019-9514).
    H2ResetFloodUnread,
    /// HTTP/2: HEADERS of empty names and values (CVE-2019-9516).
    H2EmptyHeaders,
}

/// Every attack, in the order of the report.
pub const ALL: [Attack; 28] = [
    Attack::IdleFlood,
    Attack::ResetFlood,
    Attack::SlowOpening,
    Attack::SlowBody,
    Attack::OpenThenSilent,
    Attack::NeverRead,
    Attack::BurstThenIdle,
    Attack::MaxBodies,
    Attack::FdExhaustion,
    Attack::H2WindowFlood,
    Attack::H2PingFlood,
    Attack::H2ZeroWindow,
    Attack::H2RapidReset,
    Attack::H2Continuation,
    Attack::H2SettingsFlood,
    Attack::H2EmptyFrames,
    Attack::H2MadeYouReset,
    Attack::H2HpackBomb,
    Attack::TlsBigHello,
    Attack::TlsHandshakeFlood,
    Attack::H1PipelineFlood,
    Attack::H2WindowFloodRead,
    Attack::H2PingFloodUnread,
    Attack::H2BudgetDownload,
    Attack::H2DataDribble,
    Attack::H2PriorityChurn,
    Attack::H2ResetFloodUnread,
    Attack::H2EmptyHeaders,
];

/// The probe's p99 budget under a frame flood, seconds (the same hyper on
/// tokio: about 0.1 s; ringkit without a cooperative budget: 0.7-1.4 s).
pub const FLOOD_P99: f64 = 0.5;

/// The soft and hard fd limit of the server under `FdExhaustion`.
pub const FD_LIMIT: u64 = 256;

impl Attack {
    /// Its name in reports and `--only`.
    pub fn name(self) -> &'static str {
        match self {
            Attack::IdleFlood => "idle-flood",
            Attack::ResetFlood => "reset-flood",
            Attack::SlowOpening => "slow-opening",
            Attack::SlowBody => "slow-body",
            Attack::OpenThenSilent => "open-then-silent",
            Attack::NeverRead => "never-read",
            Attack::BurstThenIdle => "burst-then-idle",
            Attack::MaxBodies => "max-bodies",
            Attack::FdExhaustion => "fd-exhaustion",
            Attack::H2WindowFlood => "h2-window-flood",
            Attack::H2PingFlood => "h2-ping-flood",
            Attack::H2ZeroWindow => "h2-zero-window",
            Attack::H2RapidReset => "h2-rapid-reset",
            Attack::H2Continuation => "h2-continuation",
            Attack::H2SettingsFlood => "h2-settings-flood",
            Attack::H2EmptyFrames => "h2-empty-frames",
            Attack::H2MadeYouReset => "h2-made-you-reset",
            Attack::H2HpackBomb => "h2-hpack-bomb",
            Attack::TlsBigHello => "tls-big-hello",
            Attack::TlsHandshakeFlood => "tls-handshake-flood",
            Attack::H1PipelineFlood => "h1-pipeline-flood",
            Attack::H2WindowFloodRead => "h2-window-flood-read",
            Attack::H2PingFloodUnread => "h2-ping-flood-unread",
            Attack::H2BudgetDownload => "h2-budget-download",
            Attack::H2DataDribble => "h2-data-dribble",
            Attack::H2PriorityChurn => "h2-priority-churn",
            Attack::H2ResetFloodUnread => "h2-reset-flood-unread",
            Attack::H2EmptyHeaders => "h2-empty-headers",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Result<Attack, String> {
        ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            let names: Vec<&str> = ALL.iter().map(|a| a.name()).collect();
            format!("{s:?}: no such attack (the attacks: {})", names.join(", "))
        })
    }

    /// Whether it means anything against `t` (echo holds no request, so
    /// neither a body nor a partial frame).
    pub fn applies(self, t: Target) -> bool {
        let axum = matches!(t, Target::Axum | Target::AxumTls);
        match self {
            // Every HTTP server but nginx (axum on tokio beside ringkit's).
            Attack::H1PipelineFlood => t.http() && !t.nginx(),
            // ringkit's TLS servers and axum over rustls on tokio.
            Attack::TlsHandshakeFlood => t.tls() && !t.nginx(),
            // axum on tokio stands beside ringkit's on the HTTP/2 floods
            // (it has no timeouts for the others to wait for).
            a if a.floods() => t.axum(),
            // The peers have no input budget to fill, but their download
            // is measured beside ringkit's.
            Attack::H2BudgetDownload => t.axum(),
            Attack::H2ZeroWindow => axum,
            // ringkit's TLS servers (nginx's limits are its own).
            Attack::TlsBigHello => matches!(t, Target::ServeTls | Target::AxumTls),
            _ if t.peer() => false,
            Attack::SlowBody => t.http(),
            Attack::MaxBodies => t != Target::Echo,
            _ => true,
        }
    }

    /// A frame flood: the probe's p99 is held to [`FLOOD_P99`].
    pub fn floods(self) -> bool {
        matches!(
            self,
            Attack::H2WindowFlood
                | Attack::H2WindowFloodRead
                | Attack::H2PingFlood
                | Attack::H2PingFloodUnread
                | Attack::H2DataDribble
                | Attack::H2PriorityChurn
                | Attack::H2ResetFloodUnread
                | Attack::H2EmptyHeaders
                | Attack::H2RapidReset
                | Attack::H2Continuation
                | Attack::H2SettingsFlood
                | Attack::H2EmptyFrames
                | Attack::H2MadeYouReset
                | Attack::H2HpackBomb
                | Attack::TlsHandshakeFlood
                | Attack::H1PipelineFlood
        )
    }

    /// Whether it waits for the server's timeouts (the short form lowers
    /// them for these only): not the floods, which run for a set time.
    pub fn waits_for_timeouts(self) -> bool {
        !self.floods()
            && !matches!(
                self,
                Attack::ResetFlood
                    | Attack::BurstThenIdle
                    | Attack::MaxBodies
                    | Attack::H2BudgetDownload
            )
    }

    /// Whether the server must be started with its fd limit lowered.
    pub fn nofile(self) -> Option<u64> {
        (self == Attack::FdExhaustion).then_some(FD_LIMIT)
    }

    /// The server's connection cap for this attack: the battery's, but
    /// room for every bursting connection (and the probe's).
    pub fn cap(self, cap: usize) -> usize {
        match self {
            Attack::BurstThenIdle => cap.max(super::burst::BURST_CONNS + 64),
            Attack::TlsBigHello => cap.max(BIG_HELLO_CONNS + 64),
            Attack::H2BudgetDownload => cap.max(BUDGET_HEADS + 64),
            _ => cap,
        }
    }

    /// The server's input budget for this attack (`--max-buffered-mib`),
    /// when not its default (32 MiB): the short form's few connections
    /// could not fill that, so it lowers it.
    pub fn input_mib(self, short: bool) -> Option<usize> {
        match self {
            Attack::TlsBigHello if short => Some(BIG_HELLO_SHORT_MIB),
            Attack::H2BudgetDownload => Some(BUDGET_MIB),
            _ => None,
        }
    }

    /// Most RSS over the start allowed once the attack's connections have
    /// all closed, KiB.
    pub fn closed_budget_kib(self) -> Option<u64> {
        matches!(self, Attack::BurstThenIdle | Attack::TlsBigHello).then_some(16 * 1024)
    }

    /// Most RSS growth allowed under the attack, KiB, with `input_mib` the
    /// server's input budget: twice the budget (what small holders may
    /// add past it) and 16 MiB of slack.
    pub fn rss_budget_kib(self, input_mib: Option<usize>) -> Option<u64> {
        let mib = input_mib.unwrap_or(32) as u64;
        match self {
            Attack::MaxBodies => Some(64 * 1024),
            // A flood's frames are consumed as they come: what a server
            // queues for them (answers, resets, one-byte DATA frames) must
            // stay bounded (ringkit grew 0.3-1.5 MiB in 6 s; the floods
            // write 40-200 MB/s).
            a if a.floods() => Some(64 * 1024),
            Attack::TlsBigHello => Some((2 * mib + 16) * 1024),
            _ => None,
        }
    }
}

/// Connections holding a large ClientHello (full form; short: 600).
const BIG_HELLO_CONNS: usize = 3000;
/// The input budget the short form gives the server under it, MiB.
const BIG_HELLO_SHORT_MIB: usize = 4;

/// The input budget the server gets under `H2BudgetDownload`, MiB, in
/// both forms: small, so that the heads fill it well within the header
/// timeout (2 300 TLS connections for the default 32 MiB took 7-9 s in a
/// debug build, against a 10 s timeout).
const BUDGET_MIB: usize = 2;
/// Bytes of each unfinished head under `H2BudgetDownload`: under the
/// 16 KiB a connection may hold before it is the one closed, so no
/// holder stands out.
const HEAD_BYTES: usize = 15_000;
/// Unfinished heads under `H2BudgetDownload`: enough for twice the
/// budget (what small holders may fill, after which a server refuses even
/// them), and 64 more.
const BUDGET_HEADS: usize = 2 * (BUDGET_MIB << 20) / HEAD_BYTES + 64;

/// A WINDOW_UPDATE of 1 on the connection.
const WINDOW_ONE: &[u8] = &[0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 1];
/// A PING.
const PING: &[u8] = b"\0\0\x08\x06\0\0\0\0\0pingping";

/// Run `a` against the server; the probe runs meanwhile.
pub fn run(a: Attack, cx: &Ctx) -> io::Result<Outcome> {
    let mut o = Outcome::default();
    let mut held = Held::new();
    match a {
        Attack::IdleFlood | Attack::FdExhaustion => {
            let n = match (a, cx.target.has_cap()) {
                (Attack::FdExhaustion, _) => FD_LIMIT as usize + 100,
                (_, true) => cx.cap + 50,
                _ => cx.n(300, 100),
            };
            for _ in 0..n {
                match cx.tcp() {
                    Ok(s) => held.push(Conn::Plain(s)),
                    Err(e) => o.notes.push(format!("connect: {e}")),
                }
            }
            held.restart_clock();
            // Past the cap, a server closes some at once: those count as
            // closed, the rest at the idle timeout. Past the fd limit, those
            // left in the listen backlog are accepted once fds are free, and
            // idle out in turn: two idle timeouts.
            let budget = match a {
                Attack::FdExhaustion => cx.timeouts.idle.map(|d| 2.0 * d.as_secs_f64() + SLACK),
                _ => cx.idle_budget(),
            };
            cx.await_close(&mut held, budget, &mut o);
        }
        Attack::ResetFlood => {
            let n = cx.n(2000, 500);
            for _ in 0..n {
                if let Ok(s) = TcpStream::connect_timeout(&cx.addr, Duration::from_secs(2)) {
                    set_linger_zero(&s);
                }
            }
            o.hostile = n;
        }
        Attack::SlowOpening | Attack::SlowBody => {
            let n = cx.n(50, 20);
            let mut bytes = target::opening(cx.target, cx.tls)?;
            for _ in 0..n {
                let c = if a == Attack::SlowBody {
                    let mut c =
                        target::connect(cx.target, cx.addr, cx.tls, Duration::from_secs(2))?;
                    c.write_all(
                        b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n",
                    )?;
                    c
                } else {
                    Conn::Plain(cx.tcp()?)
                };
                held.push(c);
            }
            if a == Attack::SlowBody {
                bytes = vec![b'b'; 100_000];
            }
            held.restart_clock();
            // A request head or record from its first byte; a body, under
            // ringkit-http, within the same header timeout.
            let budget = match cx.target {
                Target::Echo => None,
                _ => Some(cx.timeouts.header.as_secs_f64() + SLACK),
            };
            trickle(&mut held, &bytes, budget.unwrap_or(HOLD.as_secs_f64()));
            o.hostile = held.len();
            o.close_budget = budget;
            held.check();
            o.closed = held.closed();
            o.all_closed_after = held.all_closed_after();
            if budget.is_none() {
                o.notes
                    .push("echo answers every byte: a trickle is progress".into());
            }
        }
        Attack::OpenThenSilent => {
            let n = cx.n(50, 20);
            for _ in 0..n {
                held.push(open(cx)?);
            }
            held.restart_clock();
            // ringkit-hyper wants the first request within the header
            // timeout of the first byte (the preface or handshake); the
            // others count a connection that has said all it had to say as
            // idle.
            let budget = match cx.target {
                Target::Axum | Target::AxumTls => Some(cx.timeouts.header.as_secs_f64() + SLACK),
                _ => cx.idle_budget(),
            };
            cx.await_close(&mut held, budget, &mut o);
        }
        Attack::NeverRead => {
            let n = cx.n(20, 8);
            for _ in 0..n {
                let mut c = target::connect(cx.target, cx.addr, cx.tls, Duration::from_secs(2))?;
                fill(cx.target, &mut c);
                held.push(c);
            }
            held.restart_clock();
            let stall = match cx.target {
                Target::Log => cx.timeouts.header,
                _ => cx.timeouts.send,
            };
            cx.await_close(&mut held, Some(stall.as_secs_f64() + SLACK + 1.0), &mut o);
        }
        Attack::BurstThenIdle => super::burst::burst_then_idle(cx, &mut o)?,
        Attack::H2WindowFlood => super::h2::flood(cx, &mut o, Frames::Same(WINDOW_ONE), false)?,
        Attack::H2PingFlood => super::h2::flood(cx, &mut o, Frames::Same(PING), true)?,
        Attack::H2RapidReset => super::h2::flood(cx, &mut o, Frames::RapidReset, true)?,
        Attack::H2Continuation => super::h2::flood(cx, &mut o, Frames::Continuation, true)?,
        Attack::H2SettingsFlood => {
            // SETTINGS_MAX_CONCURRENT_STREAMS = 100, each to be ACKed.
            const SETTINGS: &[u8] = &[0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100];
            super::h2::flood(cx, &mut o, Frames::Same(SETTINGS), false)?
        }
        Attack::H2EmptyFrames => super::h2::flood(cx, &mut o, Frames::EmptyData, true)?,
        Attack::H2HpackBomb => super::h2::flood(cx, &mut o, Frames::HpackBomb, true)?,
        Attack::H2MadeYouReset => super::h2::flood(cx, &mut o, Frames::MadeYouReset, true)?,
        Attack::H2ZeroWindow => {
            let budget = cx.timeouts.send.as_secs_f64() + SLACK + 1.0;
            super::h2::zero_window(cx, &mut o, budget)?
        }
        Attack::TlsBigHello => super::floods::big_hellos(cx, &mut o, BIG_HELLO_CONNS)?,
        Attack::TlsHandshakeFlood => super::floods::handshakes(cx, &mut o)?,
        Attack::H1PipelineFlood => super::h2::flood(cx, &mut o, Frames::Http1, true)?,
        Attack::H2WindowFloodRead => super::h2::flood(cx, &mut o, Frames::Same(WINDOW_ONE), true)?,
        Attack::H2PingFloodUnread => super::h2::flood(cx, &mut o, Frames::Same(PING), false)?,
        Attack::H2DataDribble => super::h2::flood(cx, &mut o, Frames::DataDribble, true)?,
        Attack::H2PriorityChurn => super::h2::flood(cx, &mut o, Frames::PriorityChurn, true)?,
        Attack::H2ResetFloodUnread => super::h2::flood(cx, &mut o, Frames::MadeYouReset, false)?,
        Attack::H2EmptyHeaders => super::h2::flood(cx, &mut o, Frames::EmptyHeaders, true)?,
        Attack::H2BudgetDownload => {
            let fill = 2 * (BUDGET_MIB << 20);
            super::h2::budget_download(cx, &mut o, BUDGET_HEADS, HEAD_BYTES, fill)?
        }
        Attack::MaxBodies => {
            let n = 100;
            let (head, body) = max_body(cx.target);
            for _ in 0..n {
                let Ok(mut c) = target::connect(cx.target, cx.addr, cx.tls, Duration::from_secs(2))
                else {
                    continue;
                };
                let _ = c.tcp().set_write_timeout(Some(Duration::from_secs(1)));
                if c.write_all(&head).and_then(|_| c.write_all(&body)).is_err() {
                    o.notes.push("some bodies were not taken whole".into());
                }
                held.push(c);
            }
            o.hostile = held.len();
            std::thread::sleep(Duration::from_millis(500));
            o.notes.dedup();
        }
    }
    Ok(o)
}

/// Write `bytes` to every held connection a byte a second until the
/// server has closed them all or `limit` seconds have passed.
fn trickle(held: &mut Held, bytes: &[u8], limit: f64) {
    let t0 = Instant::now();
    let mut i = 0;
    while t0.elapsed().as_secs_f64() < limit + 1.0 {
        held.check();
        if held.closed() == held.len() {
            return;
        }
        if i < bytes.len() {
            for c in held.conns_mut() {
                let _ = c.tcp().set_write_timeout(Some(Duration::from_millis(100)));
                let _ = c.write_all(&bytes[i..=i]);
            }
            i += 1;
        }
        let next = t0 + Duration::from_secs(i as u64);
        while Instant::now() < next {
            held.check();
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A connection that has sent a whole opening and then says nothing.
fn open(cx: &Ctx) -> io::Result<Conn> {
    let t = cx.target;
    let mut c = target::connect(t, cx.addr, cx.tls, Duration::from_secs(2))?;
    match t {
        // The h2 preface and an empty SETTINGS frame.
        Target::Axum => {
            c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")?
        }
        // The handshake is the opening.
        _ if t.tls() => {}
        _ => target::exchange(t, &mut c)?,
    }
    Ok(c)
}

/// Pipeline requests (records, messages) into `c` until the socket is full.
fn fill(t: Target, c: &mut Conn) {
    let chunk = match t {
        Target::Echo => vec![b'e'; 64 * 1024],
        Target::Log => {
            let mut v = Vec::new();
            for _ in 0..1024 {
                v.extend_from_slice(&16u32.to_le_bytes());
                v.extend_from_slice(&[b'r'; 16]);
            }
            v
        }
        _ => target::gets(target::huge_path(t), 64),
    };
    let _ = c.tcp().set_write_timeout(Some(Duration::from_millis(500)));
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if c.write_all(&chunk).is_err() {
            return;
        }
    }
}

/// The largest request a client may start, less one byte: its opening and
/// its body.
fn max_body(t: Target) -> (Vec<u8>, Vec<u8>) {
    match t {
        Target::Log => {
            let len: u32 = 1_000_000;
            (len.to_le_bytes().to_vec(), vec![b'r'; len as usize - 1])
        }
        _ => {
            // ringkit-http's default body limit, nginx's 1 MiB; axum's
            // default limit is 2 MB, but no route of the app takes a body.
            let len = 1 << 20;
            let head =
                format!("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len}\r\n\r\n");
            (head.into_bytes(), vec![b'b'; len - 1])
        }
    }
}

/// Make the next close of `s` a reset.
fn set_linger_zero(s: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket we own, with a linger struct of the
    // size we pass.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}
