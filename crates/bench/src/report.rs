//! Reports: a terminal table, report.md, results.json and SVG charts.

use std::fmt::Write as _;

use svg::node::element::{Line, Rectangle, Text};
use svg::Document;

use crate::compare::{CompareResults, Summary};
use crate::study::Section;

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
}

/// The summary as a fixed-width table.
pub fn table(res: &CompareResults) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<20} {:>6} {:>10} {:>21} {:>9} {:>13} {:>9} {:>8} {:>8} {:>8} {:>5}",
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
            "{:<20} {:>6} {:>10.0} {:>21} {:>9.2} {:>13} {:>9} {:>8} {:>8.0} {:>8} {:>5}",
            r.contender,
            r.conns,
            r.rps.median,
            format!("({:.0}-{:.0})", r.rps.min, r.rps.max),
            r.cpu_us.median,
            format!("({:.2}+{:.2})", r.cpu_user_us, r.cpu_sys_us),
            opt(r.syscalls_per_req, 2),
            opt(r.enters_per_req, 3),
            r.p99_us,
            r.cpu_vs_best_epoll
                .map_or("-".into(), |v| format!("{v:.2}x")),
            format!("{}/{}", r.ok_samples, r.samples),
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
        "- date: {}\n- command: `{}`\n- kernel: {}\n- CPU: {} ({} cores)\n- server pinned to CPU {}, load generator to CPU {}\n- workload: {}-byte messages, one in flight per connection; connections {:?}; {} rounds of {} s, contenders interleaved and rotated\n- wall time: {:.0} s; ringkit {}",
        sys.date, sys.command, sys.kernel, sys.cpu_model, sys.cores, c.server_cpu, c.client_cpu,
        c.len, c.conns, c.rounds, c.secs, res.wall_secs, sys.tool_version
    );
    let _ = writeln!(s, "\n### Servers\n");
    for ct in &res.contenders {
        let banner = res
            .server_banners
            .iter()
            .find(|(n, _)| *n == ct.name)
            .map_or("", |(_, b)| b.as_str());
        let _ = writeln!(
            s,
            "- **{}** ({:?}): `{}` — {}",
            ct.name,
            ct.family,
            ct.cmd.join(" "),
            banner
        );
    }
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "- skipped **{n}**: {why}");
    }
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
            r.cpu_vs_best_epoll.map_or("-".into(), |v| format!("{v:.2}x")),
            r.rps_vs_best_epoll.map_or("-".into(), |v| format!("{v:.2}x")),
            opt(r.syscalls_per_req, 2), opt(r.enters_per_req, 3), r.p99_us, r.ok_samples, r.samples
        );
    }
    let _ = writeln!(s, "\nSyscall sources: ringkit servers count their own syscalls; peers are counted by `strace -c -f` in a separate run whose throughput is not used.\n");
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

/// A grouped bar chart: one group per connection count, one bar per contender.
fn bar_chart(
    title: &str,
    unit: &str,
    rows: &[Summary],
    value: impl Fn(&Summary) -> f64,
) -> Document {
    let mut conns: Vec<usize> = rows.iter().map(|r| r.conns).collect();
    conns.dedup();
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        if !names.contains(&r.contender) {
            names.push(r.contender.clone());
        }
    }
    let (w, h, left, top, bottom) = (760.0, 380.0, 70.0, 40.0, 70.0);
    let max = rows.iter().map(&value).fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let plot_h = h - top - bottom;
    let group_w = (w - left - 20.0) / conns.len().max(1) as f64;
    let bar_w = (group_w - 20.0) / names.len().max(1) as f64;
    let colors = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    ];
    let mut doc = Document::new()
        .set("viewBox", (0, 0, w as i64, h as i64))
        .set("width", w)
        .set("height", h)
        .set("font-family", "sans-serif")
        .set("font-size", 11);
    doc = doc.add(
        Rectangle::new()
            .set("width", w)
            .set("height", h)
            .set("fill", "white"),
    );
    doc = doc.add(
        Text::new(format!("{title} ({unit})"))
            .set("x", left)
            .set("y", 20)
            .set("font-size", 14),
    );
    doc = doc.add(
        Line::new()
            .set("x1", left)
            .set("y1", top)
            .set("x2", left)
            .set("y2", h - bottom)
            .set("stroke", "black"),
    );
    doc = doc.add(
        Line::new()
            .set("x1", left)
            .set("y1", h - bottom)
            .set("x2", w - 10.0)
            .set("y2", h - bottom)
            .set("stroke", "black"),
    );
    for i in 0..=4 {
        let v = max * i as f64 / 4.0;
        let y = h - bottom - plot_h * i as f64 / 4.0;
        doc = doc.add(Text::new(format!("{v:.1}")).set("x", 5).set("y", y + 4.0));
        doc = doc.add(
            Line::new()
                .set("x1", left)
                .set("y1", y)
                .set("x2", w - 10.0)
                .set("y2", y)
                .set("stroke", "#ddd"),
        );
    }
    for (gi, c) in conns.iter().enumerate() {
        let gx = left + 10.0 + gi as f64 * group_w;
        doc = doc.add(
            Text::new(format!("{c} connections"))
                .set("x", gx + group_w / 2.0 - 40.0)
                .set("y", h - bottom + 16.0),
        );
        for (ni, n) in names.iter().enumerate() {
            if let Some(r) = rows.iter().find(|r| r.conns == *c && &r.contender == n) {
                let v = value(r);
                let bh = plot_h * v / max;
                let x = gx + ni as f64 * bar_w;
                doc = doc.add(
                    Rectangle::new()
                        .set("x", x)
                        .set("y", h - bottom - bh)
                        .set("width", (bar_w - 2.0).max(1.0))
                        .set("height", bh)
                        .set("fill", colors[ni % colors.len()]),
                );
            }
        }
    }
    for (ni, n) in names.iter().enumerate() {
        let x = left + (ni as f64) * 105.0;
        doc = doc.add(
            Rectangle::new()
                .set("x", x)
                .set("y", h - 30.0)
                .set("width", 10)
                .set("height", 10)
                .set("fill", colors[ni % colors.len()]),
        );
        doc = doc.add(Text::new(n.clone()).set("x", x + 14.0).set("y", h - 21.0));
    }
    doc
}

/// The echo study as a section of the compare report.
pub fn section(res: &CompareResults) -> Section {
    let rps = bar_chart("Echo throughput", "requests/s", &res.summary, |r| {
        r.rps.median
    });
    let cpu = bar_chart(
        "Echo: server CPU per request",
        "µs, lower is better",
        &res.summary,
        |r| r.cpu_us.median,
    );
    Section {
        study: "echo".into(),
        table: table(res),
        markdown: markdown(res),
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![
            ("echo_rps.svg".into(), rps.to_string()),
            ("echo_cpu.svg".into(), cpu.to_string()),
        ],
        skipped: res.skipped.clone(),
    }
}
