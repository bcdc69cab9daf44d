//! The echo study's report: a terminal table, report.md, results.json and
//! SVG charts.

use std::fmt::Write as _;

use super::results::{CompareResults, Sample, Summary};
use crate::harness::bars::Bars;
use crate::harness::fmt::{opt, ratio};
use crate::harness::server::Family;
use crate::harness::study::Section;
use crate::harness::table::{Col, Table};

/// The results: every contender at every connection count.
fn results(res: &CompareResults) -> Table {
    let mut t = Table::new(vec![
        Col::left("contender"),
        Col::right("conns"),
        Col::right("req/s"),
        Col::left("min–max"),
        Col::right("server CPU µs/req (user+sys)").short("cpu us/r (user+sys)"),
        Col::right("CPU vs best epoll").short("vs epoll"),
        Col::right("req/s vs best epoll").md_only(),
        Col::right("syscalls/req").short("sysc/r"),
        Col::right("io_uring_enter/req").short("enter/r"),
        Col::right("p99 µs"),
        Col::right("ok samples").short("ok"),
    ]);
    for r in &res.summary {
        t.row(vec![
            r.contender.clone(),
            r.conns.to_string(),
            format!("{:.0}", r.rps.median),
            format!("{:.0}–{:.0}", r.rps.min, r.rps.max),
            format!(
                "{:.2} ({:.2}+{:.2})",
                r.cpu_us.median, r.cpu_user_us, r.cpu_sys_us
            ),
            ratio(r.cpu_vs_best_epoll),
            ratio(r.rps_vs_best_epoll),
            opt(r.syscalls_per_req, 2),
            opt(r.enters_per_req, 3),
            format!("{:.0}", r.p99_us),
            format!("{}/{}", r.ok_samples, r.samples),
        ]);
    }
    t
}

/// The summary as a fixed-width table.
pub fn table(res: &CompareResults) -> String {
    let mut s = results(res).text();
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
    for (conns, t) in paired_matrices(res) {
        let _ = writeln!(
            s,
            "Paired CPU per request, row over column, median over rounds (c={conns}):"
        );
        for l in t.text().lines() {
            let _ = writeln!(s, "  {l}");
        }
    }
    s
}

/// Per connection count (with an epoll contender): the paired ratio of
/// every contender's CPU per request over every epoll contender's, row
/// over column.
fn paired_matrices(res: &CompareResults) -> Vec<(usize, Table)> {
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
            let mut t = Table::new(
                std::iter::once(String::new())
                    .chain(cols.iter().map(|c| format!("/ {c}")))
                    .map(Col::left)
                    .collect(),
            );
            for r in rows {
                t.row(
                    std::iter::once(r.contender.clone())
                        .chain(cols.iter().map(|c| {
                            ratio(
                                r.cpu_paired_vs_epoll
                                    .iter()
                                    .find(|p| p.vs == *c)
                                    .map(|p| p.ratio.median),
                            )
                        }))
                        .collect(),
                );
            }
            Some((conns, t))
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
    let mut t = Table::new(vec![
        Col::left("contender"),
        Col::right("conns"),
        Col::right("fewest"),
        Col::right("median"),
        Col::right("most"),
        Col::right("Jain's index"),
        Col::right("p50 µs"),
        Col::right("p99 µs"),
        Col::right("p99.9 µs"),
    ]);
    for r in &res.summary {
        let med = |f: fn(&Sample) -> f64| good_median(res, r, f);
        t.row(vec![
            r.contender.clone(),
            r.conns.to_string(),
            format!("{:.0}", med(|x| x.load.conn_min as f64)),
            format!("{:.0}", med(|x| x.load.conn_median as f64)),
            format!("{:.0}", med(|x| x.load.conn_max as f64)),
            format!("{:.3}", med(|x| x.load.jain)),
            format!("{:.0}", med(|x| x.load.p50_us)),
            format!("{:.0}", med(|x| x.load.p99_us)),
            format!("{:.0}", med(|x| x.load.p999_us)),
        ]);
    }
    s.push_str(&t.markdown());
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
    let mut t = Table::new(vec![
        Col::left("contender"),
        Col::right("conns"),
        Col::right("its req/s"),
        Col::right("req/s over its run"),
        Col::right("run past -t (s)"),
        Col::right("threads that gave up"),
    ]);
    for r in &res.summary {
        let med = |f: fn(&Sample) -> f64| good_median(res, r, f);
        t.row(vec![
            r.contender.clone(),
            r.conns.to_string(),
            format!("{:.0}", med(|x| x.load.tool_rps)),
            format!("{:.0}", med(|x| x.load.rps())),
            format!("{:.2}", med(|x| x.load.connect_secs)),
            format!("{:.0}", med(|x| x.load.dead_conns as f64)),
        ]);
    }
    s.push_str(&t.markdown());
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
    s.push_str(&results(res).markdown());
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
    for (conns, t) in paired_matrices(res) {
        let _ = writeln!(
            s,
            "\nPaired CPU per request at {conns} connections: row over column, round by round, median over rounds:\n"
        );
        s.push_str(&t.markdown());
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
