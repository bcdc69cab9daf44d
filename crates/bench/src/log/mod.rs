//! The durable-log study: commits per second and commit latency of
//! `ringkit-log` against the same group-commit design on tokio and on std
//! threads, and against fio's synced sequential writes (the device's limit).
//!
//! [`run`] is one contender's run, in the process that calls it (`ringkit
//! log bench` runs it in a child, pinned, so its CPU is its own); the
//! study ([`study()`]) starts those children and fio, interleaved.
//!
//! # What the peers do not share with ringkit-log
//!
//! - **Pipelining.** The peers keep one batch in flight, while ringkit-log
//!   runs with two. ringkit-log's own A/B puts that at 0.98x (buffered) and
//!   1.04x (`O_DIRECT`) of its commits/s, in `log-pipeline-2026-11-27`.
//! - **Durable writes.** Every peer makes a batch durable as ringkit-log
//!   does by default, with one `RWF_DSYNC` write (`pwritev2` on tokio's
//!   blocking pool and on std threads; glommio's `DmaFile` takes no
//!   per-write flags, so its files are opened `O_DSYNC`). `--linked-sync`
//!   turns all of them back to write then `fdatasync`; glommio's API cannot
//!   link a write to its sync.
//! - **Rollover.** The glommio peer opens its next file on the committer's
//!   path, once per 256 MiB segment.
//! - **Sync threads.** On io_uring an `fdatasync` (under `--linked-sync`,
//!   or the one for a batch written beside another) runs on the kernel's
//!   io-wq threads. These inherit the pinned affinity, so the study stays on
//!   one CPU: `Cpus_allowed_list` of `iou-wrk` is `0` under
//!   `log bench --cpu 0`, checked on 6.18.44. Their CPU is counted, since
//!   `RUSAGE_SELF` includes them.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ringkit::Backend;
use serde::{Deserialize, Serialize};

use crate::harness::sysinfo::CpuTimes;

mod glommio_peer;
mod peers;
pub mod study;

pub use study::study;

/// Which log implementation a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEngine {
    /// `ringkit-log` on one ringkit thread.
    Ringkit(Backend),
    /// The same design on a tokio current-thread runtime: a group-commit
    /// task; each batch's write and `fdatasync` in one `spawn_blocking`
    /// (what `tokio::fs` does per call, with one hop instead of two).
    Tokio,
    /// The same design on std threads, one per writer: the first writer to
    /// find no flush in progress writes and syncs everything queued, under
    /// a mutex; the others wait on a condition variable.
    Std,
    /// The same design on glommio: a committer task, each batch written
    /// with `DmaFile::write_at` and `fdatasync` (`O_DIRECT` only).
    Glommio,
}

impl LogEngine {
    /// Short name: `ringkit-uring`, `ringkit-epoll`, `tokio`, `std`, `glommio`.
    pub fn name(self) -> String {
        match self {
            LogEngine::Ringkit(b) => format!("ringkit-{b}"),
            LogEngine::Tokio => "tokio".into(),
            LogEngine::Std => "std".into(),
            LogEngine::Glommio => "glommio".into(),
        }
    }
}

impl std::str::FromStr for LogEngine {
    type Err = String;
    fn from_str(s: &str) -> Result<LogEngine, String> {
        match s {
            "ringkit" | "ringkit-auto" => Ok(LogEngine::Ringkit(Backend::Auto)),
            "ringkit-uring" => Ok(LogEngine::Ringkit(Backend::Uring)),
            "ringkit-epoll" => Ok(LogEngine::Ringkit(Backend::Epoll)),
            "tokio" => Ok(LogEngine::Tokio),
            "std" => Ok(LogEngine::Std),
            "glommio" => Ok(LogEngine::Glommio),
            _ => Err(format!(
                "{s:?}: engines are ringkit, ringkit-uring, ringkit-epoll, tokio, std, glommio"
            )),
        }
    }
}

/// One run.
#[derive(Debug, Clone)]
pub struct LogBenchConfig {
    /// Directory of the log (made if missing; emptied first).
    pub dir: PathBuf,
    /// Concurrent writers, each appending one record at a time.
    pub writers: usize,
    /// Payload bytes per record.
    pub record: usize,
    /// Measured seconds.
    pub secs: f64,
    /// `O_DIRECT`.
    pub direct: bool,
    /// Which implementation.
    pub engine: LogEngine,
    /// Bytes of the log's file (a segment for ringkit-log; the peers write
    /// a file of this size, zero-filled before the run, round and round).
    pub file_size: u64,
    /// Most bytes per batch.
    pub max_batch: usize,
    /// ringkit-log's batches in flight (1: the serial commit; 2: the next
    /// batch written while one syncs). The peers keep one.
    pub batches_in_flight: u32,
    /// ringkit-log's `Options::dsync_writes`: a batch with none before it
    /// in flight goes as one `RWF_DSYNC` write. The peers then write with
    /// `RWF_DSYNC` too (glommio: an `O_DSYNC` file), else write then
    /// `fdatasync`.
    pub dsync_writes: bool,
}

/// What one run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LogBenchResult {
    /// Contender name.
    pub engine: String,
    /// Writers.
    pub writers: usize,
    /// Payload bytes per record.
    pub record: usize,
    /// `O_DIRECT`.
    pub direct: bool,
    /// Appends that resolved (durable) in the window.
    pub commits: u64,
    /// Window, seconds.
    pub secs: f64,
    /// Batches written (one `fdatasync` each).
    pub batches: u64,
    /// Bytes written to the file (framing included).
    pub bytes: u64,
    /// Commit latency (append to durable), µs.
    pub p50_us: f64,
    /// p99, µs.
    pub p99_us: f64,
    /// p99.9, µs.
    pub p999_us: f64,
    /// Max, µs.
    pub max_us: f64,
    /// CPU seconds of the process (all threads) in the window.
    pub cpu_s: f64,
    /// Files in the log's directory at the end (segments and the rest),
    /// counted before the directory is removed.
    #[serde(default)]
    pub files: u64,
}

impl LogBenchResult {
    /// Commits per second.
    pub fn commits_per_s(&self) -> f64 {
        self.commits as f64 / self.secs.max(1e-9)
    }
    /// Written MB (10^6 bytes) per second.
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.secs.max(1e-9)
    }
    /// Average bytes per batch.
    pub fn batch_bytes(&self) -> f64 {
        self.bytes as f64 / self.batches.max(1) as f64
    }
    /// CPU µs per commit.
    pub fn cpu_us_per_commit(&self) -> f64 {
        self.cpu_s * 1e6 / self.commits.max(1) as f64
    }
}

/// The payload every writer appends (its content does not matter; its
/// length does).
fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8).collect()
}

/// Commit latencies, µs, with 3 significant digits.
fn histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

fn finish(
    cfg: &LogBenchConfig,
    h: &hdrhistogram::Histogram<u64>,
    window: Duration,
    cpu: CpuTimes,
    batches: u64,
    bytes: u64,
) -> LogBenchResult {
    LogBenchResult {
        engine: cfg.engine.name(),
        writers: cfg.writers,
        record: cfg.record,
        direct: cfg.direct,
        commits: h.len(),
        secs: window.as_secs_f64(),
        batches,
        bytes,
        p50_us: h.value_at_quantile(0.5) as f64,
        p99_us: h.value_at_quantile(0.99) as f64,
        p999_us: h.value_at_quantile(0.999) as f64,
        max_us: h.max() as f64,
        cpu_s: cpu.user + cpu.system,
        files: 0,
    }
}

/// Run one contender for `cfg.secs` and measure it. `cfg.dir` must not
/// exist (a path that does is refused: it may hold a live log); it is
/// made (with its `LOCK` held, so no log can be started there meanwhile),
/// the contender's files are made in `cfg.dir/log` (and, for the peers,
/// zero-filled) before the window opens, and what it made is removed after
/// (never anything another process put there meanwhile).
pub fn run(cfg: &LogBenchConfig) -> io::Result<LogBenchResult> {
    if cfg.writers == 0 || cfg.record == 0 {
        return Err(crate::harness::err::invalid_input(
            "want at least one writer and a record of at least one byte",
        ));
    }
    // `dir` appears with its LOCK held (a log started there meanwhile
    // fails); the contender writes in `dir/log`; all of it goes after.
    let mut made = crate::harness::made_dir::MadeDir::new_locked(&cfg.dir)?;
    let inner = LogBenchConfig {
        dir: made.subdir("log")?,
        ..cfg.clone()
    };
    let mut r = match cfg.engine {
        LogEngine::Ringkit(b) => run_ringkit(&inner, b),
        LogEngine::Tokio => peers::run_tokio(&inner),
        LogEngine::Std => peers::run_std(&inner),
        LogEngine::Glommio => glommio_peer::run_glommio(&inner),
    }?;
    r.files = std::fs::read_dir(&inner.dir)?.count() as u64;
    Ok(r)
}

fn run_ringkit(cfg: &LogBenchConfig, backend: Backend) -> io::Result<LogBenchResult> {
    use std::cell::RefCell;
    use std::rc::Rc;
    let rt = ringkit::Builder::new().backend(backend).build()?;
    rt.block_on(async {
        let opts = ringkit_log::Options {
            direct: cfg.direct,
            segment_size: cfg.file_size,
            max_batch: cfg.max_batch,
            batches_in_flight: cfg.batches_in_flight,
            dsync_writes: cfg.dsync_writes,
            ..ringkit_log::Options::default()
        };
        let log = ringkit_log::Log::open(&cfg.dir, opts).await?;
        let hist = Rc::new(RefCell::new(histogram()));
        let before = log.stats();
        let cpu0 = CpuTimes::own();
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(cfg.secs);
        let writers: Vec<_> = (0..cfg.writers)
            .map(|_| {
                let (log, hist) = (log.clone(), hist.clone());
                let data = payload(cfg.record);
                ringkit::spawn(async move {
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        log.append(data.clone()).await?;
                        let _ = hist.borrow_mut().record(t.elapsed().as_micros() as u64);
                    }
                    Ok::<_, io::Error>(())
                })
            })
            .collect();
        for w in writers {
            w.await.map_err(|e| io::Error::other(e.to_string()))??;
        }
        let window = start.elapsed();
        let cpu = CpuTimes::own().since(&cpu0);
        let after = log.stats();
        let h = hist.borrow();
        Ok(finish(
            cfg,
            &h,
            window,
            cpu,
            after.batches - before.batches,
            after.bytes_written - before.bytes_written,
        ))
    })
}
