//! Memory per idle connection, server by server.
//!
//! For each server: start it pinned to the server CPU (its soft
//! `RLIMIT_NOFILE` raised to the hard limit before `exec`), warm it up with
//! short connections that make 4096 round trips in all (so state shared by
//! all connections, such as every page of ringkit's provided-buffer ring, is
//! in the baseline), settle, sample its RSS; then
//! open N connections that each echo one 64-byte message (so the server has
//! set up that connection's read state) and stay open and silent; settle,
//! sample again. Bytes per idle connection = RSS growth / N.
//!
//! How the first messages arrive matters, so each server is measured twice
//! ([`First`]): connections that send in waves of 128, each echoed before
//! the next wave, and all N connected silently, then all sending at once
//! (a real burst: the server has N receives ready in one turn).
//!
//! RSS is the process's user-space memory: socket buffers live in the
//! kernel and are not in it (they are the same for every server here).

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit::net::TcpStream;
use serde::Serialize;

use crate::harness::child::free_addr;
use crate::harness::process::{Launch, ProcSample, Process};
use crate::harness::server::RingkitServer;

/// A server to measure.
#[derive(Debug, Clone)]
pub struct IdleServer {
    /// Name in the report.
    pub name: String,
    /// Command; `{addr}` is replaced by the listen address.
    pub cmd: Vec<String>,
    /// What it holds per idle connection, in a sentence.
    pub holds: String,
    /// It publishes ringkit's counters (`--stats`), with the allocator's
    /// bytes in use: the heap per connection is measured too.
    pub stats: bool,
}

/// Settings of an idle-memory run.
#[derive(Debug, Clone)]
pub struct IdleConfig {
    /// Servers, measured in this order.
    pub servers: Vec<IdleServer>,
    /// Servers that could not be run, with why.
    pub skipped: Vec<(String, String)>,
    /// Idle connections per server.
    pub conns: usize,
    /// CPU for the servers.
    pub server_cpu: Option<usize>,
    /// CPU for the client.
    pub client_cpu: Option<usize>,
}

impl IdleConfig {
    /// The four servers of the study: ringkit on io_uring (multishot recv
    /// into the shared provided-buffer ring), ringkit on epoll, and the
    /// tokio and monoio peers (`peer`: the `ringkit-peer` binary).
    pub fn standard(ringkit: PathBuf, peer: Result<PathBuf, String>, conns: usize) -> IdleConfig {
        let ringkit_cmd = |backend: &str| -> Vec<String> {
            RingkitServer::echo(&ringkit)
                .backend(backend)
                .flag("--recv", "multishot")
                .stats()
                .cmd()
        };
        let mut servers = vec![
            IdleServer {
                name: "ringkit-uring".into(),
                cmd: ringkit_cmd("uring"),
                holds: "a task (its future is 288 bytes: the write path is boxed while it runs), the stream (fd, read stash), one multishot RECV entry in the driver, a slot in the thread's idle-timeout table (one sweeper timer per thread, not a timer per connection), and no buffer: data lands in the shared provided-buffer ring (in the base RSS) only when it arrives, and the slot goes back to the kernel once echoed".into(),
                stats: true,
            },
            IdleServer {
                name: "ringkit-epoll".into(),
                cmd: ringkit_cmd("epoll"),
                holds: "a task, the stream and its epoll registration, a slot in the thread's idle-timeout table, and no buffer: the pending receive waits for readiness without one, then reads into the thread's scratch buffer and keeps an exact-size copy of what arrived, dropped once echoed".into(),
                stats: true,
            },
        ];
        let mut skipped = Vec::new();
        match peer {
            Ok(p) => {
                let p = p.display().to_string();
                for (name, sub) in [("tokio", "tokio-echo"), ("monoio", "monoio-echo")] {
                    servers.push(IdleServer {
                        name: name.into(),
                        cmd: vec![p.clone(), sub.into(), "{addr}".into()],
                        holds: "a task and its 4 KiB read buffer".into(),
                        stats: false,
                    });
                }
            }
            Err(e) => {
                for n in ["tokio", "monoio"] {
                    skipped.push((n.to_string(), e.clone()));
                }
            }
        }
        let two = crate::harness::sysinfo::SystemInfo::gather().cores >= 2;
        IdleConfig {
            servers,
            skipped,
            conns,
            server_cpu: two.then_some(0),
            client_cpu: two.then_some(1),
        }
    }
}

/// How the idle connections send their first message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum First {
    /// In waves of 128 connections, each wave echoed before the next.
    #[default]
    Waves,
    /// All connected silently, then all sending at once.
    Burst,
}

impl First {
    /// Both, in the order they are measured.
    pub const BOTH: [First; 2] = [First::Waves, First::Burst];

    fn name(self) -> &'static str {
        match self {
            First::Waves => "waves",
            First::Burst => "burst",
        }
    }
}

/// One server's figures.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct IdleRow {
    /// Server name.
    pub name: String,
    /// How the first messages arrived.
    pub first: First,
    /// Command line.
    pub cmd: String,
    /// RSS after warm-up, KiB.
    pub base_rss_kib: u64,
    /// RSS with the idle connections open, KiB.
    pub idle_rss_kib: u64,
    /// Idle connections that were open and had echoed.
    pub conns: usize,
    /// Open fds with the idle connections open.
    pub fds: u64,
    /// (idle RSS − base RSS) / conns.
    pub bytes_per_conn: f64,
    /// (heap in use with the idle connections − before) / conns, by the
    /// server's allocator (ringkit servers; `None` for peers).
    pub heap_per_conn: Option<f64>,
    /// What the server holds per idle connection.
    pub holds: String,
    /// Why this row failed, if it did.
    pub error: Option<String>,
}

/// The result of an idle-memory run.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct IdleReport {
    /// One row per server.
    pub rows: Vec<IdleRow>,
    /// Servers not run, with why.
    pub skipped: Vec<(String, String)>,
    /// Idle connections asked for.
    pub conns: usize,
    /// CPUs: server, client.
    pub cpus: (Option<usize>, Option<usize>),
}

/// Bytes per connection after one message that each ringkit backend aims
/// to stay under.
const IDLE_TARGETS: [(&str, f64); 2] = [("ringkit-uring", 1024.0), ("ringkit-epoll", 1536.0)];

impl IdleReport {
    /// Bytes per connection of `name`: the larger of its two modes.
    fn per_conn(&self, name: &str) -> Option<f64> {
        self.rows
            .iter()
            .filter(|r| r.name == name && r.error.is_none())
            .map(|r| r.bytes_per_conn)
            .reduce(f64::max)
    }

    /// ringkit-uring's bytes per idle connection over tokio's.
    pub fn uring_vs_tokio(&self) -> Option<f64> {
        Some(self.per_conn("ringkit-uring")? / self.per_conn("tokio")?.max(1.0))
    }

    /// Whether every server measured without error.
    pub fn ok(&self) -> bool {
        self.rows.iter().all(|r| r.error.is_none())
    }
}

impl std::fmt::Display for IdleReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpu = |c: Option<usize>| c.map_or("unpinned".to_string(), |c| format!("CPU {c}"));
        writeln!(
            f,
            "Memory per idle connection: {} connections per server, each echoed {MSG} bytes once and then stayed silent, the first messages sent in waves of 128 (each wave echoed before the next) and, on a fresh server, all at once; server {}, client {}. Targets and ratios take the larger of the two.",
            self.conns,
            cpu(self.cpus.0),
            cpu(self.cpus.1)
        )?;
        writeln!(
            f,
            "RSS is user-space memory; kernel socket buffers are not in it. Heap is what the server's allocator handed out and has not taken back (glibc mallinfo2, published by ringkit servers): the part of RSS that is the server's own data.\n"
        )?;
        let tokio = self.per_conn("tokio");
        writeln!(
            f,
            "{:<15} {:<6} {:>10} {:>14} {:>8} {:>15} {:>15} {:>9}",
            "server",
            "first",
            "base RSS",
            "RSS with idle",
            "fds",
            "RSS B per conn",
            "heap B per conn",
            "vs tokio"
        )?;
        for r in &self.rows {
            if let Some(e) = &r.error {
                writeln!(f, "{:<15} {:<6} FAILED: {e}", r.name, r.first.name())?;
                continue;
            }
            let vs = tokio.map_or("-".to_string(), |t| {
                format!("{:.2}x", r.bytes_per_conn / t.max(1.0))
            });
            writeln!(
                f,
                "{:<15} {:<6} {:>7.1} MiB {:>10.1} MiB {:>8} {:>15.0} {:>15} {:>9}",
                r.name,
                r.first.name(),
                r.base_rss_kib as f64 / 1024.0,
                r.idle_rss_kib as f64 / 1024.0,
                r.fds,
                r.bytes_per_conn,
                r.heap_per_conn
                    .map_or("-".to_string(), |h| format!("{h:.0}")),
                vs
            )?;
        }
        for (n, why) in &self.skipped {
            writeln!(f, "{n:<15} skipped: {why}")?;
        }
        writeln!(f, "\nWhat each holds per idle connection:")?;
        for r in self.rows.iter().filter(|r| r.first == First::Waves) {
            writeln!(f, "  {:<15} {}", r.name, r.holds)?;
        }
        if let Some(ratio) = self.uring_vs_tokio() {
            writeln!(
                f,
                "\nringkit-uring uses {:.2}x tokio's bytes per idle connection (target: at most 0.25x): {}",
                ratio,
                if ratio <= 0.25 { "met" } else { "NOT met" }
            )?;
        }
        for (name, target) in IDLE_TARGETS {
            if let Some(b) = self.per_conn(name) {
                let verdict = if b <= target { "met" } else { "NOT met" };
                writeln!(
                    f,
                    "{name} holds {b:.0} bytes per connection (target: at most {target:.0}): {verdict}"
                )?;
            }
        }
        Ok(())
    }
}

/// Measure every server in `cfg`.
pub fn run(cfg: &IdleConfig, log: &mut dyn FnMut(&str)) -> io::Result<IdleReport> {
    ringkit::raise_nofile_limit();
    if let Some(cpu) = cfg.client_cpu {
        ringkit::pin_to_cpu(cpu)?;
    }
    let mut rep = IdleReport {
        skipped: cfg.skipped.clone(),
        conns: cfg.conns,
        cpus: (cfg.server_cpu, cfg.client_cpu),
        ..Default::default()
    };
    for s in &cfg.servers {
        for first in First::BOTH {
            log(&format!("{} ({}): starting", s.name, first.name()));
            let row = measure(cfg, s, first).unwrap_or_else(|e| IdleRow {
                name: s.name.clone(),
                first,
                holds: s.holds.clone(),
                error: Some(e.to_string()),
                ..Default::default()
            });
            log(&format!(
                "{} ({}): {}",
                s.name,
                first.name(),
                match &row.error {
                    Some(e) => format!("FAILED: {e}"),
                    None => format!("{:.0} bytes per idle connection", row.bytes_per_conn),
                }
            ));
            rep.rows.push(row);
        }
    }
    Ok(rep)
}

fn measure(cfg: &IdleConfig, s: &IdleServer, first: First) -> io::Result<IdleRow> {
    let addr: SocketAddr = ([127, 0, 0, 1], free_addr()?.port()).into();
    let stats =
        std::env::temp_dir().join(format!("ringkit-idle-{}-{}", std::process::id(), s.name));
    let cmd = crate::harness::server::substitute(&s.cmd, addr, &stats);
    let launch = Launch {
        cpu: cfg.server_cpu,
        raise_nofile: true,
        ..Launch::new(cmd.clone(), addr)
    };
    let mut srv = Process::start(&launch)?;
    let rt = ringkit::Builder::new().build()?;
    // Warm-up: 32 connections of 128 round trips each, closed again. 4096
    // receives cycle through every slot of ringkit's provided-buffer ring
    // (1024 by default), so the ring's pages — a fixed pool shared by all
    // connections — are in the baseline, not charged to idle connections.
    let warm = rt.block_on(open_idle(addr, 32, WARM_ROUNDS))?;
    drop(warm);
    std::thread::sleep(Duration::from_millis(300));
    let base = settle_rss(&srv)?;
    let flush = || ringkit::publish::flush(srv.pid(), &stats, Duration::from_secs(5));
    let heap0 = if s.stats {
        Some(flush()?.heap_bytes)
    } else {
        None
    };
    let conns = match first {
        First::Waves => rt.block_on(open_idle(addr, cfg.conns, 1))?,
        First::Burst => rt.block_on(open_burst(addr, cfg.conns))?,
    };
    std::thread::sleep(Duration::from_millis(300));
    let idle = settle_rss(&srv)?;
    let heap = match heap0 {
        Some(h0) => Some((h0, flush()?.heap_bytes)),
        None => None,
    };
    if srv.try_exit()?.is_some() {
        return Err(io::Error::other(format!(
            "server exited: {}",
            srv.stderr_tail(3)
        )));
    }
    let n = conns.len();
    drop(conns);
    drop(rt);
    srv.kill();
    // The counters' files: `<stats>.<thread>`.
    for t in 0..4 {
        let _ = std::fs::remove_file(format!("{}.{t}", stats.display()));
    }
    Ok(IdleRow {
        name: s.name.clone(),
        first,
        cmd: cmd.join(" "),
        base_rss_kib: base.rss_kib,
        idle_rss_kib: idle.rss_kib,
        conns: n,
        fds: idle.fds,
        bytes_per_conn: (idle.rss_kib as f64 - base.rss_kib as f64) * 1024.0 / n.max(1) as f64,
        heap_per_conn: heap.map(|(h0, h1)| (h1 as f64 - h0 as f64) / n.max(1) as f64),
        holds: s.holds.clone(),
        error: None,
    })
}

/// Sample until RSS stops changing (three equal samples 100 ms apart, at
/// most 3 s).
fn settle_rss(srv: &Process) -> io::Result<ProcSample> {
    let t0 = Instant::now();
    let gone = || io::Error::other("server vanished");
    let mut last = srv.sample().ok_or_else(gone)?;
    let mut same = 0;
    while same < 2 && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
        let s = srv.sample().ok_or_else(gone)?;
        same = if s.rss_kib == last.rss_kib {
            same + 1
        } else {
            0
        };
        last = s;
    }
    Ok(last)
}

/// Round trips per warm-up connection.
const WARM_ROUNDS: usize = 128;

/// Bytes each connection echoes per round.
const MSG: usize = 64;

/// Open `n` connections, each echoing `MSG` bytes `rounds` times; return them open.
async fn open_idle(addr: SocketAddr, n: usize, rounds: usize) -> io::Result<Vec<TcpStream>> {
    const WAVE: usize = 128;
    let mut out = Vec::with_capacity(n);
    let failed = Rc::new(std::cell::RefCell::new(None::<io::Error>));
    let mut i = 0;
    while i < n {
        let mut hs = Vec::new();
        for k in i..(i + WAVE).min(n) {
            let failed = failed.clone();
            hs.push(ringkit::spawn(async move {
                match one_idle(addr, k as u64, rounds).await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        failed.borrow_mut().get_or_insert(e);
                        None
                    }
                }
            }));
        }
        for h in hs {
            if let Ok(Some(s)) = h.await {
                out.push(s);
            }
        }
        if let Some(e) = failed.borrow_mut().take() {
            return Err(io::Error::new(
                e.kind(),
                format!("idle connection {} of {n}: {e}", out.len() + 1),
            ));
        }
        i += WAVE;
    }
    Ok(out)
}

/// Open `n` connections silently (in waves of connects), then have every
/// one send `MSG` bytes at once (all writes queued in one turn) and check
/// its echo; return them open.
async fn open_burst(addr: SocketAddr, n: usize) -> io::Result<Vec<TcpStream>> {
    let silent = open_idle(addr, n, 0).await?;
    let mut hs = Vec::with_capacity(n);
    for (k, s) in silent.into_iter().enumerate() {
        hs.push(ringkit::spawn(async move {
            echo_once(&s, k as u64, 0).await.map(|()| s)
        }));
    }
    let mut out = Vec::with_capacity(n);
    for h in hs {
        match h.await {
            Ok(Ok(s)) => out.push(s),
            Ok(Err(e)) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("burst connection {} of {n}: {e}", out.len() + 1),
                ))
            }
            Err(e) => return Err(io::Error::other(format!("burst task: {e:?}"))),
        }
    }
    Ok(out)
}

/// Send round `r`'s message and check its echo.
async fn echo_once(s: &TcpStream, k: u64, r: u64) -> io::Result<()> {
    let limit = Duration::from_secs(30);
    let msg = crate::harness::rng::ByteGen::message(k, r, MSG);
    s.write_all(msg.clone()).await.0?;
    let mut got = Vec::with_capacity(MSG);
    while got.len() < MSG {
        let (res, buf) = s.read_timeout(Vec::with_capacity(MSG), limit).await;
        let n = res?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
    }
    if got != msg {
        return Err(crate::harness::err::invalid_data("echo mismatch"));
    }
    Ok(())
}

async fn one_idle(addr: SocketAddr, k: u64, rounds: usize) -> io::Result<TcpStream> {
    let limit = Duration::from_secs(30);
    let s = ringkit::time::timeout(limit, TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    s.set_nodelay(true)?;
    for r in 0..rounds {
        echo_once(&s, k, r as u64).await?;
    }
    Ok(s)
}
