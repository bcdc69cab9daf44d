//! `ringkit compare log`: commits per second and commit latency at 1, 16
//! and 64 concurrent writers, 4 KiB records, buffered and `O_DIRECT`:
//! ringkit-log on io_uring and on epoll, the same design on tokio, on std
//! threads and (`O_DIRECT` only) on glommio's `DmaFile` (each a `ringkit
//! log bench` child pinned to the server CPU, its whole CPU counted; every
//! one makes a batch durable with an `RWF_DSYNC` write, and
//! `ringkit-uring-linked` with a write linked to an `fdatasync`), and fio
//! writing the same batch size with an `fdatasync` after every write
//! (`--rw=write --fdatasync=1`, io_uring and psync engines) and with
//! `O_DSYNC` writes (`--sync=dsync`, io_uring), on a file zero-filled
//! first: the device's limit for synced writes. Rounds interleaved and
//! rotated; ratios paired per round.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::LogBenchResult;
use crate::harness::bars::Bars;
use crate::harness::fmt::cpu;
use crate::harness::latency::schedule;
use crate::harness::stat::{nan_from_null, stat, Stat};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::CpuTimes;
use crate::harness::table::{Col, Table};

/// The log contenders (`ringkit log bench --engine`, `--backend`, and
/// whether `--linked-sync`).
const LOGS: [(&str, &str, &str, bool); 6] = [
    ("ringkit-uring", "ringkit", "uring", false),
    ("ringkit-uring-linked", "ringkit", "uring", true),
    ("ringkit-epoll", "ringkit", "epoll", false),
    ("tokio", "tokio", "auto", false),
    ("std", "std", "auto", false),
    ("glommio", "glommio", "auto", false),
];

/// Whether contender `name` runs in this mode (glommio's `DmaFile` is
/// `O_DIRECT` only).
fn runs(name: &str, direct: bool) -> bool {
    direct || name != "glommio"
}

/// fio's runs: (name after `fio-`, engine, `--sync=dsync` rather than
/// `--fdatasync=1`).
const FIOS: [(&str, &str, bool); 3] = [
    ("io_uring", "io_uring", false),
    ("psync", "psync", false),
    ("io_uring-dsync", "io_uring", true),
];

/// Record size.
const RECORD: usize = 4096;

/// One sample.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct Sample {
    contender: String,
    direct: bool,
    writers: usize,
    round: usize,
    #[serde(deserialize_with = "nan_from_null")]
    commits_per_s: f64,
    #[serde(deserialize_with = "nan_from_null")]
    mb_per_s: f64,
    #[serde(deserialize_with = "nan_from_null")]
    syncs_per_s: f64,
    #[serde(deserialize_with = "nan_from_null")]
    batch_bytes: f64,
    #[serde(deserialize_with = "nan_from_null")]
    p50_us: f64,
    #[serde(deserialize_with = "nan_from_null")]
    p99_us: f64,
    #[serde(deserialize_with = "nan_from_null")]
    p999_us: f64,
    #[serde(deserialize_with = "nan_from_null")]
    cpu_us_per_commit: f64,
    error: Option<String>,
}

impl Sample {
    fn failed(contender: &str, direct: bool, writers: usize, round: usize, e: String) -> Sample {
        Sample {
            contender: contender.into(),
            direct,
            writers,
            round,
            commits_per_s: f64::NAN,
            mb_per_s: f64::NAN,
            syncs_per_s: f64::NAN,
            batch_bytes: f64::NAN,
            p50_us: f64::NAN,
            p99_us: f64::NAN,
            p999_us: f64::NAN,
            cpu_us_per_commit: f64::NAN,
            error: Some(e),
        }
    }
}

struct Plan {
    writers: Vec<usize>,
    rounds: usize,
    secs: f64,
    file_size: u64,
}

fn plan(opts: &StudyOpts) -> Plan {
    Plan {
        writers: if opts.quick {
            vec![1, 64]
        } else {
            vec![1, 16, 64]
        },
        rounds: opts.rounds.unwrap_or(if opts.quick { 2 } else { 5 }),
        secs: opts.secs.unwrap_or(if opts.quick { 1.5 } else { 3.0 }),
        file_size: 256 << 20,
    }
}

/// One `ringkit log bench` child.
fn run_log(
    opts: &StudyOpts,
    dir: &Path,
    (engine, backend, linked): (&str, &str, bool),
    writers: usize,
    direct: bool,
    p: &Plan,
) -> io::Result<LogBenchResult> {
    let mut cmd = Command::new(&opts.ringkit_bin);
    cmd.args(["log", "bench", "--json", "--dir"])
        .arg(dir)
        .args(["--engine", engine, "--backend", backend])
        .args(["--writers", &writers.to_string()])
        .args(["--record", &RECORD.to_string()])
        .args(["--secs", &p.secs.to_string()])
        .args(["--segment-mib", &(p.file_size >> 20).to_string()])
        .args(["--cpu", &opts.server_cpu.to_string()]);
    if direct {
        cmd.arg("--direct");
    }
    if linked {
        cmd.arg("--linked-sync");
    }
    let out = cmd.output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ringkit log bench failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let line = text
        .lines()
        .rfind(|l| l.starts_with('{'))
        .ok_or_else(|| io::Error::other("no JSON line from ringkit log bench"))?;
    serde_json::from_str(line).map_err(io::Error::other)
}

/// A zero-filled file of `size` bytes at `path` (what fio writes over).
fn zero_file(path: &Path, size: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::create(path)?;
    let zeros = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < size {
        let n = (size - off).min(zeros.len() as u64) as usize;
        f.write_all_at(&zeros[..n], off)?;
        off += n as u64;
    }
    f.sync_all()
}

/// fio writing `bs` bytes then `fdatasync` (or each write `O_DSYNC`, with
/// `dsync`), over and over, for the window.
fn run_fio(
    opts: &StudyOpts,
    file: &Path,
    (engine, dsync): (&str, bool),
    bs: u64,
    direct: bool,
    p: &Plan,
) -> io::Result<(f64, f64, f64, f64, f64, f64)> {
    let mut cmd = Command::new("fio");
    let sync = if dsync {
        "--sync=dsync"
    } else {
        "--fdatasync=1"
    };
    cmd.args(["--name=log", "--rw=write", sync, "--iodepth=1"])
        .arg(format!("--filename={}", file.display()))
        .arg(format!("--size={}", p.file_size))
        .arg(format!("--bs={bs}"))
        .arg(format!("--ioengine={engine}"))
        .arg(format!("--direct={}", u8::from(direct)))
        .arg(format!("--runtime={}", p.secs))
        .args(["--time_based", "--output-format=json"])
        .arg(format!("--cpus_allowed={}", opts.server_cpu));
    let (out, cpu) = CpuTimes::of_command(&mut cmd)?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "fio failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(io::Error::other)?;
    let job = &v["jobs"][0];
    let w = &job["write"];
    let secs = w["runtime"].as_f64().unwrap_or(p.secs * 1e3) / 1e3;
    let ios = w["total_ios"].as_f64().unwrap_or(0.0);
    // The sync's latency; a `--sync=dsync` write's own (fio gives a
    // write's percentiles as completion latency, a sync's as latency).
    let (sync, lat) = if dsync {
        (w, "clat_ns")
    } else {
        (&job["sync"], "lat_ns")
    };
    let pct =
        |x: &serde_json::Value, q: &str| x[lat]["percentile"][q].as_f64().unwrap_or(f64::NAN) / 1e3;
    // (syncs/s, MB/s, sync p50 µs, sync p99 µs, sync p99.9 µs, CPU µs per sync)
    Ok((
        ios / secs.max(1e-9),
        w["bw_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        pct(sync, "50.000000"),
        pct(sync, "99.000000"),
        pct(sync, "99.900000"),
        (cpu.user + cpu.system) * 1e6 / ios.max(1.0),
    ))
}

/// Run the study for `ringkit compare log`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let p = plan(opts);
    let made = crate::harness::made_dir::MadeDir::new(
        std::env::temp_dir().join(format!("ringkit-log-study-{}", std::process::id())),
    )?;
    let base: PathBuf = made.path().to_path_buf();
    let fio = Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut names: Vec<String> = LOGS.iter().map(|l| l.0.to_string()).collect();
    if fio {
        names.extend(FIOS.iter().map(|e| format!("fio-{}", e.0)));
    }
    let mut samples = Vec::new();
    for direct in [false, true] {
        for &writers in &p.writers {
            let mode = if direct { "O_DIRECT" } else { "buffered" };
            // fio writes what one batch of ringkit-log writes: calibrate.
            progress(&format!(
                "{mode}, {writers} writers: calibrating fio's block size"
            ));
            let cal = run_log(
                opts,
                &base.join("cal"),
                ("ringkit", "auto", false),
                writers,
                direct,
                &p,
            )?;
            let bs = ((cal.batch_bytes() as u64).div_ceil(4096) * 4096).max(4096);
            for (round, name) in schedule(&names, p.rounds) {
                if !runs(name, direct) {
                    continue;
                }
                progress(&format!(
                    "{mode}, {writers} writers, round {}/{}: {name}",
                    round + 1,
                    p.rounds
                ));
                let dir = base.join(name);
                let s = if let Some(e) = name.strip_prefix("fio-") {
                    let file = base.join("fio.dat");
                    let (_, engine, dsync) = *FIOS.iter().find(|f| f.0 == e).expect("a fio run");
                    zero_file(&file, p.file_size)
                        .and_then(|()| run_fio(opts, &file, (engine, dsync), bs, direct, &p))
                        .map(|(rate, mb, p50, p99, p999, cpu)| Sample {
                            contender: name.clone(),
                            direct,
                            writers,
                            round,
                            commits_per_s: rate,
                            mb_per_s: mb,
                            syncs_per_s: rate,
                            batch_bytes: bs as f64,
                            p50_us: p50,
                            p99_us: p99,
                            p999_us: p999,
                            cpu_us_per_commit: cpu,
                            error: None,
                        })
                } else {
                    let (_, engine, backend, linked) =
                        *LOGS.iter().find(|l| l.0 == name).expect("a log run");
                    run_log(opts, &dir, (engine, backend, linked), writers, direct, &p).map(|r| {
                        Sample {
                            contender: name.clone(),
                            direct,
                            writers,
                            round,
                            commits_per_s: r.commits_per_s(),
                            mb_per_s: r.mb_per_s(),
                            syncs_per_s: r.batches as f64 / r.secs,
                            batch_bytes: r.batch_bytes(),
                            p50_us: r.p50_us,
                            p99_us: r.p99_us,
                            p999_us: r.p999_us,
                            cpu_us_per_commit: r.cpu_us_per_commit(),
                            error: None,
                        }
                    })
                };
                samples.push(s.unwrap_or_else(|e| {
                    Sample::failed(name, direct, writers, round, e.to_string())
                }));
            }
        }
    }
    drop(made);
    let summary = summarize(&names, &samples, &p);
    Ok(section(&LogResults {
        record: RECORD,
        rounds: p.rounds,
        secs: p.secs,
        segment_bytes: p.file_size,
        samples,
        summary,
        server_cpu: Some(opts.server_cpu),
    }))
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct Row {
    mode: String,
    writers: usize,
    contender: String,
    commits_per_s: Stat,
    mb_per_s: Stat,
    syncs_per_s: Stat,
    batch_bytes: Stat,
    p50_us: Stat,
    p99_us: Stat,
    p999_us: Stat,
    cpu_us_per_commit: Stat,
    vs_tokio: Stat,
    vs_std: Stat,
    vs_glommio: Stat,
    /// Written MB/s over fio io_uring's at the same batch size.
    mb_vs_fio: Stat,
    /// The same over fio io_uring's with `O_DSYNC` writes (absent from
    /// runs before that row).
    #[serde(default)]
    mb_vs_fio_dsync: Stat,
    ok: usize,
}

/// What the study measured: results.json's `studies.log`.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct LogResults {
    record: usize,
    rounds: usize,
    secs: f64,
    segment_bytes: u64,
    samples: Vec<Sample>,
    summary: Vec<Row>,
    /// The CPU every process was pinned to (`None`: a run from before it
    /// was kept).
    #[serde(default)]
    server_cpu: Option<usize>,
}

/// A row per mode, writer count and contender that runs in that mode.
fn summarize(names: &[String], samples: &[Sample], p: &Plan) -> Vec<Row> {
    let mut rows = Vec::new();
    for direct in [false, true] {
        for &writers in &p.writers {
            let of = |c: &str| -> Vec<&Sample> {
                samples
                    .iter()
                    .filter(|s| {
                        s.contender == c
                            && s.direct == direct
                            && s.writers == writers
                            && s.error.is_none()
                    })
                    .collect()
            };
            let paired = |c: &str, r: &str, k: fn(&Sample) -> f64| {
                if c.starts_with("fio-") && !r.starts_with("fio-") {
                    // fio's commits are its syncs: not the same quantity.
                    return Stat::default();
                }
                let refs = of(r);
                stat(
                    of(c)
                        .iter()
                        .filter_map(|s| {
                            refs.iter()
                                .find(|x| x.round == s.round)
                                .map(|x| k(s) / k(x))
                        })
                        .collect(),
                )
            };
            for c in names.iter().filter(|c| runs(c, direct)) {
                let g = of(c);
                let f = |k: fn(&Sample) -> f64| stat(g.iter().map(|s| k(s)).collect());
                rows.push(Row {
                    mode: if direct { "O_DIRECT" } else { "buffered" }.into(),
                    writers,
                    contender: c.clone(),
                    commits_per_s: f(|s| s.commits_per_s),
                    mb_per_s: f(|s| s.mb_per_s),
                    syncs_per_s: f(|s| s.syncs_per_s),
                    batch_bytes: f(|s| s.batch_bytes),
                    p50_us: f(|s| s.p50_us),
                    p99_us: f(|s| s.p99_us),
                    p999_us: f(|s| s.p999_us),
                    cpu_us_per_commit: f(|s| s.cpu_us_per_commit),
                    vs_tokio: paired(c, "tokio", |s: &Sample| s.commits_per_s),
                    vs_std: paired(c, "std", |s| s.commits_per_s),
                    vs_glommio: paired(c, "glommio", |s| s.commits_per_s),
                    mb_vs_fio: paired(c, "fio-io_uring", |s| s.mb_per_s),
                    mb_vs_fio_dsync: paired(c, "fio-io_uring-dsync", |s| s.mb_per_s),
                    ok: g.len(),
                });
            }
        }
    }
    rows
}

/// The study's section of the report.
pub fn section(res: &LogResults) -> Section {
    let rows = &res.summary;
    let fio = rows.iter().any(|r| r.contender.starts_with("fio-"));
    let mut md = format!(
        "## Durable log: commits/s and commit latency\n\n\
         - {} B records; each writer appends one record and waits until it is durable, then the next; \
         {} rounds of {} s per row, contenders interleaved and rotated; every process pinned to CPU {}\n\
         - ringkit-log (`ringkit log bench`) on io_uring and epoll; the same design (group commit, the same framing, \
         one `RWF_DSYNC` write per batch, segments zero-filled ahead in the background) on tokio \
         (batch I/O in `spawn_blocking`, `pwritev2`), on std threads (a group-commit mutex, `pwritev2`) and, \
         `O_DIRECT` only, on glommio (a committer task, `DmaFile::write_at` from its registered I/O memory to a \
         file opened `O_DSYNC`); `ringkit-uring-linked`: ringkit-log with each batch's write linked to an \
         `fdatasync` (`--linked-sync`); {} MiB segments\n\
         - fio: `--rw=write --bs=<ringkit-log's batch size in that row> --fdatasync=1`, one write then one sync, \
         and `fio-io_uring-dsync` with `--sync=dsync` instead, each write `O_DSYNC`, \
         on a file zero-filled first: for fio, commits/s = syncs/s and the latency columns are its sync's \
         (its write's with `O_DSYNC`)\n\
         - CPU: µs per commit of the whole process (every thread); ratios paired per round (higher is better): \
         commits/s over tokio's, std's and glommio's, written MB/s over fio io_uring's at the same batch size \
         (with `fdatasync`, and with `O_DSYNC`)\n\n",
        res.record, res.rounds, res.secs, cpu(res.server_cpu), res.segment_bytes >> 20
    );
    let ratio = |s: &Stat| {
        if s.median > 0.0 {
            format!("{:.2}x", s.median)
        } else {
            "-".into()
        }
    };
    let mut t = Table::new(vec![
        Col::left("mode"),
        Col::right("writers").short("w"),
        Col::left("contender"),
        Col::right("commits/s"),
        Col::right("MB/s"),
        Col::right("syncs/s"),
        Col::right("batch B"),
        Col::right("p50 µs"),
        Col::right("p99 µs"),
        Col::right("p99.9 µs"),
        Col::right("CPU µs/commit").short("cpu µs"),
        Col::right("commits/s vs tokio").short("vs tokio"),
        Col::right("vs std"),
        Col::right("vs glommio"),
        Col::right("MB/s vs fio-io_uring").short("MB vs fio"),
        Col::right("vs fio-io_uring-dsync").short("vs dsync"),
        Col::right("ok"),
    ]);
    for r in rows {
        t.row(vec![
            r.mode.clone(),
            r.writers.to_string(),
            r.contender.clone(),
            format!(
                "{:.0} ({:.0}–{:.0})",
                r.commits_per_s.median, r.commits_per_s.min, r.commits_per_s.max
            ),
            format!("{:.1}", r.mb_per_s.median),
            format!("{:.0}", r.syncs_per_s.median),
            format!("{:.0}", r.batch_bytes.median),
            format!("{:.0}", r.p50_us.median),
            format!("{:.0}", r.p99_us.median),
            format!("{:.0}", r.p999_us.median),
            format!("{:.1}", r.cpu_us_per_commit.median),
            ratio(&r.vs_tokio),
            ratio(&r.vs_std),
            ratio(&r.vs_glommio),
            ratio(&r.mb_vs_fio),
            ratio(&r.mb_vs_fio_dsync),
            format!("{}/{}", r.ok, res.rounds),
        ]);
    }
    md += &t.markdown();
    if !fio {
        md += "\nfio is not installed here: its rows are missing.\n";
    }
    // What the disk's flush costs: fio's one-writer rows (a small write,
    // then fdatasync): the latency every commit figure above rests on.
    for r in rows
        .iter()
        .filter(|r| r.writers == 1 && r.contender == "fio-psync")
    {
        md += &format!(
            "\nThis disk's flush ({}): `fdatasync` after a {} B write takes p50 {:.0} µs, p99 {:.0} µs (fio psync). \
             A flush this fast means the device acknowledges from a cache (a VM's virtual disk, or a drive with \
             power-loss protection); durability here is the process's and the kernel's, not a power cut's.\n",
            r.mode, r.batch_bytes.median, r.p50_us.median, r.p99_us.median
        );
    }
    let errors: Vec<String> = res
        .samples
        .iter()
        .filter_map(|s| {
            s.error.as_ref().map(|e| {
                format!(
                    "{} ({} w, direct {}) round {}: {e}",
                    s.contender, s.writers, s.direct, s.round
                )
            })
        })
        .collect();
    if !errors.is_empty() {
        md += &format!("\nFailed samples: {}\n", errors.join("; "));
    }
    let chart = Bars::from_rows(
        "Durable log, 4 KiB records: commits per second",
        "commits/s",
        rows,
        |r| format!("{} w={}", r.mode, r.writers),
        |r| r.contender.clone(),
        |r| r.commits_per_s.median,
    );
    md += "\n![commits per second](log_commits.svg)\n";
    Section {
        study: "log".into(),
        table: t.text(),
        markdown: md,
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![("log_commits.svg".into(), chart.svg())],
        ..Default::default()
    }
}
