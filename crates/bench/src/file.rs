//! The file I/O study (`ringkit bench file`, `ringkit compare file`): a
//! small fio-like job runner on ringkit, side by side with fio.
//!
//! A job is a direction (`read`, `write`, `randread`, `randwrite`), a block
//! size, a queue depth, `O_DIRECT` or buffered, and a submission batch
//! ([`Job::parse`]: `randread,bs=4k,qd=32,direct=1,batch=1`). The tool creates one test file of the
//! asked size in the directory the user names (default: the temp dir),
//! fills it with pseudo-random bytes, drops it from the page cache, and
//! removes it at the end.
//!
//! Engines ([`Engine`]):
//! - `uring[-fixed][-sqpoll][-iopoll]`: written directly on `ringkit-uring`,
//!   with the setup flags fio's io_uring engine uses (`COOP_TASKRUN`,
//!   `SINGLE_ISSUER|DEFER_TASKRUN`, stripped where refused). `qd` operations
//!   are kept in flight: every CQE is re-queued at once, and the queued
//!   SQEs are submitted as soon as `batch` of them wait (default 1: each at
//!   once, like fio's default `iodepth_batch_submit=1`); `submit_and_wait(1)`
//!   submits the rest and waits.
//!
//!   Why the default is 1: on this project's reference VM (virtio-blk,
//!   mq-deadline) submitting the re-queued reads in one enter per reap
//!   (`batch=32`) cost 8-20% of the IOPS against fio (device latency p50 470
//!   against 364 us) for 13% less CPU per I/O; io_uring plugs a batch of
//!   three or more reads, so the disk gets them in one kick. Submitting each
//!   read at once matched fio (1.03x). The full study runs both. `fixed`:
//!   one registered buffer (`READ_FIXED`/`WRITE_FIXED`) and a registered
//!   file; `sqpoll`: the poller pinned to another CPU (refused when it would
//!   share the submitter's CPU — on a 2-core machine that setup collapses);
//!   `iopoll`: `IORING_SETUP_IOPOLL`, probed first (most VM disks have no
//!   poll queues and answer `EOPNOTSUPP`).
//! - `rt-uring`, `rt-epoll`: `qd` ringkit tasks looping on
//!   `File::read_at`/`write_at`. On epoll files have no readiness, so each
//!   call is an inline `pread`/`pwrite`: effectively queue depth 1, fio's
//!   psync stand-in.
//! - `fio-*` ([`crate::fio`]): the same job through fio's io_uring, libaio
//!   and psync engines, skipped with an install hint when fio is missing.
//!
//! Latency is from submission (push of the SQE, or the call) to the reap of
//! the completion, like fio's `lat` (which the fio rows report). CPU per I/O
//! is this process's user+system time over the window (`getrusage`, which
//! includes the SQPOLL kernel thread), or fio's `usr_cpu`/`sys_cpu`.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit::buf::{AlignedBuf, IoBufMut};
use ringkit::Backend;
use ringkit_uring::opcode::{self, Target};
use ringkit_uring::{sys, IoUring};
use serde::Serialize;

use crate::fio::{self, FioEngine, FioJob};
use crate::harness::latency::{now_ns, process_cpu, rotation, LatencySummary};
use crate::harness::rng::Rng;
use crate::harness::stat::{stat, Stat};
use crate::harness::study::{Section, StudyOpts};
use crate::harness::sysinfo::SystemInfo;

/// Direction and pattern of a job (fio's `--rw` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Rw {
    /// Sequential read.
    Read,
    /// Sequential write.
    Write,
    /// Random read.
    RandRead,
    /// Random write.
    RandWrite,
}

impl Rw {
    /// fio's name.
    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
        }
    }
    /// Writes?
    pub fn is_write(self) -> bool {
        matches!(self, Rw::Write | Rw::RandWrite)
    }
    /// Random offsets?
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite)
    }
}

/// One job: what to do, not how long or on which file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Direction and pattern.
    pub rw: Rw,
    /// Block size, bytes.
    pub bs: u32,
    /// Queue depth (operations in flight).
    pub qd: u32,
    /// `O_DIRECT` (else buffered).
    pub direct: bool,
    /// Submit once this many operations are queued (fio's
    /// `iodepth_batch_submit`): 1, the default as in fio, submits each
    /// operation the moment it is queued; `qd` submits in batches, with one
    /// `io_uring_enter` per reap. Batching costs fewer syscalls but on some
    /// devices more latency (a plugged batch reaches a virtio disk in one
    /// kick): the study shows both.
    pub batch: u32,
}

/// A size with an optional binary suffix: `4096`, `4k`, `256m`, `1g`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (num, mul) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("bad size {s:?} (e.g. 4096, 4k, 256m, 1g)"))
}

impl Job {
    /// Parse `RW[,bs=SIZE][,qd=N][,direct=0|1][,batch=N]`, e.g.
    /// `randread,bs=4k,qd=32`. Defaults: bs 4k, qd 32, direct 1, batch 1.
    /// `iodepth=` is accepted for `qd=`, `iodepth_batch_submit=` for
    /// `batch=`; a batch above `qd` is cut to `qd`.
    pub fn parse(s: &str) -> Result<Job, String> {
        let mut parts = s.split(',').map(str::trim);
        let rw = match parts.next().unwrap_or("") {
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            other => {
                return Err(format!(
                    "job {s:?}: unknown direction {other:?} (read, write, randread, randwrite)"
                ))
            }
        };
        let mut job = Job {
            rw,
            bs: 4096,
            qd: 32,
            direct: true,
            batch: 1,
        };
        for p in parts.filter(|p| !p.is_empty()) {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("job {s:?}: {p:?} is not key=value"))?;
            match k {
                "bs" => {
                    let bs = parse_size(v)?;
                    job.bs = u32::try_from(bs)
                        .ok()
                        .filter(|b| b % 512 == 0)
                        .ok_or_else(|| {
                            format!("job {s:?}: bs must be a multiple of 512 below 4 GiB")
                        })?;
                }
                "qd" | "iodepth" => {
                    job.qd = v
                        .parse::<u32>()
                        .ok()
                        .filter(|q| (1..=4096).contains(q))
                        .ok_or_else(|| format!("job {s:?}: qd must be 1..=4096"))?;
                }
                "direct" => {
                    job.direct = match v {
                        "1" | "true" | "yes" => true,
                        "0" | "false" | "no" => false,
                        _ => return Err(format!("job {s:?}: direct=0 or 1")),
                    }
                }
                "batch" | "iodepth_batch_submit" => {
                    job.batch = v
                        .parse::<u32>()
                        .ok()
                        .filter(|b| (1..=4096).contains(b))
                        .ok_or_else(|| format!("job {s:?}: batch must be 1..=4096"))?;
                }
                _ => {
                    return Err(format!(
                        "job {s:?}: unknown key {k:?} (bs, qd, direct, batch)"
                    ))
                }
            }
        }
        job.batch = job.batch.min(job.qd);
        Ok(job)
    }

    /// `randread 4k qd32 direct`.
    pub fn label(&self) -> String {
        let bs = if self.bs % 1024 == 0 {
            format!("{}k", self.bs / 1024)
        } else {
            self.bs.to_string()
        };
        let batch = if self.batch > 1 {
            format!(" batch{}", self.batch)
        } else {
            String::new()
        };
        format!(
            "{} {bs} qd{} {}{batch}",
            self.rw.name(),
            self.qd,
            if self.direct { "direct" } else { "buffered" }
        )
    }
}

/// How the I/O is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Engine {
    /// Directly on `ringkit-uring`.
    Uring {
        /// Registered buffer + registered file.
        fixed: bool,
        /// SQPOLL on another CPU.
        sqpoll: bool,
        /// IOPOLL.
        iopoll: bool,
    },
    /// ringkit tasks on this backend.
    Rt(#[serde(serialize_with = "ser_backend")] Backend),
    /// fio.
    Fio(FioEngine),
}

fn ser_backend<S: serde::Serializer>(b: &Backend, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(b)
}

impl Engine {
    /// Short name (also what `--engines` takes).
    pub fn name(self) -> String {
        match self {
            Engine::Uring {
                fixed,
                sqpoll,
                iopoll,
            } => {
                let mut s = "uring".to_string();
                for (on, n) in [(fixed, "-fixed"), (sqpoll, "-sqpoll"), (iopoll, "-iopoll")] {
                    if on {
                        s.push_str(n);
                    }
                }
                s
            }
            Engine::Rt(b) => format!("rt-{b}"),
            Engine::Fio(f) => f.name(),
        }
    }

    fn sqpoll(self) -> bool {
        matches!(
            self,
            Engine::Uring { sqpoll: true, .. }
                | Engine::Fio(FioEngine::IoUring { sqpoll: true, .. })
        )
    }

    fn iopoll(self) -> bool {
        matches!(
            self,
            Engine::Uring { iopoll: true, .. }
                | Engine::Fio(FioEngine::IoUring { hipri: true, .. })
        )
    }

    /// The fio row this engine is judged against (same options).
    pub fn fio_peer(self) -> Option<Engine> {
        match self {
            Engine::Uring {
                fixed,
                sqpoll,
                iopoll,
            } => Some(Engine::Fio(FioEngine::IoUring {
                fixed,
                sqpoll,
                hipri: iopoll,
            })),
            Engine::Rt(Backend::Epoll) => Some(Engine::Fio(FioEngine::Psync)),
            Engine::Rt(_) => Some(Engine::Fio(FioEngine::IoUring {
                fixed: false,
                sqpoll: false,
                hipri: false,
            })),
            Engine::Fio(_) => None,
        }
    }

    /// Queue depth this engine really keeps for a job of depth `qd`.
    pub fn effective_qd(self, qd: u32) -> u32 {
        match self {
            Engine::Rt(Backend::Epoll) | Engine::Fio(FioEngine::Psync) => 1,
            _ => qd,
        }
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Engine, String> {
        let flags = |rest: &str| -> Option<(bool, bool, bool)> {
            let (mut f, mut sq, mut io) = (false, false, false);
            for p in rest.split('-').filter(|p| !p.is_empty()) {
                match p {
                    "fixed" => f = true,
                    "sqpoll" => sq = true,
                    "iopoll" => io = true,
                    _ => return None,
                }
            }
            Some((f, sq, io))
        };
        let bad = || {
            format!(
                "unknown engine {s:?}: uring[-fixed][-sqpoll][-iopoll], rt-uring, rt-epoll, \
                 fio-io_uring[-fixed][-sqpoll][-iopoll], fio-libaio, fio-psync"
            )
        };
        match s {
            "rt-uring" => Ok(Engine::Rt(Backend::Uring)),
            "rt-epoll" => Ok(Engine::Rt(Backend::Epoll)),
            "fio-libaio" => Ok(Engine::Fio(FioEngine::Libaio)),
            "fio-psync" => Ok(Engine::Fio(FioEngine::Psync)),
            _ => {
                if let Some(rest) = s.strip_prefix("fio-io_uring") {
                    let (fixed, sqpoll, hipri) = flags(rest).ok_or_else(bad)?;
                    Ok(Engine::Fio(FioEngine::IoUring {
                        fixed,
                        sqpoll,
                        hipri,
                    }))
                } else if let Some(rest) = s.strip_prefix("uring") {
                    let (fixed, sqpoll, iopoll) = flags(rest).ok_or_else(bad)?;
                    Ok(Engine::Uring {
                        fixed,
                        sqpoll,
                        iopoll,
                    })
                } else {
                    Err(bad())
                }
            }
        }
    }
}

/// A job with the engines to run it on.
#[derive(Debug, Clone, Serialize)]
pub struct JobPlan {
    /// The job.
    pub job: Job,
    /// Engines, interleaved.
    pub engines: Vec<Engine>,
}

/// Settings of a file run.
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Default, Serialize)]
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
    /// `io_uring_enter` calls per I/O (raw io_uring engines).
    pub enters_per_io: Option<f64>,
    /// Setup that took effect.
    pub setup: String,
    /// Why it failed.
    pub error: Option<String>,
}

/// One (job, engine) over its rounds.
#[derive(Debug, Clone, Serialize)]
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
    /// io_uring_enter per I/O.
    pub enters_per_io: Option<f64>,
    /// IOPS / the fio peer's IOPS (same job, same options).
    pub iops_vs_fio: Option<f64>,
    /// CPU per I/O / the fio peer's.
    pub cpu_vs_fio: Option<f64>,
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
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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

/// The test file, removed on drop.
#[derive(Debug)]
pub struct TestFile {
    path: PathBuf,
}

impl TestFile {
    /// Create `size` bytes of pseudo-random data under `dir`, fsync them and
    /// drop them from the page cache.
    pub fn create(dir: &Path, size: u64) -> io::Result<TestFile> {
        use std::io::Write;
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!(
            "ringkit-file-{}-{}.dat",
            std::process::id(),
            now_ns()
        ));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        let t = TestFile { path };
        let mut rng = Rng::new(now_ns());
        let mut chunk = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            for w in chunk.chunks_exact_mut(8) {
                w.copy_from_slice(&rng.next_u64().to_ne_bytes());
            }
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        f.sync_all()?;
        // SAFETY: a valid fd; advice only.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        Ok(t)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Filesystem type and block device of `path`.
// `f_type` is i64 here but i32 on some architectures: keep the cast.
#[allow(clippy::unnecessary_cast)]
fn describe(path: &Path) -> (String, String) {
    use std::os::unix::fs::MetadataExt;
    let fs = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .ok()
        .and_then(|c| {
            // SAFETY: all-zero is a valid statfs.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            // SAFETY: a NUL-terminated path and a writable statfs.
            (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0).then_some(st.f_type)
        })
        .map_or_else(
            || "unknown".to_string(),
            |t| match t as i64 {
                0xEF53 => "ext4".into(),
                0x5846_5342 => "xfs".into(),
                0x9123_683E => "btrfs".into(),
                0x0102_1994 => "tmpfs".into(),
                0x794c_7630 => "overlayfs".into(),
                other => format!("fs magic {other:#x}"),
            },
        );
    let dev = std::fs::metadata(path).map_or_else(
        |_| "unknown".into(),
        |m| {
            let d = m.dev();
            let (maj, min) = (libc::major(d), libc::minor(d));
            let name = std::fs::read_to_string(format!("/sys/dev/block/{maj}:{min}/uevent"))
                .ok()
                .and_then(|u| {
                    u.lines()
                        .find_map(|l| l.strip_prefix("DEVNAME=").map(|n| format!("/dev/{n}")))
                })
                .unwrap_or_else(|| "no block device".into());
            format!("{name} ({maj}:{min})")
        },
    );
    (fs, dev)
}

fn open_std(path: &Path, job: &Job) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(job.rw.is_write())
        .custom_flags(if job.direct { libc::O_DIRECT } else { 0 })
        .open(path)
        .map_err(|e| {
            if job.direct && e.raw_os_error() == Some(libc::EINVAL) {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("O_DIRECT refused on {}: {e}", path.display()),
                )
            } else {
                e
            }
        })
}

/// Can this file be read with IOPOLL? One O_DIRECT read on an IOPOLL ring.
pub fn probe_iopoll(path: &Path, bs: u32) -> Result<(), String> {
    let job = Job {
        rw: Rw::RandRead,
        bs,
        qd: 1,
        direct: true,
        batch: 1,
    };
    let f = open_std(path, &job).map_err(|e| e.to_string())?;
    let mut ring = IoUring::builder(4)
        .iopoll()
        .build()
        .map_err(|e| format!("IOPOLL ring: {e}"))?;
    let mut buf = AlignedBuf::new(bs as usize, 4096);
    let e = opcode::Read::new(f.as_raw_fd().into(), buf.stable_mut_ptr(), bs)
        .build()
        .user_data(1);
    // SAFETY: `buf` outlives the read: we wait for its completion below and
    // leak the buffer if we cannot.
    unsafe { ring.push(e.sqe()) }.map_err(|_| "SQ full".to_string())?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Err(e) = ring.submit_and_wait(1) {
            if e.kind() != io::ErrorKind::Interrupted {
                std::mem::forget(buf);
                return Err(format!("io_uring_enter: {e}"));
            }
        }
        if let Some(c) = ring.completions().next() {
            return match c.res {
                r if r >= 0 => Ok(()),
                r if -r == libc::EOPNOTSUPP => Err(
                    "EOPNOTSUPP: the device has no poll queues (typical of VM disks; \
                     NVMe needs nvme.poll_queues>0)"
                        .into(),
                ),
                r => Err(format!("{}", io::Error::from_raw_os_error(-r))),
            };
        }
        if Instant::now() > deadline {
            std::mem::forget(buf);
            return Err("no completion within 5 s".into());
        }
    }
}

/// What one measured run gives back.
#[derive(Default)]
struct Measured {
    lat: Vec<u64>,
    secs: f64,
    cpu: (f64, f64),
    enters: Option<u64>,
    setup: String,
}

/// Offsets of a job: random blocks, or sequential and wrapping.
struct Offsets {
    rng: Rng,
    random: bool,
    next: u64,
    blocks: u64,
    bs: u64,
}

impl Offsets {
    fn new(job: &Job, size: u64, seed: u64) -> Offsets {
        let bs = u64::from(job.bs);
        Offsets {
            rng: Rng::new(seed),
            random: job.rw.is_random(),
            next: 0,
            blocks: (size / bs).max(1),
            bs,
        }
    }
    #[inline]
    fn next(&mut self) -> u64 {
        let b = if self.random {
            self.rng.range(0, self.blocks - 1)
        } else {
            let b = self.next;
            self.next = (self.next + 1) % self.blocks;
            b
        };
        b * self.bs
    }
}

/// The raw ringkit-uring engine.
fn run_uring(
    cfg: &FileConfig,
    path: &Path,
    job: &Job,
    (fixed, sqpoll, iopoll): (bool, bool, bool),
) -> io::Result<Measured> {
    let file = open_std(path, job)?;
    let fd = file.as_raw_fd();
    let (qd, bs) = (job.qd as usize, job.bs as usize);
    // Declared before the ring so that it is dropped after it; leaked below
    // if operations might still be in flight.
    let mut mem = AlignedBuf::new(qd * bs, 4096);
    if job.rw.is_write() {
        let mut rng = Rng::new(7);
        for w in mem.as_mut_slice().chunks_exact_mut(8) {
            w.copy_from_slice(&rng.next_u64().to_ne_bytes());
        }
    }
    let base = mem.stable_mut_ptr();
    // The flags fio's io_uring engine asks for (COOP_TASKRUN, SINGLE_ISSUER
    // and DEFER_TASKRUN: no IPI to post completions, task work runs when we
    // reap), so that "the same options" holds; refused ones are stripped
    // (DEFER_TASKRUN under SQPOLL) and the setup line says what took effect.
    let mut b = IoUring::builder((qd as u32).next_power_of_two())
        .coop_taskrun()
        .defer_taskrun();
    if sqpoll {
        b = b
            .sqpoll(Duration::from_millis(100))
            .sqpoll_cpu(cfg.sq_cpu as u32);
    }
    if iopoll {
        b = b.iopoll();
    }
    let mut ring = b.build()?;
    let target = if fixed {
        let iov = libc::iovec {
            iov_base: base.cast(),
            iov_len: qd * bs,
        };
        // SAFETY: `mem` outlives the registration: it is dropped after the
        // ring (or leaked), and only fixed operations touch it.
        unsafe { ring.register_buffers(&[iov]) }?;
        ring.register_files(&[fd])?;
        Target::Fixed(0)
    } else {
        Target::Fd(fd)
    };
    let mut m = Measured {
        setup: format!(
            "flags {}, {} SQ entries",
            ringkit_uring::flag_names(ring.setup_flags(), sys::SETUP_FLAG_NAMES),
            ring.sq().capacity()
        ),
        ..Default::default()
    };
    let write = job.rw.is_write();
    let push = |ring: &mut IoUring, slot: usize, off: u64| -> io::Result<()> {
        // SAFETY: slot < qd, so the slot's bytes lie inside `mem`.
        let p = unsafe { base.add(slot * bs) };
        let e = match (write, fixed) {
            (false, false) => opcode::Read::new(target, p, bs as u32).offset(off).build(),
            (false, true) => opcode::ReadFixed::new(target, p, bs as u32, 0)
                .offset(off)
                .build(),
            (true, false) => opcode::Write::new(target, p, bs as u32).offset(off).build(),
            (true, true) => opcode::WriteFixed::new(target, p, bs as u32, 0)
                .offset(off)
                .build(),
        };
        // SAFETY: the slot's bytes stay valid and unused by anything else
        // until this operation's CQE is reaped (INVARIANT of `mem` above).
        unsafe { ring.push(e.user_data(slot as u64).sqe()) }
            .map_err(|_| io::Error::other("SQ unexpectedly full"))
    };
    let mut offs = Offsets::new(job, cfg.size, now_ns());
    let mut started = vec![0u64; qd];
    let mut inflight = 0usize;
    // Submit once `batch` SQEs wait in the SQ; the wait below submits the
    // rest. The last SQE queued before that wait is left to it (`last`):
    // one enter instead of two.
    let batch = job.batch.max(1);
    let flush = |ring: &mut IoUring, last: bool| -> io::Result<()> {
        if !last && ring.sq().pending() >= batch {
            ring.submit()?;
        }
        Ok(())
    };
    let mut body = || -> io::Result<()> {
        let cpu0 = process_cpu();
        let enters0 = ring.enter_count();
        let t_start = now_ns();
        let deadline = t_start + (cfg.secs * 1e9) as u64;
        for (slot, s) in started.iter_mut().enumerate() {
            push(&mut ring, slot, offs.next())?;
            *s = now_ns();
            inflight += 1;
            flush(&mut ring, slot + 1 == qd)?;
        }
        let mut done: Vec<(usize, i32)> = Vec::with_capacity(qd);
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {}
                Err(e) => return Err(e),
            }
            let now = now_ns();
            done.clear();
            done.extend(ring.completions().map(|c| (c.user_data as usize, c.res)));
            // Reaped: no longer in flight, even if we stop at an error below.
            inflight -= done.len();
            for (i, &(slot, res)) in done.iter().enumerate() {
                if res != bs as i32 {
                    return Err(if res < 0 {
                        io::Error::from_raw_os_error(-res)
                    } else {
                        io::Error::other(format!("short I/O: {res} of {bs} bytes"))
                    });
                }
                if now < deadline {
                    m.lat.push(now - started[slot]);
                    push(&mut ring, slot, offs.next())?;
                    started[slot] = now_ns();
                    inflight += 1;
                    flush(&mut ring, i + 1 == done.len())?;
                }
            }
            if now >= deadline {
                let cpu1 = process_cpu();
                m.secs = (now - t_start) as f64 / 1e9;
                m.cpu = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
                m.enters = Some(ring.enter_count() - enters0);
                return Ok(());
            }
        }
    };
    let r = body();
    // Reap what is still in flight before the buffers can go (each wait
    // bounded, so a lost completion cannot hang the tool).
    let deadline = Instant::now() + Duration::from_secs(10);
    while inflight > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match ring.submit_and_wait_timeout(1, left) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(_) => break,
        }
        inflight -= ring.completions().count().min(inflight);
    }
    drop(ring);
    if inflight > 0 {
        // The kernel may still write into it: never free it.
        std::mem::forget(mem);
    }
    r.map(|()| m)
}

/// The runtime engine: `qd` tasks looping on read_at/write_at.
fn run_rt(cfg: &FileConfig, path: &Path, job: &Job, backend: Backend) -> io::Result<Measured> {
    let rt = ringkit::Builder::new()
        .backend(backend)
        .ignore_env()
        .build()
        .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.to_string()))?;
    let setup = rt.backend_report().to_string();
    let job = *job;
    let (size, secs) = (cfg.size, cfg.secs);
    let path = path.to_path_buf();
    rt.block_on(async move {
        let file = Rc::new(
            ringkit::fs::OpenOptions::new()
                .read(true)
                .write(job.rw.is_write())
                .direct(job.direct)
                .open(&path)
                .await?,
        );
        let m0 = ringkit::metrics();
        let cpu0 = process_cpu();
        let t_start = now_ns();
        let deadline = t_start + (secs * 1e9) as u64;
        let handles: Vec<_> = (0..job.qd)
            .map(|t| {
                let file = file.clone();
                ringkit::spawn(async move {
                    let bs = job.bs as usize;
                    let mut buf = AlignedBuf::new(bs, 4096);
                    let mut offs = Offsets::new(&job, size, now_ns() ^ u64::from(t) << 40);
                    let mut lat = Vec::new();
                    loop {
                        let t0 = now_ns();
                        if t0 >= deadline {
                            return Ok::<_, io::Error>(lat);
                        }
                        let off = offs.next();
                        let (res, b) = if job.rw.is_write() {
                            file.write_at(buf, off).await
                        } else {
                            file.read_at(buf, off).await
                        };
                        buf = b;
                        let n = res?;
                        if n != bs {
                            return Err(io::Error::other(format!("short I/O: {n} of {bs}")));
                        }
                        let t1 = now_ns();
                        if t1 < deadline {
                            lat.push(t1 - t0);
                        }
                    }
                })
            })
            .collect();
        let mut lat = Vec::new();
        for h in handles {
            lat.extend(
                h.await
                    .map_err(|e| io::Error::other(format!("task: {e:?}")))??,
            );
        }
        let cpu1 = process_cpu();
        let m1 = ringkit::metrics().since(&m0);
        Ok(Measured {
            lat,
            secs: (secs).min((now_ns() - t_start) as f64 / 1e9),
            cpu: (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1),
            enters: (backend == Backend::Uring).then_some(m1.uring_enters),
            setup,
        })
    })
}

/// Why `engine` must not run with `cfg`, if so; the bool says "only warn".
fn sqpoll_check(cfg: &FileConfig, engine: Engine) -> Option<(String, bool)> {
    if !engine.sqpoll() {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    (cores < 2 || cfg.sq_cpu == cfg.cpu).then(|| {
        (
            format!(
                "SQPOLL poller would share CPU {} with the submitter ({cores} CPUs online): \
                 the two compete for one CPU (fio's io_uring engine fell from 62k to 4.6k IOPS \
                 in this setup); give the poller its own CPU (--sq-cpu)",
                cfg.cpu
            ),
            cfg.allow_shared_sqpoll,
        )
    })
}

fn sample(cfg: &FileConfig, path: &Path, job: &Job, engine: Engine, round: usize) -> FileSample {
    let mut s = FileSample {
        job: job.label(),
        engine: engine.name(),
        round,
        ..Default::default()
    };
    let measured: io::Result<Measured> = match engine {
        Engine::Fio(fe) => {
            let fj = FioJob {
                file: path,
                size: cfg.size,
                bs: job.bs,
                rw: job.rw.name(),
                qd: job.qd,
                direct: job.direct,
                batch: job.batch,
                secs: cfg.secs,
                cpu: cfg.cpu,
                sq_cpu: cfg.sq_cpu,
            };
            match fio::run(&fj, fe) {
                Ok(r) => {
                    s.ios = r.ios;
                    s.secs = r.secs;
                    s.lat_avg = r.lat_avg;
                    s.lat_p50 = r.lat_p50;
                    s.lat_p99 = r.lat_p99;
                    (s.cpu_user_per_io, s.cpu_sys_per_io) = r.cpu_per_io();
                    s.setup = format!("{} {}", r.version, fio::args(&fj, fe).join(" "));
                    return s;
                }
                Err(e) => Err(e),
            }
        }
        _ => std::thread::scope(|sc| {
            sc.spawn(|| {
                ringkit::pin_to_cpu(cfg.cpu)?;
                match engine {
                    Engine::Uring {
                        fixed,
                        sqpoll,
                        iopoll,
                    } => run_uring(cfg, path, job, (fixed, sqpoll, iopoll)),
                    Engine::Rt(b) => run_rt(cfg, path, job, b),
                    Engine::Fio(_) => unreachable!("handled above"),
                }
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("measuring thread panicked")))
        }),
    };
    match measured {
        Ok(mut m) => {
            let l = LatencySummary::from_samples(&mut m.lat);
            s.ios = l.count;
            s.secs = m.secs;
            s.lat_avg = l.avg;
            s.lat_p50 = l.p50 as f64;
            s.lat_p99 = l.p99 as f64;
            let n = l.count.max(1) as f64;
            s.cpu_user_per_io = m.cpu.0 / n;
            s.cpu_sys_per_io = m.cpu.1 / n;
            s.enters_per_io = m.enters.map(|e| e as f64 / n);
            s.setup = m.setup;
            if l.count == 0 {
                s.error = Some("no I/O completed".into());
            }
        }
        Err(e) => s.error = Some(e.to_string()),
    }
    s
}

/// Run the file study. `progress` gets one line per sample.
pub fn run(cfg: &FileConfig, progress: &mut dyn FnMut(&str)) -> io::Result<FileResults> {
    let wall = Instant::now();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    let fio_version = fio::version();
    let uring_ok = IoUring::new(8).map(drop).map_err(|e| e.to_string());
    if cfg.size < 1 << 20 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the test file must be at least 1 MiB",
        ));
    }
    progress(&format!(
        "creating a {} MiB test file in {}",
        cfg.size >> 20,
        cfg.dir.display()
    ));
    let t_fill = Instant::now();
    let tf = TestFile::create(&cfg.dir, cfg.size)?;
    let (fs, device) = describe(tf.path());
    if fs == "tmpfs" {
        warnings.push(format!(
            "{} is on tmpfs: this measures memory, not a disk; name a directory on the disk (--dir)",
            cfg.dir.display()
        ));
    }
    let wants_iopoll = cfg
        .plans
        .iter()
        .flat_map(|p| &p.engines)
        .any(|e| e.iopoll());
    let iopoll = match &uring_ok {
        Ok(()) if wants_iopoll || cfg.plans.iter().any(|p| p.job.direct) => {
            let bs = cfg.plans.first().map_or(4096, |p| p.job.bs);
            probe_iopoll(tf.path(), bs)
        }
        Ok(()) => Err("not probed (no O_DIRECT job)".into()),
        Err(e) => Err(format!("io_uring unavailable: {e}")),
    };
    let target = FileTarget {
        path: tf.path().display().to_string(),
        device,
        fs,
        fill_secs: t_fill.elapsed().as_secs_f64(),
        iopoll,
    };
    // Decide what runs.
    let mut list: Vec<(Job, Engine)> = Vec::new();
    for p in &cfg.plans {
        for &e in &p.engines {
            let key = format!("{} / {}", p.job.label(), e.name());
            let why = match e {
                Engine::Fio(_) => fio_version.as_ref().err().cloned(),
                Engine::Uring { .. } | Engine::Rt(Backend::Uring) => uring_ok
                    .as_ref()
                    .err()
                    .map(|x| format!("io_uring unavailable: {x}")),
                _ => None,
            };
            let why = why.or_else(|| {
                (e.iopoll() && (!p.job.direct || target.iopoll.is_err())).then(|| {
                    format!(
                        "IOPOLL not supported here: {}",
                        if p.job.direct {
                            target.iopoll.clone().err().unwrap_or_default()
                        } else {
                            "needs O_DIRECT".into()
                        }
                    )
                })
            });
            let why = why.or_else(|| match sqpoll_check(cfg, e) {
                Some((w, true)) => {
                    warnings.push(format!("{key}: WARNING: {w}"));
                    None
                }
                Some((w, false)) => Some(w),
                None => None,
            });
            match why {
                Some(w) => skipped.push((key, w)),
                None => list.push((p.job, e)),
            }
        }
    }
    let total = list.len() * cfg.rounds;
    let mut samples = Vec::with_capacity(total);
    for round in 0..cfg.rounds {
        for i in rotation(list.len(), round) {
            let (job, e) = list[i];
            let s = sample(cfg, tf.path(), &job, e, round);
            progress(&format!(
                "[{}/{total}] round {round} {} / {}: {}",
                samples.len() + 1,
                s.job,
                s.engine,
                match &s.error {
                    Some(e) => format!("error: {e}"),
                    None => format!("{:.0} IOPS", s.ios as f64 / s.secs.max(1e-9)),
                }
            ));
            samples.push(s);
        }
    }
    drop(tf);
    let rows = summarize(&list, &samples);
    Ok(FileResults {
        system: SystemInfo::gather(),
        config: cfg.clone(),
        target,
        fio: fio_version,
        rows,
        samples,
        skipped,
        warnings,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

fn summarize(list: &[(Job, Engine)], samples: &[FileSample]) -> Vec<FileRow> {
    let mut rows: Vec<FileRow> = list
        .iter()
        .map(|&(job, engine)| {
            let (jl, en) = (job.label(), engine.name());
            let mine: Vec<&FileSample> = samples
                .iter()
                .filter(|s| s.job == jl && s.engine == en)
                .collect();
            let good: Vec<&&FileSample> = mine
                .iter()
                .filter(|s| s.error.is_none() && s.ios > 0 && s.secs > 0.0)
                .collect();
            let med =
                |f: &dyn Fn(&FileSample) -> f64| stat(good.iter().map(|s| f(s)).collect()).median;
            let epi: Vec<f64> = good.iter().filter_map(|s| s.enters_per_io).collect();
            let iops = stat(good.iter().map(|s| s.ios as f64 / s.secs).collect());
            FileRow {
                job,
                engine,
                name: en,
                effective_qd: engine.effective_qd(job.qd),
                mib_s: iops.median * f64::from(job.bs) / (1 << 20) as f64,
                iops,
                lat_avg_us: med(&|s| s.lat_avg) / 1e3,
                lat_p50_us: med(&|s| s.lat_p50) / 1e3,
                lat_p99_us: med(&|s| s.lat_p99) / 1e3,
                cpu_us_per_io: med(&|s| (s.cpu_user_per_io + s.cpu_sys_per_io) * 1e6),
                cpu_user_us: med(&|s| s.cpu_user_per_io * 1e6),
                cpu_sys_us: med(&|s| s.cpu_sys_per_io * 1e6),
                enters_per_io: (!epi.is_empty()).then(|| stat(epi).median),
                iops_vs_fio: None,
                cpu_vs_fio: None,
                fio_peer: None,
                setup: good.first().map_or_else(String::new, |s| s.setup.clone()),
                ok_samples: good.len(),
                samples: mine.len(),
            }
        })
        .collect();
    let peers: Vec<(Job, Engine, f64, f64)> = rows
        .iter()
        .filter(|r| r.ok_samples > 0)
        .map(|r| (r.job, r.engine, r.iops.median, r.cpu_us_per_io))
        .collect();
    for r in &mut rows {
        let Some(peer) = r.engine.fio_peer() else {
            continue;
        };
        if let Some(&(_, _, iops, cpu)) = peers.iter().find(|p| p.0 == r.job && p.1 == peer) {
            r.fio_peer = Some(peer.name());
            if r.ok_samples > 0 && iops > 0.0 {
                r.iops_vs_fio = Some(r.iops.median / iops);
                r.cpu_vs_fio = (cpu > 0.0).then(|| r.cpu_us_per_io / cpu);
            }
        }
    }
    rows
}

pub use crate::file_report::{markdown, section, table, targets};

fn engines(names: &[&str]) -> Vec<Engine> {
    names
        .iter()
        .map(|n| n.parse().expect("built-in engine names parse"))
        .collect()
}

/// The plans `ringkit compare file` runs. Full (about 3 minutes): 4 KiB
/// randread qd32 on every engine, randread qd1, sequential read qd32,
/// randwrite qd32 and randread qd32 submitted in batches of 32 on a few;
/// `--quick`: randread qd32 on six engines.
pub fn default_plans(quick: bool) -> Vec<JobPlan> {
    let job = |s: &str| Job::parse(s).expect("built-in job specs parse");
    if quick {
        return vec![JobPlan {
            job: job("randread,bs=4k,qd=32,direct=1"),
            engines: engines(&[
                "uring",
                "uring-fixed",
                "rt-uring",
                "rt-epoll",
                "fio-io_uring",
                "fio-psync",
            ]),
        }];
    }
    vec![
        JobPlan {
            job: job("randread,bs=4k,qd=32,direct=1"),
            engines: engines(&[
                "uring",
                "uring-fixed",
                "uring-sqpoll",
                "uring-iopoll",
                "rt-uring",
                "rt-epoll",
                "fio-io_uring",
                "fio-io_uring-fixed",
                "fio-io_uring-sqpoll",
                "fio-io_uring-iopoll",
                "fio-libaio",
                "fio-psync",
            ]),
        },
        JobPlan {
            job: job("randread,bs=4k,qd=1,direct=1"),
            engines: engines(&["uring", "rt-uring", "rt-epoll", "fio-io_uring", "fio-psync"]),
        },
        JobPlan {
            job: job("read,bs=128k,qd=32,direct=1"),
            engines: engines(&["uring", "fio-io_uring", "fio-libaio"]),
        },
        JobPlan {
            job: job("randwrite,bs=4k,qd=32,direct=1"),
            engines: engines(&["uring", "rt-uring", "fio-io_uring", "fio-libaio"]),
        },
        JobPlan {
            job: job("randread,bs=4k,qd=32,direct=1,batch=32"),
            engines: engines(&["uring", "uring-fixed", "fio-io_uring"]),
        },
    ]
}

/// The configuration `ringkit compare file` uses: the test file in the
/// temp dir (`TMPDIR`), 256 MiB (quick: 64 MiB), 5 rounds of 1.5 s (quick:
/// 3 of 1 s). A VM disk's IOPS drift ±15% between samples: more, shorter
/// interleaved rounds give steadier medians than few long ones.
pub fn config_for(opts: &StudyOpts) -> FileConfig {
    FileConfig {
        dir: std::env::temp_dir(),
        size: if opts.quick { 64 << 20 } else { 256 << 20 },
        plans: default_plans(opts.quick),
        rounds: opts.rounds.unwrap_or(if opts.quick { 3 } else { 5 }),
        secs: opts.secs.unwrap_or(if opts.quick { 1.0 } else { 1.5 }),
        cpu: opts.client_cpu,
        sq_cpu: opts.server_cpu,
        allow_shared_sqpoll: false,
    }
}

/// Run the file study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    Ok(section(&run(&config_for(opts), progress)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_jobs() {
        let j = Job::parse("randread,bs=4k,qd=32,direct=1").unwrap();
        assert_eq!(
            j,
            Job {
                rw: Rw::RandRead,
                bs: 4096,
                qd: 32,
                direct: true,
                batch: 1
            }
        );
        assert_eq!(j.label(), "randread 4k qd32 direct");
        let j = Job::parse("write, bs=128KiB, iodepth=1, direct=0").unwrap();
        assert_eq!(
            (j.rw, j.bs, j.qd, j.direct),
            (Rw::Write, 128 << 10, 1, false)
        );
        assert_eq!(Job::parse("read").unwrap().qd, 32);
        for bad in [
            "",
            "readwrite",
            "read,bs=100",
            "read,qd=0",
            "read,direct=2",
            "read,x=1",
            "read,bs",
        ] {
            assert!(Job::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn parses_batches() {
        let j = Job::parse("randread,qd=16,batch=8").unwrap();
        assert_eq!((j.qd, j.batch), (16, 8));
        assert_eq!(j.label(), "randread 4k qd16 direct batch8");
        // Cut to the queue depth; 1 is not shown.
        assert_eq!(Job::parse("read,qd=4,batch=64").unwrap().batch, 4);
        assert_eq!(
            Job::parse("read,iodepth_batch_submit=1").unwrap().label(),
            "read 4k qd32 direct"
        );
        assert!(Job::parse("read,batch=0").is_err());
        assert!(Job::parse("read,batch=x").is_err());
    }

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("4x").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn engine_names_round_trip() {
        for n in [
            "uring",
            "uring-fixed",
            "uring-sqpoll",
            "uring-fixed-sqpoll",
            "uring-iopoll",
            "rt-uring",
            "rt-epoll",
            "fio-io_uring",
            "fio-io_uring-fixed",
            "fio-io_uring-sqpoll",
            "fio-libaio",
            "fio-psync",
        ] {
            let e: Engine = n.parse().unwrap();
            assert_eq!(e.name(), n);
        }
        assert!("uring-fast".parse::<Engine>().is_err());
        assert!("fio-spdk".parse::<Engine>().is_err());
        let e: Engine = "uring-fixed".parse().unwrap();
        assert_eq!(e.fio_peer().unwrap().name(), "fio-io_uring-fixed");
        assert_eq!(Engine::Rt(Backend::Epoll).effective_qd(32), 1);
    }

    #[test]
    fn shared_sqpoll_is_refused_unless_allowed() {
        let mut cfg = config_for(&StudyOpts {
            quick: true,
            rounds: None,
            secs: None,
            server_cpu: 0,
            client_cpu: 0,
            peer_syscalls: None,
            out_dir: PathBuf::new(),
            ringkit_bin: PathBuf::new(),
            peer_bin: Err(String::new()),
            want_peer_syscalls: false,
            conns: Vec::new(),
            msg_len: 512,
            only: Vec::new(),
        });
        let e: Engine = "uring-sqpoll".parse().unwrap();
        assert_eq!(sqpoll_check(&cfg, e).map(|x| x.1), Some(false));
        cfg.allow_shared_sqpoll = true;
        assert_eq!(sqpoll_check(&cfg, e).map(|x| x.1), Some(true));
        assert!(sqpoll_check(&cfg, "uring".parse().unwrap()).is_none());
    }

    #[test]
    fn offsets_stay_in_the_file() {
        let job = Job::parse("randread,bs=4k").unwrap();
        let mut o = Offsets::new(&job, 1 << 20, 3);
        for _ in 0..10_000 {
            let off = o.next();
            assert!(off % 4096 == 0 && off + 4096 <= 1 << 20);
        }
        let job = Job::parse("read,bs=4k").unwrap();
        let mut o = Offsets::new(&job, 3 * 4096, 3);
        let v: Vec<u64> = (0..4).map(|_| o.next()).collect();
        assert_eq!(v, vec![0, 4096, 8192, 0]);
    }
}
