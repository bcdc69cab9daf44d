//! `ringkit log bench|serve|dump|check|salvage|crashcheck`: the durable
//! append log (`ringkit-log`) from the command line.

use std::io::{self, Write as _};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use ringkit::Backend;
use ringkit_bench::log::{LogBenchConfig, LogEngine};
use ringkit_log::Log;

use crate::log_opts::LogOpts;

/// The durable append log.
#[derive(Subcommand, Debug)]
pub enum LogCmd {
    /// Append from N concurrent writers for S seconds: commits/s, MB/s and
    /// commit latency (append to durable).
    Bench(BenchArgs),
    /// Serve a log over TCP: a client sends records as a 4-byte
    /// little-endian length then the bytes; the server answers each, in
    /// order on that connection, with its 8-byte little-endian LSN once it
    /// is durable. Many connections at once, pipelining allowed. A record
    /// that cannot be made durable closes its connection (nothing after the
    /// last LSN answered is acknowledged).
    Serve(crate::log_serve::ServeArgs),
    /// Write every record to stdout as an 8-byte LE LSN, a 4-byte LE
    /// length and the bytes, in LSN order. Opens the log read-only: writes
    /// nothing, takes no lock, works beside a running `log serve`.
    Dump(DumpArgs),
    /// Read a log without writing anything and report each segment, any
    /// torn tail, and any damage (segment and offset); exit status 1 if
    /// the log would not open.
    Check(CheckArgs),
    /// Copy the records that still check into a new log at --into (which
    /// must not exist, or be empty), each at its old LSN; LSNs lost to the
    /// damage become holes (never reused). The damaged log is only read.
    Salvage(SalvageArgs),
    /// Explore crash states: run a seeded workload on a log while
    /// recording every write, sync, rename and directory sync, then
    /// recover every state a crash could leave on disk and check that no
    /// acknowledged record is lost or changed.
    Crashcheck(crate::crashcheck::CrashcheckArgs),
}

/// `ringkit log check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The log's directory.
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// auto | uring | epoll.
    #[arg(long, default_value = "auto")]
    pub(crate) backend: Backend,
}

/// `ringkit log salvage`.
#[derive(Args, Debug)]
pub struct SalvageArgs {
    #[command(flatten)]
    log: LogOpts,
    /// The new log to copy into (must not exist, or be empty).
    #[arg(long)]
    into: PathBuf,
    /// The least LSN the new log may hand out next (a hole reaches it):
    /// needed when the log's newest segment is gone and how far its LSNs
    /// ran is unknown; give one past every LSN ever acknowledged.
    #[arg(long)]
    next_lsn: Option<u64>,
}

/// `ringkit log bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    log: LogOpts,
    /// Concurrent writers, each appending one record at a time.
    #[arg(long, default_value_t = 16)]
    writers: usize,
    /// Payload bytes per record.
    #[arg(long, default_value_t = 4096)]
    record: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// ringkit (this log on --backend), or the same design on tokio or on
    /// std threads (the peers of `ringkit compare log`).
    #[arg(long, default_value = "ringkit")]
    engine: String,
    /// Pin the process (every thread) to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Also print the result as one JSON line.
    #[arg(long)]
    json: bool,
}

/// `ringkit log dump`.
#[derive(Args, Debug)]
pub struct DumpArgs {
    #[command(flatten)]
    log: LogOpts,
}

pub fn log(cmd: LogCmd) -> io::Result<()> {
    match cmd {
        LogCmd::Bench(a) => bench(a),
        LogCmd::Serve(a) => crate::log_serve::serve(a),
        LogCmd::Dump(a) => dump(a),
        LogCmd::Check(a) => check(a),
        LogCmd::Salvage(a) => salvage(a),
        LogCmd::Crashcheck(a) => crate::crashcheck::run(a),
    }
}

fn bench(a: BenchArgs) -> io::Result<()> {
    if let Some(cpu) = a.cpu {
        ringkit::pin_to_cpu(cpu)?;
    }
    let engine = match a.engine.parse::<LogEngine>() {
        Ok(LogEngine::Ringkit(_)) => LogEngine::Ringkit(a.log.backend),
        Ok(e) => e,
        Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
    };
    let o = a.log.options();
    let r = ringkit_bench::log::run(&LogBenchConfig {
        dir: a.log.dir.clone(),
        writers: a.writers,
        record: a.record,
        secs: a.secs,
        direct: a.log.direct,
        engine,
        file_size: o.segment_size,
        max_batch: o.max_batch,
        batches_in_flight: o.batches_in_flight,
        dsync_writes: o.dsync_writes,
    })?;
    println!("{:.0} commits/s", r.commits_per_s());
    println!(
        "{}: {} writers, {} B records, {}, {:.1} s: {:.1} MB/s written, {:.0} syncs/s ({:.0} B per batch), {:.1} CPU µs per commit",
        r.engine,
        r.writers,
        r.record,
        if r.direct { "O_DIRECT" } else { "buffered" },
        r.secs,
        r.mb_per_s(),
        r.batches as f64 / r.secs,
        r.batch_bytes(),
        r.cpu_us_per_commit()
    );
    println!(
        "commit latency: p50 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs, max {:.0} µs",
        r.p50_us, r.p99_us, r.p999_us, r.max_us
    );
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    }
    Ok(())
}

fn dump(a: DumpArgs) -> io::Result<()> {
    let rt = ringkit::Builder::new().backend(a.log.backend).build()?;
    rt.block_on(async {
        if !a.log.dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no log at {}", a.log.dir.display()),
            ));
        }
        let log = Log::open_read_only(&a.log.dir, a.log.options()).await?;
        let mut out = io::BufWriter::new(io::stdout().lock());
        let mut next = log.first_lsn();
        let mut count = 0u64;
        loop {
            let got = log.read_from(next, 4096).await?;
            if got.is_empty() {
                break;
            }
            for (lsn, p) in got {
                out.write_all(&lsn.to_le_bytes())?;
                out.write_all(&(p.len() as u32).to_le_bytes())?;
                out.write_all(&p)?;
                next = lsn + 1;
                count += 1;
            }
        }
        out.flush()?;
        drop(out);
        eprintln!("ringkit log: {count} records");
        Ok(())
    })
}

fn check(a: CheckArgs) -> io::Result<()> {
    let rt = ringkit::Builder::new().backend(a.backend).build()?;
    let r = rt.block_on(ringkit_log::check(&a.dir))?;
    match r.manifest {
        Some((id, start)) => println!("MANIFEST: log {id:016x}, first LSN {start}"),
        None => println!("MANIFEST: missing or damaged"),
    }
    for s in &r.segments {
        let header = match (s.header, s.block) {
            (Some((id, first)), Some(block)) => {
                format!("log {id:016x}, first LSN {first}, {block}-byte blocks")
            }
            _ => "no valid header".into(),
        };
        println!(
            "{}: {} bytes, {header}, {} records ending at offset {}{}",
            s.name,
            s.size,
            s.records,
            s.end,
            s.tail.as_ref().map_or(String::new(), |t| format!("; {t}"))
        );
    }
    match r.error {
        None => {
            println!("ok: {} durable records; the log opens", r.records);
            Ok(())
        }
        Some(e) => {
            println!("the log would not open: {e}");
            std::process::exit(1);
        }
    }
}

fn salvage(a: SalvageArgs) -> io::Result<()> {
    let rt = ringkit::Builder::new().backend(a.log.backend).build()?;
    let r = rt.block_on(ringkit_log::salvage(
        &a.log.dir,
        &a.into,
        a.log.options(),
        a.next_lsn,
    ))?;
    for (first, n) in &r.holes {
        println!(
            "lost to damage, kept as a hole: LSNs {first}..={}",
            first + n - 1
        );
    }
    println!(
        "{} records copied into {} at their LSNs ({}..{}); the next append gets {}",
        r.copied,
        r.into.display(),
        r.first,
        r.next,
        r.next
    );
    Ok(())
}
