//! `ringkit torture echo|http|idle|hostile`: chaos against a server this
//! command starts, every byte verified; idle-connection memory per server;
//! and the battery of hostile clients.

use std::io;
use std::time::Duration;

use clap::{Args, ValueEnum};
use ringkit::Backend;
use ringkit_bench::torture::{self, TortureConfig};
use ringkit_echo::EchoLimits;

/// What to torture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TortureMode {
    /// The echo server (`ringkit echo`).
    Echo,
    /// The HTTP server (`ringkit serve` on a directory of generated files;
    /// the --server-* fault knobs apply to echo only).
    Http,
    /// Memory per idle connection: ringkit (uring, epoll), tokio, monoio.
    Idle,
    /// Hostile clients against --server (every ringkit server by default),
    /// each beside a well-behaved client, with time and memory budgets.
    Hostile,
    /// A three-node replicated map (`ringkit raft`) under client load,
    /// --rounds of SIGKILLs and partitions (nftables; needs root), every
    /// operation's history checked (`--seed`, `--backend`, `--dir` apply).
    Raft,
}

/// `ringkit torture`.
#[derive(Args, Debug)]
pub struct TortureArgs {
    /// echo | http | idle | hostile.
    pub(crate) mode: TortureMode,
    /// Hostile: the servers to attack: http, serve, serve-tls, axum,
    /// axum-tls, echo, log, nginx, nginx-tls, axum-tokio and
    /// axum-tls-tokio (the same axum app on tokio in the clear and over
    /// rustls, `ringkit-peer`, on the floods and the download), or `all`
    /// (the seven ringkit servers); repeat or separate with commas.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    pub(crate) server: Vec<String>,
    /// Hostile: the short form (timeouts of seconds, fewer connections;
    /// what `cargo test` runs).
    #[arg(long)]
    pub(crate) short: bool,
    /// Hostile: only these attacks (idle-flood, reset-flood, slow-opening,
    /// slow-body, open-then-silent, never-read, burst-then-idle,
    /// max-bodies, fd-exhaustion, h2-window-flood, h2-ping-flood,
    /// h2-zero-window, h2-rapid-reset, h2-continuation, h2-settings-flood,
    /// h2-empty-frames, h2-made-you-reset, h2-hpack-bomb, tls-big-hello,
    /// tls-handshake-flood, h1-pipeline-flood, h2-window-flood-read,
    /// h2-ping-flood-unread, h2-budget-download, h2-data-dribble,
    /// h2-priority-churn, h2-reset-flood-unread, h2-empty-headers); each
    /// runs where it
    /// applies.
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Vec<String>,
    /// Hostile: `--max-connections` of the servers that take it.
    #[arg(long, default_value_t = 256)]
    pub(crate) cap: usize,
    /// Hostile: a directory that does not exist yet, for the files, logs
    /// and certificates (default: a new one under the temp dir, removed
    /// after).
    #[arg(long)]
    pub(crate) dir: Option<std::path::PathBuf>,
    /// Seconds of chaos (about 30 for CI, 600 for the long mode).
    #[arg(long, default_value_t = 30.0)]
    secs: f64,
    /// Server backend: auto | uring | epoll.
    #[arg(long, default_value = "auto")]
    pub(crate) backend: Backend,
    /// Backend of the chaos clients' own runtime.
    #[arg(long, default_value = "auto")]
    client_backend: Backend,
    /// Seed of every random decision (same seed, same choices).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Concurrent client connections (idle: idle connections per server;
    /// default 64, idle 10000).
    #[arg(long)]
    conns: Option<usize>,
    /// Server threads.
    #[arg(long, default_value_t = 1)]
    server_threads: usize,
    /// CPU for the server (default 0 on a machine with two or more CPUs).
    #[arg(long)]
    pub(crate) server_cpu: Option<usize>,
    /// CPU for the clients (default 1 on a machine with two or more CPUs).
    #[arg(long)]
    pub(crate) client_cpu: Option<usize>,
    /// Graceful-shutdown mode: send SIGTERM to the server after SECS (in-flight
    /// messages must complete, new connections be refused, exit code 0).
    #[arg(long, value_name = "SECS")]
    sigterm_at: Option<f64>,
    /// Server fault: io_uring SQ entries (CQ 4x); e.g. 4.
    #[arg(long)]
    server_entries: Option<u32>,
    /// Server fault: provided-buffer ring size (power of two); e.g. 2 (ENOBUFS).
    #[arg(long)]
    server_recv_buffers: Option<u16>,
    /// Server fault: soft RLIMIT_NOFILE of the server (EMFILE on accept).
    #[arg(long)]
    server_nofile: Option<u64>,
    /// Network faults (needs root, ip, nft and tc): the server runs in a
    /// network namespace behind a veth pair and the link misbehaves:
    /// loss1 | loss5 (nftables drops, each direction), delay (20 ms ± 5 ms
    /// each way, by a fault proxy), slow (10 Mbit/s, tc tbf), slice (1 to
    /// 16-byte segments), reset (3% of connections reset mid-stream),
    /// silent (after the chaos, 16 peers go silent mid-transfer: the server
    /// must free them within its timeouts). The server gets short timeouts
    /// (send 10 s; echo dead-peer / HTTP idle 10 s).
    #[arg(long, value_name = "PROFILE")]
    faults: Option<torture::FaultProfile>,
    /// HTTP only: serve HTTPS (a fresh self-signed certificate) and drive
    /// it with rustls clients that verify every body byte; with --faults,
    /// TLS across the faulty link.
    #[arg(long)]
    tls: bool,
    /// Seconds without progress after which a connection counts as stalled.
    #[arg(long, default_value_t = 60.0)]
    stall_secs: f64,
    /// Print the report as JSON too.
    #[arg(long)]
    pub(crate) json: bool,
    /// Raft: rounds of faults.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Raft: concurrent clients.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Raft: the port every node listens on (node N at 10.X.Y.N in its own
    /// namespace, or 127.0.0.1N without namespaces).
    #[arg(long, default_value_t = 7200)]
    port: u16,
    /// Raft: the faults (nemeses) to draw from, comma-separated (default: all the
    /// machine can run): kill-leader, kill-follower, kill-majority,
    /// kill-all, pause-leader, pause-node, cut-node, cut-leader,
    /// cut-leader-from-peers, cut-inbound, moving-split, power-loss,
    /// power-loss-all, slow-disk-power-loss, disk-full. Each is run once first, in an
    /// order drawn from the seed, then at random.
    #[arg(long, value_delimiter = ',', value_parser = crate::nemesis::Fault::parse)]
    nemesis: Vec<crate::nemesis::Fault>,
    /// Raft: go on after the first violation (default: stop there).
    #[arg(long)]
    keep_going: bool,
}

pub fn torture(a: TortureArgs) -> io::Result<()> {
    if a.mode == TortureMode::Raft {
        return raft(&a);
    }
    let exe = std::env::current_exe()?;
    let mut cfg = TortureConfig::new(exe);
    cfg.backend = a.backend;
    cfg.client_backend = a.client_backend;
    cfg.secs = a.secs;
    cfg.seed = a.seed;
    cfg.conns = a.conns.unwrap_or(64).max(1);
    cfg.server_threads = a.server_threads.max(1);
    if a.server_cpu.is_some() {
        cfg.server_cpu = a.server_cpu;
    }
    if a.client_cpu.is_some() {
        cfg.client_cpu = a.client_cpu;
    }
    cfg.sigterm_at = a.sigterm_at;
    cfg.limits = EchoLimits {
        entries: a.server_entries,
        recv_buffers: a.server_recv_buffers.map(|n| (n, 4096)),
        nofile: a.server_nofile,
        ..EchoLimits::default()
    };
    cfg.stall = Duration::from_secs_f64(a.stall_secs.max(1.0));
    cfg.faults = a.faults;
    cfg.tls = a.tls;
    let mut log = |m: &str| eprintln!("ringkit torture: {m}");
    if a.mode == TortureMode::Idle {
        return idle(&a, cfg.exe.clone(), &mut log);
    }
    cfg.mode = match a.mode {
        TortureMode::Http => torture::TortureMode::Http,
        _ => torture::TortureMode::Echo,
    };
    let rep = torture::run(&cfg, &mut log)?;
    println!("{rep}");
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    }
    if rep.ok() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "torture FAILED: {}",
            rep.failures.join("; ")
        )))
    }
}

/// `ringkit torture idle`: bytes per idle connection, per server.
fn idle(a: &TortureArgs, exe: std::path::PathBuf, log: &mut dyn FnMut(&str)) -> io::Result<()> {
    let peer = ringkit_bench::harness::peers::peer_binary(&exe);
    let mut cfg = torture::idle::IdleConfig::standard(exe, peer, a.conns.unwrap_or(10_000).max(1));
    if a.server_cpu.is_some() {
        cfg.server_cpu = a.server_cpu;
    }
    if a.client_cpu.is_some() {
        cfg.client_cpu = a.client_cpu;
    }
    let rep = torture::idle::run(&cfg, log)?;
    println!("{rep}");
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    }
    if rep.ok() {
        Ok(())
    } else {
        Err(io::Error::other(
            "idle-connection measurement failed for some servers",
        ))
    }
}

/// `ringkit torture raft`.
fn raft(a: &TortureArgs) -> io::Result<()> {
    let cfg = crate::torture_raft::RaftTorture {
        rounds: a.rounds,
        seed: a.seed,
        clients: a.clients,
        backend: a.backend,
        dir: a.dir.clone(),
        port: a.port,
        faults: a.nemesis.clone(),
        keep_going: a.keep_going,
    };
    let mut log = |m: &str| eprintln!("ringkit torture raft: {m}");
    let r = crate::torture_raft::run(&cfg, &mut log)?;
    let v = &r.verdict;
    let faults: Vec<String> = r.faults.iter().map(|(f, n)| format!("{f} x{n}")).collect();
    println!("ringkit torture raft: faults run: {}", faults.join(", "));
    if v.violations.is_empty() {
        println!(
            "ringkit torture raft: {} rounds, {} operations checked ({} appends acknowledged, {} \
             unknown, {} reads): nothing lost, reordered or stale",
            r.rounds,
            v.ops,
            v.acked - v.reads,
            r.unknown,
            v.reads
        );
        Ok(())
    } else {
        if let Some((round, secs)) = r.first_violation {
            println!("ringkit torture raft: first violation after round {round}, {secs:.1} s");
        }
        for m in v.violations.iter().take(20) {
            println!("VIOLATION: {m}");
        }
        if v.violations.len() > 20 {
            println!("... and {} more", v.violations.len() - 20);
        }
        Err(io::Error::other(format!(
            "torture raft FAILED: {} violations",
            v.violations.len()
        )))
    }
}
