//! Reports of the file study: the terminal table, the report.md section,
//! the target verdicts and the charts.

use std::fmt::Write as _;

use super::job::{Engine, Rw};
use super::spec::{FileResults, FileRow, FileSample};
use crate::harness::bars::Bars;
use crate::harness::fmt::{opt, ratio};
use crate::harness::study::Section;
use crate::harness::table::{Col, Table};

/// The targets: 4 KiB randread qd32 O_DIRECT (each I/O submitted at once,
/// fio's default), uring vs fio io_uring with the same options: IOPS >=
/// 0.97x and CPU per I/O <= 1.0x. Batched jobs show in the table only.
pub fn targets(res: &FileResults) -> Vec<String> {
    let mut out = Vec::new();
    for r in res.rows.iter().filter(|r| {
        r.job.rw == Rw::RandRead
            && r.job.bs == 4096
            && r.job.qd == 32
            && r.job.direct
            && r.job.batch == 1
            && matches!(r.engine, Engine::Uring { .. })
    }) {
        match (r.iops_vs_fio, r.cpu_vs_fio, &r.fio_peer) {
            (Some(i), c, Some(p)) => out.push(format!(
                "{} vs {p}: IOPS {i:.3}x (target >= 0.97x: {}), CPU/IO {} (target <= 1.00x: {})",
                r.name,
                if i >= 0.97 { "MET" } else { "NOT MET" },
                ratio(c),
                match c {
                    Some(c) if c <= 1.0 => "MET",
                    Some(_) => "NOT MET",
                    None => "not evaluated",
                }
            )),
            _ => out.push(format!(
                "{}: not evaluated (no fio row with the same options in this run)",
                r.name
            )),
        }
    }
    out
}

/// The results: every engine on every job.
fn results(res: &FileResults) -> Table {
    let mut t = Table::new(vec![
        Col::left("job"),
        Col::left("engine"),
        Col::right("effective qd").short("qd"),
        Col::right("IOPS"),
        Col::left("min–max"),
        Col::right("MiB/s"),
        Col::right("lat avg µs"),
        Col::right("p50 µs"),
        Col::right("p99 µs"),
        Col::right("CPU µs/IO (user+sys)").short("cpu us/IO (user+sys)"),
        Col::right("whole-process CPU µs/IO").md_only(),
        Col::right("io_uring_enter/IO").short("enter"),
        Col::right("IOPS vs fio").short("vs fio"),
        Col::right("CPU vs fio").short("cpu/fio"),
        Col::right("sys vs fio").short("sys/fio"),
        Col::left("fio peer").md_only(),
        Col::right("ok"),
    ]);
    for r in &res.rows {
        t.row(vec![
            r.job.label(),
            r.name.clone(),
            r.effective_qd.to_string(),
            format!("{:.0}", r.iops.median),
            format!("{:.0}–{:.0}", r.iops.min, r.iops.max),
            format!("{:.1}", r.mib_s),
            format!("{:.1}", r.lat_avg_us),
            format!("{:.1}", r.lat_p50_us),
            format!("{:.1}", r.lat_p99_us),
            format!(
                "{:.2} ({:.2}+{:.2})",
                r.cpu_us_per_io, r.cpu_user_us, r.cpu_sys_us
            ),
            format!("{:.2}", r.whole_cpu_us),
            opt(r.enters_per_io, 3),
            ratio(r.iops_vs_fio),
            ratio(r.cpu_vs_fio),
            ratio(r.sys_vs_fio),
            r.fio_peer.as_deref().unwrap_or("-").to_string(),
            format!("{}/{}", r.ok_samples, r.samples),
        ]);
    }
    t
}

/// The rows as a fixed-width terminal table.
pub fn table(res: &FileResults) -> String {
    let mut s = results(res).text();
    for t in targets(res) {
        let _ = writeln!(s, "target: {t}");
    }
    let _ = writeln!(
        s,
        "IOPOLL: {}",
        match &res.target.iopoll {
            Ok(()) => "supported".to_string(),
            Err(e) => format!("not supported: {e}"),
        }
    );
    for w in &res.warnings {
        let _ = writeln!(s, "{w}");
    }
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "skipped {n}: {why}");
    }
    s
}

/// The section of report.md.
pub fn markdown(res: &FileResults) -> String {
    let c = &res.config;
    let sys = &res.system;
    let t = &res.target;
    let mut s = String::new();
    let _ = writeln!(s, "## File I/O\n");
    let _ = writeln!(
        s,
        "- kernel {}, CPU {} ({} cores); submitter and fio pinned to CPU {}, SQPOLL pollers on CPU {}\n\
         - test file: {} MiB of pseudo-random bytes at `{}` on {} ({}), created in {:.1} s, dropped from the page cache, removed afterwards\n\
         - {} rounds of {} s per sample, engines interleaved and rotated; wall {:.0} s\n\
         - IOPOLL: {}\n\
         - fio: {}\n\
         - latency: submission to reaped completion (fio: `lat_ns`); CPU per I/O: what the I/O cost, over the I/O: ringkit's engines, their process's user+system time over the window (`getrusage`, SQPOLL thread included); fio (run with `--thread`), its job thread over its I/O loop (fio's own usr_cpu/sys_cpu) plus its ring's kernel threads (`iou-sqp-*`, `iou-wrk-*`, read from `/proc` every 5 ms). fio's whole process over its life (`wait4`: start-up, clock calibration and exit included) is the *whole-process* column, not compared. With SQPOLL, fio's job thread spins on the completion ring while ringkit's engine sleeps in `io_uring_enter`, unless it is the `-spin` engine: *sys vs fio* compares kernel time only (poller plus submissions)\n\
         - command: `{}`; ringkit {}\n",
        sys.kernel, sys.cpu_model, sys.cores, c.cpu, c.sq_cpu, c.size >> 20, t.path, t.device, t.fs,
        t.fill_secs, c.rounds, c.secs, res.wall_secs,
        match &t.iopoll { Ok(()) => "supported on this file's device".to_string(), Err(e) => format!("not supported: {e}") },
        match &res.fio { Ok(v) => v.clone(), Err(e) => format!("rows skipped: {e}") },
        sys.command, sys.tool_version
    );
    s.push_str(&results(res).markdown());
    let _ = writeln!(s, "\n### Targets\n");
    for t in targets(res) {
        let _ = writeln!(s, "- {t}");
    }
    let _ = writeln!(
        s,
        "\nReference (measured earlier on this kind of VM, not this run): fio io_uring qd32 62k IOPS \
         (65k with fixed buffers + registered files), libaio 66k, psync qd1 14k; SQPOLL sharing the \
         submitter's CPU collapsed to 4.6k IOPS, which is why ringkit refuses that setup.\n"
    );
    for w in &res.warnings {
        let _ = writeln!(s, "- **{w}**");
    }
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "- skipped **{n}**: {why}");
    }
    let failed: Vec<&FileSample> = res.samples.iter().filter(|x| x.error.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "\n### Failed samples\n");
        for f in failed {
            let _ = writeln!(
                s,
                "- {} / {} round {}: {}",
                f.job,
                f.engine,
                f.round,
                f.error.as_deref().unwrap_or("")
            );
        }
    }
    let _ = writeln!(
        s,
        "\n![IOPS](file_iops.svg)\n\n![CPU per I/O](file_cpu.svg)"
    );
    s
}

fn chart(res: &FileResults, title: &str, unit: &str, f: impl Fn(&FileRow) -> f64) -> Bars {
    let mut jobs: Vec<String> = Vec::new();
    let mut engines: Vec<String> = Vec::new();
    for r in &res.rows {
        if !jobs.contains(&r.job.label()) {
            jobs.push(r.job.label());
        }
        if !engines.contains(&r.name) {
            engines.push(r.name.clone());
        }
    }
    Bars {
        title: title.into(),
        unit: unit.into(),
        values: jobs
            .iter()
            .map(|j| {
                engines
                    .iter()
                    .map(|e| {
                        res.rows
                            .iter()
                            .find(|r| &r.job.label() == j && &r.name == e && r.ok_samples > 0)
                            .map(&f)
                    })
                    .collect()
            })
            .collect(),
        groups: jobs,
        series: engines,
    }
}

/// The study as a section of the compare report.
pub fn section(res: &FileResults) -> Section {
    Section {
        study: "file".into(),
        table: table(res),
        markdown: markdown(res),
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![
            (
                "file_iops.svg".into(),
                chart(res, "File I/O", "IOPS, higher is better", |r| r.iops.median).svg(),
            ),
            (
                "file_cpu.svg".into(),
                chart(res, "File I/O: CPU per I/O", "µs, lower is better", |r| {
                    r.cpu_us_per_io
                })
                .svg(),
            ),
        ],
        skipped: res.skipped.clone(),
    }
}
