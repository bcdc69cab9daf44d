//! The section of an HTTP study (`compare http`, `compare static`):
//! terminal table, markdown, json and charts.

use std::fmt::Write as _;

use super::results::{HttpResults, HttpSummary, LoadTool};
use crate::harness::bars::Bars;
use crate::harness::fmt::{opt, paired, ratio};
use crate::harness::study::Section;
use crate::harness::summary::ServerSample;
use crate::harness::table::{Col, Table};

/// The results: every contender on every workload.
fn results(res: &HttpResults) -> Table {
    let r = &res.reference;
    let mut t = Table::new(vec![
        Col::left("contender"),
        Col::left("workload"),
        Col::right("req/s"),
        Col::left("min–max"),
        Col::right(format!("req/s vs {r}")).short("vs ref"),
        Col::right(format!("req/s vs {r}, paired (range)")).short("vs ref, paired"),
        Col::right("server CPU µs/req (user+sys)").short("cpu us/r (user+sys)"),
        Col::right(format!("CPU vs {r}")).short("cpu/ref"),
        Col::right(format!("CPU vs {r}, paired (range)")).short("cpu/ref, paired"),
        Col::right("CPU µs/MiB of body").short("us/MiB"),
        Col::right("req/s vs best epoll").md_only(),
        Col::right("CPU vs best epoll").md_only(),
        Col::right("syscalls/req").short("sysc/r"),
        Col::right("io_uring_enter/req").short("enter/r"),
        Col::right("p50 µs").md_only(),
        Col::right("p99 µs"),
        Col::right("server CPU used").md_only(),
        Col::right("response bytes").md_only(),
        Col::right("ok samples").short("ok"),
    ]);
    for r in &res.summary {
        t.row(vec![
            r.contender.clone(),
            r.workload.clone(),
            format!("{:.0}", r.rps.median),
            format!("{:.0}–{:.0}", r.rps.min, r.rps.max),
            ratio(r.rps_vs_ref),
            paired(r.rps_vs_ref_paired),
            format!(
                "{:.2} ({:.2}+{:.2})",
                r.cpu_us.median, r.cpu_user_us, r.cpu_sys_us
            ),
            ratio(r.cpu_vs_ref),
            paired(r.cpu_vs_ref_paired),
            opt(r.cpu_us_per_mib, 0),
            ratio(r.rps_vs_best_epoll),
            ratio(r.cpu_vs_best_epoll),
            opt(r.syscalls_per_req, 2),
            opt(r.enters_per_req, 3),
            format!("{:.0}", r.p50_us),
            format!("{:.0}", r.p99_us),
            util(r.cpu_util),
            r.resp_bytes.map_or("-".into(), |b| b.to_string()),
            format!("{}/{}", r.ok_samples, r.samples),
        ]);
    }
    t
}

/// The summary as a fixed-width table.
pub fn table(res: &HttpResults) -> String {
    let mut s = results(res).text();
    let _ = writeln!(
        s,
        "vs ref, cpu/ref: against {}, medians; paired: over rounds, median (range) (req/s higher is better, CPU lower is better)",
        res.reference
    );
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
    let _ = writeln!(s, "## {}\n", res.title);
    let _ = writeln!(
        s,
        "- date: {}\n- command: `{}`\n- kernel: {}\n- CPU: {} ({} cores)\n- servers pinned to CPU {}, load generator to CPU {}\n- workload: {}; {}; {} rounds of {} s, contenders interleaved and rotated\n- load generator: {} ({})\n- nginx: {}\n- wall time: {:.0} s; ringkit {}",
        sys.date,
        sys.command,
        sys.kernel,
        sys.cpu_model,
        sys.cores,
        res.server_cpu,
        res.client_cpu,
        res.about,
        res.workloads.iter().map(|w| w.name.as_str()).collect::<Vec<_>>().join(", "),
        res.rounds,
        res.secs,
        res.tool_version,
        res.tool_reason,
        res.nginx_version.as_deref().unwrap_or("not run"),
        res.wall_secs,
        sys.tool_version
    );
    s.push_str(&crate::harness::summary::servers_markdown(
        &res.contenders,
        &res.server_banners,
        &res.skipped,
    ));
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
                "\nwrk frames every response (a malformed or truncated response is a read error) and counts statuses above 399 and socket errors; any of them fails the sample. It does not compare body lengths with an expected value; `RINGKIT_HTTP_LOAD=builtin` uses the built-in generator, which checks the status, body length and body bytes (CRC-32C) of every response. Server CPU per request: user+system CPU time of the server from /proc, sampled just before wrk starts and 120 ms after it exits, divided by wrk's total requests (wrk's connects are inside that span; wrk has a fixed duration, so no warm-up can be cut off)."
            );
        }
        LoadTool::Builtin => {
            if let Some(b) = res.samples.iter().find_map(|x| x.builtin.as_ref()) {
                let _ = writeln!(s, "\nGenerator runtime: {}.", b.backend);
            }
            let _ = writeln!(
                s,
                "\nThe built-in generator checks the status (200), the body length and the body bytes (CRC-32C of the known body: every response up to 256 KiB, the first and every fourth of each connection above) of every response (a mix checks each path's own); any error fails the sample. Server CPU per request: user+system CPU time from /proc over the measured window (after all connections are up and 200 ms of warm-up), divided by the responses in the window. In close mode latency includes the connect."
            );
        }
    }
    let _ = writeln!(
        s,
        "\n### Results (medians over good samples; ratios in the same run: req/s higher is better, CPU lower is better)\n"
    );
    s.push_str(&results(res).markdown());
    let _ = writeln!(s, "\nServer CPU used: the server's CPU time over the window's wall time (1.00 = one core busy throughout); a row marked *load-limited* used under {:.0}% of its core, so the load generator (or latency) set the pace and its req/s ratio understates the difference: read the CPU per request there. Response bytes: one response to the workload's request, head and body, as a probe read it before the load (nginx is configured with `server_tokens off` and, for `return 200`, no Content-Type; it still adds `Server` and `Connection: keep-alive`).", crate::harness::summary::LOAD_LIMITED_BELOW * 100.0);
    let _ = writeln!(s, "\nSyscall sources: ringkit servers count their own syscalls (`--stats`); the other servers (and ringkit's where a study says so) are counted in a separate run whose throughput is not used, by `perf stat -e raw_syscalls:sys_enter` (or, without perf, `strace -c -f`, which slows the server and so under-counts its `epoll_wait` calls).");
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
        "\n![{t} requests per second]({id}_rps.svg)\n\n![{t} server CPU per request]({id}_cpu.svg)",
        t = res.title,
        id = res.study
    );
    s
}

/// The http study as a section of the compare report.
pub fn section(res: &HttpResults) -> Section {
    let chart = |title: &str, unit: &str, value: fn(&HttpSummary) -> f64| {
        Bars::from_rows(
            title,
            unit,
            &res.summary,
            |r| r.workload.clone(),
            |r| r.contender.clone(),
            value,
        )
        .svg()
    };
    let rps = chart(
        &format!("{}: throughput", res.title),
        "requests/s, higher is better",
        |r| r.rps.median,
    );
    let cpu = chart(
        &format!("{}: server CPU per request", res.title),
        "µs, lower is better",
        |r| r.cpu_us.median,
    );
    let id = &res.study;
    Section {
        study: id.clone(),
        table: table(res),
        markdown: markdown(res),
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![
            (format!("{id}_rps.svg"), rps),
            (format!("{id}_cpu.svg"), cpu),
        ],
        skipped: res.skipped.clone(),
    }
}

/// A server's CPU use, marked when it was not the bottleneck.
fn util(u: f64) -> String {
    if u < crate::harness::summary::LOAD_LIMITED_BELOW {
        format!("{u:.2} *load-limited*")
    } else {
        format!("{u:.2}")
    }
}
