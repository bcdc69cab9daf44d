//! What the HTTP study measures and how it is summarised: workloads,
//! samples, per-contender summaries (shared figures plus the ratios to
//! nginx and to the best epoll server), and the results.

use std::sync::Arc;

use serde::Serialize;

use super::load::{HttpLoadResult, Target};
use super::wrk::WrkResult;
use crate::harness::server::Contender;
use crate::harness::stat::{stat, Stat};
use crate::harness::summary::{best_epoll, Figures, PeerSyscalls, ServerSample};
use crate::harness::syscalls::SyscallTool;
use crate::harness::sysinfo::SystemInfo;
use ringkit::publish::Published;

/// One load shape.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Workload {
    /// Label, e.g. "keep-alive c=100".
    pub name: String,
    /// Connections (keep-alive) or concurrent requests (close).
    pub conns: usize,
    /// `Connection: close`: a new connection per request.
    pub close: bool,
    /// The path asked for (unused with a mix).
    pub path: String,
    /// Body length every response must have (`None`: the first one's; a
    /// mix: each path's own).
    pub body_len: Option<usize>,
    /// Paths asked for at random instead of `path` (in the JSON: their count).
    #[serde(skip)]
    pub mix: Option<Arc<[Target]>>,
    /// How many paths the mix has (0: none).
    pub mix_paths: usize,
    /// Mean body bytes per response (0 for an empty body).
    pub mean_body: f64,
    /// Requests written together per connection (1: one at a time; more
    /// needs the built-in generator).
    pub pipeline: usize,
    /// CRC-32C of the body every response must have (the built-in
    /// generator checks the bytes; a mix's targets carry their own).
    #[serde(default)]
    pub crc32c: Option<u32>,
}

impl Workload {
    /// `GET /`, answered `200` with an empty body (the HTTP study).
    pub(crate) fn new(conns: usize, close: bool) -> Workload {
        Workload::file("", conns, close, "/", 0).bytes(b"")
    }

    /// Every response's body must be exactly `body` (length and bytes).
    pub(crate) fn bytes(mut self, body: &[u8]) -> Workload {
        self.body_len = Some(body.len());
        self.mean_body = body.len() as f64;
        self.crc32c = Some(crc32c::crc32c(body));
        self
    }

    /// Every response's body must have CRC-32C `crc`.
    pub(crate) fn crc(mut self, crc: u32) -> Workload {
        self.crc32c = Some(crc);
        self
    }

    /// `GET path`, every body `body_len` bytes; `label` prefixes the name.
    pub(crate) fn file(
        label: &str,
        conns: usize,
        close: bool,
        path: &str,
        body_len: usize,
    ) -> Workload {
        let kind = if close { "close" } else { "keep-alive" };
        Workload {
            name: format!(
                "{label}{}{kind} c={conns}",
                if label.is_empty() { "" } else { " " }
            ),
            conns,
            close,
            path: path.into(),
            body_len: Some(body_len),
            mix: None,
            mix_paths: 0,
            mean_body: body_len as f64,
            pipeline: 1,
            crc32c: None,
        }
    }

    /// The same with `depth` requests pipelined per connection.
    pub(crate) fn pipelined(mut self, depth: usize) -> Workload {
        self.pipeline = depth.max(1);
        if depth > 1 {
            self.name = format!("{} pipeline={depth}", self.name);
        }
        self
    }

    /// Paths of `mix` at random, each checked against its own length.
    pub(crate) fn mix(label: &str, conns: usize, close: bool, mix: Arc<[Target]>) -> Workload {
        let mean = mix.iter().map(|t| t.body_len as f64).sum::<f64>() / mix.len().max(1) as f64;
        Workload {
            mix_paths: mix.len(),
            mean_body: mean,
            body_len: None,
            mix: Some(mix),
            ..Workload::file(label, conns, close, "/", 0)
        }
    }

    /// A file-name-safe tag of the workload and round, for logs.
    pub(crate) fn tag(&self, round: &str) -> String {
        let slug: String = self
            .name
            .chars()
            .filter_map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' => Some(c),
                ' ' => Some('-'),
                _ => None,
            })
            .collect();
        format!("{slug}-{round}")
    }
}

/// The load generator used.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize, PartialEq, Eq)]
pub enum LoadTool {
    /// wrk (Debian package).
    Wrk,
    /// ringkit's built-in generator (`ringkit bench http`).
    Builtin,
}

/// One measured sample.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
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
    /// Bytes of one response to the workload's request, head and body,
    /// read from a probe request before the load (plain HTTP, one path).
    #[serde(default)]
    pub resp_bytes: Option<u64>,
    /// Error starting or running.
    pub error: Option<String>,
}

impl ServerSample for HttpSample {
    /// Ran, with requests and without errors.
    fn ok(&self) -> bool {
        self.error.is_none() && self.errors == 0 && self.requests > 0
    }
    fn cpu_secs(&self) -> (f64, f64) {
        (self.cpu_user_s, self.cpu_sys_s)
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

/// Summary of one contender under one workload.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct HttpSummary {
    /// The figures every server study has.
    #[serde(flatten)]
    pub figures: Figures,
    /// Workload label.
    pub workload: String,
    /// p50 latency, µs (median).
    pub p50_us: f64,
    /// rps median / the reference's (nginx, or the study's `reference`).
    pub rps_vs_ref: Option<f64>,
    /// CPU per request median / the reference's (lower is better).
    pub cpu_vs_ref: Option<f64>,
    /// rps median / best epoll contender's.
    pub rps_vs_best_epoll: Option<f64>,
    /// CPU per request median / best epoll contender's.
    pub cpu_vs_best_epoll: Option<f64>,
    /// Server CPU per MiB of body sent, µs (workloads with a body).
    pub cpu_us_per_mib: Option<f64>,
    /// Paired: this contender's requests/s over the reference's in the same
    /// round, median and range over the rounds where both have a good sample.
    pub rps_vs_ref_paired: Option<Stat>,
    /// Paired: CPU per request over the reference's in the same round
    /// (lower is better).
    pub cpu_vs_ref_paired: Option<Stat>,
    /// Bytes of one response (head and body), as the probe read it.
    pub resp_bytes: Option<u64>,
}

/// A summary reads as its figures (`r.rps`, `r.contender`, ...).
impl std::ops::Deref for HttpSummary {
    type Target = Figures;
    fn deref(&self) -> &Figures {
        &self.figures
    }
}

/// Everything the study produced.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct HttpResults {
    /// The study: "http", "static" or "axum".
    pub study: String,
    /// The contender the `*_vs_ref` ratios divide by.
    pub reference: String,
    /// Its heading in the report.
    pub title: String,
    /// What the workloads ask for, one sentence.
    pub about: String,
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

/// `value` of `who`'s sample over `base`'s in the same round of workload
/// `w`, for every round where both have a good sample: median and range.
fn paired(
    samples: &[HttpSample],
    w: &str,
    who: &str,
    base: &str,
    value: impl Fn(&HttpSample) -> f64,
) -> Option<Stat> {
    let good = |name: &str, round: usize| {
        samples
            .iter()
            .find(|s| s.contender == name && s.workload == w && s.round == round && s.ok())
    };
    let v: Vec<f64> = samples
        .iter()
        .filter(|s| s.contender == who && s.workload == w && s.ok())
        .filter_map(|s| {
            let b = value(good(base, s.round)?);
            (b > 0.0).then(|| value(s) / b)
        })
        .collect();
    (!v.is_empty()).then(|| stat(v))
}

pub(crate) fn summarize(
    reference: &str,
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
                    rps_vs_ref: None,
                    cpu_vs_ref: None,
                    rps_vs_best_epoll: None,
                    cpu_vs_best_epoll: None,
                    cpu_us_per_mib: None,
                    rps_vs_ref_paired: paired(samples, &w.name, &c.name, reference, |s| s.rps),
                    cpu_vs_ref_paired: paired(samples, &w.name, &c.name, reference, |s| {
                        let (u, k) = s.cpu_us_per_req();
                        u + k
                    }),
                    resp_bytes: mine.iter().find_map(|s| s.resp_bytes),
                }
            })
            .collect();
        let usable = |r: &&HttpSummary| r.ok_samples > 0;
        let nginx = rows
            .iter()
            .filter(usable)
            .find(|r| r.contender == reference)
            .map(|r| (r.rps.median, r.cpu_us.median));
        let (best_rps, best_cpu) = best_epoll(rows.iter().map(|r| &r.figures));
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
        for r in rows.iter_mut().filter(|r| r.ok_samples > 0) {
            if let Some((n_rps, n_cpu)) = nginx {
                r.rps_vs_ref = ratio(r.rps.median, n_rps);
                r.cpu_vs_ref = ratio(r.cpu_us.median, n_cpu);
            }
            r.rps_vs_best_epoll = best_rps.and_then(|b| ratio(r.rps.median, b));
            r.cpu_vs_best_epoll = best_cpu.and_then(|b| ratio(r.cpu_us.median, b));
            // Per MiB only where bodies are what the server moves (1 KiB and up).
            if w.mean_body >= 1024.0 {
                r.cpu_us_per_mib = ratio(r.cpu_us.median, w.mean_body / (1 << 20) as f64);
            }
        }
        out.extend(rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::server::Family;

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
            resp_bytes: None,
            error: None,
        };
        let samples = vec![
            s("nginx", 100.0, 10.0, 0),
            s("ringkit-uring", 150.0, 5.0, 0),
            s("hyper", 120.0, 8.0, 0),
            s("hyper", 1e9, 1.0, 3),
        ];
        let sum = summarize("nginx", &cs, &w, &samples, &[], None);
        let get = |n: &str| sum.iter().find(|r| r.contender == n).unwrap();
        let u = get("ringkit-uring");
        assert!((u.rps_vs_ref.unwrap() - 1.5).abs() < 1e-9);
        assert!((u.cpu_vs_ref.unwrap() - 0.5).abs() < 1e-9);
        assert!((u.rps_vs_best_epoll.unwrap() - 1.25).abs() < 1e-9);
        assert!((u.cpu_vs_best_epoll.unwrap() - 5.0 / 8.0).abs() < 1e-9);
        let p = u.cpu_vs_ref_paired.unwrap();
        assert!((p.median - 0.5).abs() < 1e-9, "{p:?}");
        assert!((u.rps_vs_ref_paired.unwrap().median - 1.5).abs() < 1e-9);
        let h = get("hyper");
        // The failed sample (round 0 too, but errors) is not paired.
        assert!((h.rps_vs_ref_paired.unwrap().max - 1.2).abs() < 1e-9);
        assert_eq!((h.ok_samples, h.samples), (1, 2));
        assert!((h.rps.median - 120.0).abs() < 1e-9);
    }
}
