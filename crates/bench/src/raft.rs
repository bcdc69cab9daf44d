//! The replicated-map study (`compare raft`): commits per second and
//! commit latency of a 3-node openraft cluster of the same map, state
//! machine, settings and protocol, on two stacks:
//!
//! - `ringkit-uring`, `ringkit-epoll`: `ringkit raft serve`, openraft on
//!   ringkit (its runtime adapter) with ringkit-log as the log (group
//!   commit, the next batch written while the last one syncs);
//! - `openraft-tokio`: `ringkit-peer openraft-node`, openraft on its
//!   default runtime (tokio, current-thread) with its log an append file
//!   written with `tokio::fs`, `fdatasync` per append call, entries kept
//!   in memory (the way openraft's examples build a store).
//!
//! Each sample is one `ringkit raft bench --json` child (a new cluster on
//! empty directories, nodes on the server CPU, closed-loop clients on the
//! client CPU). Workloads: 32 clients writing 100-byte values (the short
//! variant runs only this one), 1 client, and 32 clients writing 4 KiB.
//! Contenders interleaved and rotated per round; ratios paired per round.
//! The clients are closed loop: their latencies are service times (a
//! client waits for its answer before it sends again), not the response
//! times an open-loop load would see.

use std::fmt::Write as _;
use std::io;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::harness::fmt::cpu;
use crate::harness::latency::rotation;
use crate::harness::stat::{stat, Stat};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::table::{Col, Table};

/// The contenders: (name, `--engine`, `--backend`).
const CONTENDERS: [(&str, &str, &str); 3] = [
    ("ringkit-uring", "ringkit", "uring"),
    ("ringkit-epoll", "ringkit", "epoll"),
    ("openraft-tokio", "tokio", "auto"),
];

/// A workload: closed-loop clients, each one write at a time, and the
/// bytes of each value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Workload {
    clients: usize,
    value: usize,
}

const W32: Workload = Workload {
    clients: 32,
    value: 100,
};
const FULL: [Workload; 3] = [
    W32,
    Workload {
        clients: 1,
        value: 100,
    },
    Workload {
        clients: 32,
        value: 4096,
    },
];

/// What `ringkit raft bench --json` prints.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Sample {
    #[serde(default)]
    contender: String,
    #[serde(default)]
    round: usize,
    #[serde(default)]
    workload: Option<Workload>,
    commits_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    failed: u64,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Row {
    workload: Workload,
    contender: String,
    commits_per_sec: Stat,
    p50_ms: Stat,
    p99_ms: Stat,
    p999_ms: Stat,
    /// Per round: this contender's commits/s over openraft-tokio's.
    commits_vs_tokio: Stat,
    /// Per round: this contender's p99 over openraft-tokio's.
    p99_vs_tokio: Stat,
    ok: usize,
    /// Writes that failed, over every sample of the row.
    failed: u64,
}

/// What the study measured: results.json's `studies.raft`.
#[derive(Debug, Serialize, Deserialize)]
pub struct RaftResults {
    rounds: usize,
    secs: f64,
    workloads: Vec<Workload>,
    rows: Vec<Row>,
    samples: Vec<Sample>,
    /// The nodes' CPU (`None`: a run from before it was kept).
    #[serde(default)]
    server_cpu: Option<usize>,
    /// The clients' CPU.
    #[serde(default)]
    client_cpu: Option<usize>,
}

fn run(
    opts: &StudyOpts,
    engine: &str,
    backend: &str,
    secs: f64,
    w: Workload,
) -> Result<Sample, String> {
    let mut cmd = Command::new(&opts.ringkit_bin);
    cmd.args(["raft", "bench", "--json"])
        .arg(format!("--engine={engine}"))
        .arg(format!("--backend={backend}"))
        .arg(format!("--secs={secs}"))
        .arg(format!("--clients={}", w.clients))
        .arg(format!("--value={}", w.value))
        .arg(format!("--cpu={}", opts.server_cpu))
        .arg(format!("--client-cpu={}", opts.client_cpu));
    if engine == "tokio" {
        let peer = opts.peer_bin.as_ref().map_err(|e| e.clone())?;
        cmd.arg(format!("--peer-bin={}", peer.display()));
    }
    let out = cmd
        .output()
        .map_err(|e| format!("ringkit raft bench: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ringkit raft bench failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).map_err(|e| format!("ringkit raft bench printed {line:?}: {e}"))
}

/// `ringkit compare raft`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let rounds = opts.rounds.unwrap_or(if opts.quick { 5 } else { 7 }).max(1);
    let secs = opts.secs.unwrap_or(if opts.quick { 3.0 } else { 5.0 });
    let workloads: &[Workload] = if opts.quick { &[W32] } else { &FULL };
    let mut samples = Vec::new();
    for round in 0..rounds {
        for &w in workloads {
            for i in rotation(CONTENDERS.len(), round) {
                let (name, engine, backend) = CONTENDERS[i];
                progress(&format!(
                    "raft: round {}/{rounds}, {} clients x {} B, {name}",
                    round + 1,
                    w.clients,
                    w.value
                ));
                let mut s = run(opts, engine, backend, secs, w).unwrap_or_else(|e| Sample {
                    error: Some(e),
                    ..Sample::default()
                });
                s.contender = name.into();
                s.round = round;
                s.workload = Some(w);
                samples.push(s);
            }
        }
    }
    let rows = workloads.iter().flat_map(|&w| rows(&samples, w)).collect();
    Ok(section(&RaftResults {
        rounds,
        secs,
        workloads: workloads.to_vec(),
        rows,
        samples,
        server_cpu: Some(opts.server_cpu),
        client_cpu: Some(opts.client_cpu),
    }))
}

/// The samples of contender `c` under workload `w` that ran (writes that
/// failed included: they are counted, not hidden by leaving the sample
/// out).
fn of<'a>(samples: &'a [Sample], w: Workload, c: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
    samples
        .iter()
        .filter(move |s| s.error.is_none() && s.commits_per_sec > 0.0)
        .filter(move |s| s.contender == c && s.workload == Some(w))
}

fn rows(samples: &[Sample], w: Workload) -> Vec<Row> {
    let paired = |c: &str, k: fn(&Sample) -> f64| {
        let v = of(samples, w, c)
            .filter_map(|s| {
                of(samples, w, "openraft-tokio")
                    .find(|t| t.round == s.round)
                    .map(|t| k(s) / k(t))
            })
            .collect();
        stat(v)
    };
    CONTENDERS
        .iter()
        .map(|(c, _, _)| Row {
            workload: w,
            contender: c.to_string(),
            commits_per_sec: stat(of(samples, w, c).map(|s| s.commits_per_sec).collect()),
            p50_ms: stat(of(samples, w, c).map(|s| s.p50_ms).collect()),
            p99_ms: stat(of(samples, w, c).map(|s| s.p99_ms).collect()),
            p999_ms: stat(of(samples, w, c).map(|s| s.p999_ms).collect()),
            commits_vs_tokio: paired(c, |s| s.commits_per_sec),
            p99_vs_tokio: paired(c, |s| s.p99_ms),
            ok: of(samples, w, c).count(),
            failed: of(samples, w, c).map(|s| s.failed).sum(),
        })
        .collect()
}

/// The study's section of the report.
pub fn section(res: &RaftResults) -> Section {
    let (rounds, secs) = (res.rounds, res.secs);
    let range = |s: &Stat, p: usize| format!("{:.p$} ({:.p$}-{:.p$})", s.median, s.min, s.max);
    let ratio = |s: &Stat| format!("{:.2}x ({:.2}-{:.2})", s.median, s.min, s.max);
    let mut md = format!(
        "## Replicated map: openraft on ringkit against openraft on tokio\n\n\
         A 3-node openraft cluster (openraft 0.10.0-alpha.37) of the same key-value map, state \
         machine, settings (100 ms heartbeats, a snapshot every 10 000 entries, the committed id \
         saved at most every 50 ms) and framed-JSON protocol; closed-loop clients each set a \
         value and wait for it to be committed by a majority and applied. {rounds} rounds of \
         {secs} s (after 1 s of warm-up), a new cluster on empty directories per sample, \
         contenders interleaved and rotated; the three nodes pinned to CPU {}, the clients to \
         CPU {}.\n\n\
         - `ringkit-uring`, `ringkit-epoll`: `ringkit raft serve`, openraft on ringkit, its log \
         ringkit-log (buffered, group commit: the next batch is written while the last syncs)\n\
         - `openraft-tokio`: `ringkit-peer openraft-node`, openraft on tokio (current-thread), \
         its log an append file written with `tokio::fs`, `fdatasync` per append call, entries \
         also kept in memory for reads\n\
         - latencies are service times: each client waits for its answer before it sends \
         again (closed loop), so a stall delays the next writes instead of being measured by them\n\
         - ratios are paired per round: commits/s over openraft-tokio's (higher is better), p99 \
         over openraft-tokio's (lower is better); median (min-max). Samples with failed writes \
         stay in the figures; the failed column counts those writes\n\n",
        cpu(res.server_cpu),
        cpu(res.client_cpu)
    );
    let mut t = Table::new(vec![
        Col::right("clients"),
        Col::right("value B").short("value"),
        Col::left("contender"),
        Col::right("commits/s"),
        Col::right("p50 ms"),
        Col::right("p99 ms"),
        Col::right("p99.9 ms"),
        Col::right("commits/s vs openraft-tokio").short("commits vs tokio"),
        Col::right("p99 vs openraft-tokio").short("p99 vs tokio"),
        Col::right("failed writes").short("failed"),
        Col::right("samples").md_only(),
    ]);
    for r in &res.rows {
        t.row(vec![
            r.workload.clients.to_string(),
            r.workload.value.to_string(),
            r.contender.clone(),
            range(&r.commits_per_sec, 0),
            format!("{:.2}", r.p50_ms.median),
            format!("{:.2}", r.p99_ms.median),
            format!("{:.2}", r.p999_ms.median),
            ratio(&r.commits_vs_tokio),
            ratio(&r.p99_vs_tokio),
            r.failed.to_string(),
            format!("{}/{rounds}", r.ok),
        ]);
    }
    md.push_str(&t.markdown());
    let table = format!("raft ({rounds} rounds of {secs} s, 3 nodes)\n{}", t.text());
    let mut skipped = Vec::new();
    for s in res.samples.iter().filter(|s| s.error.is_some()) {
        let why = s.error.clone().unwrap_or_default();
        let _ = writeln!(md, "\n- round {} {}: {why}", s.round + 1, s.contender);
        skipped.push((format!("{} round {}", s.contender, s.round + 1), why));
    }
    Section {
        study: "raft".into(),
        table,
        markdown: md,
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: Vec::new(),
        skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(c: &str, round: usize, rate: f64, p99: f64) -> Sample {
        Sample {
            contender: c.into(),
            round,
            workload: Some(W32),
            commits_per_sec: rate,
            p99_ms: p99,
            ..Sample::default()
        }
    }

    #[test]
    fn ratios_are_paired_by_round_broken_samples_left_out_failed_writes_kept() {
        let mut broken = s("ringkit-uring", 2, 1.0, 1.0);
        broken.error = Some("it broke".into());
        let mut lossy = s("openraft-tokio", 3, 50.0, 1.0);
        lossy.failed = 7;
        let mut other = s("ringkit-uring", 0, 900.0, 9.0);
        other.workload = Some(FULL[1]);
        let samples = vec![
            s("ringkit-uring", 0, 200.0, 2.0),
            s("openraft-tokio", 0, 100.0, 4.0),
            s("ringkit-uring", 1, 300.0, 3.0),
            s("openraft-tokio", 1, 100.0, 1.0),
            broken,
            s("openraft-tokio", 2, 100.0, 1.0),
            lossy,
            other,
        ];
        let r = rows(&samples, W32);
        assert_eq!(r[0].contender, "ringkit-uring");
        assert_eq!(r[0].ok, 2);
        assert_eq!(r[0].commits_vs_tokio.min, 2.0);
        assert_eq!(r[0].commits_vs_tokio.max, 3.0);
        assert_eq!(r[0].p99_vs_tokio.min, 0.5);
        assert_eq!(r[0].p99_vs_tokio.max, 3.0);
        assert_eq!(
            r[0].commits_per_sec.max, 300.0,
            "another workload's sample left out"
        );
        assert_eq!(r[2].commits_vs_tokio.median, 1.0);
        assert_eq!(
            (r[2].ok, r[2].failed),
            (4, 7),
            "a sample with failed writes stays"
        );
        assert_eq!(r[2].commits_per_sec.min, 50.0);
        assert_eq!(r[1].ok, 0);
    }
}
