//! `ringkit torture hostile`: one battery of hostile clients against every
//! server, each attack beside a well-behaved client that must keep getting
//! answers, with time and memory budgets.
//!
//! # A run
//! For each attack ([`attack::ALL`]) a fresh server is started as a user
//! would start it: its defaults, plus `--max-connections` (a low cap, so a
//! flood can pass it) and, for the fd attack, soft and hard
//! `RLIMIT_NOFILE` lowered to [`attack::FD_LIMIT`]. The short form
//! (`cargo test`) also lowers the timeouts to seconds for the attacks that
//! wait for them; the rules stay the same. The server is warmed up (so state shared by all connections is in
//! the baseline), sampled (RSS, fds), then attacked while the probe makes a
//! fresh connection and one exchange every 200 ms and a sampler keeps the
//! peaks. Then the hostile connections are released and the server's fds
//! must fall back.
//!
//! # Budgets (a run fails on any)
//! - The server never exits.
//! - The probe is answered within 2 s, except where the attack fills the
//!   connection cap or the fd table: there within the idle timeout + 2 s
//!   (the attackers' own timeout; echo, which keeps live idle peers, within
//!   2 s of their leaving).
//! - The server closes every connection that makes no progress within its
//!   stated timeout + 2 s: idle and silent-after-opening at the idle
//!   timeout (ringkit-hyper: an h2 preface or TLS handshake then silence
//!   at the header timeout), a trickled opening or body at the header
//!   timeout (log: the frame timeout), replies never read at the send
//!   timeout (log: frame).
//! - HTTP/2 frame floods: RSS grows by at most 64 MiB (what a server
//!   queues for the frames stays bounded); the probe's p99 within 0.5 s,
//!   in a release build (a debug build floods from one connection, and only the 2 s
//!   wait applies); the peers, axum on tokio in the clear and over
//!   rustls, are measured, not judged (what they miss is a note, not a
//!   failure).
//! - Burst then idle (1 000 HTTP connections bursting at once: each sends
//!   64 pipelined requests for ~16 KiB before any reply is read): memory
//!   per idle connection afterwards within 2x of a fresh one's (at least
//!   16 KiB), plus 1 MiB in all (what the allocator keeps of the bursts'
//!   freed buffers beyond the warm-up's); and once they all closed, RSS
//!   within 16 MiB of the start.
//! - Maximal bodies or partial records: RSS grows by at most 64 MiB (the
//!   32 MiB default budget of input per thread, and the allocator's slack).
//! - An input budget filled beside an HTTP/2 download: the server's
//!   budget lowered to 2 MiB and filled twice over (what small holders
//!   may fill) by unfinished 15 000-byte heads, which must still be held
//!   after the download; the 16 MiB download must be a 200 with every
//!   byte.
//! - Large ClientHellos (3 000 connections each holding all but 100 bytes
//!   of a 64 KiB one; short form 600 under a 4 MiB input budget): RSS
//!   grows by at most twice the input budget plus 16 MiB (the handshake's
//!   ciphertext is charged to the budget as a partial head is), and the
//!   connections the server keeps are closed at the header timeout; once
//!   all closed, RSS within 16 MiB of the start.
//! - After the attack, open fds fall back to within 4 of before.
//!
//! Past the fd limit, connections left in the listen backlog are accepted
//! once fds free up and idle out in turn: there the close budget is two
//! idle timeouts.

pub mod attack;
mod burst;
mod ctx;
mod floods;
mod h2;
pub mod held;
pub mod study;
pub mod target;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::harness::child::free_addr;
use crate::harness::process::{self, ProcSample, Process};
use attack::{Attack, Ctx, Outcome};
use held::{Probe, ProbeFigures};
use target::{Site, Target, Timeouts};

/// Settings of a hostile run.
#[derive(Debug, Clone)]
pub struct HostileConfig {
    /// The server.
    pub target: Target,
    /// The `ringkit` binary.
    pub exe: PathBuf,
    /// `uring` or `epoll` (nginx: ignored).
    pub backend: String,
    /// Short form: timeouts in seconds, fewer connections.
    pub short: bool,
    /// `--max-connections` of the servers that take it.
    pub cap: usize,
    /// Attacks to run (all that apply when empty).
    pub only: Vec<Attack>,
    /// A directory that does not exist yet: files, logs, nginx's.
    pub dir: PathBuf,
    /// Pin the server here.
    pub server_cpu: Option<usize>,
    /// Pin this process's clients here.
    pub client_cpu: Option<usize>,
}

impl HostileConfig {
    /// Defaults for `target`: full timeouts, a cap of 256.
    pub fn new(target: Target, exe: PathBuf, backend: &str, dir: PathBuf) -> HostileConfig {
        let two = crate::harness::sysinfo::SystemInfo::gather().cores >= 2;
        HostileConfig {
            target,
            exe,
            backend: backend.into(),
            short: false,
            cap: 256,
            only: Vec::new(),
            dir,
            server_cpu: two.then_some(0),
            client_cpu: two.then_some(1),
        }
    }

    /// The timeouts the server runs with under `a`: the short form lowers
    /// them only for the attacks that wait for them (a burst on 100
    /// connections one after another outlasts a 4 s idle timeout).
    fn timeouts(&self, a: Attack) -> Timeouts {
        if self.short && a.waits_for_timeouts() {
            Timeouts::short(self.target)
        } else {
            Timeouts::defaults(self.target)
        }
    }

    fn short_for(&self, a: Attack) -> bool {
        self.short && a.waits_for_timeouts()
    }
}

/// One attack's row.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Row {
    /// Server.
    pub target: String,
    /// Backend.
    pub backend: String,
    /// Attack.
    pub attack: String,
    /// Hostile connections.
    pub hostile: usize,
    /// The well-behaved client.
    pub probe: ProbeFigures,
    /// Its budget, seconds.
    pub probe_budget_secs: f64,
    /// Hostile connections the server closed.
    pub closed: usize,
    /// Seconds until it had closed them all.
    pub all_closed_after_secs: Option<f64>,
    /// The budget for that.
    pub close_budget_secs: Option<f64>,
    /// Server RSS before, at the peak, and after (KiB).
    pub rss_kib: [u64; 3],
    /// RSS growth per hostile connection at the peak and after (KiB).
    pub per_conn_kib: [f64; 2],
    /// Burst then idle: KiB per connection fresh, and after the bursts.
    pub burst_kib: Option<[f64; 2]>,
    /// Open fds before, at the peak, after.
    pub fds: [u64; 3],
    /// The server was up at the end.
    pub alive: bool,
    /// Budgets missed (empty: passed).
    pub failures: Vec<String>,
    /// What the reader should know.
    pub notes: Vec<String>,
}

impl Row {
    /// The two memory cells of a report: KiB per hostile connection at the
    /// peak and after; for a burst, fresh (marked `fresh`) and after.
    pub fn memory_cells(&self, fresh: &str) -> (String, String) {
        match self.burst_kib {
            Some([f, b]) => (format!("{f:.1}{fresh}"), format!("{b:.1}")),
            None => (
                format!("{:.1}", self.per_conn_kib[0]),
                format!("{:.1}", self.per_conn_kib[1]),
            ),
        }
    }
}

/// Peaks of a process while an attack runs.
struct Sampler {
    stop: Arc<AtomicBool>,
    peak: Arc<Mutex<ProcSample>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(Mutex::new(ProcSample::default()));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Some(x) = ProcSample::of(pid) else { return };
                if let Ok(mut p) = p.lock() {
                    p.rss_kib = p.rss_kib.max(x.rss_kib);
                    p.fds = p.fds.max(x.fds);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Sampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> ProcSample {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        self.peak.lock().map(|p| *p).unwrap_or_default()
    }
}

/// Run every attack that applies (or those of `cfg.only`) on `cfg.target`.
pub fn run(cfg: &HostileConfig, log: &mut dyn FnMut(&str)) -> io::Result<Vec<Row>> {
    crate::harness::made_dir::must_be_new_or_empty(&cfg.dir)?;
    std::fs::create_dir_all(&cfg.dir)?;
    let site = Site::make(&cfg.dir)?;
    if let Some(cpu) = cfg.client_cpu {
        let _ = ringkit::pin_to_cpu(cpu);
    }
    let attacks: Vec<Attack> = if cfg.only.is_empty() {
        attack::ALL.to_vec()
    } else {
        cfg.only.clone()
    };
    let mut rows = Vec::new();
    for (i, a) in attacks.into_iter().enumerate() {
        if !a.applies(cfg.target) {
            continue;
        }
        log(&format!(
            "{} {}: {}",
            cfg.target.name(),
            cfg.backend,
            a.name()
        ));
        let row = run_attack(cfg, &site, a, i)?;
        for f in &row.failures {
            log(&format!("  FAILED: {f}"));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Start a fresh server, warm it up, attack it, check the budgets.
fn run_attack(cfg: &HostileConfig, site: &Site, a: Attack, i: usize) -> io::Result<Row> {
    let t = cfg.target;
    let timeouts = cfg.timeouts(a);
    let addr = SocketAddr::from(([127, 0, 0, 1], free_addr()?.port()));
    let cmd = target::command(
        t,
        &target::Launch {
            exe: &cfg.exe,
            backend: &cfg.backend,
            addr,
            cap: a.cap(cfg.cap),
            site,
            timeouts: &timeouts,
            short: cfg.short_for(a),
            run: i,
            input_mib: a.input_mib(cfg.short),
        },
    )?;
    let launch = process::Launch {
        cpu: cfg.server_cpu,
        nofile: a.nofile(),
        ..process::Launch::new(cmd, addr)
    };
    let mut srv = Process::start(&launch)?;
    let tls = crate::torture::tls::client_config(&site.ca)?;
    warm_up(t, addr, &tls)?;
    std::thread::sleep(Duration::from_millis(300));
    let before = srv.sample().unwrap_or_default();
    let sampler = Sampler::start(srv.pid());
    let probe = Probe::start(t, addr, tls.clone(), Duration::from_millis(200));
    let pid = srv.pid();
    let rss = move || ProcSample::of(pid).map_or(0, |s| s.rss_kib);
    let cx = Ctx {
        target: t,
        addr,
        timeouts,
        cap: cfg.cap,
        short: cfg.short,
        tls: &tls,
        rss: &rss,
    };
    let outcome = attack::run(a, &cx);
    // Let the probe see the server once the attack is over (after a
    // flood that fills the cap, that is when the attackers are gone).
    std::thread::sleep(Duration::from_millis(500));
    let probe = probe.finish();
    let peak = sampler.finish();
    let o = outcome.unwrap_or_else(|e| Outcome {
        notes: vec![format!("the attack stopped: {e}")],
        ..Outcome::default()
    });
    // The hostile connections are all closed by now (they lived in the
    // attack); the server must give their fds back.
    let after = srv
        .settle_fds(before.fds + 4, Duration::from_secs(5))
        .unwrap_or_default();
    let alive = matches!(srv.try_exit(), Ok(None));
    let fills = matches!(a, Attack::FdExhaustion) || (a == Attack::IdleFlood && t.has_cap());
    let probe_budget = match (fills, timeouts.idle) {
        (true, Some(idle)) => idle.as_secs_f64() + 2.0,
        (true, None) => 3.0 + 2.0,
        _ => 2.0,
    };
    let n = o.hostile.max(1) as f64;
    let per = |x: u64| x.saturating_sub(before.rss_kib) as f64 / n;
    let mut failures = Vec::new();
    if !alive {
        failures.push(format!("server exited: {}", srv.stderr_tail(5)));
    }
    if probe.worst_wait_secs > probe_budget || probe.unanswered_at_end {
        failures.push(format!(
            "well-behaved client waited {:.2} s (budget {probe_budget:.0} s){}; last error: {}",
            probe.worst_wait_secs,
            if probe.unanswered_at_end {
                ", still unanswered"
            } else {
                ""
            },
            probe.last_error
        ));
    }
    // Release builds only: see `h2::flood_conns`.
    let judged = a.floods() && !t.peer() && !cfg!(debug_assertions);
    if judged && probe.p99_ms > attack::FLOOD_P99 * 1e3 {
        failures.push(format!(
            "well-behaved client's p99 {:.0} ms under the flood (budget {:.0} ms)",
            probe.p99_ms,
            attack::FLOOD_P99 * 1e3
        ));
    }
    if let Some(b) = o.close_budget {
        match o.all_closed_after {
            Some(s) if s <= b => {}
            Some(s) => failures.push(format!(
                "closed its {} after {s:.1} s (budget {b:.0} s)",
                o.hostile
            )),
            None => failures.push(format!(
                "closed {} of {} within {b:.0} s",
                o.closed, o.hostile
            )),
        }
    }
    if let (Some(f), Some(b)) = (o.fresh_kib, o.after_burst_kib) {
        let allowed = (2.0 * f).max(16.0) + 1024.0 / n;
        if b > allowed {
            failures.push(format!(
                "{b:.1} KiB per idle connection after a burst, {f:.1} fresh (budget {allowed:.1})"
            ));
        }
    }
    if let Some(b) = a.closed_budget_kib() {
        let kept = after.rss_kib.saturating_sub(before.rss_kib);
        if kept > b {
            failures.push(format!(
                "RSS {kept} KiB over the start once the attack's connections closed (budget {b})"
            ));
        }
    }
    if let Some(b) = a.rss_budget_kib(a.input_mib(cfg.short)) {
        if peak.rss_kib.saturating_sub(before.rss_kib) > b {
            failures.push(format!(
                "RSS grew {} -> {} KiB (budget +{} MiB)",
                before.rss_kib,
                peak.rss_kib,
                b / 1024
            ));
        }
    }
    if alive && after.fds > before.fds + 4 {
        failures.push(format!("fds {} before, {} after", before.fds, after.fds));
    }
    if let Some(n) = o.notes.iter().find(|n| n.starts_with("the attack stopped")) {
        failures.push(n.clone());
    }
    failures.extend(o.broken);
    let mut notes = o.notes;
    if t.peer() {
        // A peer (axum on tokio) is measured, not judged: what it missed
        // is reported beside ringkit's rows, not failed.
        notes.extend(failures.drain(..).map(|f| format!("not judged: {f}")));
    }
    srv.kill();
    Ok(Row {
        target: t.name().to_string(),
        backend: t
            .own_backend()
            .map_or_else(|| cfg.backend.clone(), Into::into),
        attack: a.name().to_string(),
        hostile: o.hostile,
        probe,
        probe_budget_secs: probe_budget,
        closed: o.closed,
        all_closed_after_secs: o.all_closed_after,
        close_budget_secs: o.close_budget,
        rss_kib: [before.rss_kib, peak.rss_kib, after.rss_kib],
        per_conn_kib: [per(peak.rss_kib), per(after.rss_kib)],
        burst_kib: o.fresh_kib.zip(o.after_burst_kib).map(|(a, b)| [a, b]),
        fds: [before.fds, peak.fds, after.fds],
        alive,
        failures,
        notes,
    })
}

/// Exchanges and a burst on a few keep-alive connections, so what all
/// connections share (every page of io_uring's provided-buffer ring, the
/// allocator's free lists after large buffers, the log's first segment)
/// is in the baseline.
fn warm_up(t: Target, addr: SocketAddr, tls: &Arc<rustls::ClientConfig>) -> io::Result<()> {
    let each = if t == Target::Log { 50 } else { 500 };
    for _ in 0..4 {
        let mut c = target::connect(t, addr, tls, Duration::from_secs(5))?;
        for _ in 0..each {
            target::exchange(t, &mut c)?;
        }
        burst::burst(t, &mut c)?;
    }
    Ok(())
}

/// The rows as a table.
pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<10} {:<6} {:<17} {:>5} {:>8} {:>12} {:>9} {:>9} {:>13} {:>5}\n",
        "server",
        "back",
        "attack",
        "conns",
        "wait s",
        "closed (s)",
        "KiB/conn",
        "after",
        "fds b/p/a",
        "ok"
    );
    for r in rows {
        let closed = match (r.all_closed_after_secs, r.close_budget_secs) {
            (Some(x), Some(_)) => format!("all {x:.1}"),
            (None, Some(_)) => format!("{}/{}", r.closed, r.hostile),
            _ => "-".into(),
        };
        let (during, after) = r.memory_cells("f");
        s += &format!(
            "{:<10} {:<6} {:<17} {:>5} {:>8.2} {:>12} {:>9} {:>9} {:>13} {:>5}\n",
            r.target,
            r.backend,
            r.attack,
            r.hostile,
            r.probe.worst_wait_secs,
            closed,
            during,
            after,
            format!("{}/{}/{}", r.fds[0], r.fds[1], r.fds[2]),
            if r.failures.is_empty() { "yes" } else { "NO" },
        );
    }
    s
}
