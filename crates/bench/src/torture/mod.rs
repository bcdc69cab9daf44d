//! `ringkit torture`: a chaos load against a server it starts, with every
//! byte verified.
//!
//! # What a run does (echo)
//! 1. Starts `ringkit echo` as a child process (pinned to the server CPU,
//!    with the fault knobs asked for) on a free loopback port, and waits
//!    until every server thread says it is listening.
//! 2. Samples the child's RSS and open fds (`/proc/PID/status`, `/proc/PID/fd`):
//!    the start figures; a background thread keeps the peaks.
//! 3. Runs the chaos clients ([`echo`]) on a ringkit runtime on this thread
//!    (pinned to the client CPU) for the given time. In graceful mode
//!    (`sigterm_at`) it sends `SIGTERM` at that moment instead, checks that
//!    a new connection is refused once the server says its listener is
//!    closed, lets every client finish the message it had started, and
//!    requires exit code 0.
//! 4. Otherwise, once every client connection is closed: checks the server
//!    is alive, waits for its fd count to settle, echoes a few fresh
//!    messages of every size on new connections, samples the end figures,
//!    then stops it with `SIGTERM` and requires exit code 0.
//!
//! A run fails — [`TortureReport::failures`] is not empty — on any wrong
//! or missing byte, stalled or refused connection, server death, error line
//! from the server other than those a fault knob provokes on purpose, fd
//! leak, or non-zero exit.
//!
//! Every random decision derives from the seed; with the same seed a run
//! makes the same choices (the network's timing still varies).

pub mod echo;
pub mod faults;
pub mod hostile;
pub mod http;
pub mod idle;
pub mod proxy;
pub mod report;
pub mod sendq;
pub mod silent;
mod slots;
pub mod tally;
pub mod tls;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringkit::Backend;
use serde::Serialize;

use ringkit_echo::EchoLimits;

use crate::harness::child::free_addr;
use crate::harness::process::{Launch, ProcSample, Process, Ready};
use crate::harness::server::RingkitServer;
use report::mib;

pub use faults::FaultProfile;
pub use report::{FaultFigures, ServerFigures, TortureReport};

/// Settings of one run of chaos clients (echo or HTTP).
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// Concurrent session slots.
    pub conns: usize,
    /// Seed of every random decision.
    pub seed: u64,
    /// Stop starting new work at this moment.
    pub stop_at: Instant,
    /// A connection owed bytes with nothing arriving for this long has
    /// stalled.
    pub stall: Duration,
    /// Whether stopping means the server is being shut down gracefully.
    pub graceful_stop: bool,
    /// The server's request timeout when the link may legitimately hold a
    /// request back that long (a faulty link made in a namespace, not by
    /// the proxy): an HTTP 408 for a request held back that long is the
    /// server's right ([`sendq`]). `None`: every 408 is a failure.
    pub request_timeout: Option<Duration>,
}

/// Which server a torture run attacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
pub enum TortureMode {
    /// `ringkit echo`: every byte echoed back.
    #[default]
    Echo,
    /// `ringkit serve DIR`: every status, length and body byte.
    Http,
}

/// Settings of a torture run.
#[derive(Debug, Clone)]
pub struct TortureConfig {
    /// Echo or HTTP.
    pub mode: TortureMode,
    /// The `ringkit` binary that serves (`<exe> echo|serve ...`).
    pub exe: PathBuf,
    /// Server backend.
    pub backend: Backend,
    /// Backend of the chaos clients' own runtime.
    pub client_backend: Backend,
    /// Seconds of chaos.
    pub secs: f64,
    /// Seed of every random decision.
    pub seed: u64,
    /// Concurrent client connections (session slots).
    pub conns: usize,
    /// Server threads.
    pub server_threads: usize,
    /// Pin the server to this CPU.
    pub server_cpu: Option<usize>,
    /// Pin the clients to this CPU.
    pub client_cpu: Option<usize>,
    /// Graceful-shutdown mode: send `SIGTERM` after this many seconds.
    pub sigterm_at: Option<f64>,
    /// Server fault knobs (entries, provided buffers, nofile) and drain timing.
    pub limits: EchoLimits,
    /// A connection owed bytes with none arriving for this long has stalled.
    pub stall: Duration,
    /// Run the server across a faulty link ([`faults`]): needs root.
    pub faults: Option<FaultProfile>,
    /// HTTP mode over TLS ([`tls`]): the server gets a fresh certificate,
    /// the clients are rustls connections that verify every body byte.
    pub tls: bool,
}

impl TortureConfig {
    /// Defaults for `exe`: auto backend, 30 s, seed 1, 64 connections, one
    /// server thread on CPU 0, clients on CPU 1 (when there are two CPUs).
    pub fn new(exe: PathBuf) -> TortureConfig {
        let two = crate::harness::sysinfo::SystemInfo::gather().cores >= 2;
        TortureConfig {
            mode: TortureMode::Echo,
            exe,
            backend: Backend::Auto,
            client_backend: Backend::Auto,
            secs: 30.0,
            seed: 1,
            conns: 64,
            server_threads: 1,
            server_cpu: two.then_some(0),
            client_cpu: two.then_some(1),
            sigterm_at: None,
            limits: EchoLimits::default(),
            stall: Duration::from_secs(60),
            faults: None,
            tls: false,
        }
    }

    fn server_cmd(
        &self,
        addr: SocketAddr,
        dir: Option<&std::path::Path>,
        tls: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Vec<String> {
        let s = match dir {
            Some(dir) => RingkitServer::serve(&self.exe, dir),
            None => RingkitServer::echo(&self.exe),
        };
        let mut s = s
            .addr(addr)
            .backend(self.backend)
            .threads(self.server_threads);
        if dir.is_some() {
            if let Some((cert, key)) = tls {
                s = s
                    .flag("--tls-cert", cert.display())
                    .flag("--tls-key", key.display());
            }
            if self.faults.is_some() {
                // Short timeouts, so the silent peers are freed quickly.
                s = s
                    .flag("--send-timeout", FAULT_SEND_TIMEOUT)
                    .flag("--idle-timeout", FAULT_PEER_TIMEOUT)
                    .flag("--header-timeout", FAULT_REQUEST_TIMEOUT);
            }
            return s.cmd();
        }
        if self.faults.is_some() {
            s = s
                .flag("--send-timeout", FAULT_SEND_TIMEOUT)
                .flag("--dead-peer-timeout", FAULT_PEER_TIMEOUT);
        }
        s = s
            .flag("--drain-idle-ms", self.limits.drain_idle.as_millis())
            .flag("--drain-secs", self.limits.drain_timeout.as_secs_f64());
        if let Some(n) = self.limits.entries {
            s = s.flag("--entries", n);
        }
        if let Some((n, size)) = self.limits.recv_buffers {
            s = s.flag("--recv-buffers", n).flag("--recv-buffer-size", size);
        }
        if let Some(n) = self.limits.nofile {
            s = s.flag("--nofile", n);
        }
        s.cmd()
    }
}

/// Under `--faults`: the server's send timeout (s). Not shorter: on the
/// 10 Mbit/s link a flow whose segments the token bucket dropped waits out
/// retransmission backoff (1, 2, 4 s...) with no progress, and 3 s cut
/// such live connections mid-response.
const FAULT_SEND_TIMEOUT: u64 = 10;
/// Under `--faults`: the echo server's dead-peer timeout and the HTTP
/// server's idle timeout (s); the same reasoning.
const FAULT_PEER_TIMEOUT: u64 = 10;
/// Under `--faults`: the HTTP server's request (head and body) timeout (s).
/// A pipelined body can wait this long behind a lost window update: the
/// sender learns of the open window only by its zero-window probes, which
/// back off as retransmissions do. The clients accept a 408 that comes at
/// least this long after its request began to be written.
const FAULT_REQUEST_TIMEOUT: u64 = 10;
/// How long the silent peers may take to be freed: the timeouts above,
/// keepalive probes and margin.
const SILENT_LIMIT: Duration = Duration::from_secs(30);

use crate::harness::made_dir::MadeDir;

/// Run the torture (`cfg.mode`). `log` gets progress lines.
pub fn run(cfg: &TortureConfig, log: &mut dyn FnMut(&str)) -> io::Result<TortureReport> {
    ringkit::raise_nofile_limit();
    let net = match cfg.faults {
        Some(_) => {
            if let Some(why) = faults::unavailable() {
                return Err(crate::harness::err::unsupported(why));
            }
            Some(faults::Net::create(std::process::id())?)
        }
        None => None,
    };
    let ip = net
        .as_ref()
        .map_or(std::net::Ipv4Addr::LOCALHOST, |n| n.server_ip);
    let addr: SocketAddr = (ip, free_addr()?.port()).into();
    let dir = match cfg.mode {
        TortureMode::Echo => None,
        TortureMode::Http => {
            let d = std::env::temp_dir().join(format!(
                "ringkit-torture-{}-{}",
                std::process::id(),
                cfg.seed
            ));
            let d = MadeDir::new(d)?;
            http::make_files(d.path(), cfg.seed)?;
            Some(d)
        }
    };
    // HTTPS: a certificate outside the served directory.
    let tls_dir = match (cfg.tls, cfg.mode) {
        (true, TortureMode::Http) => {
            let d = std::env::temp_dir().join(format!(
                "ringkit-torture-tls-{}-{}",
                std::process::id(),
                cfg.seed
            ));
            Some(MadeDir::new(d)?)
        }
        (true, TortureMode::Echo) => {
            return Err(crate::harness::err::invalid_input(
                "--tls is for the HTTP torture (ringkit serve)",
            ))
        }
        _ => None,
    };
    let tls_files = match &tls_dir {
        Some(d) => Some(tls::make_cert(d.path())?),
        None => None,
    };
    let cmd = cfg.server_cmd(
        addr,
        dir.as_ref().map(|d| d.path()),
        tls_files
            .as_ref()
            .map(|(c, k, _)| (c.as_path(), k.as_path())),
    );
    let ca = tls_files.as_ref().map(|(_, _, ca)| ca.clone());
    let wrapped = match &net {
        Some(n) => n.wrap(cmd.clone()),
        None => cmd.clone(),
    };
    let launch = Launch {
        cpu: cfg.server_cpu,
        ready: Ready::Lines {
            pat: "listening on".into(),
            n: cfg.server_threads,
        },
        ..Launch::new(wrapped, addr)
    };
    let mut srv = Process::start(&launch)?;
    let mut rep = TortureReport {
        mode: match (cfg.mode, cfg.tls) {
            (TortureMode::Echo, _) => "echo".into(),
            (TortureMode::Http, false) => "http".into(),
            (TortureMode::Http, true) => "https".into(),
        },
        server_cmd: cmd.join(" "),
        seed: cfg.seed,
        conns: cfg.conns,
        cpus: (cfg.server_cpu, cfg.client_cpu),
        ..Default::default()
    };
    rep.server_backend = srv
        .lines()
        .iter()
        .find_map(|l| l.split_once(" with ").map(|(_, b)| b.to_string()))
        .unwrap_or_default();
    std::thread::sleep(Duration::from_millis(200));
    let start = srv
        .sample()
        .ok_or_else(|| io::Error::other("server vanished at start"))?;
    rep.start = start.into();
    log(&format!(
        "server pid {} on {addr}: {}; RSS {}, {} fds",
        srv.pid(),
        rep.server_backend,
        mib(start.rss_kib),
        start.fds
    ));
    if let Some(cpu) = cfg.client_cpu {
        ringkit::pin_to_cpu(cpu)?;
    }
    // The link's faults, and the proxy the clients go through for the
    // profiles it makes.
    let mut proxy = None;
    if let (Some(p), Some(n)) = (cfg.faults, &net) {
        n.apply(p)?;
        let how = match p {
            FaultProfile::Loss1 | FaultProfile::Loss5 => {
                "nftables numgen drops on the server's veth, both directions"
            }
            FaultProfile::Slow => "tc tbf at 10 Mbit/s on both veth ends",
            FaultProfile::Silent => {
                "every packet dropped by nftables after the chaos, with peers mid-transfer"
            }
            _ => "the fault proxy between the clients and the server",
        };
        if let Some(t) = p.toxics() {
            proxy = Some(proxy::Proxy::start(addr, t, cfg.seed)?);
        }
        rep.faults = Some(FaultFigures {
            profile: p.name().into(),
            how: how.into(),
            ..Default::default()
        });
        log(&format!(
            "faults: {} ({how}), server in namespace {}",
            p.name(),
            n.ns
        ));
    }
    let client_addr = proxy.as_ref().map_or(addr, |p| p.addr());

    let graceful = cfg.sigterm_at.is_some();
    let chaos_secs = cfg.sigterm_at.unwrap_or(cfg.secs).max(0.0);
    let t0 = Instant::now();
    let pid = srv.pid();
    let threads = cfg.server_threads;
    let lines = srv.lines_handle();
    let probe: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let mut sigterm_at: Option<Instant> = None;
    let mut probe_thread = None;
    let mut last_log = Instant::now();
    // The echo server says when its listener is closed; the HTTP server does not.
    let marker = (cfg.mode == TortureMode::Echo).then_some("listener closed");
    let mut on_stop = || {
        if !graceful {
            return;
        }
        sigterm_at = Some(Instant::now());
        // SAFETY: kill(2) on our own child, which we have not reaped.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        let (lines, probe) = (lines.clone(), probe.clone());
        probe_thread = Some(std::thread::spawn(move || {
            let r = probe_refused(addr, &lines, threads, marker);
            if let Ok(mut p) = probe.lock() {
                *p = Some(r);
            }
        }));
    };
    let mut progress = |what: &str, t: &tally::Tally, done: u64| {
        if last_log.elapsed() >= Duration::from_secs(5) {
            last_log = Instant::now();
            let s = ProcSample::of(pid).unwrap_or_default();
            log(&format!(
                "t={:>4.0}s sessions {} {what} {done} verified {} mismatches {} losses {} | server RSS {} fds {}",
                t0.elapsed().as_secs_f64(),
                t.sessions,
                mib(t.bytes_verified / 1024),
                t.mismatches,
                t.losses,
                mib(s.rss_kib),
                s.fds
            ));
        }
    };
    let stop_at = t0 + Duration::from_secs_f64(chaos_secs);
    let chaos = ChaosConfig {
        addr: client_addr,
        conns: cfg.conns,
        seed: cfg.seed,
        stop_at,
        stall: cfg.stall,
        graceful_stop: graceful,
        // Through the fault proxy the client's peer is the proxy, whose
        // kernel acknowledges at once: no 408 can be judged there, and
        // none is due (the proxy holds nothing back for seconds).
        request_timeout: cfg
            .faults
            .filter(|p| p.toxics().is_none())
            .map(|_| Duration::from_secs(FAULT_REQUEST_TIMEOUT)),
    };
    // The clients' failures, less the losses the fault proxy's resets
    // explain; returns those resets.
    let judge = |rep: &mut TortureReport, t: &tally::Tally| {
        let resets = explain_resets(rep, proxy.as_ref(), t.losses);
        let mut tally = t.clone();
        tally.losses -= resets;
        rep.failures.extend(tally.failure());
        resets
    };
    match cfg.mode {
        TortureMode::Echo => {
            let counts = echo::run(chaos, cfg.client_backend, &mut on_stop, &mut |c| {
                progress("messages", &c.tally, c.messages_verified)
            })?;
            let resets = judge(&mut rep, &counts.tally);
            // Every message written whole comes back whole, except those whose
            // client reset while the echo was on its way (or whose
            // connection the fault proxy reset).
            if counts.tally.unserved_at_shutdown == 0
                && resets == 0
                && counts.messages_verified + counts.reset_during_send < counts.messages_sent
            {
                rep.failures.push(format!(
                    "{} messages sent, {} verified, only {} explained by clients that reset",
                    counts.messages_sent, counts.messages_verified, counts.reset_during_send
                ));
            }
            if counts.messages_verified == 0 {
                rep.failures.push("no message was echoed at all".into());
            }
            rep.echo = Some(counts);
        }
        TortureMode::Http if ca.is_some() => {
            let ca = ca.as_ref().expect("checked");
            let counts = tls::run(
                client_addr,
                ca,
                cfg.conns,
                cfg.seed,
                stop_at,
                cfg.stall,
                chaos.request_timeout,
            )?;
            let cut = counts.losses + counts.connect_errors;
            let resets = explain_resets(&mut rep, proxy.as_ref(), cut);
            if counts.mismatches + counts.stalls > 0 || cut > resets {
                rep.failures.push(format!(
                    "TLS clients: {} mismatches, {} stalls, {} losses, {} connect errors ({resets} explained by the proxy's resets)",
                    counts.mismatches, counts.stalls, counts.losses, counts.connect_errors
                ));
            }
            if counts.verified == 0 {
                rep.failures
                    .push("no TLS response was verified at all".into());
            }
            rep.tls = Some(counts);
        }
        TortureMode::Http => {
            let counts = http::run(chaos, cfg.client_backend, &mut on_stop, &mut |c| {
                progress("responses", &c.tally, c.responses_verified)
            })?;
            let resets = judge(&mut rep, &counts.tally);
            if counts.tally.unserved_at_shutdown == 0
                && resets == 0
                && counts.responses_verified + counts.unanswered_after_close < counts.requests
            {
                rep.failures.push(format!(
                    "{} requests sent, only {} answered and verified",
                    counts.requests, counts.responses_verified
                ));
            }
            if counts.responses_verified == 0 {
                rep.failures.push("no response was verified at all".into());
            }
            rep.http = Some(counts);
        }
    }
    rep.secs = t0.elapsed().as_secs_f64();

    if graceful {
        if let Some(t) = probe_thread.take() {
            let _ = t.join();
        }
        rep.refused_after_sigterm = probe.lock().ok().and_then(|p| p.clone());
        match &rep.refused_after_sigterm {
            Some(r) if r.starts_with("refused") => {}
            Some(r) => rep
                .failures
                .push(format!("after SIGTERM a new connection got: {r}")),
            None => rep.failures.push("the refusal probe did not run".into()),
        }
        let limit = cfg.limits.drain_timeout + Duration::from_secs(30);
        let st = srv.wait_exit(limit)?;
        if let Some(t) = sigterm_at {
            rep.shutdown_secs = st.map(|_| t.elapsed().as_secs_f64());
        }
        finish_exit(&mut rep, st, limit);
    } else {
        if let Some(st) = srv.try_exit()? {
            rep.failures.push(format!(
                "server died during the run ({st}): {}",
                srv.stderr_tail(5)
            ));
            rep.exit_code = st.code();
        } else {
            // `ringkit serve` keeps the files it served open in its
            // open-file cache (one per thread): those are not a leak.
            let cached = match cfg.mode {
                TortureMode::Echo => 0,
                TortureMode::Http => (http::FILES as u64 + 1) * cfg.server_threads as u64,
            };
            let allowed = start.fds + cached;
            let settled = srv.settle_fds(allowed, Duration::from_secs(10));
            let checked = match (cfg.mode, &ca) {
                (TortureMode::Echo, _) => echo::final_check(addr, cfg.stall),
                (TortureMode::Http, Some(ca)) => tls::final_check(addr, ca, cfg.seed, cfg.stall),
                (TortureMode::Http, None) => http::final_check(addr, cfg.seed, cfg.stall),
            };
            if let Err(e) = checked {
                rep.failures
                    .push(format!("after the chaos, fresh connections: {e}"));
            }
            drop(proxy.take());
            if let (Some(FaultProfile::Silent), Some(n)) = (cfg.faults, &net) {
                let largest = (1..http::FILES)
                    .max_by_key(|&i| http::file_size(cfg.seed, i))
                    .unwrap_or(1);
                log("silent peers: dropping every packet on the link");
                match silent::run(
                    n,
                    &srv,
                    addr,
                    cfg.mode,
                    ca.as_ref(),
                    largest,
                    16,
                    SILENT_LIMIT,
                ) {
                    Ok(fig) => {
                        if let Some(x) = rep.faults.as_mut() {
                            x.silent = Some(fig);
                        }
                    }
                    Err(e) => rep.failures.push(e),
                }
            }
            let end = srv.settle_fds(allowed, Duration::from_secs(10)).or(settled);
            match end {
                Some(e) => {
                    rep.end = Some(e.into());
                    if e.fds > allowed {
                        rep.failures.push(format!(
                            "fd leak: {} open fds at the end, {} at the start (+{cached} for cached files)",
                            e.fds, start.fds
                        ));
                    }
                }
                None => rep.failures.push("server vanished at the end".into()),
            }
            let t = Instant::now();
            srv.signal(libc::SIGTERM)?;
            let limit = cfg.limits.drain_timeout + Duration::from_secs(30);
            let st = srv.wait_exit(limit)?;
            rep.shutdown_secs = st.map(|_| t.elapsed().as_secs_f64());
            finish_exit(&mut rep, st, limit);
        }
    }
    let peak = srv.peak();
    rep.peak = ServerFigures {
        rss_kib: peak.rss_kib.max(rep.start.rss_kib),
        fds: peak.fds.max(rep.start.fds),
    };
    srv.kill();
    server_lines(&mut rep, &srv.lines(), cfg.limits.nofile.is_some());
    Ok(rep)
}

/// Losses the fault proxy's own resets explain (at most one per reset),
/// recorded in the report.
fn explain_resets(rep: &mut TortureReport, proxy: Option<&proxy::Proxy>, losses: u64) -> u64 {
    let Some(p) = proxy else { return 0 };
    let explained = losses.min(p.resets());
    if let Some(x) = rep.faults.as_mut() {
        x.relayed = p.relayed();
        x.injected_resets = p.resets();
        x.losses_explained = explained;
    }
    explained
}

/// Record the exit status: it must be a clean 0.
fn finish_exit(rep: &mut TortureReport, st: Option<std::process::ExitStatus>, limit: Duration) {
    match st {
        Some(st) => {
            rep.exit_code = st.code();
            if st.code() != Some(0) {
                rep.failures.push(format!(
                    "server exit after SIGTERM: {st} (want exit code 0)"
                ));
            }
        }
        None => rep
            .failures
            .push(format!("server still running {limit:?} after SIGTERM")),
    }
}

/// Sort the server's stderr into accept errors, other errors, and failures.
fn server_lines(rep: &mut TortureReport, lines: &[String], low_nofile: bool) {
    for l in lines {
        if let Some((_, c)) = l.split_once("runtime counters: ") {
            rep.server_counters.push(c.to_string());
        }
        // "thread N: stopped: ..., K accept errors"
        if let Some(k) = l
            .strip_suffix(" accept errors")
            .and_then(|h| h.rsplit(' ').next())
            .and_then(|k| k.parse::<u64>().ok())
        {
            rep.accept_errors += k;
        }
        if l.contains("accept error:") {
            let expected = low_nofile && l.contains("Too many open files");
            if !expected {
                rep.server_errors.push(l.clone());
            }
        } else if l.contains("error:") || l.contains("panicked") {
            rep.server_errors.push(l.clone());
        }
    }
    if !rep.server_errors.is_empty() {
        rep.failures.push(format!(
            "{} error lines from the server (first: {})",
            rep.server_errors.len(),
            rep.server_errors[0]
        ));
    }
}

/// After `SIGTERM`: once every server thread says its listener is closed
/// (`marker`), a new connection must be refused. Without a marker (a
/// server that does not say), connect until refused, for at most 30 s.
fn probe_refused(
    addr: SocketAddr,
    lines: &Arc<Mutex<Vec<String>>>,
    threads: usize,
    marker: Option<&str>,
) -> String {
    let t0 = Instant::now();
    let Some(marker) = marker else {
        loop {
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    return format!(
                        "refused (as it should) {:.0} ms after SIGTERM",
                        t0.elapsed().as_secs_f64() * 1e3
                    )
                }
                Err(e) => return format!("error {e} (want connection refused)"),
                Ok(_) if t0.elapsed() > Duration::from_secs(30) => {
                    return "still accepted 30 s after SIGTERM (want connection refused)".into()
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    };
    loop {
        let closed = lines
            .lock()
            .map(|v| v.iter().filter(|l| l.contains(marker)).count())
            .unwrap_or(0);
        if closed >= threads {
            break;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return "no 'listener closed' line from the server within 30 s".into();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => "refused (as it should)".into(),
        Err(e) => format!("error {e} (want connection refused)"),
        Ok(_) => "ACCEPTED (want connection refused)".into(),
    }
}
