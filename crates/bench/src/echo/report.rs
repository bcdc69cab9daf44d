//! The echo study's report: a terminal table, report.md, results.json and
//! SVG charts.

use std::fmt::Write as _;

use super::results::{CompareResults, Sample, Summary};
use crate::harness::bars::Bars;
use crate::harness::fmt::{opt, ratio};
use crate::harness::server::Family;
use crate::harness::study::Section;

/// The summary as a fixed-width table.
pub fn table(res: &CompareResults) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<22} {:>6} {:>10} {:>21} {:>9} {:>13} {:>9} {:>8} {:>8} {:>8} {:>5}",
        "contender",
        "conns",
        "req/s",
        "(min-max)",
        "cpu us/r",
        "(user+sys)",
        "sysc/r",
        "enter/r",
        "p99 us",
        "vs epoll",
        "ok"
    );
    for r in &res.summary {
        let _ = writeln!(
            s,
            "{:<22} {:>6} {:>10.0} {:>21} {:>9.2} {:>13} {:>9} {:>8} {:>8.0} {:>8} {:>5}",
            r.contender,
            r.conns,
            r.rps.median,
            format!("({:.0}-{:.0})", r.rps.min, r.rps.max),
            r.cpu_us.median,
            format!("({:.2}+{:.2})", r.cpu_user_us, r.cpu_sys_us),
            opt(r.syscalls_per_req, 2),
            opt(r.enters_per_req, 3),
            r.p99_us,
            ratio(r.cpu_vs_best_epoll),
            format!("{}/{}", r.ok_samples, r.samples),
        );
    }
    let paired = paired_lines(res);
    if !paired.is_empty() {
        let _ = writeln!(
            s,
            "CPU per request vs the best epoll server (lowest median), paired round by round (median, min-max over rounds):"
        );
        for l in paired {
            let _ = writeln!(s, "  {l}");
        }
    }
    for (conns, rows) in paired_matrices(res) {
        let _ = writeln!(
            s,
            "Paired CPU per request, row over column, median over rounds (c={conns}):"
        );
        let w = rows.iter().map(|r| r[0].len()).max().unwrap_or(0) + 2;
        for row in rows {
            let _ = writeln!(
                s,
                "  {:<w$}{}",
                row[0],
                row[1..]
                    .iter()
                    .map(|c| format!("{c:>16}"))
                    .collect::<String>()
            );
        }
    }
    s
}

/// Per connection count (with an epoll contender): the paired ratio of
/// every contender over every epoll contender, as cells: a header row
/// ("", "/ epoll server", ...), then one row per contender.
fn paired_matrices(res: &CompareResults) -> Vec<(usize, Vec<Vec<String>>)> {
    res.config
        .conns
        .iter()
        .filter_map(|&conns| {
            let rows: Vec<&Summary> = res.summary.iter().filter(|r| r.conns == conns).collect();
            let cols: Vec<String> = rows
                .iter()
                .filter(|r| r.family == Family::Epoll)
                .map(|r| r.contender.clone())
                .collect();
            if cols.is_empty() {
                return None;
            }
            let header = std::iter::once(String::new())
                .chain(cols.iter().map(|c| format!("/ {c}")))
                .collect();
            let body = rows.iter().map(|r| {
                std::iter::once(r.contender.clone())
                    .chain(cols.iter().map(|c| {
                        ratio(
                            r.cpu_paired_vs_epoll
                                .iter()
                                .find(|p| p.vs == *c)
                                .map(|p| p.ratio.median),
                        )
                    }))
                    .collect()
            });
            Some((conns, std::iter::once(header).chain(body).collect()))
        })
        .collect()
}

/// One line per io_uring contender: its paired per-round CPU ratio.
fn paired_lines(res: &CompareResults) -> Vec<String> {
    res.summary
        .iter()
        .filter(|r| r.family == Family::Uring)
        .filter_map(|r| {
            r.cpu_vs_best_epoll_paired.map(|p| {
                format!(
                    "{} c={}: {:.2}x ({:.2}-{:.2})",
                    r.contender, r.conns, p.median, p.min, p.max
                )
            })
        })
        .collect()
}

/// How evenly each server served its connections: per contender and
/// connection count, medians over the good samples of the per-connection
/// responses (fewest, median, most) and of Jain's index.
fn fairness_markdown(res: &CompareResults) -> String {
    let mut s = String::new();
    if res.config.client == super::load::EchoClient::RustEchoBench {
        // It reports totals only: no per-connection counts, no latencies.
        return s;
    }
    let _ = writeln!(
        s,
        "\n### Fairness ({:?} client)\n\nResponses per connection in the window (medians over the good samples) and Jain's index (1: every connection got the same; 1/n: one got everything). With a thread-per-connection client, a server that answers a few connections in bursts shows a spread here that requests/s alone would hide.\n",
        res.config.client
    );
    let _ = writeln!(s, "| contender | conns | fewest | median | most | Jain's index | p50 µs | p99 µs | p99.9 µs |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &res.summary {
        let med = |f: fn(&Sample) -> f64| good_median(res, r, f);
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.3} | {:.0} | {:.0} | {:.0} |",
            r.contender,
            r.conns,
            med(|x| x.load.conn_min as f64),
            med(|x| x.load.conn_median as f64),
            med(|x| x.load.conn_max as f64),
            med(|x| x.load.jain),
            med(|x| x.load.p50_us),
            med(|x| x.load.p99_us),
            med(|x| x.load.p999_us),
        );
    }
    s
}

/// The median of `f` over the good samples of `r`'s contender and
/// connection count (0 without any).
fn good_median(res: &CompareResults, r: &Summary, f: fn(&Sample) -> f64) -> f64 {
    let v: Vec<f64> = res
        .samples
        .iter()
        .filter(|x| {
            x.contender == r.contender && x.conns == r.conns && x.error.is_none() && x.load.ok()
        })
        .map(f)
        .collect();
    if v.is_empty() {
        0.0
    } else {
        crate::harness::stat::stat(v).median
    }
}

/// With rust_echo_bench as the client: its own figure (responses over
/// its nominal duration) beside responses over its whole run, how much
/// longer than nominal the run took, and the threads that gave up; medians
/// over the good samples. Empty for the other clients.
fn tool_markdown(res: &CompareResults) -> String {
    let mut s = String::new();
    if res.config.client != super::load::EchoClient::RustEchoBench {
        return s;
    }
    let _ = writeln!(
        s,
        "\n### rust_echo_bench's own figure\n\nIt divides what its threads counted by `-t` ({:.0} s), but they start counting as each is spawned, seconds before its clock starts: the tables above divide by its whole run instead. Threads that gave up ended on a read shorter than a message.\n",
        res.config.secs.floor().max(1.0)
    );
    let _ = writeln!(s, "| contender | conns | its req/s | req/s over its run | run past -t (s) | threads that gave up |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    for r in &res.summary {
        let med = |f: fn(&Sample) -> f64| good_median(res, r, f);
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.2} | {:.0} |",
            r.contender,
            r.conns,
            med(|x| x.load.tool_rps),
            med(|x| x.load.rps()),
            med(|x| x.load.connect_secs),
            med(|x| x.load.dead_conns as f64),
        );
    }
    s
}

/// report.md.
pub fn markdown(res: &CompareResults) -> String {
    let mut s = String::new();
    let sys = &res.system;
    let c = &res.config;
    let _ = writeln!(s, "## Echo\n");
    let _ = writeln!(
        s,
        "- date: {}\n- command: `{}`\n- kernel: {}\n- CPU: {} ({} cores)\n- server pinned to CPU {}, load generator to CPU {}\n- workload: {}-byte messages, {} in flight per connection; connections {:?}; {} rounds of {} s, contenders interleaved and rotated\n- wall time: {:.0} s; ringkit {}",
        sys.date, sys.command, sys.kernel, sys.cpu_model, sys.cores, c.server_cpu, c.client_cpu,
        c.len, c.pipeline, c.conns, c.rounds, c.secs, res.wall_secs, sys.tool_version
    );
    s.push_str(&crate::harness::summary::servers_markdown(
        &res.contenders,
        &res.server_banners,
        &res.skipped,
    ));
    let _ = writeln!(
        s,
        "\n### Results (medians; ratios are to the best epoll contender in the same run)\n"
    );
    let _ = writeln!(s, "| contender | conns | req/s | min–max | server CPU µs/req (user+sys) | CPU vs best epoll | req/s vs best epoll | syscalls/req | io_uring_enter/req | p99 µs | ok samples |");
    let _ = writeln!(s, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &res.summary {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0}–{:.0} | {:.2} ({:.2}+{:.2}) | {} | {} | {} | {} | {:.0} | {}/{} |",
            r.contender, r.conns, r.rps.median, r.rps.min, r.rps.max, r.cpu_us.median,
            r.cpu_user_us, r.cpu_sys_us,
            ratio(r.cpu_vs_best_epoll),
            ratio(r.rps_vs_best_epoll),
            opt(r.syscalls_per_req, 2), opt(r.enters_per_req, 3), r.p99_us, r.ok_samples, r.samples
        );
    }
    s.push_str(&fairness_markdown(res));
    s.push_str(&tool_markdown(res));
    let paired = paired_lines(res);
    if !paired.is_empty() {
        let _ = writeln!(
            s,
            "\nPaired: CPU per request over that of the best epoll server (the one with the lowest median), round by round (median, min–max over rounds; drift between rounds cancels):\n"
        );
        for l in paired {
            let _ = writeln!(s, "- {l}");
        }
    }
    for (conns, m) in paired_matrices(res) {
        let _ = writeln!(
            s,
            "\nPaired CPU per request at {conns} connections: row over column, round by round, median over rounds:\n"
        );
        for (i, row) in m.iter().enumerate() {
            let _ = writeln!(s, "| {} |", row.join(" | "));
            if i == 0 {
                let _ = writeln!(s, "|{}", "---|".repeat(row.len()));
            }
        }
    }
    let _ = writeln!(s, "\nSyscall sources: ringkit servers count their own syscalls; peers are counted in a separate run whose throughput is not used, by `perf stat -e raw_syscalls:sys_enter` (the kernel counts; the server keeps its speed) or, without perf, by `strace -c -f` (which slows the server, so an epoll server's `epoll_wait` batches fill up and its count reads low).\n");
    let failed: Vec<_> = res
        .samples
        .iter()
        .filter(|x| x.error.is_some() || !x.load.ok())
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "### Failed samples\n");
        for f in failed {
            let _ = writeln!(
                s,
                "- {} conns {} round {}: {} (failed conns {}, mismatches {}{})",
                f.contender,
                f.conns,
                f.round,
                f.error.as_deref().unwrap_or("load check failed"),
                f.load.failed_conns,
                f.load.mismatches,
                f.load
                    .first_error
                    .as_deref()
                    .map(|e| format!(", first error: {e}"))
                    .unwrap_or_default()
            );
        }
    }
    let _ = writeln!(
        s,
        "\n![requests per second](echo_rps.svg)\n\n![server CPU per request](echo_cpu.svg)"
    );
    s
}

/// The echo study as a section of the compare report.
pub fn section(res: &CompareResults) -> Section {
    let chart = |title: &str, unit: &str, value: fn(&Summary) -> f64| {
        Bars::from_rows(
            title,
            unit,
            &res.summary,
            |r| format!("{} connections", r.conns),
            |r| r.contender.clone(),
            value,
        )
        .svg()
    };
    let rps = chart("Echo throughput", "requests/s", |r| r.rps.median);
    let cpu = chart(
        "Echo: server CPU per request",
        "µs, lower is better",
        |r| r.cpu_us.median,
    );
    Section {
        study: "echo".into(),
        table: table(res),
        markdown: markdown(res),
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![("echo_rps.svg".into(), rps), ("echo_cpu.svg".into(), cpu)],
        skipped: res.skipped.clone(),
    }
}
