//! The http study's section: terminal table, markdown, json and charts.

use std::fmt::Write as _;

use svg::node::element::{Line, Rectangle, Text};
use svg::Document;

use super::study::{HttpResults, HttpSummary, LoadTool};
use crate::study::Section;

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
}

fn ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}x"))
}

/// The summary as a fixed-width table.
pub fn table(res: &HttpResults) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<14} {:<18} {:>9} {:>19} {:>8} {:>13} {:>7} {:>7} {:>8} {:>8} {:>8} {:>5}",
        "contender",
        "workload",
        "req/s",
        "(min-max)",
        "cpu us/r",
        "(user+sys)",
        "sysc/r",
        "enter/r",
        "p99 us",
        "vs nginx",
        "cpu/ngx",
        "ok"
    );
    for r in &res.summary {
        let _ = writeln!(
            s,
            "{:<14} {:<18} {:>9.0} {:>19} {:>8.2} {:>13} {:>7} {:>7} {:>8.0} {:>8} {:>8} {:>5}",
            r.contender,
            r.workload,
            r.rps.median,
            format!("({:.0}-{:.0})", r.rps.min, r.rps.max),
            r.cpu_us.median,
            format!("({:.2}+{:.2})", r.cpu_user_us, r.cpu_sys_us),
            opt(r.syscalls_per_req, 2),
            opt(r.enters_per_req, 3),
            r.p99_us,
            ratio(r.rps_vs_nginx),
            ratio(r.cpu_vs_nginx),
            format!("{}/{}", r.ok_samples, r.samples),
        );
    }
    let _ = writeln!(s, "load: {} ({})", res.tool_version, res.tool_reason);
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "skipped {n}: {why}");
    }
    s
}

/// The markdown of the section.
pub fn markdown(res: &HttpResults) -> String {
    let mut s = String::new();
    let sys = &res.system;
    let _ = writeln!(s, "## HTTP\n");
    let _ = writeln!(
        s,
        "- date: {}\n- command: `{}`\n- kernel: {}\n- CPU: {} ({} cores)\n- servers pinned to CPU {}, load generator to CPU {}\n- workload: `GET /` answered `200` with an empty body; {}; {} rounds of {} s, contenders interleaved and rotated\n- load generator: {} ({})\n- nginx: {}\n- wall time: {:.0} s; ringkit {}",
        sys.date,
        sys.command,
        sys.kernel,
        sys.cpu_model,
        sys.cores,
        res.server_cpu,
        res.client_cpu,
        res.workloads.iter().map(|w| w.name.as_str()).collect::<Vec<_>>().join(", "),
        res.rounds,
        res.secs,
        res.tool_version,
        res.tool_reason,
        res.nginx_version.as_deref().unwrap_or("not run"),
        res.wall_secs,
        sys.tool_version
    );
    let _ = writeln!(s, "\n### Servers\n");
    for c in &res.contenders {
        let banner = res
            .server_banners
            .iter()
            .find(|(n, _)| *n == c.name)
            .map_or("", |(_, b)| b.as_str());
        let _ = writeln!(
            s,
            "- **{}** ({:?}): `{}` — {}",
            c.name,
            c.family,
            c.cmd.join(" "),
            banner
        );
    }
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "- skipped **{n}**: {why}");
    }
    if let Some(conf) = &res.nginx_conf {
        let _ = writeln!(
            s,
            "\nnginx.conf (PORT is each sample's port):\n\n```nginx\n{conf}```"
        );
    }
    let _ = writeln!(s, "\n### Load\n");
    for (w, cmd) in &res.load_commands {
        let _ = writeln!(s, "- {w}: `{cmd}`");
    }
    match res.tool {
        LoadTool::Wrk => {
            let _ = writeln!(
                s,
                "\nwrk frames every response (a malformed or truncated response is a read error) and counts statuses above 399 and socket errors; any of them fails the sample. It does not compare body lengths with an expected value; `RINGKIT_HTTP_LOAD=builtin` uses the built-in generator, which checks the status and body length of every response. Server CPU per request: user+system CPU time of the server from /proc, sampled just before wrk starts and 120 ms after it exits, divided by wrk's total requests (wrk's connects are inside that span; wrk has a fixed duration, so no warm-up can be cut off)."
            );
        }
        LoadTool::Builtin => {
            if let Some(b) = res.samples.iter().find_map(|x| x.builtin.as_ref()) {
                let _ = writeln!(s, "\nGenerator runtime: {}.", b.backend);
            }
            let _ = writeln!(
                s,
                "\nThe built-in generator checks the status (200) and body length (0) of every response; any error fails the sample. Server CPU per request: user+system CPU time from /proc over the measured window (after all connections are up and 200 ms of warm-up), divided by the responses in the window. In close mode latency includes the connect."
            );
        }
    }
    let _ = writeln!(
        s,
        "\n### Results (medians over good samples; ratios in the same run)\n"
    );
    let _ = writeln!(s, "| contender | workload | req/s | min–max | req/s vs nginx | server CPU µs/req (user+sys) | CPU vs nginx | req/s vs best epoll | CPU vs best epoll | syscalls/req | io_uring_enter/req | p50 µs | p99 µs | ok samples |");
    let _ = writeln!(
        s,
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &res.summary {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0}–{:.0} | {} | {:.2} ({:.2}+{:.2}) | {} | {} | {} | {} | {} | {:.0} | {:.0} | {}/{} |",
            r.contender,
            r.workload,
            r.rps.median,
            r.rps.min,
            r.rps.max,
            ratio(r.rps_vs_nginx),
            r.cpu_us.median,
            r.cpu_user_us,
            r.cpu_sys_us,
            ratio(r.cpu_vs_nginx),
            ratio(r.rps_vs_best_epoll),
            ratio(r.cpu_vs_best_epoll),
            opt(r.syscalls_per_req, 2),
            opt(r.enters_per_req, 3),
            r.p50_us,
            r.p99_us,
            r.ok_samples,
            r.samples
        );
    }
    let _ = writeln!(s, "\nSyscall sources: ringkit servers count their own syscalls (`--stats`); nginx and hyper are counted by `strace -c -f -p PID` in a separate run whose throughput is not used.");
    for r in res
        .summary
        .iter()
        .filter(|r| r.syscalls_per_req.is_none() && !r.syscalls_source.is_empty())
    {
        let _ = writeln!(
            s,
            "- {} {}: syscalls {}",
            r.contender, r.workload, r.syscalls_source
        );
    }
    let tw: Vec<u64> = res
        .samples
        .iter()
        .filter_map(|x| x.time_wait_at_start)
        .collect();
    if res.workloads.iter().any(|w| w.close) && !tw.is_empty() {
        let _ = writeln!(
            s,
            "\nClose-mode runs leave sockets in TIME_WAIT (60 s); at the start of the samples there were {}–{} (per sample in results.json). Each sample uses a fresh server port, and rotation spreads any effect over the contenders.",
            tw.iter().min().unwrap_or(&0),
            tw.iter().max().unwrap_or(&0)
        );
    }
    let failed: Vec<_> = res.samples.iter().filter(|x| !x.ok()).collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "\n### Failed samples\n");
        for f in failed {
            let detail = if let Some(e) = &f.error {
                e.clone()
            } else if let Some(w) = &f.wrk {
                format!(
                    "wrk: {} requests, socket errors connect {} read {} write {} timeout {}, non-2xx/3xx {}",
                    w.requests, w.connect_errors, w.read_errors, w.write_errors, w.timeouts, w.non_2xx_3xx
                )
            } else if let Some(b) = &f.builtin {
                format!(
                    "{} responses, {} errors (connect {}, read {}, write {}, timeout {}, bad status {}, wrong body {}, malformed {}){}",
                    b.responses,
                    b.errors(),
                    b.connect_errors,
                    b.read_errors,
                    b.write_errors,
                    b.timeouts,
                    b.bad_status,
                    b.bad_body,
                    b.malformed,
                    b.first_error
                        .as_deref()
                        .map(|e| format!("; first: {e}"))
                        .unwrap_or_default()
                )
            } else {
                "no result".into()
            };
            let _ = writeln!(
                s,
                "- {} {} round {}: {}",
                f.contender, f.workload, f.round, detail
            );
        }
    }
    let _ = writeln!(
        s,
        "\n![HTTP requests per second](http_rps.svg)\n\n![HTTP server CPU per request](http_cpu.svg)"
    );
    s
}

/// A grouped bar chart: one group per workload, one bar per contender.
fn bar_chart(
    title: &str,
    unit: &str,
    rows: &[HttpSummary],
    value: impl Fn(&HttpSummary) -> f64,
) -> Document {
    let mut groups: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        if !groups.contains(&r.workload) {
            groups.push(r.workload.clone());
        }
        if !names.contains(&r.contender) {
            names.push(r.contender.clone());
        }
    }
    let (w, h, left, top, bottom) = (760.0, 380.0, 70.0, 40.0, 70.0);
    let max = rows.iter().map(&value).fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let plot_h = h - top - bottom;
    let group_w = (w - left - 20.0) / groups.len().max(1) as f64;
    let bar_w = (group_w - 20.0) / names.len().max(1) as f64;
    let colors = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    ];
    let line = |x1: f64, y1: f64, x2: f64, y2: f64, color: &str| {
        Line::new()
            .set("x1", x1)
            .set("y1", y1)
            .set("x2", x2)
            .set("y2", y2)
            .set("stroke", color)
    };
    let mut doc = Document::new()
        .set("viewBox", (0, 0, w as i64, h as i64))
        .set("width", w)
        .set("height", h)
        .set("font-family", "sans-serif")
        .set("font-size", 11)
        .add(
            Rectangle::new()
                .set("width", w)
                .set("height", h)
                .set("fill", "white"),
        )
        .add(
            Text::new(format!("{title} ({unit})"))
                .set("x", left)
                .set("y", 20)
                .set("font-size", 14),
        )
        .add(line(left, top, left, h - bottom, "black"))
        .add(line(left, h - bottom, w - 10.0, h - bottom, "black"));
    for i in 0..=4 {
        let v = max * i as f64 / 4.0;
        let y = h - bottom - plot_h * i as f64 / 4.0;
        let label = if max >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        };
        doc = doc
            .add(Text::new(label).set("x", 5).set("y", y + 4.0))
            .add(line(left, y, w - 10.0, y, "#ddd"));
    }
    for (gi, g) in groups.iter().enumerate() {
        let gx = left + 10.0 + gi as f64 * group_w;
        doc = doc.add(
            Text::new(g.clone())
                .set("x", gx + group_w / 2.0 - 45.0)
                .set("y", h - bottom + 16.0),
        );
        for (ni, n) in names.iter().enumerate() {
            if let Some(r) = rows
                .iter()
                .find(|r| r.workload == *g && &r.contender == n && r.ok_samples > 0)
            {
                let bh = plot_h * value(r) / max;
                doc = doc.add(
                    Rectangle::new()
                        .set("x", gx + ni as f64 * bar_w)
                        .set("y", h - bottom - bh)
                        .set("width", (bar_w - 2.0).max(1.0))
                        .set("height", bh)
                        .set("fill", colors[ni % colors.len()]),
                );
            }
        }
    }
    for (ni, n) in names.iter().enumerate() {
        let x = left + (ni as f64) * 120.0;
        doc = doc
            .add(
                Rectangle::new()
                    .set("x", x)
                    .set("y", h - 30.0)
                    .set("width", 10)
                    .set("height", 10)
                    .set("fill", colors[ni % colors.len()]),
            )
            .add(Text::new(n.clone()).set("x", x + 14.0).set("y", h - 21.0));
    }
    doc
}

/// The http study as a section of the compare report.
pub fn section(res: &HttpResults) -> Section {
    let rps = bar_chart("HTTP throughput", "requests/s", &res.summary, |r| {
        r.rps.median
    });
    let cpu = bar_chart(
        "HTTP: server CPU per request",
        "µs, lower is better",
        &res.summary,
        |r| r.cpu_us.median,
    );
    Section {
        study: "http".into(),
        table: table(res),
        markdown: markdown(res),
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![
            ("http_rps.svg".into(), rps.to_string()),
            ("http_cpu.svg".into(), cpu.to_string()),
        ],
        skipped: res.skipped.clone(),
    }
}
