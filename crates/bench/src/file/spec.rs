//! The file study's plans, configuration, samples and results.

use std::path::PathBuf;

use serde::Serialize;

use super::job::{Engine, Job};
use crate::harness::stat::Stat;
use crate::harness::sysinfo::SystemInfo;

/// A job with the engines to run it on.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct JobPlan {
    /// The job.
    pub job: Job,
    /// Engines, interleaved.
    pub engines: Vec<Engine>,
}

/// Settings of a file run.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FileConfig {
    /// Directory for the test file.
    pub dir: PathBuf,
    /// Test file size, bytes.
    pub size: u64,
    /// Jobs and engines.
    pub plans: Vec<JobPlan>,
    /// Rounds.
    pub rounds: usize,
    /// Seconds per sample.
    pub secs: f64,
    /// CPU of the submitting thread (and of fio).
    pub cpu: usize,
    /// CPU of SQPOLL threads.
    pub sq_cpu: usize,
    /// Run SQPOLL even when the poller shares the submitter's CPU (with a
    /// warning) instead of refusing.
    pub allow_shared_sqpoll: bool,
}

/// One measured sample.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct FileSample {
    /// Job label.
    pub job: String,
    /// Engine name.
    pub engine: String,
    /// Round.
    pub round: usize,
    /// I/Os completed in the window.
    pub ios: u64,
    /// Window, seconds.
    pub secs: f64,
    /// Latency, ns: mean.
    pub lat_avg: f64,
    /// p50, ns.
    pub lat_p50: f64,
    /// p99, ns.
    pub lat_p99: f64,
    /// User CPU seconds per I/O.
    pub cpu_user_per_io: f64,
    /// System CPU seconds per I/O.
    pub cpu_sys_per_io: f64,
    /// CPU seconds per I/O of the whole process over its life: fio's
    /// start-up and exit included (`wait4`); for ringkit's engines the same
    /// as the charged figure.
    #[serde(default)]
    pub whole_cpu_per_io: f64,
    /// `io_uring_enter` calls per I/O (raw io_uring engines).
    pub enters_per_io: Option<f64>,
    /// Setup that took effect.
    pub setup: String,
    /// Why it failed.
    pub error: Option<String>,
}

/// One (job, engine) over its rounds.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FileRow {
    /// Job.
    pub job: Job,
    /// Engine.
    pub engine: Engine,
    /// Engine name.
    pub name: String,
    /// Queue depth actually kept.
    pub effective_qd: u32,
    /// IOPS: median, min, max.
    pub iops: Stat,
    /// MiB/s (median).
    pub mib_s: f64,
    /// Latency mean, µs (median over rounds).
    pub lat_avg_us: f64,
    /// p50, µs.
    pub lat_p50_us: f64,
    /// p99, µs.
    pub lat_p99_us: f64,
    /// CPU µs per I/O, user + system (median).
    pub cpu_us_per_io: f64,
    /// User part.
    pub cpu_user_us: f64,
    /// System part.
    pub cpu_sys_us: f64,
    /// Whole-process CPU µs per I/O (fio: start-up and exit included).
    pub whole_cpu_us: f64,
    /// io_uring_enter per I/O.
    pub enters_per_io: Option<f64>,
    /// IOPS / the fio peer's IOPS (same job, same options).
    pub iops_vs_fio: Option<f64>,
    /// CPU per I/O / the fio peer's.
    pub cpu_vs_fio: Option<f64>,
    /// System CPU per I/O / the fio peer's (with SQPOLL: the poller's and
    /// the submissions' kernel time, without how each side reaps).
    pub sys_vs_fio: Option<f64>,
    /// Which fio row the ratios use.
    pub fio_peer: Option<String>,
    /// Setup that took effect.
    pub setup: String,
    /// Good samples.
    pub ok_samples: usize,
    /// All samples.
    pub samples: usize,
}

/// Where the test file lived.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FileTarget {
    /// Path of the test file (removed afterwards).
    pub path: String,
    /// Block device (`/sys/dev/block/MAJ:MIN`), if found.
    pub device: String,
    /// Filesystem type (from statfs), e.g. ext4, tmpfs.
    pub fs: String,
    /// Seconds it took to create and fill the file.
    pub fill_secs: f64,
    /// IOPOLL on this file: `Ok` or why not.
    pub iopoll: Result<(), String>,
}

/// Everything a file run produced.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FileResults {
    /// Machine and tool.
    pub system: SystemInfo,
    /// Settings.
    pub config: FileConfig,
    /// The test file.
    pub target: FileTarget,
    /// fio's version, or why fio rows were skipped.
    pub fio: Result<String, String>,
    /// Per (job, engine).
    pub rows: Vec<FileRow>,
    /// Raw samples.
    pub samples: Vec<FileSample>,
    /// Skipped (job/engine, reason).
    pub skipped: Vec<(String, String)>,
    /// Warnings printed with the results.
    pub warnings: Vec<String>,
    /// Wall time, seconds.
    pub wall_secs: f64,
}
