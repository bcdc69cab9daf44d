//! Reports of the wake-up study: the terminal table, the report.md
//! section, the target verdict text and the charts.

use std::fmt::Write as _;

use super::spec::{Channel, WakeResults, WakeRow, WakeSample, WakeVerdict};
use crate::harness::bars::Bars;
use crate::harness::fmt::opt;
use crate::harness::study::Section;
use crate::harness::table::{Col, Table};

/// The results: every reader on every channel.
fn results(res: &WakeResults) -> Table {
    let mut t = Table::new(vec![
        Col::left("reader"),
        Col::left("channel"),
        Col::left("setup").md_only(),
        Col::right("avg ns"),
        Col::right("p50 ns"),
        Col::left("p50 min–max"),
        Col::right("p90 ns"),
        Col::right("p99 ns"),
        Col::right("p99.9 ns"),
        Col::right("io_uring_enter per wake-up").short("enter/w"),
        Col::right("ok samples").short("ok"),
    ]);
    for r in &res.rows {
        t.row(vec![
            r.contender.reader.name().to_string(),
            r.contender.channel.name().to_string(),
            r.setup.replace('|', "\\|"),
            format!("{:.0}", r.avg),
            format!("{:.0}", r.p50.median),
            format!("{:.0}–{:.0}", r.p50.min, r.p50.max),
            format!("{:.0}", r.p90),
            format!("{:.0}", r.p99),
            format!("{:.0}", r.p999),
            opt(r.enters_per_wake, 2),
            format!("{}/{}", r.ok_samples, r.samples),
        ]);
    }
    t
}

/// The rows as a fixed-width terminal table.
pub fn table(res: &WakeResults) -> String {
    let mut s = results(res).text();
    let _ = writeln!(s, "{}", verdict_text(&res.verdict));
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "skipped {n}: {why}");
    }
    s
}

pub(crate) fn verdict_text(v: &WakeVerdict) -> String {
    let mut s = String::new();
    let line = |s: &mut String,
                what: &str,
                u: &Option<(String, f64)>,
                e: Option<f64>,
                r: Option<f64>,
                limit: f64| {
        let _ = match (u, e, r) {
            (Some((n, u)), Some(e), Some(r)) => writeln!(
                s,
                "target {what}: best io_uring {n} p50 {u:.0} ns vs epoll {e:.0} ns = {r:.3}x (target <= {limit:.2}x): {}",
                if r <= limit { "MET" } else { "NOT MET" }
            ),
            _ => writeln!(s, "target {what}: not evaluated (a contender is missing or failed)"),
        };
    };
    line(
        &mut s,
        "busy poll (pipe)",
        &v.uring_busy,
        v.epoll_busy,
        v.busy_ratio,
        1.0,
    );
    line(
        &mut s,
        "blocking (pipe)",
        &v.uring_block,
        v.epoll_block,
        v.block_ratio,
        1.05,
    );
    s
}

/// The section of report.md.
pub fn markdown(res: &WakeResults) -> String {
    let c = &res.config;
    let sys = &res.system;
    let mut s = String::new();
    let _ = writeln!(s, "## Wake-up latency\n");
    let _ = writeln!(
        s,
        "- kernel {}, CPU {} ({} cores); reader pinned to CPU {}, writer to CPU {}\n\
         - {} measured wake-ups per sample after {} unmeasured; writer pause uniform {}–{} µs (busy wait); {} rounds, contenders interleaved and rotated; wall {:.0} s\n\
         - latency = t1 (reader, right after waking) − t0 (writer, right before write), CLOCK_MONOTONIC; figures are medians over rounds of each round's nearest-rank percentile\n\
         - command: `{}`; ringkit {}\n",
        sys.kernel, sys.cpu_model, sys.cores, c.reader_cpu, c.writer_cpu, c.count, c.warmup,
        c.pause_us.0, c.pause_us.1, c.rounds, res.wall_secs, sys.command, sys.tool_version
    );
    s.push_str(&results(res).markdown());
    let _ = writeln!(s, "\n### Targets (pipe)\n");
    for l in verdict_text(&res.verdict).lines() {
        let _ = writeln!(s, "- {l}");
    }
    let _ = writeln!(
        s,
        "\nReference (other machines, not this run): on an i9-12900F io_uring busy poll p50 was 1988 ns vs epoll 1316 ns with default flags, \
         1505 ns with COOP_TASKRUN|TASKRUN_FLAG; the liburing maintainer found parity with DEFER_TASKRUN|SINGLE_ISSUER.\n"
    );
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "- skipped **{n}**: {why}");
    }
    let failed: Vec<&WakeSample> = res.samples.iter().filter(|x| x.error.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "\n### Failed samples\n");
        for f in failed {
            let _ = writeln!(
                s,
                "- {} round {}: {}",
                f.contender,
                f.round,
                f.error.as_deref().unwrap_or("")
            );
        }
    }
    let _ = writeln!(
        s,
        "\n![wake-up latency p50](wakeup_p50.svg)\n\n![wake-up latency p99](wakeup_p99.svg)"
    );
    s
}

/// A chart of one figure: one group per channel, one bar per reader.
fn chart(res: &WakeResults, what: &str, f: impl Fn(&WakeRow) -> f64) -> Bars {
    let mut channels: Vec<Channel> = Vec::new();
    let mut readers: Vec<String> = Vec::new();
    for r in &res.rows {
        if !channels.contains(&r.contender.channel) {
            channels.push(r.contender.channel);
        }
        let n = r.contender.reader.name();
        if !readers.contains(&n) {
            readers.push(n);
        }
    }
    Bars {
        title: format!("Wake-up latency {what}"),
        unit: "ns, lower is better".into(),
        groups: channels.iter().map(|c| c.name().to_string()).collect(),
        values: channels
            .iter()
            .map(|&ch| {
                readers
                    .iter()
                    .map(|n| {
                        res.rows
                            .iter()
                            .find(|r| {
                                r.contender.channel == ch
                                    && &r.contender.reader.name() == n
                                    && r.ok_samples > 0
                            })
                            .map(&f)
                    })
                    .collect()
            })
            .collect(),
        series: readers,
    }
}

/// The study as a section of the compare report.
pub fn section(res: &WakeResults) -> Section {
    Section {
        study: "wakeup".into(),
        table: table(res),
        markdown: markdown(res),
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![
            (
                "wakeup_p50.svg".into(),
                chart(res, "p50", |r| r.p50.median).svg(),
            ),
            ("wakeup_p99.svg".into(), chart(res, "p99", |r| r.p99).svg()),
        ],
        skipped: res.skipped.clone(),
    }
}
