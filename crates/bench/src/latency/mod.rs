//! `ringkit compare latency`: latency at a fixed load, free of coordinated
//! omission.
//!
//! A closed-loop client slows down when the server does, so queueing never
//! shows in its latencies. Here every workload first finds each server's
//! closed-loop maximum (the same generator, closed loop, interleaved rounds)
//! and takes the epoll server with the best median as the reference. Its
//! open-loop capacity is what it completes when offered more than it can
//! carry, open loop ([`OVERLOADS`] times that maximum). Every server is then driven **open loop** at 25,
//! 50, 75 and 90% of that capacity: each connection sends at its scheduled
//! moments whether or not earlier replies are back (pipelined, any number in
//! flight), latency counts from the scheduled moment, and what is unanswered
//! or unsent at the window's end is recorded up to the end, not dropped
//! ([`crate::harness::open_loop`]). Every server thus faces the same offered
//! load, and a server that cannot carry it shows it (achieved < offered,
//! latency growing over the window). Beside every tail, the host's own
//! stalls over the same window ([`crate::harness::stalls`]).
//!
//! Workloads: echo 512 B at 1000 connections (ringkit on io_uring and epoll,
//! tokio, monoio), HTTP `GET /` at 1000 connections and a static 1 KiB file
//! at 100 (ringkit on both backends, nginx), and the axum hello app at 100
//! (ringkit on io_uring, axum on tokio). Server on the server CPU, load on
//! the client CPU, rounds interleaved and rotated, ratios paired per round.
//! With `oha` installed, one row (HTTP `GET /` at 25%: oha's own ceiling on
//! one core at 1000 connections is about half the servers' maxima) is
//! measured again by oha's open loop (`-q`, `--latency-correction`), both
//! figures side by side.

mod oha;
mod plan;
pub(crate) mod report;

use std::io;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::harness::latency::schedule;
use crate::harness::stalls::HostStalls;
use crate::harness::stat::{stat, Stat};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::SystemInfo;

/// Fractions of the reference rate every server is driven at.
pub const LEVELS: [f64; 4] = [0.25, 0.5, 0.75, 0.9];

/// The 10 000-connection variant's one level.
pub const C10K_LEVELS: [f64; 1] = [0.5];

/// Which study runs on this machinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Variant {
    /// `compare latency`: four workloads at 25, 50, 75 and 90%.
    Latency,
    /// `compare c10k`: HTTP, static and axum at 10 000 keep-alive
    /// connections, closed-loop maxima and 50% of the reference.
    C10k,
}

impl Variant {
    fn levels(self) -> &'static [f64] {
        match self {
            Variant::Latency => &LEVELS,
            Variant::C10k => &C10K_LEVELS,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Variant::Latency => "latency",
            Variant::C10k => "c10k",
        }
    }
}

/// The level of the oha cross-check: oha tops out near 80k requests/s on
/// one core at 1000 connections here, so a higher rate would measure oha.
const CROSS_CHECK_LEVEL: f64 = 0.25;

/// One load run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Point {
    /// Workload label.
    pub workload: String,
    /// Server name.
    pub contender: String,
    /// An epoll server (one of those the reference is taken from).
    pub epoll: bool,
    /// Fraction of the reference rate; `None`: the closed-loop run.
    pub level: Option<f64>,
    /// Offered rate, requests/s (`None`: closed loop).
    pub rate: Option<f64>,
    /// Round number.
    pub round: usize,
    /// Achieved responses/s.
    pub rps: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// p90 latency, µs.
    pub p90_us: f64,
    /// p99 latency, µs.
    pub p99_us: f64,
    /// p99.9 latency, µs.
    pub p999_us: f64,
    /// Slowest response, µs.
    pub max_us: f64,
    /// Failed connections, mismatches, bad responses.
    pub errors: u64,
    /// Jain's fairness index over the connections' responses, closed loop
    /// only (in an open loop the schedule sets each connection's share).
    pub jain: Option<f64>,
    /// Open loop: counted requests unanswered, and never sent, at
    /// the window's end (in the latencies with their wait up to the end),
    /// and the most in flight on one connection.
    #[serde(default)]
    pub unanswered: u64,
    /// See `unanswered`.
    #[serde(default)]
    pub unsent: u64,
    /// See `unanswered`.
    #[serde(default)]
    pub most_in_flight: usize,
    /// The host's own stalls on the server's and the load's CPUs over the
    /// same window ([`StallProbe`](crate::harness::stalls::StallProbe)).
    #[serde(default)]
    pub host: HostStalls,
    /// Why the run failed, if it did.
    pub error: Option<String>,
}

impl Point {
    fn ok(&self) -> bool {
        self.error.is_none() && self.errors == 0 && self.rps > 0.0
    }
}

/// One (workload, contender, level): medians over rounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Workload label.
    pub workload: String,
    /// Server name.
    pub contender: String,
    /// Fraction of the reference rate; `None`: the closed-loop runs.
    pub level: Option<f64>,
    /// Offered rate, requests/s (`None`: closed loop).
    pub rate: Option<f64>,
    /// Achieved responses/s.
    pub rps: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// p90 latency, µs.
    pub p90_us: f64,
    /// p99 latency, µs.
    pub p99_us: f64,
    /// p99.9 latency, µs.
    pub p999_us: f64,
    /// Slowest response, µs.
    pub max_us: f64,
    /// Achieved under 95% of the offered rate (median).
    pub saturated: bool,
    /// Runs that failed or saw errors, of all runs.
    pub failed: usize,
    /// All runs.
    pub runs: usize,
    /// p99 and p99.9 over the reference server's, paired per round, median.
    pub p99_vs_ref: Option<f64>,
    /// p999_vs_ref.
    pub p999_vs_ref: Option<f64>,
    /// The fewest and most of the per-round ratios behind `p99_vs_ref`.
    pub p99_vs_ref_span: Option<(f64, f64)>,
    /// The same for `p999_vs_ref`.
    pub p999_vs_ref_span: Option<(f64, f64)>,
    /// The host's stalls over the same runs (medians): wake-up lateness of
    /// a real-time probe on each CPU at p99 and p99.9, and the latest, µs
    /// (0 in runs from before the probe).
    #[serde(default)]
    pub host_p99_us: f64,
    /// See `host_p99_us`.
    #[serde(default)]
    pub host_p999_us: f64,
    /// See `host_p99_us`.
    #[serde(default)]
    pub host_max_us: f64,
}

/// A workload's reference: the epoll server with the highest closed-loop max.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reference {
    /// Workload label.
    pub workload: String,
    /// Server name.
    pub contender: String,
    /// Its closed-loop maximum (median), requests/s.
    pub max_rps: f64,
    /// Its open-loop capacity, requests/s: what it completes when offered
    /// more than it carries, open loop (median over rounds; see
    /// [`OVERLOADS`]). The load levels are fractions of this.
    #[serde(default)]
    pub capacity_rps: f64,
    /// The offer the capacity was read at, times the closed-loop maximum.
    #[serde(default)]
    pub overload: f64,
    /// Whether that offer was more than the server carried (achieved under
    /// 95% of it); if not, the capacity is a lower bound.
    #[serde(default)]
    pub saturated: bool,
}

/// The capacity runs' offers, times the reference's closed-loop maximum,
/// tried in order until one is more than the server carries.
pub const OVERLOADS: [f64; 2] = [1.2, 2.0];

/// Everything the study measured.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LatencyResults {
    /// Which study.
    pub variant: Variant,
    /// The load levels, fractions of each workload's reference.
    pub levels: Vec<f64>,
    /// The machine.
    pub system: SystemInfo,
    /// Rounds per point.
    pub rounds: usize,
    /// Measured seconds per run.
    pub secs: f64,
    /// CPU of the servers.
    pub server_cpu: usize,
    /// CPU of the load.
    pub client_cpu: usize,
    /// Each workload's reference.
    pub references: Vec<Reference>,
    /// Every run.
    pub points: Vec<Point>,
    /// Medians per workload, server and load.
    pub rows: Vec<Row>,
    /// The oha cross-check.
    pub oha: Vec<oha::CrossCheck>,
    /// What could not run, and why.
    pub skipped: Vec<(String, String)>,
    /// Wall time of the study, seconds.
    pub wall_secs: f64,
}

fn median(v: Vec<f64>) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        stat(v).median
    }
}

/// Medians per (workload, contender, level), with ratios to the reference.
fn summarize(points: &[Point], refs: &[Reference]) -> Vec<Row> {
    let mut keys: Vec<(String, String, Option<f64>)> = Vec::new();
    for p in points {
        let k = (p.workload.clone(), p.contender.clone(), p.level);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.iter()
        .map(|(w, c, level)| {
            let mine: Vec<&Point> = points
                .iter()
                .filter(|p| &p.workload == w && &p.contender == c && p.level == *level)
                .collect();
            let ok: Vec<&&Point> = mine.iter().filter(|p| p.ok()).collect();
            let m = |f: fn(&Point) -> f64| median(ok.iter().map(|p| f(p)).collect());
            let rate = mine.first().and_then(|p| p.rate);
            let rps = m(|p| p.rps);
            let reference = refs.iter().find(|r| &r.workload == w);
            let paired = |f: fn(&Point) -> f64| -> Option<Stat> {
                let r = reference?;
                (*level)?;
                let v: Vec<f64> = ok
                    .iter()
                    .filter_map(|p| {
                        let theirs = points.iter().find(|q| {
                            q.workload == *w
                                && q.contender == r.contender
                                && q.level == *level
                                && q.round == p.round
                                && q.ok()
                        })?;
                        (f(theirs) > 0.0).then(|| f(p) / f(theirs))
                    })
                    .collect();
                (!v.is_empty()).then(|| stat(v))
            };
            let (p99, p999) = (paired(|p| p.p99_us), paired(|p| p.p999_us));
            Row {
                workload: w.clone(),
                contender: c.clone(),
                level: *level,
                rate,
                rps,
                p50_us: m(|p| p.p50_us),
                p90_us: m(|p| p.p90_us),
                p99_us: m(|p| p.p99_us),
                p999_us: m(|p| p.p999_us),
                max_us: m(|p| p.max_us),
                saturated: rate.is_some_and(|r| rps < 0.95 * r),
                failed: mine.len() - ok.len(),
                runs: mine.len(),
                p99_vs_ref: p99.map(|s| s.median),
                p999_vs_ref: p999.map(|s| s.median),
                p99_vs_ref_span: p99.map(|s| (s.min, s.max)),
                p999_vs_ref_span: p999.map(|s| (s.min, s.max)),
                host_p99_us: m(|p| p.host.p99_us),
                host_p999_us: m(|p| p.host.p999_us),
                host_max_us: m(|p| p.host.max_us),
            }
        })
        .collect()
}

/// Run the latency study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    run(opts, Variant::Latency, progress)
}

/// Run the 10 000-connection study for `ringkit compare c10k`: keep-alive
/// `GET /` on `ringkit http` and nginx, a static 1 KiB file on `ringkit
/// serve` and nginx, and the axum app on ringkit and on tokio, each at
/// 10 000 connections: every request must be answered; p99 at 50% of the
/// best epoll server's open-loop capacity.
pub fn study_c10k(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    run(opts, Variant::C10k, progress)
}

fn run(opts: &StudyOpts, variant: Variant, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let wall = Instant::now();
    ringkit::raise_nofile_limit();
    let dir = opts.out_dir.join(variant.name());
    std::fs::create_dir_all(&dir)?;
    let mut skipped = Vec::new();
    let benches = plan::benches(opts, &dir, &mut skipped, variant)?;
    let levels = variant.levels();
    let rounds = opts.rounds.unwrap_or(if opts.quick { 2 } else { 3 }).max(1);
    let secs = opts.secs.unwrap_or(if opts.quick { 2.0 } else { 5.0 });
    let total: usize = benches
        .iter()
        .map(|b| b.contenders.len() * rounds * (1 + levels.len()) + rounds)
        .sum();
    let mut points: Vec<Point> = Vec::new();
    let mut refs = Vec::new();
    let mut checks = Vec::new();
    let mut n = 0;
    for b in &benches {
        let cs = &b.contenders;
        // `only`: that contender alone (the capacity runs).
        let mut measure =
            |level: Option<f64>, rate: Option<f64>, only: Option<&str>, points: &mut Vec<Point>| {
                for (round, c) in schedule(cs, rounds) {
                    if only.is_some_and(|o| o != c.name) {
                        continue;
                    }
                    let tag = match level {
                        Some(l) => format!("{:.0}-{round}", l * 100.0),
                        None => format!("max-{round}"),
                    };
                    let mut p = plan::sample(opts, b, c, rate, secs, &tag);
                    p.level = level;
                    p.round = round;
                    n += 1;
                    progress(&format!(
                        "{n}/{total} {} {} {}: {:.0} req/s, p99 {:.0} µs{}",
                        b.name,
                        c.name,
                        match level {
                            None => "closed loop".to_string(),
                            Some(l) if OVERLOADS.contains(&l) => {
                                format!("capacity run at {l:.1}x the closed-loop maximum")
                            }
                            Some(l) => format!("{:.0}% load", l * 100.0),
                        },
                        p.rps,
                        p.p99_us,
                        if p.ok() { "" } else { " FAILED" }
                    ));
                    points.push(p);
                }
            };
        measure(None, None, None, &mut points);
        let max_of = |name: &str| {
            median(
                points
                    .iter()
                    .filter(|p| p.workload == b.name && p.contender == name)
                    .filter(|p| p.level.is_none() && p.ok())
                    .map(|p| p.rps)
                    .collect(),
            )
        };
        let best = cs
            .iter()
            .filter(|c| matches!(c.family, crate::harness::server::Family::Epoll))
            .map(|c| (c.name.clone(), max_of(&c.name)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((contender, max_rps)) = best.filter(|(_, m)| *m > 0.0) else {
            skipped.push((
                b.name.clone(),
                "no epoll server finished its closed-loop run: no reference rate".into(),
            ));
            continue;
        };
        // The reference's open-loop capacity: what it completes when
        // offered more than it can carry. Pipelining can carry more than
        // the closed loop did: when the first offer is carried (achieved
        // at least 95% of it), offer the next. (Kept as points at those
        // levels; no table shows them.)
        let (mut capacity_rps, mut overload, mut saturated) = (0.0, OVERLOADS[0], false);
        for factor in OVERLOADS {
            measure(
                Some(factor),
                Some(factor * max_rps),
                Some(&contender),
                &mut points,
            );
            let caps: Vec<f64> = points
                .iter()
                .filter(|p| p.workload == b.name && p.contender == contender)
                .filter(|p| p.level == Some(factor) && p.error.is_none() && p.rps > 0.0)
                .map(|p| p.rps)
                .collect();
            (capacity_rps, overload) = (median(caps), factor);
            saturated = capacity_rps < 0.95 * factor * max_rps;
            if saturated || capacity_rps <= 0.0 {
                break;
            }
        }
        if capacity_rps <= 0.0 {
            skipped.push((
                b.name.clone(),
                format!("{contender}'s open-loop capacity runs all failed: no reference rate"),
            ));
            continue;
        }
        refs.push(Reference {
            workload: b.name.clone(),
            contender: contender.clone(),
            max_rps,
            capacity_rps,
            overload,
            saturated,
        });
        for &level in levels {
            measure(Some(level), Some(level * capacity_rps), None, &mut points);
        }
        if let plan::Kind::Http { .. } = b.kind {
            if b.name.starts_with("http") && variant == Variant::Latency {
                checks.extend(oha::cross_check(
                    opts,
                    b,
                    &contender,
                    CROSS_CHECK_LEVEL * capacity_rps,
                    secs,
                    progress,
                ));
            }
        }
    }
    let rows = summarize(&points, &refs);
    let res = LatencyResults {
        variant,
        levels: levels.to_vec(),
        system: SystemInfo::gather(),
        rounds,
        secs,
        server_cpu: opts.server_cpu,
        client_cpu: opts.client_cpu,
        references: refs,
        points,
        rows,
        oha: checks,
        skipped,
        wall_secs: wall.elapsed().as_secs_f64(),
    };
    let _ = std::fs::remove_dir_all(dir.join("static").join("www"));
    Ok(report::section(&res))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(c: &str, level: Option<f64>, round: usize, p99: f64) -> Point {
        Point {
            workload: "w".into(),
            contender: c.into(),
            level,
            rate: level.map(|l| l * 1000.0),
            round,
            rps: level.map_or(1000.0, |l| l * 1000.0),
            p99_us: p99,
            p999_us: 2.0 * p99,
            ..Default::default()
        }
    }

    #[test]
    fn ratios_pair_rounds_against_the_reference() {
        let refs = vec![Reference {
            workload: "w".into(),
            contender: "ref".into(),
            max_rps: 1000.0,
            capacity_rps: 900.0,
            overload: 1.2,
            saturated: true,
        }];
        let mut pts = vec![
            p("ref", Some(0.5), 0, 100.0),
            p("ref", Some(0.5), 1, 200.0),
            p("x", Some(0.5), 0, 50.0),
            p("x", Some(0.5), 1, 50.0),
        ];
        // A failed run is left out of the medians and counted.
        let mut bad = p("x", Some(0.5), 2, 1.0);
        bad.error = Some("reset".into());
        pts.push(bad);
        let rows = summarize(&pts, &refs);
        let x = rows.iter().find(|r| r.contender == "x").unwrap();
        // Rounds 0 and 1: 0.5 and 0.25; median of two is their mean.
        assert!((x.p99_vs_ref.unwrap() - 0.375).abs() < 1e-9, "{x:?}");
        assert_eq!((x.failed, x.runs), (1, 3));
        assert!(!x.saturated);
        let r = rows.iter().find(|r| r.contender == "ref").unwrap();
        assert_eq!(r.p99_vs_ref, Some(1.0));
    }

    #[test]
    fn a_server_short_of_the_offered_rate_is_saturated() {
        let mut q = p("x", Some(0.9), 0, 10.0);
        q.rps = 700.0;
        let rows = summarize(&[q], &[]);
        assert!(rows[0].saturated);
        assert_eq!(rows[0].p99_vs_ref, None);
    }
}
