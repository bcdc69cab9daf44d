//! The ring-overhead study (`ringkit bench nop`, `ringkit compare nop`):
//! NOPs per second, ns per NOP and NOPs per `io_uring_enter`, by batch size,
//! on `ringkit-uring` directly.
//!
//! Variants, each a fresh ring of [`RING_ENTRIES`] SQEs with default flags:
//! - `plain`: push `batch` NOPs, one `submit_and_wait(batch)` (one
//!   `io_uring_enter`), reap all `batch` CQEs from shared memory;
//! - `regfd`: the same with the ring fd registered
//!   (`IORING_REGISTER_RING_FDS`), so each enter skips the fd lookup;
//! - `sqpoll`: `IORING_SETUP_SQPOLL` with the poller pinned
//!   (`IORING_SETUP_SQ_AFF`) to the *other* CPU and a 1 s idle time: push,
//!   publish the tail (enter only if the poller sleeps), spin on the CQ.
//!   It is refused when the poller would share the submitter's CPU.
//!
//! Every (variant, batch) pair is one contender; contenders run interleaved,
//! rotated each round, each sample on a fresh thread pinned to the measured
//! CPU. Enters are counted by the ring ([`IoUring::enter_count`]), not
//! estimated.

use std::fmt::Write as _;
use std::io;
use std::time::{Duration, Instant};

use ringkit_uring::{sys, IoUring};
use serde::Serialize;

use crate::harness::bars::Bars;
use crate::harness::latency::schedule;
use crate::harness::stat::{stat, Stat};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::SystemInfo;
use crate::harness::table::{Col, Table};

/// SQ entries of every ring (CQ: twice that).
pub const RING_ENTRIES: u32 = 256;
/// A liburing C program's figures on the reference machine (NOPs/s):
/// batch 1 and batch 32.
pub const LIBURING_REFERENCE: [(u32, f64); 2] = [(1, 1.95e6), (32, 12.0e6)];

/// How the ring is set up and driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum NopVariant {
    /// Default flags, one `submit_and_wait` per batch.
    Plain,
    /// As `Plain`, with the ring fd registered.
    RegFd,
    /// SQPOLL on another CPU; the submitter spins on the CQ.
    Sqpoll,
}

impl NopVariant {
    /// Short name used in tables and `--variants`.
    pub fn name(self) -> &'static str {
        match self {
            NopVariant::Plain => "plain",
            NopVariant::RegFd => "regfd",
            NopVariant::Sqpoll => "sqpoll",
        }
    }
}

impl std::str::FromStr for NopVariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "plain" => Ok(NopVariant::Plain),
            "regfd" => Ok(NopVariant::RegFd),
            "sqpoll" => Ok(NopVariant::Sqpoll),
            _ => Err(format!("unknown variant {s:?}: plain, regfd or sqpoll")),
        }
    }
}

/// Settings of a NOP run.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct NopConfig {
    /// Batch sizes (NOPs per submit).
    pub batches: Vec<u32>,
    /// Ring variants.
    pub variants: Vec<NopVariant>,
    /// Rounds (every contender once per round).
    pub rounds: usize,
    /// Measured seconds per sample.
    pub secs: f64,
    /// CPU of the submitting thread.
    pub cpu: usize,
    /// CPU of the SQPOLL kernel thread.
    pub sqpoll_cpu: usize,
}

impl Default for NopConfig {
    fn default() -> Self {
        NopConfig {
            batches: vec![1, 8, 32, 128],
            variants: vec![NopVariant::Plain, NopVariant::RegFd, NopVariant::Sqpoll],
            rounds: 5,
            secs: 0.5,
            cpu: 1,
            sqpoll_cpu: 0,
        }
    }
}

/// One measured sample.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct NopSample {
    /// Variant.
    pub variant: NopVariant,
    /// Batch size.
    pub batch: u32,
    /// Round.
    pub round: usize,
    /// NOPs completed.
    pub nops: u64,
    /// Measured seconds.
    pub secs: f64,
    /// `io_uring_enter` calls in the window.
    pub enters: u64,
    /// Setup flags that took effect.
    pub flags: String,
    /// Why the sample failed, if it did.
    pub error: Option<String>,
}

/// One contender summarised over its rounds (medians, min–max).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct NopRow {
    /// Variant.
    pub variant: NopVariant,
    /// Batch size.
    pub batch: u32,
    /// NOPs per second.
    pub nops_per_sec: Stat,
    /// Nanoseconds per NOP.
    pub ns_per_nop: Stat,
    /// NOPs per `io_uring_enter` (median; infinite shows as `null` when no enter was needed).
    pub nops_per_enter: Option<f64>,
    /// Setup flags that took effect.
    pub flags: String,
    /// Good samples.
    pub ok_samples: usize,
    /// All samples.
    pub samples: usize,
}

/// Everything a NOP run produced.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct NopResults {
    /// Machine and tool.
    pub system: SystemInfo,
    /// Settings.
    pub config: NopConfig,
    /// Per contender.
    pub rows: Vec<NopRow>,
    /// Raw samples.
    pub samples: Vec<NopSample>,
    /// Contenders not run, and why.
    pub skipped: Vec<(String, String)>,
    /// Wall time of the run, seconds.
    pub wall_secs: f64,
}

/// Why `variant` cannot run with `cfg` on this machine, if it cannot.
fn refuse(cfg: &NopConfig, variant: NopVariant) -> Option<String> {
    if variant != NopVariant::Sqpoll {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    if cores < 2 || cfg.sqpoll_cpu == cfg.cpu {
        Some(format!(
            "SQPOLL poller would share CPU {} with the submitter ({cores} CPUs online): \
             the two would take turns and the figure would measure the scheduler",
            cfg.cpu
        ))
    } else {
        None
    }
}

fn build_ring(cfg: &NopConfig, variant: NopVariant) -> io::Result<IoUring> {
    let b = IoUring::builder(RING_ENTRIES);
    let ring = match variant {
        NopVariant::Plain => b.build()?,
        NopVariant::RegFd => {
            let ring = b.register_ring_fd(true).build()?;
            if !ring.ring_fd_registered() {
                return Err(crate::harness::err::unsupported(
                    "IORING_REGISTER_RING_FDS refused by this kernel",
                ));
            }
            ring
        }
        NopVariant::Sqpoll => b
            .sqpoll(Duration::from_secs(1))
            .sqpoll_cpu(cfg.sqpoll_cpu as u32)
            .build()?,
    };
    Ok(ring)
}

/// Measure one contender for `secs` on the current thread (pinned to `cfg.cpu`).
fn measure(cfg: &NopConfig, variant: NopVariant, batch: u32, round: usize, secs: f64) -> NopSample {
    let mut s = NopSample {
        variant,
        batch,
        round,
        nops: 0,
        secs: 0.0,
        enters: 0,
        flags: String::new(),
        error: None,
    };
    let mut run = || -> io::Result<()> {
        ringkit::pin_to_cpu(cfg.cpu)
            .map_err(|e| io::Error::other(format!("cannot pin to CPU {}: {e}", cfg.cpu)))?;
        let mut ring = build_ring(cfg, variant)?;
        s.flags = ringkit_uring::flag_names(ring.setup_flags(), sys::SETUP_FLAG_NAMES);
        let one = |ring: &mut IoUring| match variant {
            NopVariant::Sqpoll => crate::raw::nop::batch_sqpoll(ring, batch),
            _ => crate::raw::nop::batch_enter(ring, batch),
        };
        // Warm up: page faults, caches, the poller's first wake-up.
        let warm = Instant::now();
        while warm.elapsed() < Duration::from_millis(20) {
            one(&mut ring)?;
        }
        // Read the clock every CHUNK batches so it costs next to nothing.
        let chunk = (4096 / batch).max(1);
        let dur = Duration::from_secs_f64(secs);
        let enters0 = ring.enter_count();
        let start = Instant::now();
        let mut batches = 0u64;
        let el = loop {
            for _ in 0..chunk {
                one(&mut ring)?;
            }
            batches += u64::from(chunk);
            let el = start.elapsed();
            if el >= dur {
                break el;
            }
        };
        s.enters = ring.enter_count() - enters0;
        s.nops = batches * u64::from(batch);
        s.secs = el.as_secs_f64();
        Ok(())
    };
    if let Err(e) = run() {
        s.error = Some(e.to_string());
    }
    s
}

/// Run the NOP study. `progress` gets one line per sample.
pub fn run(cfg: &NopConfig, progress: &mut dyn FnMut(&str)) -> io::Result<NopResults> {
    let wall = Instant::now();
    let mut skipped = Vec::new();
    let mut contenders = Vec::new();
    for &v in &cfg.variants {
        if let Some(why) = refuse(cfg, v) {
            skipped.push((v.name().to_string(), why));
            continue;
        }
        for &b in &cfg.batches {
            contenders.push((v, b));
        }
    }
    if let Some(&b) = cfg.batches.iter().find(|&&b| b == 0 || b > RING_ENTRIES) {
        return Err(crate::harness::err::invalid_input(format!(
            "batch {b} must be in 1..={RING_ENTRIES}"
        )));
    }
    // Probe: can we have a ring at all?
    IoUring::new(8).map_err(|e| {
        crate::harness::err::unsupported(format!(
            "io_uring unavailable: {e} ({})",
            ringkit_uring::explain_setup_error(&e)
        ))
    })?;
    let total = contenders.len() * cfg.rounds;
    let mut samples = Vec::with_capacity(total);
    for (round, &(v, b)) in schedule(&contenders, cfg.rounds) {
        let s = std::thread::scope(|sc| {
            sc.spawn(|| measure(cfg, v, b, round, cfg.secs))
                .join()
                .map_err(|_| io::Error::other("measuring thread panicked"))
        })?;
        progress(&format!(
            "[{}/{total}] round {round} {} batch {b}: {}",
            samples.len() + 1,
            v.name(),
            match &s.error {
                Some(e) => format!("error: {e}"),
                None => format!("{:.0} NOPs/s", s.nops as f64 / s.secs.max(1e-9)),
            }
        ));
        samples.push(s);
    }
    let rows = contenders
        .iter()
        .map(|&(v, b)| summarize(v, b, &samples))
        .collect();
    Ok(NopResults {
        system: SystemInfo::gather(),
        config: cfg.clone(),
        rows,
        samples,
        skipped,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

fn summarize(v: NopVariant, b: u32, samples: &[NopSample]) -> NopRow {
    let mine: Vec<&NopSample> = samples
        .iter()
        .filter(|s| s.variant == v && s.batch == b)
        .collect();
    let good: Vec<&&NopSample> = mine
        .iter()
        .filter(|s| s.error.is_none() && s.nops > 0)
        .collect();
    let per_enter: Vec<f64> = good
        .iter()
        .filter(|s| s.enters > 0)
        .map(|s| s.nops as f64 / s.enters as f64)
        .collect();
    NopRow {
        variant: v,
        batch: b,
        nops_per_sec: stat(good.iter().map(|s| s.nops as f64 / s.secs).collect()),
        ns_per_nop: stat(good.iter().map(|s| s.secs * 1e9 / s.nops as f64).collect()),
        nops_per_enter: (!per_enter.is_empty()).then(|| stat(per_enter).median),
        flags: good.first().map_or_else(String::new, |s| s.flags.clone()),
        ok_samples: good.len(),
        samples: mine.len(),
    }
}

fn per_enter(r: &NopRow) -> String {
    match r.nops_per_enter {
        Some(v) => format!("{v:.1}"),
        None if r.ok_samples > 0 => "no enter".into(),
        None => "-".into(),
    }
}

/// The results: every variant at every batch size.
fn results(res: &NopResults) -> Table {
    let mut t = Table::new(vec![
        Col::left("variant"),
        Col::left("flags").md_only(),
        Col::right("batch"),
        Col::right("NOPs/s"),
        Col::left("min–max"),
        Col::right("ns/NOP"),
        Col::right("NOPs per io_uring_enter").short("NOPs/enter"),
        Col::right("ok samples").short("ok"),
    ]);
    for r in &res.rows {
        t.row(vec![
            r.variant.name().to_string(),
            r.flags.replace('|', "\\|"),
            r.batch.to_string(),
            format!("{:.0}", r.nops_per_sec.median),
            format!("{:.0}–{:.0}", r.nops_per_sec.min, r.nops_per_sec.max),
            format!("{:.1}", r.ns_per_nop.median),
            per_enter(r),
            format!("{}/{}", r.ok_samples, r.samples),
        ]);
    }
    t
}

/// The rows as a fixed-width terminal table.
pub fn table(res: &NopResults) -> String {
    let mut s = results(res).text();
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "skipped {n}: {why}");
    }
    s
}

/// The section of report.md.
pub fn markdown(res: &NopResults) -> String {
    let c = &res.config;
    let sys = &res.system;
    let mut s = String::new();
    let _ = writeln!(s, "## Ring overhead (NOP)\n");
    let _ = writeln!(
        s,
        "- kernel {}, CPU {} ({} cores); submitter pinned to CPU {}, SQPOLL poller on CPU {}\n\
         - ring: {RING_ENTRIES} SQ entries; batches {:?}; {} rounds of {} s, contenders interleaved and rotated; wall {:.0} s\n\
         - command: `{}`; ringkit {}\n",
        sys.kernel, sys.cpu_model, sys.cores, c.cpu, c.sqpoll_cpu, c.batches, c.rounds, c.secs,
        res.wall_secs, sys.command, sys.tool_version
    );
    s.push_str(&results(res).markdown());
    for (n, why) in &res.skipped {
        let _ = writeln!(s, "\n- skipped **{n}**: {why}");
    }
    let _ = writeln!(
        s,
        "\nReference (another machine, not this run): a liburing C program did {}. \
         Compare ratios between rows of this run, not absolute figures across machines.\n",
        LIBURING_REFERENCE
            .iter()
            .map(|(b, v)| format!("{:.2} M NOPs/s at batch {b}", v / 1e6))
            .collect::<Vec<_>>()
            .join(" and ")
    );
    let failed: Vec<&NopSample> = res.samples.iter().filter(|s| s.error.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "### Failed samples\n");
        for f in failed {
            let _ = writeln!(
                s,
                "- {} batch {} round {}: {}",
                f.variant.name(),
                f.batch,
                f.round,
                f.error.as_deref().unwrap_or("")
            );
        }
        s.push('\n');
    }
    let _ = writeln!(s, "![NOPs per second](nop_rate.svg)");
    s
}

/// The NOPs/s chart: one group per batch, one bar per variant.
pub fn chart(res: &NopResults) -> Bars {
    let mut series: Vec<NopVariant> = Vec::new();
    for r in &res.rows {
        if !series.contains(&r.variant) {
            series.push(r.variant);
        }
    }
    let batches = &res.config.batches;
    Bars {
        title: "NOP submit+reap".into(),
        unit: "NOPs/s, higher is better".into(),
        groups: batches.iter().map(|b| format!("batch {b}")).collect(),
        series: series.iter().map(|v| v.name().to_string()).collect(),
        values: batches
            .iter()
            .map(|&b| {
                series
                    .iter()
                    .map(|&v| {
                        res.rows
                            .iter()
                            .find(|r| r.variant == v && r.batch == b && r.ok_samples > 0)
                            .map(|r| r.nops_per_sec.median)
                    })
                    .collect()
            })
            .collect(),
    }
}

/// The study as a section of the compare report.
pub fn section(res: &NopResults) -> Section {
    Section {
        study: "nop".into(),
        table: table(res),
        markdown: markdown(res),
        json: serde_json::to_value(res).unwrap_or_default(),
        svgs: vec![("nop_rate.svg".into(), chart(res).svg())],
        skipped: res.skipped.clone(),
    }
}

/// The configuration `ringkit compare nop` uses for `opts`.
pub fn config_for(opts: &StudyOpts) -> NopConfig {
    let d = NopConfig::default();
    NopConfig {
        rounds: opts.rounds.unwrap_or(if opts.quick { 3 } else { d.rounds }),
        secs: opts.secs.unwrap_or(if opts.quick { 0.2 } else { d.secs }),
        cpu: opts.client_cpu,
        sqpoll_cpu: opts.server_cpu,
        ..d
    }
}

/// Run the nop study for `ringkit compare` (about 30 s; `--quick` about 8 s).
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let res = run(&config_for(opts), progress)?;
    Ok(section(&res))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_round_trip() {
        for v in [NopVariant::Plain, NopVariant::RegFd, NopVariant::Sqpoll] {
            assert_eq!(v.name().parse::<NopVariant>(), Ok(v));
        }
        assert!("fast".parse::<NopVariant>().is_err());
    }

    #[test]
    fn sqpoll_on_the_submitters_cpu_is_refused() {
        let cfg = NopConfig {
            cpu: 0,
            sqpoll_cpu: 0,
            ..NopConfig::default()
        };
        assert!(refuse(&cfg, NopVariant::Sqpoll).is_some());
        assert!(refuse(&cfg, NopVariant::Plain).is_none());
    }

    #[test]
    fn summary_uses_good_samples_only() {
        let mk = |nops, enters, error: Option<&str>| NopSample {
            variant: NopVariant::Plain,
            batch: 8,
            round: 0,
            nops,
            secs: 1.0,
            enters,
            flags: "none".into(),
            error: error.map(String::from),
        };
        let samples = vec![
            mk(800, 100, None),
            mk(1600, 200, None),
            mk(0, 0, Some("boom")),
        ];
        let r = summarize(NopVariant::Plain, 8, &samples);
        assert_eq!((r.ok_samples, r.samples), (2, 3));
        assert_eq!(r.nops_per_sec.median, 1200.0);
        assert_eq!(r.nops_per_enter, Some(8.0));
    }
}
