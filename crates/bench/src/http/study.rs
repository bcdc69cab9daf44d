//! `ringkit compare http`: nginx, ringkit (io_uring and epoll) and hyper
//! answering `GET /` with `200` and an empty body, side by side.
//!
//! For every workload and round, each contender's server is started as its
//! own process pinned to the server CPU and stopped by its pid; contenders
//! are interleaved and rotated every round. The load is wrk (`-t1`, pinned to
//! the client CPU) when installed, the built-in generator otherwise
//! (`RINGKIT_HTTP_LOAD=builtin|wrk` overrides).
//!
//! Server CPU per request: with wrk, the server's user+system CPU time from
//! /proc is sampled just before wrk starts and 120 ms after it exits (the
//! server is idle at both ends), and divided by wrk's total request count;
//! wrk's connects and warm-up are inside that span. With the built-in
//! generator, CPU is sampled at the start and end of the measured window.
//! ringkit servers' syscalls come from their `--stats` counters over the same
//! span; nginx's and hyper's from `perf stat -e raw_syscalls:sys_enter` (or
//! `strace -c -f` without perf) on a separate run
//! whose throughput is not used.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;

use super::load::HttpLoadResult;
use super::report;
use super::sample::Run;
use super::wrk::{self, WrkResult};
use crate::harness::server::{Contender, Family, RingkitServer};
use crate::harness::stat::stat;
use crate::harness::study::{Section, StudyOpts};
use crate::harness::summary::{best_epoll, Figures, PeerSyscalls, ServerSample};
use crate::harness::syscalls::SyscallTool;
use crate::harness::sysinfo::SystemInfo;
use ringkit::publish::Published;

/// Where Debian's nginx lives.
pub const NGINX: &str = "/usr/sbin/nginx";

/// One load shape.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Workload {
    /// Label, e.g. "keep-alive c=100".
    pub name: String,
    /// Connections (keep-alive) or concurrent requests (close).
    pub conns: usize,
    /// `Connection: close`: a new connection per request.
    pub close: bool,
}

impl Workload {
    fn new(conns: usize, close: bool) -> Workload {
        let kind = if close { "close" } else { "keep-alive" };
        Workload {
            name: format!("{kind} c={conns}"),
            conns,
            close,
        }
    }
}

/// The load generator used.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub enum LoadTool {
    /// wrk (Debian package).
    Wrk,
    /// ringkit's built-in generator (`ringkit bench http`).
    Builtin,
}

/// One measured sample.
#[derive(Debug, Clone, Serialize)]
pub struct HttpSample {
    /// Contender.
    pub contender: String,
    /// Workload label.
    pub workload: String,
    /// Round.
    pub round: usize,
    /// Requests counted (wrk: whole run; built-in: the window).
    pub requests: u64,
    /// Requests per second.
    pub rps: f64,
    /// Latency p50, µs.
    pub p50_us: f64,
    /// Latency p99, µs.
    pub p99_us: f64,
    /// Errors the generator counted.
    pub errors: u64,
    /// Server user CPU seconds over the span.
    pub cpu_user_s: f64,
    /// Server system CPU seconds over the span.
    pub cpu_sys_s: f64,
    /// ringkit counters over the span.
    pub stats: Option<Published>,
    /// wrk's report.
    pub wrk: Option<WrkResult>,
    /// The built-in generator's result.
    pub builtin: Option<HttpLoadResult>,
    /// TCP sockets in TIME_WAIT when the sample started (/proc/net/sockstat):
    /// close-mode runs leave many behind, which can slow later connects.
    pub time_wait_at_start: Option<u64>,
    /// Error starting or running.
    pub error: Option<String>,
}

impl ServerSample for HttpSample {
    fn ok(&self) -> bool {
        HttpSample::ok(self)
    }
    fn cpu_us_per_req(&self) -> (f64, f64) {
        HttpSample::cpu_us_per_req(self)
    }
    fn rps(&self) -> f64 {
        self.rps
    }
    fn answered(&self) -> u64 {
        self.requests
    }
    fn p99_us(&self) -> f64 {
        self.p99_us
    }
    fn stats(&self) -> Option<&Published> {
        self.stats.as_ref()
    }
}

impl HttpSample {
    /// Ran, with requests and without errors.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.errors == 0 && self.requests > 0
    }
    pub(crate) fn cpu_us_per_req(&self) -> (f64, f64) {
        let r = self.requests.max(1) as f64;
        (self.cpu_user_s * 1e6 / r, self.cpu_sys_s * 1e6 / r)
    }
}

/// Summary of one contender under one workload.
#[derive(Debug, Clone, Serialize)]
pub struct HttpSummary {
    /// The figures every server study has.
    #[serde(flatten)]
    pub figures: Figures,
    /// Workload label.
    pub workload: String,
    /// p50 latency, µs (median).
    pub p50_us: f64,
    /// rps median / nginx's.
    pub rps_vs_nginx: Option<f64>,
    /// CPU per request median / nginx's (lower is better).
    pub cpu_vs_nginx: Option<f64>,
    /// rps median / best epoll contender's.
    pub rps_vs_best_epoll: Option<f64>,
    /// CPU per request median / best epoll contender's.
    pub cpu_vs_best_epoll: Option<f64>,
}

/// A summary reads as its figures (`r.rps`, `r.contender`, ...).
impl std::ops::Deref for HttpSummary {
    type Target = Figures;
    fn deref(&self) -> &Figures {
        &self.figures
    }
}

/// Everything the study produced.
#[derive(Debug, Clone, Serialize)]
pub struct HttpResults {
    /// Machine and tool.
    pub system: SystemInfo,
    /// Load generator used, and why.
    pub tool: LoadTool,
    /// Why that generator.
    pub tool_reason: String,
    /// Its version.
    pub tool_version: String,
    /// `nginx -v`.
    pub nginx_version: Option<String>,
    /// The nginx configuration (with `PORT` for the port of each sample).
    pub nginx_conf: Option<String>,
    /// Rounds.
    pub rounds: usize,
    /// Seconds per sample.
    pub secs: f64,
    /// Server CPU.
    pub server_cpu: usize,
    /// Load CPU.
    pub client_cpu: usize,
    /// Workloads.
    pub workloads: Vec<Workload>,
    /// Contenders.
    pub contenders: Vec<Contender>,
    /// Load command per workload (`PORT` stands for the sample's port).
    pub load_commands: Vec<(String, String)>,
    /// First line each server logged.
    pub server_banners: Vec<(String, String)>,
    /// Skipped contenders and why.
    pub skipped: Vec<(String, String)>,
    /// Raw samples.
    pub samples: Vec<HttpSample>,
    /// Per contender and workload.
    pub summary: Vec<HttpSummary>,
    /// Wall time, seconds.
    pub wall_secs: f64,
}

/// nginx's configuration for one sample: one worker that is the process we
/// start (no master, no daemon), epoll, `return 200;`, everything in `dir`.
pub fn nginx_conf(dir: &Path, port: &str) -> String {
    let d = dir.display();
    format!(
        "worker_processes 1;
daemon off;
master_process off;
worker_rlimit_nofile 20000;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{
    worker_connections 4096;
    use epoll;
}}
http {{
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port} reuseport;
        location / {{
            return 200;
        }}
    }}
}}
"
    )
}

fn nginx_version() -> Option<String> {
    let o = Command::new(NGINX).arg("-v").output().ok()?;
    let s = String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    s.lines().next().map(|l| l.trim().to_string())
}

/// Whether the `ringkit-peer` binary knows `hyper-http` (one built before it
/// existed prints a usage line without it).
fn peer_has_hyper(peer: &Path) -> Result<(), String> {
    let o = Command::new(peer)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", peer.display()))?;
    if String::from_utf8_lossy(&o.stderr).contains("hyper-http") {
        Ok(())
    } else {
        Err(format!(
            "{} predates hyper-http: rebuild it (cargo build --release -p ringkit-peers)",
            peer.display()
        ))
    }
}

struct Plan {
    contenders: Vec<Contender>,
    skipped: Vec<(String, String)>,
    nginx_dir: PathBuf,
}

fn plan(opts: &StudyOpts, dir: &Path) -> Plan {
    let mut contenders = Vec::new();
    let mut skipped = Vec::new();
    // Absolute: nginx resolves relative -c/-e paths against its prefix
    // (-p), so a relative --out directory used to double every path and
    // nginx failed to start.
    let nginx_dir = std::path::absolute(dir.join("nginx")).unwrap_or_else(|_| dir.join("nginx"));
    if Path::new(NGINX).exists() {
        let d = nginx_dir.display().to_string();
        contenders.push(Contender {
            name: "nginx".into(),
            family: Family::Epoll,
            cmd: vec![
                NGINX.into(),
                "-p".into(),
                format!("{d}/"),
                "-e".into(),
                format!("{d}/error.log"),
                "-c".into(),
                format!("{d}/nginx.conf"),
            ],
            ringkit: false,
        });
    } else {
        skipped.push((
            "nginx".into(),
            format!("{NGINX} not found (apt-get install -y nginx)"),
        ));
    }
    for (name, backend, family) in [
        ("ringkit-uring", "uring", Family::Uring),
        ("ringkit-epoll", "epoll", Family::Epoll),
    ] {
        let server = RingkitServer::http(&opts.ringkit_bin)
            .backend(backend)
            .threads(1)
            .stats();
        contenders.push(server.contender(name, family));
    }
    match opts
        .peer_bin
        .clone()
        .and_then(|p| peer_has_hyper(&p).map(|()| p))
    {
        Ok(p) => contenders.push(Contender {
            name: "hyper".into(),
            family: Family::Epoll,
            cmd: vec![
                p.display().to_string(),
                "hyper-http".into(),
                "{addr}".into(),
            ],
            ringkit: false,
        }),
        Err(e) => skipped.push(("hyper".into(), e)),
    }
    Plan {
        contenders,
        skipped,
        nginx_dir,
    }
}

/// Run the http study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let wall = Instant::now();
    ringkit::raise_nofile_limit();
    let dir = opts.out_dir.join("http");
    std::fs::create_dir_all(dir.join("logs"))?;
    std::fs::create_dir_all(dir.join("tmp"))?;
    let p = plan(opts, &dir);
    if p.contenders.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "no http contender can run: {}",
                p.skipped
                    .iter()
                    .map(|(n, w)| format!("{n}: {w}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    }
    let have_wrk = Path::new(wrk::WRK).exists();
    let (tool, tool_reason) = match std::env::var("RINGKIT_HTTP_LOAD").as_deref() {
        Ok("builtin") => (LoadTool::Builtin, "RINGKIT_HTTP_LOAD=builtin".to_string()),
        Ok("wrk") if have_wrk => (LoadTool::Wrk, "RINGKIT_HTTP_LOAD=wrk".to_string()),
        _ if have_wrk => (LoadTool::Wrk, format!("{} is installed", wrk::WRK)),
        _ => (
            LoadTool::Builtin,
            format!(
                "{} not found (apt-get install -y wrk); using the built-in generator",
                wrk::WRK
            ),
        ),
    };
    let tool_version = match tool {
        LoadTool::Wrk => wrk::version().unwrap_or_else(|| "wrk (version unknown)".into()),
        LoadTool::Builtin => format!("ringkit bench http {}", env!("CARGO_PKG_VERSION")),
    };
    let workloads = if opts.quick {
        vec![Workload::new(100, false), Workload::new(100, true)]
    } else {
        vec![
            Workload::new(100, false),
            Workload::new(1000, false),
            Workload::new(100, true),
        ]
    };
    let rounds = opts.rounds.unwrap_or(3).max(1);
    let secs = opts.secs.unwrap_or(if opts.quick { 2.0 } else { 10.0 });
    let run = Run {
        opts,
        dir: dir.clone(),
        nginx_dir: p.nginx_dir.clone(),
        tool,
        secs,
    };
    let load_commands = workloads
        .iter()
        .map(|w| {
            let cmd = match tool {
                LoadTool::Wrk => {
                    wrk::command("http://127.0.0.1:PORT/", w.conns, run.wrk_secs(), w.close)
                        .iter()
                        .map(|a| {
                            if a.contains(' ') {
                                format!("'{a}'")
                            } else {
                                a.clone()
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                }
                LoadTool::Builtin => format!(
                    "ringkit bench http http://127.0.0.1:PORT/ -c {} -t {secs}{} --cpu {}",
                    w.conns,
                    if w.close { " --close" } else { "" },
                    opts.client_cpu
                ),
            };
            (w.name.clone(), cmd)
        })
        .collect();
    let cs = &p.contenders;
    let total = workloads.len() * rounds * cs.len();
    let mut samples = Vec::new();
    for w in &workloads {
        for round in 0..rounds {
            for i in 0..cs.len() {
                let c = &cs[(i + round) % cs.len()];
                let s = run.sample(c, w, round);
                progress(&format!(
                    "{}/{total} {} {} round {}: {:.0} req/s{}",
                    samples.len() + 1,
                    c.name,
                    w.name,
                    round,
                    s.rps,
                    if s.ok() { "" } else { " FAILED" }
                ));
                samples.push(s);
            }
        }
    }
    let mut strace_calls: Vec<(String, String, Result<f64, String>)> = Vec::new();
    if let Some(tool) = opts.peer_syscalls {
        for w in &workloads {
            for c in cs.iter().filter(|c| !c.ringkit) {
                progress(&format!("{} {} {}", tool.name(), c.name, w.name));
                let r = run.syscalls(c, w, tool).map_err(|e| e.to_string());
                strace_calls.push((c.name.clone(), w.name.clone(), r));
            }
        }
    }
    let server_banners = cs
        .iter()
        .filter_map(|c| {
            if c.name == "nginx" {
                return nginx_version().map(|v| (c.name.clone(), v));
            }
            let tag = format!(
                "{}-{}-0",
                workloads[0].conns,
                if workloads[0].close { "close" } else { "ka" }
            );
            let log = dir.join("logs").join(format!("{}-{tag}.log", c.name));
            std::fs::read_to_string(log)
                .ok()
                .and_then(|s| s.lines().next().map(|l| (c.name.clone(), l.to_string())))
        })
        .collect();
    let summary = summarize(cs, &workloads, &samples, &strace_calls, opts.peer_syscalls);
    let _ = std::fs::remove_dir_all(dir.join("tmp"));
    let has_nginx = cs.iter().any(|c| c.name == "nginx");
    let res = HttpResults {
        system: SystemInfo::gather(),
        tool,
        tool_reason,
        tool_version,
        nginx_version: if has_nginx { nginx_version() } else { None },
        nginx_conf: has_nginx.then(|| nginx_conf(&p.nginx_dir, "PORT")),
        rounds,
        secs,
        server_cpu: opts.server_cpu,
        client_cpu: opts.client_cpu,
        workloads,
        contenders: p.contenders,
        load_commands,
        server_banners,
        skipped: p.skipped,
        samples,
        summary,
        wall_secs: wall.elapsed().as_secs_f64(),
    };
    Ok(report::section(&res))
}

fn summarize(
    cs: &[Contender],
    workloads: &[Workload],
    samples: &[HttpSample],
    strace_calls: &[(String, String, Result<f64, String>)],
    tool: Option<SyscallTool>,
) -> Vec<HttpSummary> {
    let mut out = Vec::new();
    for w in workloads {
        let mut rows: Vec<HttpSummary> = cs
            .iter()
            .map(|c| {
                let mine: Vec<&HttpSample> = samples
                    .iter()
                    .filter(|s| s.contender == c.name && s.workload == w.name)
                    .collect();
                let peer = match strace_calls
                    .iter()
                    .find(|(n, wl, _)| *n == c.name && *wl == w.name)
                {
                    Some((_, _, Ok(v))) => PeerSyscalls::Counted {
                        per_req: *v,
                        source: tool.map_or("", |t| t.source()).to_string(),
                    },
                    Some((_, _, Err(e))) => {
                        PeerSyscalls::Failed(format!("syscall count failed: {e}"))
                    }
                    None if tool.is_some() => {
                        PeerSyscalls::Failed("syscall count failed".to_string())
                    }
                    None => PeerSyscalls::NotMeasured,
                };
                let good: Vec<&&HttpSample> = mine.iter().filter(|s| s.ok()).collect();
                HttpSummary {
                    figures: Figures::of(c, &mine, peer),
                    workload: w.name.clone(),
                    p50_us: stat(good.iter().map(|s| s.p50_us).collect()).median,
                    rps_vs_nginx: None,
                    cpu_vs_nginx: None,
                    rps_vs_best_epoll: None,
                    cpu_vs_best_epoll: None,
                }
            })
            .collect();
        let usable = |r: &&HttpSummary| r.ok_samples > 0;
        let nginx = rows
            .iter()
            .filter(usable)
            .find(|r| r.contender == "nginx")
            .map(|r| (r.rps.median, r.cpu_us.median));
        let (best_rps, best_cpu) = best_epoll(rows.iter().map(|r| &r.figures));
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
        for r in rows.iter_mut().filter(|r| r.ok_samples > 0) {
            if let Some((n_rps, n_cpu)) = nginx {
                r.rps_vs_nginx = ratio(r.rps.median, n_rps);
                r.cpu_vs_nginx = ratio(r.cpu_us.median, n_cpu);
            }
            r.rps_vs_best_epoll = best_rps.and_then(|b| ratio(r.rps.median, b));
            r.cpu_vs_best_epoll = best_cpu.and_then(|b| ratio(r.cpu_us.median, b));
        }
        out.extend(rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_conf_has_the_essentials() {
        let c = nginx_conf(Path::new("/tmp/x"), "8080");
        for want in [
            "worker_processes 1;",
            "daemon off;",
            "master_process off;",
            "error_log /tmp/x/error.log;",
            "pid /tmp/x/nginx.pid;",
            "worker_connections 4096;",
            "use epoll;",
            "access_log off;",
            "keepalive_requests 100000000;",
            "listen 127.0.0.1:8080 reuseport;",
            "return 200;",
            "worker_rlimit_nofile 20000;",
        ] {
            assert!(c.contains(want), "missing {want:?} in\n{c}");
        }
    }

    #[test]
    fn ratios_vs_nginx_and_best_epoll() {
        let c = |name: &str, family| Contender {
            name: name.into(),
            family,
            cmd: vec![],
            ringkit: false,
        };
        let cs = vec![
            c("nginx", Family::Epoll),
            c("ringkit-uring", Family::Uring),
            c("hyper", Family::Epoll),
        ];
        let w = vec![Workload::new(100, false)];
        let s = |name: &str, rps: f64, cpu: f64, errors: u64| HttpSample {
            contender: name.into(),
            workload: w[0].name.clone(),
            round: 0,
            requests: 1_000_000,
            rps,
            p50_us: 1.0,
            p99_us: 2.0,
            errors,
            cpu_user_s: cpu,
            cpu_sys_s: 0.0,
            stats: None,
            wrk: None,
            builtin: None,
            time_wait_at_start: None,
            error: None,
        };
        let samples = vec![
            s("nginx", 100.0, 10.0, 0),
            s("ringkit-uring", 150.0, 5.0, 0),
            s("hyper", 120.0, 8.0, 0),
            s("hyper", 1e9, 1.0, 3),
        ];
        let sum = summarize(&cs, &w, &samples, &[], None);
        let get = |n: &str| sum.iter().find(|r| r.contender == n).unwrap();
        let u = get("ringkit-uring");
        assert!((u.rps_vs_nginx.unwrap() - 1.5).abs() < 1e-9);
        assert!((u.cpu_vs_nginx.unwrap() - 0.5).abs() < 1e-9);
        assert!((u.rps_vs_best_epoll.unwrap() - 1.25).abs() < 1e-9);
        assert!((u.cpu_vs_best_epoll.unwrap() - 5.0 / 8.0).abs() < 1e-9);
        let h = get("hyper");
        assert_eq!((h.ok_samples, h.samples), (1, 2));
        assert!((h.rps.median - 120.0).abs() < 1e-9);
    }
}
