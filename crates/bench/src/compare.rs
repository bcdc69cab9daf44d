//! `ringkit compare echo`: contenders side by side, interleaved, pinned.
//!
//! For every connection count and round, each contender's server is started
//! as its own process pinned to the server CPU, driven by the load generator
//! on this process's thread pinned to the client CPU, and stopped by its pid.
//! Contenders are interleaved (A B C A B C ...) and rotated each round, so
//! drift hits all of them alike. Around the measured window we sample the
//! server's CPU time (/proc/PID/stat) and, for ringkit, its own counters.
//! Peers' syscalls come from a separate run (never timed), counted by
//! `perf stat` on the syscall tracepoint, or by `strace -c` without perf.

use std::io;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::echo::{self, EchoLoadConfig, EchoLoadResult, Phase, ServerStats};
use crate::harness::sysinfo::{CpuTimes, SystemInfo};

/// Which family a contender belongs to (for "ratio to the best epoll").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Family {
    /// io_uring based.
    Uring,
    /// epoll based.
    Epoll,
}

/// One server to measure.
#[derive(Debug, Clone, Serialize)]
pub struct Contender {
    /// Short name.
    pub name: String,
    /// io_uring or epoll.
    pub family: Family,
    /// Command line; `{addr}` and `{stats}` are substituted.
    pub cmd: Vec<String>,
    /// Whether it writes ringkit's counters (`--stats`).
    pub ringkit: bool,
}

/// Settings of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct CompareConfig {
    /// Connection counts.
    pub conns: Vec<usize>,
    /// Message length.
    pub len: usize,
    /// Rounds (each contender once per round).
    pub rounds: usize,
    /// Measured seconds per sample.
    pub secs: f64,
    /// CPU for servers.
    pub server_cpu: usize,
    /// CPU for the load generator.
    pub client_cpu: usize,
    /// How to count peers' syscalls (`None`: not counted).
    pub peer_syscalls: Option<SyscallTool>,
    /// Output directory.
    pub out_dir: PathBuf,
}

/// One measured sample.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Contender name.
    pub contender: String,
    /// Connections.
    pub conns: usize,
    /// Round number.
    pub round: usize,
    /// What the load generator saw.
    pub load: EchoLoadResult,
    /// Server CPU over the window.
    pub cpu_user_s: f64,
    /// Server system CPU over the window.
    pub cpu_sys_s: f64,
    /// ringkit counters over the window.
    pub stats: Option<ServerStats>,
    /// Error starting or running, if any.
    pub error: Option<String>,
}

impl Sample {
    fn ok(&self) -> bool {
        self.error.is_none() && self.load.ok()
    }
    fn cpu_us_per_req(&self) -> (f64, f64) {
        let r = self.load.responses.max(1) as f64;
        (self.cpu_user_s * 1e6 / r, self.cpu_sys_s * 1e6 / r)
    }
}

/// Median and range.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Stat {
    /// Median.
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
}

/// Median, min and max of `v` (zeros when empty).
pub fn stat(mut v: Vec<f64>) -> Stat {
    if v.is_empty() {
        return Stat::default();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Stat {
        median,
        min: v[0],
        max: v[n - 1],
    }
}

/// Summary of one contender at one connection count.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Contender.
    pub contender: String,
    /// io_uring or epoll.
    pub family: Family,
    /// Connections.
    pub conns: usize,
    /// Good samples / all samples.
    pub ok_samples: usize,
    /// All samples.
    pub samples: usize,
    /// Requests per second.
    pub rps: Stat,
    /// Server CPU µs per request (user + system).
    pub cpu_us: Stat,
    /// User part (median).
    pub cpu_user_us: f64,
    /// System part (median).
    pub cpu_sys_us: f64,
    /// p99 latency, µs (median over samples).
    pub p99_us: f64,
    /// Syscalls per request: ringkit's own counters, or perf/strace for peers.
    pub syscalls_per_req: Option<f64>,
    /// Where the syscall figure comes from.
    pub syscalls_source: String,
    /// io_uring_enter calls per request (ringkit).
    pub enters_per_req: Option<f64>,
    /// rps median / best epoll contender's rps median.
    pub rps_vs_best_epoll: Option<f64>,
    /// CPU per request median / best epoll contender's (lower is better).
    pub cpu_vs_best_epoll: Option<f64>,
    /// Paired: in each round, CPU per request / that of the best epoll
    /// contender (lowest median over the run) in the same round; median and
    /// range over rounds. Less sensitive to drift between rounds than the
    /// ratio of medians.
    pub cpu_vs_best_epoll_paired: Option<Stat>,
    /// The same paired ratio against every epoll contender.
    pub cpu_paired_vs_epoll: Vec<PairedRatio>,
}

/// CPU per request over another contender's in the same round.
#[derive(Debug, Clone, Serialize)]
pub struct PairedRatio {
    /// The contender divided by.
    pub vs: String,
    /// Median and range over the rounds where both had a good sample.
    pub ratio: Stat,
}

/// Everything a comparison produced.
#[derive(Debug, Clone, Serialize)]
pub struct CompareResults {
    /// Machine and tool.
    pub system: SystemInfo,
    /// Settings.
    pub config: CompareConfig,
    /// Contenders.
    pub contenders: Vec<Contender>,
    /// What each server said about itself (backend, flags), from its log.
    pub server_banners: Vec<(String, String)>,
    /// Skipped contenders and why.
    pub skipped: Vec<(String, String)>,
    /// Raw samples.
    pub samples: Vec<Sample>,
    /// Per contender and connection count.
    pub summary: Vec<Summary>,
    /// Wall time of the whole run, seconds.
    pub wall_secs: f64,
}

/// A free loopback port (bound then released).
pub fn free_addr() -> io::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    l.local_addr()
}

/// A contender's server process, pinned, stopped by its pid (SIGTERM, then
/// SIGKILL after 2 s) when dropped.
#[derive(Debug)]
pub struct Server {
    child: Child,
}

impl Server {
    /// Start `c.cmd` (with `{addr}` and `{stats}` substituted) pinned to
    /// `cpu`, output to `log`, and wait until `addr` accepts connections.
    pub fn start(
        c: &Contender,
        addr: SocketAddr,
        stats: &Path,
        cpu: usize,
        log: &Path,
    ) -> io::Result<Server> {
        let args: Vec<String> = c
            .cmd
            .iter()
            .map(|a| {
                a.replace("{addr}", &addr.to_string())
                    .replace("{stats}", &stats.display().to_string())
            })
            .collect();
        let logf = std::fs::File::create(log)?;
        let mut cmd = Command::new(&args[0]);
        cmd.args(&args[1..])
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .env_remove("RINGKIT_BACKEND");
        // SAFETY: between fork and exec we only call sched_setaffinity, which
        // is async-signal-safe, on the child itself.
        unsafe {
            cmd.pre_exec(move || ringkit::pin_to_cpu(cpu));
        }
        let child = cmd.spawn()?;
        let s = Server { child };
        let t = Instant::now();
        loop {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(s);
            }
            if t.elapsed() > Duration::from_secs(10) {
                return Err(io::Error::other(format!(
                    "{} did not start listening on {addr} within 10 s (see {})",
                    c.name,
                    log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(2) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn one_sample(cfg: &CompareConfig, c: &Contender, conns: usize, round: usize, secs: f64) -> Sample {
    let mut sample = Sample {
        contender: c.name.clone(),
        conns,
        round,
        load: EchoLoadResult::default(),
        cpu_user_s: 0.0,
        cpu_sys_s: 0.0,
        stats: None,
        error: None,
    };
    let mut run = || -> io::Result<()> {
        let addr = free_addr()?;
        let stats_path = cfg
            .out_dir
            .join("tmp")
            .join(format!("{}-{conns}-{round}", c.name));
        let log = cfg
            .out_dir
            .join("logs")
            .join(format!("{}-{conns}-{round}.log", c.name));
        let server = Server::start(c, addr, &stats_path, cfg.server_cpu, &log)?;
        let pid = server.pid();
        let mut cpu0 = CpuTimes::default();
        let mut cpu1 = CpuTimes::default();
        let mut st0 = ServerStats::default();
        let mut st1 = ServerStats::default();
        let load_cfg = EchoLoadConfig {
            addr,
            conns,
            len: cfg.len,
            duration: Duration::from_secs_f64(secs),
            pipeline: 1,
            backend: ringkit::Backend::Auto,
        };
        let load = echo::run_load(&load_cfg, &mut |p| match p {
            Phase::WindowStart => {
                cpu0 = CpuTimes::of(pid).unwrap_or_default();
                st0 = ServerStats::read_all(&stats_path);
            }
            Phase::WindowEnd => {
                cpu1 = CpuTimes::of(pid).unwrap_or_default();
                st1 = ServerStats::read_all(&stats_path);
            }
        })?;
        drop(server);
        let cpu = cpu1.since(&cpu0);
        sample.cpu_user_s = cpu.user;
        sample.cpu_sys_s = cpu.system;
        if c.ringkit {
            sample.stats = Some(st1.since(&st0));
        }
        sample.load = load;
        Ok(())
    };
    if let Err(e) = run() {
        sample.error = Some(e.to_string());
    }
    sample
}

/// Wait until `perf` (pid `perf`) holds at least one perf_event fd per
/// thread of `pid`; false on timeout.
fn wait_perf_counters(pid: u32, perf: u32, timeout: Duration) -> bool {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(1)
        .max(1);
    poll_until(timeout, || {
        let counters = std::fs::read_dir(format!("/proc/{perf}/fd"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        std::fs::read_link(e.path())
                            .is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
                    })
                    .count()
            })
            .unwrap_or(0);
        counters >= threads
    })
}

/// Check `done` every 10 ms until it holds (true) or `timeout` passes.
fn poll_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Wait until every thread of `pid` is traced by `tracer` (`TracerPid` in
/// /proc/PID/task/*/status); false on timeout.
fn wait_traced(pid: u32, tracer: u32, timeout: Duration) -> bool {
    let want = tracer.to_string();
    poll_until(timeout, || {
        std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
            tasks.flatten().all(|task| {
                std::fs::read_to_string(task.path().join("status")).is_ok_and(|st| {
                    st.lines()
                        .find_map(|l| l.strip_prefix("TracerPid:"))
                        .is_some_and(|v| v.trim() == want)
                })
            })
        })
    })
}

/// How peers' syscalls are counted (in a separate run whose throughput is
/// not used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SyscallTool {
    /// `perf stat -e raw_syscalls:sys_enter`: the kernel counts at the
    /// tracepoint, and the server runs at nearly full speed.
    Perf,
    /// `strace -c -f`: stops the server at every syscall, so an epoll
    /// server finds fuller `epoll_wait` batches than untraced and its wait
    /// count reads low (tokio: 2.02 syscalls per request under strace,
    /// 2.08-2.18 by perf at 50 connections).
    Strace,
}

impl SyscallTool {
    /// The best tool this machine has: perf if it can count the syscall
    /// tracepoint here (it needs tracefs and permission), else strace.
    pub fn detect() -> Option<SyscallTool> {
        let ok = |cmd: &mut Command| {
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if ok(Command::new("perf").args([
            "stat",
            "-x,",
            "-e",
            "raw_syscalls:sys_enter",
            "--",
            "true",
        ])) {
            Some(SyscallTool::Perf)
        } else if ok(Command::new("strace").arg("-V")) {
            Some(SyscallTool::Strace)
        } else {
            None
        }
    }

    /// What the report says the figure came from.
    pub fn source(self) -> &'static str {
        match self {
            SyscallTool::Perf => "perf stat raw_syscalls:sys_enter (separate run)",
            SyscallTool::Strace => "strace -c (separate run)",
        }
    }

    /// Short name for file names and progress lines.
    pub fn name(self) -> &'static str {
        match self {
            SyscallTool::Perf => "perf-stat",
            SyscallTool::Strace => "strace",
        }
    }

    /// Start counting every syscall of `pid` (all its threads) into `out`.
    /// Returns once the tool is attached; stop it with [`SyscallTool::stop`].
    pub fn start(self, pid: u32, out: &Path) -> io::Result<Child> {
        let pid_s = pid.to_string();
        let mut cmd = match self {
            SyscallTool::Perf => {
                let mut c = Command::new("perf");
                c.args([
                    "stat",
                    "-x,",
                    "-e",
                    "raw_syscalls:sys_enter",
                    "-p",
                    &pid_s,
                    "-o",
                ]);
                c
            }
            SyscallTool::Strace => {
                let mut c = Command::new("strace");
                c.args(["-c", "-f", "-p", &pid_s, "-o"]);
                c
            }
        };
        let mut child = cmd
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let attached = match self {
            // perf has attached once it holds a counter for each of the
            // server's threads (perf_event fds); the idle server makes no
            // syscalls meanwhile.
            SyscallTool::Perf => wait_perf_counters(pid, child.id(), Duration::from_secs(5)),
            // Without waiting for every thread to be traced, the first
            // ~0.4 s of syscalls went uncounted against a full window of
            // responses: tokio read as 1.60 syscalls per request.
            SyscallTool::Strace => wait_traced(pid, child.id(), Duration::from_secs(5)),
        };
        let exited = child.try_wait().is_ok_and(|s| s.is_some());
        if !attached || exited {
            if !exited {
                Self::stop(child);
            }
            return Err(io::Error::other(format!(
                "{} did not attach to pid {pid}",
                self.name()
            )));
        }
        Ok(child)
    }

    /// Stop a counter from [`SyscallTool::start`]: both tools write their
    /// counts on SIGINT.
    pub fn stop(mut child: Child) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let _ = child.wait();
    }

    /// The syscall count in the tool's output file.
    pub fn count(self, out: &Path) -> io::Result<f64> {
        let text = std::fs::read_to_string(out)?;
        match self {
            SyscallTool::Perf => parse_perf_stat_count(&text),
            SyscallTool::Strace => parse_strace_total(&text),
        }
        .ok_or_else(|| io::Error::other(format!("no syscall count in {}", out.display())))
    }
}

/// Counts a server's syscalls over a load's measured window: give it the
/// load's phases, then [`WindowCounter::finish`]. The load pauses while a
/// phase hook runs and the window opens when it returns, so the counter is
/// attached before the first counted request.
#[derive(Debug)]
pub struct WindowCounter<'a> {
    tool: SyscallTool,
    pid: u32,
    out: &'a Path,
    child: Option<io::Result<Child>>,
}

impl<'a> WindowCounter<'a> {
    /// Count `pid`'s syscalls with `tool` into `out`.
    pub fn new(tool: SyscallTool, pid: u32, out: &'a Path) -> Self {
        WindowCounter {
            tool,
            pid,
            out,
            child: None,
        }
    }

    /// Start counting at the window's start, stop at its end.
    pub fn phase(&mut self, p: Phase) {
        match p {
            Phase::WindowStart => self.child = Some(self.tool.start(self.pid, self.out)),
            Phase::WindowEnd => {
                if let Some(Ok(ch)) = self.child.take() {
                    SyscallTool::stop(ch);
                }
            }
        }
    }

    /// Stop the counter if the load ended early; the error if it never
    /// attached.
    pub fn finish(mut self) -> io::Result<()> {
        match self.child.take() {
            Some(Ok(ch)) => {
                SyscallTool::stop(ch);
                Ok(())
            }
            Some(Err(e)) => Err(e),
            None => Ok(()),
        }
    }
}

/// Syscalls per request of a contender, counted by `tool` over the window
/// of a separate run whose throughput is not used.
fn syscall_sample(
    cfg: &CompareConfig,
    c: &Contender,
    conns: usize,
    tool: SyscallTool,
) -> io::Result<f64> {
    let addr = free_addr()?;
    let stats_path = cfg.out_dir.join("tmp").join(format!("{}-syscalls", c.name));
    let log = cfg
        .out_dir
        .join("logs")
        .join(format!("{}-{conns}-syscalls.log", c.name));
    let out = cfg
        .out_dir
        .join("logs")
        .join(format!("{}-{conns}-{}.txt", c.name, tool.name()));
    let server = Server::start(c, addr, &stats_path, cfg.server_cpu, &log)?;
    let mut counter = WindowCounter::new(tool, server.pid(), &out);
    let load_cfg = EchoLoadConfig {
        addr,
        conns,
        len: cfg.len,
        duration: Duration::from_secs(2),
        pipeline: 1,
        backend: ringkit::Backend::Auto,
    };
    let load = echo::run_load(&load_cfg, &mut |p| counter.phase(p));
    counter.finish()?;
    let load = load?;
    drop(server);
    Ok(tool.count(&out)? / load.responses.max(1) as f64)
}

/// The count of `perf stat -x,` output (`COUNT,UNIT,EVENT,...`).
fn parse_perf_stat_count(text: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.contains("raw_syscalls:sys_enter"))
        .and_then(|l| l.split(',').next())
        .and_then(|v| v.trim().parse::<f64>().ok())
}

/// The call count of the total line of `strace -c`.
fn parse_strace_total(text: &str) -> Option<f64> {
    text.lines()
        .rev()
        .find(|l| l.trim_end().ends_with("total"))
        .and_then(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // % time, seconds, usecs/call, calls, [errors], total
            f.get(3).and_then(|v| v.parse::<f64>().ok())
        })
}

/// Run the comparison. `progress` is called after each sample.
pub fn run(
    cfg: &CompareConfig,
    contenders: Vec<Contender>,
    skipped: Vec<(String, String)>,
    progress: &mut dyn FnMut(&Sample, usize, usize),
) -> io::Result<CompareResults> {
    let wall = Instant::now();
    std::fs::create_dir_all(cfg.out_dir.join("logs"))?;
    std::fs::create_dir_all(cfg.out_dir.join("tmp"))?;
    ringkit::pin_to_cpu(cfg.client_cpu)?;
    let total = cfg.conns.len() * cfg.rounds * contenders.len();
    let mut samples = Vec::new();
    let mut n = 0;
    for &conns in &cfg.conns {
        for round in 0..cfg.rounds {
            // Rotate the order each round: A B C, B C A, C A B, ...
            for i in 0..contenders.len() {
                let c = &contenders[(i + round) % contenders.len()];
                let s = one_sample(cfg, c, conns, round, cfg.secs);
                n += 1;
                progress(&s, n, total);
                samples.push(s);
            }
        }
    }
    let mut peer_calls: Vec<(String, usize, f64)> = Vec::new();
    if let Some(tool) = cfg.peer_syscalls {
        for &conns in &cfg.conns {
            for c in contenders.iter().filter(|c| !c.ringkit) {
                if let Ok(v) = syscall_sample(cfg, c, conns, tool) {
                    peer_calls.push((c.name.clone(), conns, v));
                }
            }
        }
    }
    let server_banners = contenders
        .iter()
        .filter_map(|c| {
            let log = cfg
                .out_dir
                .join("logs")
                .join(format!("{}-{}-0.log", c.name, cfg.conns[0]));
            std::fs::read_to_string(log)
                .ok()
                .and_then(|s| s.lines().next().map(|l| (c.name.clone(), l.to_string())))
        })
        .collect();
    let summary = summarize(&contenders, cfg, &samples, &peer_calls);
    let _ = std::fs::remove_dir_all(cfg.out_dir.join("tmp"));
    Ok(CompareResults {
        system: SystemInfo::gather(),
        config: cfg.clone(),
        contenders,
        server_banners,
        skipped,
        samples,
        summary,
        wall_secs: wall.elapsed().as_secs_f64(),
    })
}

/// CPU per request of `name` in `round` (good samples only).
fn round_cpu(samples: &[Sample], name: &str, conns: usize, round: usize) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.contender == name && s.conns == conns && s.round == round && s.ok())
        .map(|s| {
            let (u, y) = s.cpu_us_per_req();
            u + y
        })
}

/// The epoll contender with the lowest median CPU per request over all
/// rounds (the reference of the paired ratios).
fn reference_epoll<'a>(
    contenders: &'a [Contender],
    rounds: usize,
    conns: usize,
    samples: &[Sample],
) -> Option<&'a str> {
    contenders
        .iter()
        .filter(|c| c.family == Family::Epoll)
        .filter_map(|c| {
            let v: Vec<f64> = (0..rounds)
                .filter_map(|r| round_cpu(samples, &c.name, conns, r))
                .collect();
            (!v.is_empty()).then(|| (c.name.as_str(), stat(v).median))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(n, _)| n)
}

/// Per contender, its CPU per request over `reference`'s in the same
/// round, for every round where both have a good sample.
fn paired_vs(
    contenders: &[Contender],
    rounds: usize,
    conns: usize,
    samples: &[Sample],
    reference: &str,
) -> Vec<(String, Vec<f64>)> {
    let mut out: Vec<(String, Vec<f64>)> = contenders
        .iter()
        .map(|c| (c.name.clone(), Vec::new()))
        .collect();
    for round in 0..rounds {
        let Some(base) = round_cpu(samples, reference, conns, round).filter(|b| *b > 0.0) else {
            continue;
        };
        for (name, v) in &mut out {
            if let Some(x) = round_cpu(samples, name, conns, round) {
                v.push(x / base);
            }
        }
    }
    out.retain(|(_, v)| !v.is_empty());
    out
}

/// Paired ratios against the reference epoll server (what `summarize`
/// reports as `cpu_vs_best_epoll_paired`).
#[cfg(test)]
fn paired_cpu_ratios(
    contenders: &[Contender],
    rounds: usize,
    conns: usize,
    samples: &[Sample],
) -> Vec<(String, Vec<f64>)> {
    match reference_epoll(contenders, rounds, conns, samples) {
        Some(reference) => paired_vs(contenders, rounds, conns, samples, reference),
        None => Vec::new(),
    }
}

fn summarize(
    contenders: &[Contender],
    cfg: &CompareConfig,
    samples: &[Sample],
    peer_calls: &[(String, usize, f64)],
) -> Vec<Summary> {
    let mut out = Vec::new();
    for &conns in &cfg.conns {
        let mut rows: Vec<Summary> = contenders
            .iter()
            .map(|c| {
                let mine: Vec<&Sample> = samples
                    .iter()
                    .filter(|s| s.contender == c.name && s.conns == conns)
                    .collect();
                let good: Vec<&&Sample> = mine.iter().filter(|s| s.ok()).collect();
                let cpu: Vec<(f64, f64)> = good.iter().map(|s| s.cpu_us_per_req()).collect();
                let per_req = |f: &dyn Fn(&ServerStats) -> u64| {
                    let v: Vec<f64> = good
                        .iter()
                        .filter_map(|s| {
                            s.stats
                                .as_ref()
                                .map(|st| f(st) as f64 / s.load.responses.max(1) as f64)
                        })
                        .collect();
                    (!v.is_empty()).then(|| stat(v).median)
                };
                let (syscalls, source) = if c.ringkit {
                    (per_req(&|s| s.syscalls()), "ringkit counters".to_string())
                } else {
                    match peer_calls
                        .iter()
                        .find(|(n, cn, _)| *n == c.name && *cn == conns)
                    {
                        Some((_, _, v)) => (
                            Some(*v),
                            cfg.peer_syscalls.map_or("", |t| t.source()).to_string(),
                        ),
                        None if cfg.peer_syscalls.is_some() => {
                            (None, "syscall count failed (see logs/)".to_string())
                        }
                        None => (
                            None,
                            "not measured (counting off, or neither perf nor strace works here)"
                                .to_string(),
                        ),
                    }
                };
                Summary {
                    contender: c.name.clone(),
                    family: c.family,
                    conns,
                    ok_samples: good.len(),
                    samples: mine.len(),
                    rps: stat(good.iter().map(|s| s.load.rps()).collect()),
                    cpu_us: stat(cpu.iter().map(|(u, s)| u + s).collect()),
                    cpu_user_us: stat(cpu.iter().map(|c| c.0).collect()).median,
                    cpu_sys_us: stat(cpu.iter().map(|c| c.1).collect()).median,
                    p99_us: stat(good.iter().map(|s| s.load.p99_us).collect()).median,
                    syscalls_per_req: syscalls,
                    syscalls_source: source,
                    enters_per_req: if c.ringkit && c.family == Family::Uring {
                        per_req(&|s| s.uring_enters)
                    } else {
                        None
                    },
                    rps_vs_best_epoll: None,
                    cpu_vs_best_epoll: None,
                    cpu_vs_best_epoll_paired: None,
                    cpu_paired_vs_epoll: Vec::new(),
                }
            })
            .collect();
        let best_rps = rows
            .iter()
            .filter(|r| r.family == Family::Epoll && r.ok_samples > 0)
            .map(|r| r.rps.median)
            .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
        let best_cpu = rows
            .iter()
            .filter(|r| r.family == Family::Epoll && r.ok_samples > 0)
            .map(|r| r.cpu_us.median)
            .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.min(v))));
        for r in &mut rows {
            if r.ok_samples > 0 {
                r.rps_vs_best_epoll = best_rps.map(|b| r.rps.median / b);
                r.cpu_vs_best_epoll = best_cpu.map(|b| r.cpu_us.median / b);
            }
        }
        // Paired ratios against every epoll server; the one against the
        // reference (the epoll contender with the lowest median, chosen
        // once for all rounds) is also the headline `cpu_vs_best_epoll_paired`.
        // (Taking the lowest epoll sample of each round instead would pick,
        // every round, whichever epoll server had the luckiest sample: with
        // two epoll servers and noise of ±15%, that alone made equal servers
        // look 5-10% apart, against io_uring.)
        let reference = reference_epoll(contenders, cfg.rounds, conns, samples);
        for e in contenders.iter().filter(|c| c.family == Family::Epoll) {
            for (name, v) in paired_vs(contenders, cfg.rounds, conns, samples, &e.name) {
                if let Some(r) = rows.iter_mut().find(|r| r.contender == name) {
                    let ratio = stat(v);
                    if reference == Some(e.name.as_str()) {
                        r.cpu_vs_best_epoll_paired = Some(ratio);
                    }
                    r.cpu_paired_vs_epoll.push(PairedRatio {
                        vs: e.name.clone(),
                        ratio,
                    });
                }
            }
        }
        out.extend(rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contender(name: &str, family: Family) -> Contender {
        Contender {
            name: name.into(),
            family,
            cmd: vec![],
            ringkit: false,
        }
    }

    /// A sample of `us` µs of server CPU per request (1000 requests).
    fn sample(name: &str, round: usize, us: f64, ok: bool) -> Sample {
        Sample {
            contender: name.into(),
            conns: 50,
            round,
            load: EchoLoadResult {
                requests: 1000,
                responses: 1000,
                secs: 1.0,
                failed_conns: u64::from(!ok),
                ..Default::default()
            },
            cpu_user_s: 0.0,
            cpu_sys_s: us * 1000.0 / 1e6,
            stats: None,
            error: None,
        }
    }

    #[test]
    fn paired_ratios_use_one_reference_epoll_server_for_every_round() {
        let cs = [
            contender("u", Family::Uring),
            contender("e1", Family::Epoll),
            contender("e2", Family::Epoll),
        ];
        let samples = vec![
            // e1's median (6.0) beats e2's (7.0), so e1 is the reference in
            // every round, even in round 0 where e2's sample was lower.
            // Round 1: e1 failed, so no round-1 ratios. Round 2: u failed.
            sample("u", 0, 4.5, true),
            sample("e1", 0, 6.0, true),
            sample("e2", 0, 5.0, true),
            sample("u", 1, 8.8, true),
            sample("e1", 1, 1.0, false),
            sample("e2", 1, 8.0, true),
            sample("u", 2, 1.0, false),
            sample("e1", 2, 5.0, true),
            sample("e2", 2, 7.0, true),
            sample("u", 3, 7.7, true),
            sample("e1", 3, 7.0, true),
            sample("e2", 3, 9.0, true),
        ];
        let got = paired_cpu_ratios(&cs, 4, 50, &samples);
        let find = |n: &str| got.iter().find(|(m, _)| m == n).unwrap().1.clone();
        let near = |a: &[f64], b: &[f64]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
        };
        let u = find("u");
        assert!(near(&u, &[0.75, 1.1]), "{u:?}");
        let e2 = find("e2");
        assert!(near(&e2, &[5.0 / 6.0, 1.4, 9.0 / 7.0]), "{e2:?}");
        let e1 = find("e1");
        assert!(near(&e1, &[1.0, 1.0, 1.0]), "{e1:?}");
    }

    #[test]
    fn syscall_counts_parse_from_perf_and_strace_output() {
        let perf = "# started on Mon Nov 23 18:14:03 2026\n\n612345,,raw_syscalls:sys_enter,1249755,100.00,,\n";
        assert_eq!(parse_perf_stat_count(perf), Some(612345.0));
        assert_eq!(
            parse_perf_stat_count("<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n"),
            None
        );
        let strace = "% time     seconds  usecs/call     calls    errors syscall\n\
------ ----------- ----------- --------- --------- ----------------\n\
 60.00    0.600000           1    300000           sendto\n\
 40.00    0.400000           1    300500        10 recvfrom\n\
------ ----------- ----------- --------- --------- ----------------\n\
100.00    1.000000           1    600500        10 total\n";
        assert_eq!(parse_strace_total(strace), Some(600500.0));
        assert_eq!(parse_strace_total("nothing"), None);
    }

    #[test]
    fn summary_pairs_every_contender_with_every_epoll_server() {
        let cs = vec![
            contender("u", Family::Uring),
            contender("e1", Family::Epoll),
            contender("e2", Family::Epoll),
        ];
        let cfg = CompareConfig {
            conns: vec![50],
            len: 512,
            rounds: 2,
            secs: 1.0,
            server_cpu: 0,
            client_cpu: 1,
            peer_syscalls: None,
            out_dir: PathBuf::from("unused"),
        };
        let samples = vec![
            sample("u", 0, 4.0, true),
            sample("e1", 0, 5.0, true),
            sample("e2", 0, 8.0, true),
            sample("u", 1, 6.0, true),
            sample("e1", 1, 6.0, true),
            sample("e2", 1, 6.0, true),
        ];
        let sum = summarize(&cs, &cfg, &samples, &[]);
        let row = |n: &str| sum.iter().find(|r| r.contender == n).unwrap();
        let vs = |n: &str, e: &str| {
            row(n)
                .cpu_paired_vs_epoll
                .iter()
                .find(|p| p.vs == e)
                .map(|p| p.ratio.median)
                .unwrap()
        };
        // u over e1: 0.8 and 1.0; over e2: 0.5 and 1.0.
        assert!((vs("u", "e1") - 0.9).abs() < 1e-9);
        assert!((vs("u", "e2") - 0.75).abs() < 1e-9);
        assert!((vs("e1", "e1") - 1.0).abs() < 1e-9);
        // e1 has the lower median (5.5 against 7.0), so it is the reference.
        let best = row("u").cpu_vs_best_epoll_paired.unwrap();
        assert!((best.median - 0.9).abs() < 1e-9);
        assert_eq!(row("e2").cpu_paired_vs_epoll.len(), 2);
    }

    #[test]
    fn paired_ratios_need_an_epoll_server() {
        let cs = [contender("u", Family::Uring)];
        let samples = vec![sample("u", 0, 4.5, true)];
        assert!(paired_cpu_ratios(&cs, 1, 50, &samples).is_empty());
    }
}
