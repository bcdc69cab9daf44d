//! `ringkit compare generator`: how much load the echo generator drives
//! from one pinned core, against rust_echo_bench's client design.
//!
//! One ringkit-uring echo server (the fastest server we have, so that it is
//! the generator that runs out of CPU) is pinned to the server CPU. On the
//! client CPU, interleaved and rotated each round, the two generators of
//! [`crate::echo`] drive it in turn: `ringkit` (one thread, every connection
//! a task on the runtime) and `threads` (one blocking OS thread per
//! connection, rust_echo_bench's design). Both check every byte.
//!
//! Per generator: round trips per second, its own CPU, and round trips per
//! generator CPU-second (what one fully busy core can drive; the same as
//! round trips per second while the generator is the bottleneck, and still
//! meaningful when the server saturates first). The target of issue 4:
//! ringkit >= 1.5x threads.

use std::fmt::Write as _;
use std::io;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::echo::load::{self as echo, EchoLoadConfig, EchoLoadResult};
use crate::harness::bars::Bars;
use crate::harness::fmt::ratio;
use crate::harness::latency::schedule;
use crate::harness::server::{free_addr, Family, RingkitServer, Server};
use crate::harness::stat::{stat, Stat};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::SystemInfo;

/// The target: ringkit's generator drives this many times the threads
/// generator's round trips per CPU-second.
pub const TARGET: f64 = 1.5;

/// The generators compared.
pub const CLIENTS: [&str; 2] = ["ringkit", "threads"];

/// Settings.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct GenConfig {
    /// Connection counts.
    pub conns: Vec<usize>,
    /// Message length.
    pub len: usize,
    /// Rounds (each generator once per round).
    pub rounds: usize,
    /// Measured seconds per sample.
    pub secs: f64,
    /// CPU of the server.
    pub server_cpu: usize,
    /// CPU of the generators.
    pub client_cpu: usize,
    /// The `ringkit` binary (to start the server).
    #[serde(skip)]
    pub ringkit_bin: std::path::PathBuf,
    /// Where the server's log goes.
    #[serde(skip)]
    pub out_dir: std::path::PathBuf,
}

/// One measured run of one generator.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct GenSample {
    /// `ringkit` or `threads`.
    pub client: String,
    /// Connections.
    pub conns: usize,
    /// Round number.
    pub round: usize,
    /// What the generator measured.
    pub load: EchoLoadResult,
    /// Error, if the run failed.
    pub error: Option<String>,
}

impl GenSample {
    fn ok(&self) -> bool {
        self.error.is_none() && self.load.ok()
    }
}

/// Per generator and connection count.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct GenRow {
    /// `ringkit` or `threads`.
    pub client: String,
    /// Connections.
    pub conns: usize,
    /// Round trips per second.
    pub rps: Stat,
    /// The generator's CPU, share of one core.
    pub cpu_share: Stat,
    /// Round trips per generator CPU-second.
    pub per_cpu_s: Stat,
    /// p99 latency, microseconds.
    pub p99_us: Stat,
    /// Median rps / the threads generator's (ringkit row only).
    pub rps_vs_threads: Option<f64>,
    /// Median round trips per CPU-second / the threads generator's.
    pub per_cpu_vs_threads: Option<f64>,
    /// Good samples / samples.
    pub ok: (usize, usize),
}

/// Everything the study produced.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct GenResults {
    /// Machine and tool.
    pub system: SystemInfo,
    /// Settings.
    pub config: GenConfig,
    /// The server's first log line (backend and flags).
    pub server_banner: String,
    /// Raw samples.
    pub samples: Vec<GenSample>,
    /// Summary rows.
    pub rows: Vec<GenRow>,
    /// Wall time, seconds.
    pub wall_secs: f64,
}

fn one(
    cfg: &GenConfig,
    client: &str,
    conns: usize,
    round: usize,
    addr: std::net::SocketAddr,
) -> GenSample {
    let load_cfg = EchoLoadConfig {
        addr,
        conns,
        len: cfg.len,
        duration: Duration::from_secs_f64(cfg.secs),
        pipeline: 1,
        backend: ringkit::Backend::Auto,
        rate: None,
    };
    let res = if client == "threads" {
        echo::run_load_threads(&load_cfg, &mut |_| {})
    } else {
        echo::run_load(&load_cfg, &mut |_| {})
    };
    let (load, error) = match res {
        Ok(l) => {
            let e = (!l.ok()).then(|| {
                l.first_error
                    .clone()
                    .unwrap_or_else(|| "lost connections or wrong bytes".into())
            });
            (l, e)
        }
        Err(e) => (EchoLoadResult::default(), Some(e.to_string())),
    };
    GenSample {
        client: client.into(),
        conns,
        round,
        load,
        error,
    }
}

/// Run the study. `progress` gets one line per sample.
pub fn run(cfg: &GenConfig, progress: &mut dyn FnMut(&str)) -> io::Result<GenResults> {
    let wall = Instant::now();
    ringkit::raise_nofile_limit();
    let logs = cfg.out_dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let server = RingkitServer::echo(&cfg.ringkit_bin)
        .backend("uring")
        .contender("ringkit-uring", Family::Uring);
    let addr = free_addr()?;
    let log = logs.join("generator-server.log");
    let srv = Server::start(&server, addr, &cfg.out_dir, cfg.server_cpu, &log)?;
    ringkit::pin_to_cpu(cfg.client_cpu)?;
    let total = cfg.conns.len() * cfg.rounds * CLIENTS.len();
    let mut samples = Vec::new();
    for &conns in &cfg.conns {
        for (round, &client) in schedule(&CLIENTS, cfg.rounds) {
            let s = one(cfg, client, conns, round, addr);
            progress(&format!(
                "[{}/{total}] generator {client} c={conns} round {round}: {}",
                samples.len() + 1,
                match &s.error {
                    None => format!(
                        "{:.0} round trips/s, {:.0}% of a core, {:.0} per CPU-second",
                        s.load.rps(),
                        100.0 * s.load.client_cpu_s / s.load.secs.max(1e-9),
                        s.load.rps_per_client_cpu()
                    ),
                    Some(e) => format!("FAILED: {e}"),
                }
            ));
            samples.push(s);
        }
    }
    drop(srv);
    let server_banner = std::fs::read_to_string(&log)
        .ok()
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_default();
    Ok(GenResults {
        system: SystemInfo::gather(),
        config: cfg.clone(),
        server_banner,
        rows: summarize(cfg, &samples),
        samples,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

fn summarize(cfg: &GenConfig, samples: &[GenSample]) -> Vec<GenRow> {
    let mut rows = Vec::new();
    for &conns in &cfg.conns {
        let mut mine: Vec<GenRow> = CLIENTS
            .iter()
            .map(|&client| {
                let all: Vec<&GenSample> = samples
                    .iter()
                    .filter(|s| s.client == client && s.conns == conns)
                    .collect();
                let good: Vec<&&GenSample> = all.iter().filter(|s| s.ok()).collect();
                let col = |f: &dyn Fn(&EchoLoadResult) -> f64| {
                    stat(good.iter().map(|s| f(&s.load)).collect())
                };
                GenRow {
                    client: client.into(),
                    conns,
                    rps: col(&|l| l.rps()),
                    cpu_share: col(&|l| l.client_cpu_s / l.secs.max(1e-9)),
                    per_cpu_s: col(&|l| l.rps_per_client_cpu()),
                    p99_us: col(&|l| l.p99_us),
                    rps_vs_threads: None,
                    per_cpu_vs_threads: None,
                    ok: (good.len(), all.len()),
                }
            })
            .collect();
        let base = mine
            .iter()
            .find(|r| r.client == "threads" && r.ok.0 > 0)
            .map(|r| (r.rps.median, r.per_cpu_s.median));
        if let Some((rps, per_cpu)) = base {
            for r in mine
                .iter_mut()
                .filter(|r| r.client != "threads" && r.ok.0 > 0)
            {
                r.rps_vs_threads = (rps > 0.0).then(|| r.rps.median / rps);
                r.per_cpu_vs_threads = (per_cpu > 0.0).then(|| r.per_cpu_s.median / per_cpu);
            }
        }
        rows.append(&mut mine);
    }
    rows
}

/// The target lines: per connection count, met or not.
pub fn targets(res: &GenResults) -> Vec<String> {
    res.rows
        .iter()
        .filter(|r| r.client == "ringkit")
        .map(|r| match r.per_cpu_vs_threads {
            Some(x) => format!(
                "target: generator c={}: ringkit {x:.2}x the threads client's round trips per CPU-second (rps {}; target >= {TARGET}x: {})",
                r.conns,
                ratio(r.rps_vs_threads),
                if x >= TARGET { "MET" } else { "NOT MET" }
            ),
            None => format!("target: generator c={}: no good samples to compare", r.conns),
        })
        .collect()
}

/// Terminal table.
pub fn table(res: &GenResults) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<9} {:>6} {:>10} {:>20} {:>6} {:>12} {:>9} {:>8} {:>8} {:>5}",
        "generator",
        "conns",
        "rps",
        "(min-max)",
        "cpu%",
        "per CPU-s",
        "p99 us",
        "rps/thr",
        "cpu/thr",
        "ok"
    );
    for r in &res.rows {
        let _ = writeln!(
            t,
            "{:<9} {:>6} {:>10.0} {:>20} {:>6.0} {:>12.0} {:>9.0} {:>8} {:>8} {:>5}",
            r.client,
            r.conns,
            r.rps.median,
            format!("({:.0}-{:.0})", r.rps.min, r.rps.max),
            100.0 * r.cpu_share.median,
            r.per_cpu_s.median,
            r.p99_us.median,
            ratio(r.rps_vs_threads),
            ratio(r.per_cpu_vs_threads),
            format!("{}/{}", r.ok.0, r.ok.1)
        );
    }
    for l in targets(res) {
        let _ = writeln!(t, "{l}");
    }
    t
}

fn markdown(res: &GenResults) -> String {
    let c = &res.config;
    let mut m = String::new();
    let _ = writeln!(m, "## Echo load generator capacity\n");
    let _ = writeln!(
        m,
        "One ringkit-uring echo server on CPU {} (`{}`); the generators take turns on CPU {}, \
         {}-byte messages, one in flight per connection, {} rounds of {} s, interleaved and rotated. \
         `ringkit`: one thread, connections as tasks on the runtime (multishot receive on io_uring). \
         `threads`: one blocking thread per connection (rust_echo_bench's client). \
         \"per CPU-s\" is round trips per second of the generator's own CPU: what one busy core drives.\n",
        c.server_cpu, res.server_banner, c.client_cpu, c.len, c.rounds, c.secs
    );
    let _ = writeln!(m, "```\n{}```\n", table(res));
    let _ = writeln!(m, "![generator capacity](generator_capacity.svg)\n");
    m
}

fn chart(res: &GenResults) -> Bars {
    Bars::from_rows(
        "Echo generator: round trips per generator CPU-second",
        "round trips / CPU-s",
        &res.rows,
        |r| format!("{} connections", r.conns),
        |r| r.client.clone(),
        |r| r.per_cpu_s.median,
    )
}

/// The report section.
pub fn section(res: &GenResults) -> Section {
    Section {
        study: "generator".into(),
        table: table(res),
        markdown: markdown(res),
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![("generator_capacity.svg".into(), chart(res).svg())],
        skipped: Vec::new(),
    }
}

/// The configuration `ringkit compare generator` uses: 50 and 1000
/// connections, 3 rounds of 4 s (quick: 50 connections, 1 round of 2 s).
pub fn config_for(opts: &StudyOpts) -> GenConfig {
    GenConfig {
        conns: if opts.quick { vec![50] } else { vec![50, 1000] },
        len: 512,
        rounds: opts.rounds.unwrap_or(if opts.quick { 1 } else { 3 }),
        secs: opts.secs.unwrap_or(if opts.quick { 2.0 } else { 4.0 }),
        server_cpu: opts.server_cpu,
        client_cpu: opts.client_cpu,
        ringkit_bin: opts.ringkit_bin.clone(),
        out_dir: opts.out_dir.join("generator"),
    }
}

/// Run the generator study for `ringkit compare` (about 50 s; quick 5 s).
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    Ok(section(&run(&config_for(opts), progress)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(client: &str, responses: u64, cpu_s: f64, error: Option<&str>) -> GenSample {
        GenSample {
            client: client.into(),
            conns: 50,
            round: 0,
            load: EchoLoadResult {
                requests: responses,
                responses,
                secs: 1.0,
                client_cpu_s: cpu_s,
                ..Default::default()
            },
            error: error.map(String::from),
        }
    }

    #[test]
    fn ratios_use_good_samples_against_threads() {
        let cfg = GenConfig {
            conns: vec![50],
            len: 512,
            rounds: 2,
            secs: 1.0,
            server_cpu: 0,
            client_cpu: 1,
            ringkit_bin: "ringkit".into(),
            out_dir: "/tmp".into(),
        };
        let samples = vec![
            sample("ringkit", 150_000, 1.0, None),
            sample("ringkit", 10, 1.0, Some("boom")),
            sample("threads", 100_000, 1.0, None),
            sample("threads", 90_000, 0.5, None),
        ];
        let rows = summarize(&cfg, &samples);
        let rk = rows.iter().find(|r| r.client == "ringkit").unwrap();
        assert_eq!(rk.ok, (1, 2));
        assert_eq!(rk.rps.median, 150_000.0);
        // threads: rps median of 100k and 90k, per CPU-s of 100k and 180k.
        let thr = rows.iter().find(|r| r.client == "threads").unwrap();
        assert!(thr.rps_vs_threads.is_none());
        let want_rps = 150_000.0 / thr.rps.median;
        assert!((rk.rps_vs_threads.unwrap() - want_rps).abs() < 1e-9);
        let want_cpu = 150_000.0 / thr.per_cpu_s.median;
        assert!((rk.per_cpu_vs_threads.unwrap() - want_cpu).abs() < 1e-9);
    }
}
