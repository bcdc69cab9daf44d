//! fio as a peer of the file study: build the command line for a job, run
//! it pinned to a CPU with `--output-format=json`, and read IOPS, latency
//! and CPU out of its report.
//!
//! fio is charged the CPU of the threads that do its I/O, over its I/O,
//! as ringkit's engine is charged its process's CPU inside its window:
//! - its job thread, from fio's own `usr_cpu`/`sys_cpu` (`RUSAGE_THREAD`,
//!   taken around the I/O loop: fio's start-up, clock calibration and exit
//!   are outside it);
//! - the kernel threads of its ring (`iou-sqp-*`, the SQPOLL poller, and
//!   `iou-wrk-*`, io-wq workers), read from `/proc/PID/task` every 5 ms
//!   while fio runs ([`crate::harness::tasks`]); they live from the ring's
//!   setup, just before the I/O, to its teardown, just after.
//!
//! fio runs with `--thread`, so its job is a thread of the process we
//! watch (without it fio forks the job). The whole process tree's CPU from
//! `wait4` is kept beside ([`FioResult::process_cpu_per_io`]): it adds fio's
//! start-up (115-190 ms of CPU here, half of it clock calibration), which
//! until 2026-11-26 was charged to fio's rows.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::harness::tasks::run_watching;

/// A fio ioengine with the options the study compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum FioEngine {
    /// `--ioengine=io_uring`, optionally with `--fixedbufs --registerfiles`,
    /// `--sqthread_poll` (poller on `sq_cpu`) or `--hipri` (IOPOLL).
    IoUring {
        /// Fixed buffers and registered files.
        fixed: bool,
        /// SQPOLL.
        sqpoll: bool,
        /// IOPOLL (`--hipri`).
        hipri: bool,
    },
    /// `--ioengine=libaio`.
    Libaio,
    /// `--ioengine=psync` (synchronous: queue depth 1 whatever is asked).
    Psync,
}

impl FioEngine {
    /// Short name: `fio-io_uring-fixed`, `fio-libaio`, ….
    pub fn name(self) -> String {
        match self {
            FioEngine::IoUring {
                fixed,
                sqpoll,
                hipri,
            } => {
                let mut s = "fio-io_uring".to_string();
                if fixed {
                    s.push_str("-fixed");
                }
                if sqpoll {
                    s.push_str("-sqpoll");
                }
                if hipri {
                    s.push_str("-iopoll");
                }
                s
            }
            FioEngine::Libaio => "fio-libaio".into(),
            FioEngine::Psync => "fio-psync".into(),
        }
    }
}

/// What one fio job needs to know.
#[derive(Debug, Clone)]
pub struct FioJob<'a> {
    /// The test file.
    pub file: &'a Path,
    /// Its size in bytes.
    pub size: u64,
    /// Block size.
    pub bs: u32,
    /// fio's `--rw` value.
    pub rw: &'a str,
    /// Queue depth.
    pub qd: u32,
    /// `O_DIRECT`.
    pub direct: bool,
    /// Operations per submission (`--iodepth_batch_submit`; 1 is fio's
    /// default and is not passed).
    pub batch: u32,
    /// Run time, seconds.
    pub secs: f64,
    /// CPU fio runs on.
    pub cpu: usize,
    /// CPU of the SQPOLL thread.
    pub sq_cpu: usize,
}

/// What fio reported.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct FioResult {
    /// I/Os completed.
    pub ios: u64,
    /// Run time, seconds.
    pub secs: f64,
    /// IOPS as fio computed it.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Total latency (submission to completion), ns: mean, p50, p99.
    pub lat_avg: f64,
    /// p50, ns.
    pub lat_p50: f64,
    /// p99, ns.
    pub lat_p99: f64,
    /// User CPU, percent of run time, as fio reports it: its job
    /// thread's only (`RUSAGE_THREAD`), without the SQPOLL poller or io-wq
    /// workers. Kept for reference; not what the study compares.
    pub usr_cpu: f64,
    /// System CPU, percent of run time, as fio reports it (job thread).
    pub sys_cpu: f64,
    /// User seconds of the whole fio process tree (all threads, start-up
    /// and exit included), measured by us with `wait4`: shown beside, not
    /// compared.
    pub proc_user_s: f64,
    /// System seconds of the whole fio process tree.
    pub proc_sys_s: f64,
    /// User and system seconds of the ring's kernel threads (`iou-sqp-*`,
    /// `iou-wrk-*`), read from `/proc` while fio ran.
    pub ring_threads_user_s: f64,
    /// See `ring_threads_user_s`.
    pub ring_threads_sys_s: f64,
    /// fio's version string.
    pub version: String,
}

/// The fio binary's version, or why there is none.
pub fn version() -> Result<String, String> {
    match Command::new("fio").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(format!("fio --version failed: {}", o.status)),
        Err(e) => Err(format!(
            "fio not found ({e}); install it (Debian/Ubuntu: apt-get install fio) to get the peer rows"
        )),
    }
}

/// The argument list (without `fio` itself) for `job` on `engine`.
pub fn args(job: &FioJob<'_>, engine: FioEngine) -> Vec<String> {
    let (ioengine, qd) = match engine {
        FioEngine::IoUring { .. } => ("io_uring", job.qd),
        FioEngine::Libaio => ("libaio", job.qd),
        FioEngine::Psync => ("psync", 1),
    };
    let mut a = vec![
        "--name=ringkit".to_string(),
        // The job as a thread of this process, so /proc/PID/task shows it.
        "--thread".to_string(),
        format!("--filename={}", job.file.display()),
        format!("--size={}", job.size),
        format!("--bs={}", job.bs),
        format!("--rw={}", job.rw),
        format!("--iodepth={qd}"),
        format!("--direct={}", u8::from(job.direct)),
        format!("--ioengine={ioengine}"),
        "--time_based=1".into(),
        format!(
            "--runtime={}ms",
            (job.secs * 1000.0).round().max(1.0) as u64
        ),
        "--norandommap=1".into(),
        "--randrepeat=0".into(),
        "--lat_percentiles=1".into(),
        "--output-format=json".into(),
    ];
    if job.batch > 1 && qd > 1 {
        a.push(format!("--iodepth_batch_submit={}", job.batch));
    }
    if let FioEngine::IoUring {
        fixed,
        sqpoll,
        hipri,
    } = engine
    {
        if fixed {
            a.push("--fixedbufs=1".into());
            a.push("--registerfiles=1".into());
        }
        if sqpoll {
            a.push("--sqthread_poll=1".into());
            a.push(format!("--sqthread_poll_cpu={}", job.sq_cpu));
        }
        if hipri {
            a.push("--hipri=1".into());
        }
    }
    a
}

/// Run fio for `job` on `engine`, pinned to `job.cpu`.
pub fn run(job: &FioJob<'_>, engine: FioEngine) -> io::Result<FioResult> {
    let mut cmd = Command::new("fio");
    cmd.args(args(job, engine)).stdin(Stdio::null());
    crate::harness::child::prepare(&mut cmd, Some(job.cpu), false, true);
    let watched = run_watching(&mut cmd)?;
    let out = &watched.output;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "fio {} failed ({}): {}",
            engine.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let mut r = parse(&text)?;
    r.proc_user_s = watched.process.user;
    r.proc_sys_s = watched.process.system;
    let ring = watched.named(&["iou-sqp", "iou-wrk"]);
    r.ring_threads_user_s = ring.user;
    r.ring_threads_sys_s = ring.system;
    Ok(r)
}

/// Read a fio JSON report (anything before the first `{` is skipped: fio
/// prints warnings there).
pub fn parse(text: &str) -> io::Result<FioResult> {
    let start = text
        .find('{')
        .ok_or_else(|| io::Error::other("no JSON in fio's output"))?;
    let j: serde_json::Value = serde_json::from_str(&text[start..])
        .map_err(|e| io::Error::other(format!("fio JSON: {e}")))?;
    let job = &j["jobs"][0];
    // The direction that did the I/O.
    let dir = ["read", "write"]
        .into_iter()
        .map(|d| &job[d])
        .max_by_key(|d| d["total_ios"].as_u64().unwrap_or(0))
        .ok_or_else(|| io::Error::other("fio JSON without a job"))?;
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    let lat = &dir["lat_ns"];
    let pct = |p: &str| f(&lat["percentile"][p]);
    let r = FioResult {
        ios: dir["total_ios"].as_u64().unwrap_or(0),
        secs: f(&job["job_runtime"]) / 1000.0,
        iops: f(&dir["iops"]),
        bw_bytes: f(&dir["bw_bytes"]),
        lat_avg: f(&lat["mean"]),
        lat_p50: pct("50.000000"),
        lat_p99: pct("99.000000"),
        usr_cpu: f(&job["usr_cpu"]),
        sys_cpu: f(&job["sys_cpu"]),
        proc_user_s: 0.0,
        proc_sys_s: 0.0,
        ring_threads_user_s: 0.0,
        ring_threads_sys_s: 0.0,
        version: j["fio version"].as_str().unwrap_or("").to_string(),
    };
    if r.ios == 0 {
        return Err(io::Error::other(format!(
            "fio did no I/O (error {})",
            job["error"]
        )));
    }
    Ok(r)
}

impl FioResult {
    /// CPU seconds per I/O (user, system) charged to fio: its job thread
    /// over its I/O loop plus its ring's kernel threads (see the module
    /// docs).
    pub fn cpu_per_io(&self) -> (f64, f64) {
        let n = self.ios.max(1) as f64;
        let (u, s) = self.thread_cpu_per_io();
        (
            u + self.ring_threads_user_s / n,
            s + self.ring_threads_sys_s / n,
        )
    }

    /// CPU seconds per I/O of the whole fio process tree over its life,
    /// start-up and exit included (`wait4`), for reference.
    pub fn process_cpu_per_io(&self) -> (f64, f64) {
        let n = self.ios.max(1) as f64;
        (self.proc_user_s / n, self.proc_sys_s / n)
    }

    /// CPU seconds per I/O as fio itself reports it (its job thread only).
    pub fn thread_cpu_per_io(&self) -> (f64, f64) {
        let n = self.ios.max(1) as f64;
        (
            self.usr_cpu / 100.0 * self.secs / n,
            self.sys_cpu / 100.0 * self.secs / n,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"fio: some warning
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "ringkit", "error" : 0, "job_runtime" : 1500,
      "usr_cpu" : 2.0, "sys_cpu" : 40.0,
      "read" : { "total_ios" : 117199, "iops" : 78080.6, "bw_bytes" : 319818137,
        "lat_ns" : { "mean" : 409000.5, "percentile" : { "50.000000" : 396288, "99.000000" : 749568 } } },
      "write" : { "total_ios" : 0, "iops" : 0.0, "bw_bytes" : 0, "lat_ns" : { "mean" : 0.0 } }
    }
  ]
}"#;

    #[test]
    fn parses_a_read_report() {
        let r = parse(REPORT).unwrap();
        assert_eq!(r.ios, 117_199);
        assert_eq!(r.version, "fio-3.33");
        assert!((r.secs - 1.5).abs() < 1e-9);
        assert_eq!((r.lat_p50, r.lat_p99), (396_288.0, 749_568.0));
        let (u, s) = r.thread_cpu_per_io();
        assert!((u - 0.02 * 1.5 / 117_199.0).abs() < 1e-15);
        assert!((s - 0.40 * 1.5 / 117_199.0).abs() < 1e-15);
        // Charged: the job thread plus the ring's kernel threads (read
        // from /proc by `run`, none here); the whole process is apart.
        assert_eq!(r.cpu_per_io(), (u, s));
        let mut r = r;
        (r.ring_threads_user_s, r.ring_threads_sys_s) = (0.0, 1.2);
        (r.proc_user_s, r.proc_sys_s) = (0.5, 2.0);
        assert!((r.cpu_per_io().1 - (s + 1.2 / 117_199.0)).abs() < 1e-15);
        assert_eq!(r.process_cpu_per_io(), (0.5 / 117_199.0, 2.0 / 117_199.0));
        assert!(parse("no json").is_err());
    }

    #[test]
    fn command_line_matches_the_job() {
        let job = FioJob {
            file: Path::new("/tmp/x"),
            size: 1 << 20,
            bs: 4096,
            rw: "randread",
            qd: 32,
            direct: true,
            batch: 1,
            secs: 2.5,
            cpu: 1,
            sq_cpu: 0,
        };
        let a = args(
            &job,
            FioEngine::IoUring {
                fixed: true,
                sqpoll: true,
                hipri: false,
            },
        );
        for want in [
            "--iodepth=32",
            "--direct=1",
            "--ioengine=io_uring",
            "--runtime=2500ms",
            "--fixedbufs=1",
            "--registerfiles=1",
            "--sqthread_poll_cpu=0",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} in {a:?}");
        }
        assert!(args(&job, FioEngine::Psync).contains(&"--iodepth=1".to_string()));
        assert!(!a.iter().any(|x| x.starts_with("--iodepth_batch")));
        let batched = FioJob { batch: 8, ..job };
        assert!(args(&batched, FioEngine::Libaio).contains(&"--iodepth_batch_submit=8".to_string()));
        // psync runs at depth 1: no batch.
        assert!(!args(&batched, FioEngine::Psync)
            .iter()
            .any(|x| x.starts_with("--iodepth_batch")));
        assert_eq!(
            FioEngine::IoUring {
                fixed: true,
                sqpoll: false,
                hipri: false
            }
            .name(),
            "fio-io_uring-fixed"
        );
    }
}
