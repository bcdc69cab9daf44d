//! `ringkit bench wakeup|nop|file`: the wake-up latency, ring overhead and
//! file I/O studies as standalone commands. Each prints its table and can
//! write the same section `ringkit compare <study>` would (`--out DIR`).

use std::path::PathBuf;

use clap::Args;
use ringkit_bench::nop::{self, NopConfig, NopVariant};
use ringkit_bench::study::Section;
use ringkit_bench::sysinfo::SystemInfo;

/// `ringkit bench wakeup`.
#[derive(Args, Debug)]
pub struct BenchWakeupArgs {}

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

/// `ringkit bench file`.
#[derive(Args, Debug)]
pub struct BenchFileArgs {}

pub fn bench_wakeup(_a: BenchWakeupArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit bench wakeup: not built yet"))
}

/// Print a study's table, its JSON on request, and write it to `out`.
fn finish(sec: &Section, json: bool, out: Option<&PathBuf>) -> std::io::Result<()> {
    println!("{}", sec.table);
    if json {
        println!("{}", serde_json::to_string_pretty(&sec.json)?);
    }
    if let Some(dir) = out {
        ringkit_bench::study::write_sections(
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

pub fn bench_file(_a: BenchFileArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("ringkit bench file: not built yet"))
}
