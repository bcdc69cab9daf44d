//! The latency study's report section: per workload the closed-loop
//! maxima, the open-loop table, a p99-against-load chart; the targets; the
//! oha cross-check.

use std::fmt::Write as _;

use super::{LatencyResults, Row, Variant};
use crate::harness::curves::Curves;
use crate::harness::fmt::ratio;
use crate::harness::study::Section;

fn us(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} ms", v / 1000.0)
    } else {
        format!("{v:.0} µs")
    }
}

/// A paired ratio with the fewest and most of its rounds: "0.82x (0.61-1.10)".
fn spread(v: Option<f64>, span: Option<(f64, f64)>) -> String {
    match (v, span) {
        (Some(_), Some((lo, hi))) => format!("{} ({lo:.2}-{hi:.2})", ratio(v)),
        _ => ratio(v),
    }
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// The target rows: ringkit-uring at 75% on echo and HTTP.
fn targets(res: &LatencyResults) -> Vec<(&Row, &str)> {
    res.rows
        .iter()
        .filter(|r| r.contender == "ringkit-uring" && r.level == Some(0.75))
        .filter(|r| r.workload.starts_with("echo") || r.workload.starts_with("http"))
        .filter_map(|r| {
            let reference = res.references.iter().find(|x| x.workload == r.workload)?;
            Some((r, reference.contender.as_str()))
        })
        .collect()
}

/// Build the section.
pub fn section(res: &LatencyResults) -> Section {
    let mut md = String::new();
    let mut svgs = Vec::new();
    let levels = &res.levels;
    let pct = levels
        .iter()
        .map(|l| format!("{:.0}%", l * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    match res.variant {
        Variant::Latency => {
            let _ = writeln!(md, "## Latency at a fixed load (open loop)\n");
        }
        Variant::C10k => {
            let _ = writeln!(
                md,
                "## 10 000 connections\n\nEvery server holds 10 000 keep-alive connections \
                 (`ulimit -n` raised to 20 000; ringkit's servers at `--max-connections 16384`, \
                 nginx at `worker_connections 16384`). Every request must be answered: a run \
                 with a connect error, a reset, a wrong or missing response is a failed run.\n"
            );
        }
    }
    let _ = writeln!(
        md,
        "Each workload first finds every server's closed-loop maximum (median of {} rounds); the \
         epoll server with the highest is the reference. Its **open-loop capacity** is what it \
         completes when offered more than it carries, open loop (1.2x that maximum, or 2x when \
         1.2x was carried; median of as many rounds). Then \
         every server is driven **open loop** at {pct} of that capacity, latency counted from each request's scheduled moment, so \
         queueing shows (no coordinated omission). A true open loop: each connection \
         sends at its scheduled moments whether or not earlier replies are back (several \
         requests in flight, pipelined on HTTP/1.1 keep-alive), and requests unanswered or \
         unsent at the window's end are recorded with their wait up to the end, not dropped. All servers face the same offered rate; a server that \
         cannot carry it is marked *saturated* (achieved under 95% of offered). {} rounds of {} s \
         per point, interleaved and rotated; server on CPU {}, load (one thread, the built-in \
         generator) on CPU {}. Ratios are the server's latency over the reference's, paired per \
         round (median, with the fewest and most of the rounds in brackets): below 1 is faster \
         than the reference.\n\n\
         **Host stalls.** During every run a probe thread on each of the two CPUs, pinned and \
         real-time (`SCHED_FIFO`), sleeps to an absolute deadline every 1 ms and records how late \
         it wakes (cyclictest's method): time that CPU was not there for anyone. A stall \
         longer than 1 ms counts once per millisecond it swallowed, so the host's percentiles \
         are weighted by time, as a server's are by a steady stream of requests. The host \
         columns are the p99, p99.9 and latest of those wake-ups over the same window (median \
         over rounds). A server's tail near the host's is the machine's, not the server's. The \
         probe costs each CPU one wake-up per millisecond, the same for every server (its cost \
         has not been measured on its own).{}\n",
        res.rounds,
        res.rounds,
        res.secs,
        res.server_cpu,
        res.client_cpu,
        if res.points.iter().all(|p| p.host.realtime || p.host.wakes == 0) {
            ""
        } else {
            " **Here `SCHED_FIFO` was refused for some runs: their probe waited behind the \
             server and the load like any thread, so its lateness is not the host's alone.**"
        },
        pct = pct
    );
    let mut workloads: Vec<&str> = Vec::new();
    for p in &res.points {
        if !workloads.contains(&p.workload.as_str()) {
            workloads.push(&p.workload);
        }
    }
    for w in &workloads {
        let _ = writeln!(md, "### {w}\n");
        let maxima: Vec<&Row> = res
            .rows
            .iter()
            .filter(|r| r.workload == *w && r.level.is_none())
            .collect();
        let reference = res.references.iter().find(|r| r.workload == *w);
        match reference {
            Some(r) => {
                // The capacity runs, as measured: a capacity read off a run
                // that was not saturated is only a lower bound.
                let caps: Vec<&super::Point> = res
                    .points
                    .iter()
                    .filter(|p| p.workload == *w && p.contender == r.contender)
                    .filter(|p| p.level == Some(r.overload))
                    .collect();
                let offered = caps.first().and_then(|p| p.rate).unwrap_or(0.0);
                let failed = caps.iter().filter(|p| p.error.is_some()).count();
                let saturated = r.saturated;
                let _ = writeln!(
                    md,
                    "Reference: **{}**, closed-loop maximum {:.0} req/s, open-loop capacity {:.0} req/s. Closed-loop maxima: {}.\n",
                    r.contender,
                    r.max_rps,
                    r.capacity_rps,
                    maxima
                        .iter()
                        .map(|m| format!("{} {:.0}", m.contender, m.rps))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                let _ = writeln!(
                    md,
                    "Capacity runs: offered {offered:.0} req/s ({:.1}x the closed-loop maximum), achieved {} req/s, {failed} of {} failed{}.\n",
                    r.overload,
                    caps.iter()
                        .filter(|p| p.error.is_none())
                        .map(|p| format!("{:.0}", p.rps))
                        .collect::<Vec<_>>()
                        .join(", "),
                    caps.len(),
                    if saturated {
                        ""
                    } else {
                        "; **the offer was carried (achieved at least 95% of it): the capacity is a lower bound**"
                    }
                );
            }
            None => {
                let _ = writeln!(
                    md,
                    "No reference: no epoll server finished its closed-loop runs.\n"
                );
                continue;
            }
        }
        let _ = writeln!(
            md,
            "| load | offered req/s | server | achieved req/s | p50 | p90 | p99 | p99.9 | max | p99 vs ref (rounds) | p99.9 vs ref (rounds) | host p99 | host p99.9 | host max | failed runs |"
        );
        let _ = writeln!(
            md,
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for &level in levels {
            for r in res
                .rows
                .iter()
                .filter(|r| r.workload == *w && r.level == Some(level))
            {
                let _ = writeln!(
                    md,
                    "| {:.0}% | {:.0} | {}{} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} |",
                    level * 100.0,
                    r.rate.unwrap_or(0.0),
                    r.contender,
                    if r.saturated { " (saturated)" } else { "" },
                    r.rps,
                    us(r.p50_us),
                    us(r.p90_us),
                    us(r.p99_us),
                    us(r.p999_us),
                    us(r.max_us),
                    spread(r.p99_vs_ref, r.p99_vs_ref_span),
                    spread(r.p999_vs_ref, r.p999_vs_ref_span),
                    us(r.host_p99_us),
                    us(r.host_p999_us),
                    us(r.host_max_us),
                    r.failed,
                    r.runs
                );
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for r in res
            .rows
            .iter()
            .filter(|r| r.workload == *w && r.level.is_some())
        {
            if !names.contains(&r.contender.as_str()) {
                names.push(&r.contender);
            }
        }
        let chart = Curves {
            title: format!("{w}: p99 latency against offered load"),
            unit: "µs".into(),
            x_label: format!(
                "offered load, % of {}'s open-loop capacity",
                reference.map_or("the reference", |r| r.contender.as_str())
            ),
            x: levels
                .iter()
                .map(|l| (l * 100.0, format!("{:.0}%", l * 100.0)))
                .collect(),
            series: names
                .iter()
                .map(|n| {
                    let v = levels
                        .iter()
                        .map(|l| {
                            res.rows
                                .iter()
                                .find(|r| {
                                    r.workload == *w && r.contender == *n && r.level == Some(*l)
                                })
                                .map(|r| r.p99_us)
                        })
                        .collect();
                    (n.to_string(), v)
                })
                .collect(),
        };
        if levels.len() > 1 {
            let file = format!("latency-{}.svg", slug(w));
            let _ = writeln!(md, "\n![{w}: p99 against load]({file})\n");
            svgs.push((file, chart.svg()));
        }
    }

    let targets = targets(res);
    if !targets.is_empty() {
        let _ = writeln!(md, "### Targets\n");
        let _ = writeln!(
            md,
            "| workload | ringkit-uring p99 vs reference (≤ 0.70x) | p99.9 vs reference (≤ 1.00x) |"
        );
        let _ = writeln!(md, "|---|---:|---:|");
    }
    for (r, reference) in targets {
        let met = |v: Option<f64>, t: f64| match v {
            Some(v) if v <= t => format!("{v:.2}x met"),
            Some(v) => format!("{v:.2}x not met"),
            None => "–".into(),
        };
        let _ = writeln!(
            md,
            "| {} at 75% (vs {reference}) | {} | {} |",
            r.workload,
            met(r.p99_vs_ref, 0.7),
            met(r.p999_vs_ref, 1.0)
        );
    }
    // The terminal table: each workload at its highest level but 90%
    // (75% in the latency study, 50% at 10 000 connections).
    let shown = levels
        .iter()
        .copied()
        .filter(|l| *l < 0.9)
        .fold(0.0f64, f64::max);
    let mut table = String::new();
    for w in &workloads {
        let _ = writeln!(table, "{w}, {:.0}% load:", shown * 100.0);
        for r in res
            .rows
            .iter()
            .filter(|r| r.workload == *w && r.level == Some(shown))
        {
            let _ = writeln!(
                table,
                "  {:<22} {:>9.0} req/s  p50 {:>9}  p99 {:>9}  p99.9 {:>9}  vs ref p99 {}  host p99.9 {} max {}{}{}",
                r.contender,
                r.rps,
                us(r.p50_us),
                us(r.p99_us),
                us(r.p999_us),
                spread(r.p99_vs_ref, r.p99_vs_ref_span),
                us(r.host_p999_us),
                us(r.host_max_us),
                if r.saturated { "  saturated" } else { "" },
                if r.failed > 0 {
                    format!("  {} of {} runs FAILED", r.failed, r.runs)
                } else {
                    String::new()
                }
            );
        }
    }
    if !res.oha.is_empty() {
        let _ = writeln!(
            md,
            "\n### Cross-check with oha\n\nThe same server at the same offered rate, measured by the built-in \
             generator and then by `oha` (open loop with `-q`, latency from the scheduled start with \
             `--latency-correction`), one run each, at 25% load: oha's own ceiling on one core at 1000 \
             connections is about 80k requests/s, so at higher rates its figures would describe oha.\n"
        );
        let _ = writeln!(md, "| workload | server | offered req/s | client | achieved req/s | p50 | p90 | p99 | p99.9 | errors |");
        let _ = writeln!(md, "|---|---|---:|---|---:|---:|---:|---:|---:|---:|");
        for x in &res.oha {
            let _ = writeln!(
                md,
                "| {} | {} | {:.0} | built-in | {:.0} | {} | {} | {} | {} | – |",
                x.workload,
                x.contender,
                x.rate,
                x.builtin_rps,
                us(x.builtin_p50_us),
                us(x.builtin_p90_us),
                us(x.builtin_p99_us),
                us(x.builtin_p999_us)
            );
            let _ = writeln!(
                md,
                "| {} | {} | {:.0} | oha | {:.0} | {} | {} | {} | {} | {}{} |",
                x.workload,
                x.contender,
                x.rate,
                x.oha_rps,
                us(x.oha_p50_us),
                us(x.oha_p90_us),
                us(x.oha_p99_us),
                us(x.oha_p999_us),
                x.oha_errors,
                x.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            );
        }
        if let Some(x) = res.oha.first() {
            let _ = writeln!(md, "\noha's command: `{}`", x.command);
        }
    }
    if !res.skipped.is_empty() {
        let _ = writeln!(md, "\nSkipped:\n");
        for (n, why) in &res.skipped {
            let _ = writeln!(md, "- {n}: {why}");
        }
    }
    let _ = writeln!(md, "\nThe study took {:.0} s.", res.wall_secs);
    Section {
        study: match res.variant {
            Variant::Latency => "latency".into(),
            Variant::C10k => "c10k".into(),
        },
        table,
        markdown: md,
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs,
        skipped: res.skipped.clone(),
    }
}
