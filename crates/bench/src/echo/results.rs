//! What the echo study measures and how it is summarised: its settings,
//! samples, medians per contender and connection count, and paired ratios
//! (each contender's CPU per request over an epoll server's in the same
//! round, median over rounds).

use std::path::PathBuf;

use serde::Serialize;

use super::load::EchoLoadResult;
use crate::harness::server::{Contender, Family};
use crate::harness::stat::{stat, Stat};
use crate::harness::summary::{best_epoll, Figures, PeerSyscalls, ServerSample};
use crate::harness::syscalls::SyscallTool;
use crate::harness::sysinfo::SystemInfo;
use ringkit::publish::Published;

/// Settings of a comparison.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CompareConfig {
    /// Connection counts.
    pub conns: Vec<usize>,
    /// Message length.
    pub len: usize,
    /// Messages in flight per connection.
    pub pipeline: usize,
    /// Rounds (each contender once per round).
    pub rounds: usize,
    /// Measured seconds per sample.
    pub secs: f64,
    /// CPU for servers.
    pub server_cpu: usize,
    /// CPU for the load generator.
    pub client_cpu: usize,
    /// How to count peers' syscalls (`None`: not counted).
    pub peer_syscalls: Option<SyscallTool>,
    /// Output directory.
    pub out_dir: PathBuf,
    /// The load generator.
    pub client: super::load::EchoClient,
    /// rust_echo_bench's binary, with `client` `RustEchoBench`.
    pub echo_bench: Option<PathBuf>,
}

/// One measured sample.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct Sample {
    /// Contender name.
    pub contender: String,
    /// Connections.
    pub conns: usize,
    /// Round number.
    pub round: usize,
    /// What the load generator saw.
    pub load: EchoLoadResult,
    /// Server CPU over the window.
    pub cpu_user_s: f64,
    /// Server system CPU over the window.
    pub cpu_sys_s: f64,
    /// ringkit counters over the window.
    pub stats: Option<Published>,
    /// Error starting or running, if any.
    pub error: Option<String>,
}

impl ServerSample for Sample {
    fn ok(&self) -> bool {
        self.error.is_none() && self.load.ok()
    }
    fn cpu_secs(&self) -> (f64, f64) {
        (self.cpu_user_s, self.cpu_sys_s)
    }
    fn rps(&self) -> f64 {
        self.load.rps()
    }
    fn answered(&self) -> u64 {
        self.load.responses
    }
    fn p99_us(&self) -> f64 {
        self.load.p99_us
    }
    fn stats(&self) -> Option<&Published> {
        self.stats.as_ref()
    }
}

/// Summary of one contender at one connection count.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Summary {
    /// The figures every server study has.
    #[serde(flatten)]
    pub figures: Figures,
    /// Connections.
    pub conns: usize,
    /// rps median / best epoll contender's rps median.
    pub rps_vs_best_epoll: Option<f64>,
    /// CPU per request median / best epoll contender's (lower is better).
    pub cpu_vs_best_epoll: Option<f64>,
    /// Paired: in each round, CPU per request / that of the best epoll
    /// contender (lowest median over the run) in the same round; median and
    /// range over rounds. Less sensitive to drift between rounds than the
    /// ratio of medians.
    pub cpu_vs_best_epoll_paired: Option<Stat>,
    /// The same paired ratio against every epoll contender.
    pub cpu_paired_vs_epoll: Vec<PairedRatio>,
}

/// A summary reads as its figures (`r.rps`, `r.contender`, ...).
impl std::ops::Deref for Summary {
    type Target = Figures;
    fn deref(&self) -> &Figures {
        &self.figures
    }
}

/// CPU per request over another contender's in the same round.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct PairedRatio {
    /// The contender divided by.
    pub vs: String,
    /// Median and range over the rounds where both had a good sample.
    pub ratio: Stat,
}

/// Everything a comparison produced.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CompareResults {
    /// Machine and tool.
    pub system: SystemInfo,
    /// Settings.
    pub config: CompareConfig,
    /// Contenders.
    pub contenders: Vec<Contender>,
    /// What each server said about itself (backend, flags), from its log.
    pub server_banners: Vec<(String, String)>,
    /// Skipped contenders and why.
    pub skipped: Vec<(String, String)>,
    /// Raw samples.
    pub samples: Vec<Sample>,
    /// Per contender and connection count.
    pub summary: Vec<Summary>,
    /// Wall time of the whole run, seconds.
    pub wall_secs: f64,
}

/// CPU per request of `name` in `round` (good samples only).
fn round_cpu(samples: &[Sample], name: &str, conns: usize, round: usize) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.contender == name && s.conns == conns && s.round == round && s.ok())
        .map(|s| {
            let (u, y) = s.cpu_us_per_req();
            u + y
        })
}

/// The epoll contender with the lowest median CPU per request over all
/// rounds (the reference of the paired ratios).
fn reference_epoll<'a>(
    contenders: &'a [Contender],
    rounds: usize,
    conns: usize,
    samples: &[Sample],
) -> Option<&'a str> {
    contenders
        .iter()
        .filter(|c| c.family == Family::Epoll)
        .filter_map(|c| {
            let v: Vec<f64> = (0..rounds)
                .filter_map(|r| round_cpu(samples, &c.name, conns, r))
                .collect();
            (!v.is_empty()).then(|| (c.name.as_str(), stat(v).median))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(n, _)| n)
}

/// Per contender, its CPU per request over `reference`'s in the same
/// round, for every round where both have a good sample.
fn paired_vs(
    contenders: &[Contender],
    rounds: usize,
    conns: usize,
    samples: &[Sample],
    reference: &str,
) -> Vec<(String, Vec<f64>)> {
    let mut out: Vec<(String, Vec<f64>)> = contenders
        .iter()
        .map(|c| (c.name.clone(), Vec::new()))
        .collect();
    for round in 0..rounds {
        let Some(base) = round_cpu(samples, reference, conns, round).filter(|b| *b > 0.0) else {
            continue;
        };
        for (name, v) in &mut out {
            if let Some(x) = round_cpu(samples, name, conns, round) {
                v.push(x / base);
            }
        }
    }
    out.retain(|(_, v)| !v.is_empty());
    out
}

/// Paired ratios against the reference epoll server (what `summarize`
/// reports as `cpu_vs_best_epoll_paired`).
#[cfg(test)]
fn paired_cpu_ratios(
    contenders: &[Contender],
    rounds: usize,
    conns: usize,
    samples: &[Sample],
) -> Vec<(String, Vec<f64>)> {
    match reference_epoll(contenders, rounds, conns, samples) {
        Some(reference) => paired_vs(contenders, rounds, conns, samples, reference),
        None => Vec::new(),
    }
}

pub(crate) fn summarize(
    contenders: &[Contender],
    cfg: &CompareConfig,
    samples: &[Sample],
    peer_calls: &[(String, usize, f64)],
) -> Vec<Summary> {
    let mut out = Vec::new();
    for &conns in &cfg.conns {
        let mut rows: Vec<Summary> = contenders
            .iter()
            .map(|c| {
                let mine: Vec<&Sample> = samples
                    .iter()
                    .filter(|s| s.contender == c.name && s.conns == conns)
                    .collect();
                let peer = match peer_calls
                    .iter()
                    .find(|(n, cn, _)| *n == c.name && *cn == conns)
                {
                    Some((_, _, v)) => PeerSyscalls::Counted {
                        per_req: *v,
                        source: cfg.peer_syscalls.map_or("", |t| t.source()).to_string(),
                    },
                    None if cfg.peer_syscalls.is_some() => {
                        PeerSyscalls::Failed("syscall count failed (see logs/)".to_string())
                    }
                    None => PeerSyscalls::NotMeasured,
                };
                Summary {
                    figures: Figures::of(c, &mine, peer),
                    conns,
                    rps_vs_best_epoll: None,
                    cpu_vs_best_epoll: None,
                    cpu_vs_best_epoll_paired: None,
                    cpu_paired_vs_epoll: Vec::new(),
                }
            })
            .collect();
        let (best_rps, best_cpu) = best_epoll(rows.iter().map(|r| &r.figures));
        for r in &mut rows {
            if r.ok_samples > 0 {
                r.rps_vs_best_epoll = best_rps.map(|b| r.rps.median / b);
                r.cpu_vs_best_epoll = best_cpu.map(|b| r.cpu_us.median / b);
            }
        }
        // Paired ratios against every epoll server; the one against the
        // reference (the epoll contender with the lowest median, chosen
        // once for all rounds) is also the headline `cpu_vs_best_epoll_paired`.
        // (Taking the lowest epoll sample of each round instead would pick,
        // every round, whichever epoll server had the luckiest sample: with
        // two epoll servers and noise of ±15%, that alone made equal servers
        // look 5-10% apart, against io_uring.)
        let reference = reference_epoll(contenders, cfg.rounds, conns, samples);
        for e in contenders.iter().filter(|c| c.family == Family::Epoll) {
            for (name, v) in paired_vs(contenders, cfg.rounds, conns, samples, &e.name) {
                if let Some(r) = rows.iter_mut().find(|r| r.contender == name) {
                    let ratio = stat(v);
                    if reference == Some(e.name.as_str()) {
                        r.cpu_vs_best_epoll_paired = Some(ratio);
                    }
                    r.cpu_paired_vs_epoll.push(PairedRatio {
                        vs: e.name.clone(),
                        ratio,
                    });
                }
            }
        }
        out.extend(rows);
    }
    out
}

#[cfg(test)]
mod tests {

    use super::*;

    fn contender(name: &str, family: Family) -> Contender {
        Contender {
            name: name.into(),
            family,
            cmd: vec![],
            ringkit: false,
        }
    }

    /// A sample of `us` µs of server CPU per request (1000 requests).
    fn sample(name: &str, round: usize, us: f64, ok: bool) -> Sample {
        Sample {
            contender: name.into(),
            conns: 50,
            round,
            load: EchoLoadResult {
                requests: 1000,
                responses: 1000,
                secs: 1.0,
                failed_conns: u64::from(!ok),
                ..Default::default()
            },
            cpu_user_s: 0.0,
            cpu_sys_s: us * 1000.0 / 1e6,
            stats: None,
            error: None,
        }
    }

    #[test]
    fn paired_ratios_use_one_reference_epoll_server_for_every_round() {
        let cs = [
            contender("u", Family::Uring),
            contender("e1", Family::Epoll),
            contender("e2", Family::Epoll),
        ];
        let samples = vec![
            // e1's median (6.0) beats e2's (7.0), so e1 is the reference in
            // every round, even in round 0 where e2's sample was lower.
            // Round 1: e1 failed, so no round-1 ratios. Round 2: u failed.
            sample("u", 0, 4.5, true),
            sample("e1", 0, 6.0, true),
            sample("e2", 0, 5.0, true),
            sample("u", 1, 8.8, true),
            sample("e1", 1, 1.0, false),
            sample("e2", 1, 8.0, true),
            sample("u", 2, 1.0, false),
            sample("e1", 2, 5.0, true),
            sample("e2", 2, 7.0, true),
            sample("u", 3, 7.7, true),
            sample("e1", 3, 7.0, true),
            sample("e2", 3, 9.0, true),
        ];
        let got = paired_cpu_ratios(&cs, 4, 50, &samples);
        let find = |n: &str| got.iter().find(|(m, _)| m == n).unwrap().1.clone();
        let near = |a: &[f64], b: &[f64]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
        };
        let u = find("u");
        assert!(near(&u, &[0.75, 1.1]), "{u:?}");
        let e2 = find("e2");
        assert!(near(&e2, &[5.0 / 6.0, 1.4, 9.0 / 7.0]), "{e2:?}");
        let e1 = find("e1");
        assert!(near(&e1, &[1.0, 1.0, 1.0]), "{e1:?}");
    }

    #[test]
    fn summary_pairs_every_contender_with_every_epoll_server() {
        let cs = vec![
            contender("u", Family::Uring),
            contender("e1", Family::Epoll),
            contender("e2", Family::Epoll),
        ];
        let cfg = CompareConfig {
            conns: vec![50],
            len: 512,
            pipeline: 1,
            rounds: 2,
            secs: 1.0,
            server_cpu: 0,
            client_cpu: 1,
            peer_syscalls: None,
            out_dir: PathBuf::from("unused"),
            client: Default::default(),
            echo_bench: None,
        };
        let samples = vec![
            sample("u", 0, 4.0, true),
            sample("e1", 0, 5.0, true),
            sample("e2", 0, 8.0, true),
            sample("u", 1, 6.0, true),
            sample("e1", 1, 6.0, true),
            sample("e2", 1, 6.0, true),
        ];
        let sum = summarize(&cs, &cfg, &samples, &[]);
        let row = |n: &str| sum.iter().find(|r| r.contender == n).unwrap();
        let vs = |n: &str, e: &str| {
            row(n)
                .cpu_paired_vs_epoll
                .iter()
                .find(|p| p.vs == e)
                .map(|p| p.ratio.median)
                .unwrap()
        };
        // u over e1: 0.8 and 1.0; over e2: 0.5 and 1.0.
        assert!((vs("u", "e1") - 0.9).abs() < 1e-9);
        assert!((vs("u", "e2") - 0.75).abs() < 1e-9);
        assert!((vs("e1", "e1") - 1.0).abs() < 1e-9);
        // e1 has the lower median (5.5 against 7.0), so it is the reference.
        let best = row("u").cpu_vs_best_epoll_paired.unwrap();
        assert!((best.median - 0.9).abs() < 1e-9);
        assert_eq!(row("e2").cpu_paired_vs_epoll.len(), 2);
    }

    #[test]
    fn paired_ratios_need_an_epoll_server() {
        let cs = [contender("u", Family::Uring)];
        let samples = vec![sample("u", 0, 4.5, true)];
        assert!(paired_cpu_ratios(&cs, 1, 50, &samples).is_empty());
    }
}
