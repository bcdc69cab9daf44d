//! `ringkit bench wakeup|nop|file`: the wake-up latency, ring overhead and
//! file I/O studies as standalone commands. Each prints its table and can
//! write the same section `ringkit compare <study>` would (`--out DIR`).

use std::path::PathBuf;

use clap::Args;
use ringkit_bench::file::{self, Engine, FileConfig, Job, JobPlan};
use ringkit_bench::harness::study::Section;
use ringkit_bench::harness::sysinfo::SystemInfo;
use ringkit_bench::nop::{self, NopConfig, NopVariant};
use ringkit_bench::wakeup::{self, Channel, WakeConfig};

/// `ringkit bench wakeup`: wake-up latency through a pipe or an eventfd.
///
/// A writer pinned to --writer-cpu stamps t0 and writes 8 bytes; a reader
/// pinned to --reader-cpu wakes (epoll or io_uring, blocking or busy, each
/// io_uring reader with the default, coop and defer flag sets, and a
/// ringkit task on each backend) and stamps t1. Readers run interleaved,
/// rotated each round. Prints avg, p50, p90, p99, p99.9 of t1-t0 in ns and
/// whether the io_uring-vs-epoll targets are met in this run.
#[derive(Args, Debug)]
pub struct BenchWakeupArgs {
    /// Channels: pipe, eventfd (socket: only the socketpair rows).
    #[arg(long, value_delimiter = ',', default_value = "pipe,eventfd")]
    channels: Vec<Channel>,
    /// Leave out the runtime rows (rt-uring, rt-epoll and their raw
    /// baselines on a socketpair).
    #[arg(long)]
    no_runtime: bool,
    /// Only readers whose name contains one of these (e.g. busy,epoll).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Measured wake-ups per sample.
    #[arg(long, default_value_t = 8_000)]
    count: u64,
    /// Unmeasured wake-ups before them.
    #[arg(long, default_value_t = 200)]
    warmup: u64,
    /// Writer's random pause before each write, µs: MIN-MAX.
    #[arg(long, default_value = "10-50", value_parser = parse_range)]
    pause_us: (u64, u64),
    /// Rounds: every reader once per round (at least 1; 3+ to compare).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// CPU of the reader.
    #[arg(long, default_value_t = 0)]
    reader_cpu: usize,
    /// CPU of the writer.
    #[arg(long, default_value_t = 1)]
    writer_cpu: usize,
    /// Also write results.json, report.md and the charts into DIR.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the results as JSON too.
    #[arg(long)]
    json: bool,
}

/// `MIN-MAX` (or a single value) as a pair.
fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let p = |v: &str| v.trim().parse::<u64>().map_err(|e| format!("{v:?}: {e}"));
    let (a, b) = (p(a)?, p(b)?);
    if a > b {
        return Err(format!("{a} > {b}"));
    }
    Ok((a, b))
}

/// `ringkit bench nop`: NOP submit+reap on the bare ring.
///
/// Each (variant, batch) pair runs interleaved with the others, rotated each
/// round, on a thread pinned to --cpu. Prints NOPs/s, ns per NOP and NOPs
/// per io_uring_enter (counted, not estimated).
#[derive(Args, Debug)]
pub struct BenchNopArgs {
    /// Batch sizes: NOPs pushed per submit (1..=256).
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,128")]
    batches: Vec<u32>,
    /// Ring variants: plain (default flags, one submit_and_wait per batch),
    /// regfd (plus a registered ring fd), sqpoll (SQPOLL poller on
    /// --sqpoll-cpu, submitter spins on the CQ; refused on the submitter's CPU).
    #[arg(long, value_delimiter = ',', default_value = "plain,regfd,sqpoll")]
    variants: Vec<NopVariant>,
    /// Rounds: every contender once per round.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Measured seconds per sample.
    #[arg(long, default_value_t = 0.5)]
    secs: f64,
    /// CPU of the submitting thread.
    #[arg(long, default_value_t = 1)]
    cpu: usize,
    /// CPU of the SQPOLL kernel thread (must differ from --cpu).
    #[arg(long, default_value_t = 0)]
    sqpoll_cpu: usize,
    /// Also write results.json, report.md and the chart into DIR.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the results as JSON too.
    #[arg(long)]
    json: bool,
}

/// `ringkit bench file`: a fio-like file I/O job runner on ringkit, with
/// fio's io_uring, libaio and psync engines side by side when fio is
/// installed.
///
/// Creates and fills a test file of --size in --dir, runs every job on
/// every engine (interleaved, rotated each round, pinned to --cpu), removes
/// the file, and prints IOPS, MiB/s, latency avg/p50/p99 (submission to
/// completion), CPU per I/O and the ratios to fio with the same options.
#[derive(Args, Debug)]
pub struct BenchFileArgs {
    /// Directory for the test file (default: the temp dir). Put it on the
    /// disk you want to measure: a tmpfs directory measures memory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Test file size (4k, 256m, 1g, ...).
    #[arg(long, default_value = "256m", value_parser = file::parse_size)]
    size: u64,
    /// Job: RW[,bs=SIZE][,qd=N][,direct=0|1][,batch=N], RW one of read,
    /// write, randread, randwrite (defaults bs=4k, qd=32, direct=1,
    /// batch=1). batch: submit once N operations are queued (fio's
    /// iodepth_batch_submit; 1 submits each at once); it applies to the
    /// uring engines and fio's io_uring and libaio (rt-* submit once per
    /// loop turn, psync one at a time). Repeat for several jobs.
    #[arg(long = "job", default_value = "randread,bs=4k,qd=32,direct=1", value_parser = Job::parse)]
    jobs: Vec<Job>,
    /// Engines: uring[-fixed][-sqpoll][-iopoll][-spin] (ringkit-uring directly;
    /// fixed = registered buffer + file; sqpoll = poller on --sq-cpu;
    /// iopoll = IORING_SETUP_IOPOLL, probed first; spin = reap by spinning
    /// on the completion ring, as fio does under SQPOLL, needs -sqpoll),
    /// rt-uring, rt-epoll
    /// (ringkit::fs::File tasks; epoll does inline pread, psync's stand-in),
    /// fio-io_uring[-fixed][-sqpoll][-iopoll], fio-libaio, fio-psync.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "uring,uring-fixed,uring-sqpoll,rt-uring,rt-epoll,fio-io_uring,fio-io_uring-fixed,fio-libaio,fio-psync"
    )]
    engines: Vec<Engine>,
    /// Measured seconds per sample.
    #[arg(long, default_value_t = 2.0)]
    secs: f64,
    /// Rounds: every engine once per round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// CPU of the submitting thread and of fio.
    #[arg(long, default_value_t = 1)]
    cpu: usize,
    /// CPU of SQPOLL poller threads (must differ from --cpu).
    #[arg(long, default_value_t = 0)]
    sq_cpu: usize,
    /// Run SQPOLL engines even when the poller shares --cpu (expect IOPS to
    /// collapse); without it such engines are refused.
    #[arg(long)]
    allow_shared_sqpoll: bool,
    /// Also write results.json, report.md and the charts into DIR.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the results as JSON too.
    #[arg(long)]
    json: bool,
}

pub fn bench_wakeup(a: BenchWakeupArgs) -> std::io::Result<()> {
    let mut list = wakeup::contenders(&a.channels, !a.no_runtime);
    if !a.only.is_empty() {
        list.retain(|c| a.only.iter().any(|o| c.name().contains(o.as_str())));
    }
    let cfg = WakeConfig {
        contenders: list,
        count: a.count.max(1),
        warmup: a.warmup,
        pause_us: a.pause_us,
        rounds: a.rounds.max(1),
        reader_cpu: a.reader_cpu,
        writer_cpu: a.writer_cpu,
    };
    println!(
        "wake-up latency: {} readers, {} rounds of {} wake-ups, pause {}-{} us, reader on CPU {}, writer on CPU {}",
        cfg.contenders.len(),
        cfg.rounds,
        cfg.count,
        cfg.pause_us.0,
        cfg.pause_us.1,
        cfg.reader_cpu,
        cfg.writer_cpu
    );
    let res = wakeup::run(&cfg, &mut |m| eprintln!("{m}"))?;
    finish(&wakeup::section(&res), a.json, a.out.as_ref())
}

/// Print a study's table, its JSON on request, and write it to `out`.
fn finish(sec: &Section, json: bool, out: Option<&PathBuf>) -> std::io::Result<()> {
    println!("{}", sec.table);
    if json {
        println!("{}", serde_json::to_string_pretty(&sec.json)?);
    }
    if let Some(dir) = out {
        ringkit_bench::harness::study::write_sections(
            &SystemInfo::gather(),
            std::slice::from_ref(sec),
            dir,
        )?;
        println!("wrote {}/results.json and report.md", dir.display());
    }
    Ok(())
}

pub fn bench_nop(a: BenchNopArgs) -> std::io::Result<()> {
    let cfg = NopConfig {
        batches: a.batches,
        variants: a.variants,
        rounds: a.rounds.max(1),
        secs: a.secs,
        cpu: a.cpu,
        sqpoll_cpu: a.sqpoll_cpu,
    };
    println!(
        "NOP submit+reap: batches {:?}, variants {}, {} rounds of {} s, submitter on CPU {}, SQPOLL poller on CPU {}",
        cfg.batches,
        cfg.variants.iter().map(|v| v.name()).collect::<Vec<_>>().join(","),
        cfg.rounds,
        cfg.secs,
        cfg.cpu,
        cfg.sqpoll_cpu
    );
    let res = nop::run(&cfg, &mut |m| eprintln!("{m}"))?;
    finish(&nop::section(&res), a.json, a.out.as_ref())
}

pub fn bench_file(a: BenchFileArgs) -> std::io::Result<()> {
    let cfg = FileConfig {
        dir: a.dir.unwrap_or_else(std::env::temp_dir),
        size: a.size,
        plans: a
            .jobs
            .into_iter()
            .map(|job| JobPlan {
                job,
                engines: a.engines.clone(),
            })
            .collect(),
        rounds: a.rounds.max(1),
        secs: a.secs,
        cpu: a.cpu,
        sq_cpu: a.sq_cpu,
        allow_shared_sqpoll: a.allow_shared_sqpoll,
    };
    println!(
        "file I/O: jobs {}; engines {}; {} MiB test file in {}; {} rounds of {} s; CPU {}, SQPOLL on CPU {}",
        cfg.plans
            .iter()
            .map(|p| p.job.label())
            .collect::<Vec<_>>()
            .join(" + "),
        a.engines
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(","),
        cfg.size >> 20,
        cfg.dir.display(),
        cfg.rounds,
        cfg.secs,
        cfg.cpu,
        cfg.sq_cpu
    );
    let res = file::run(&cfg, &mut |m| eprintln!("{m}"))?;
    finish(&file::section(&res), a.json, a.out.as_ref())
}
