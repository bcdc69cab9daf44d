//! The server under test: a child process started, pinned, watched and
//! stopped by its own pid, and sampled from `/proc` (RSS, open fds).

use std::io::{self, BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One `/proc` sample of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcSample {
    /// Resident set size (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// Peak resident set size so far (`VmHWM`), KiB.
    pub hwm_kib: u64,
    /// Open file descriptors (entries of `/proc/PID/fd`).
    pub fds: u64,
}

impl ProcSample {
    /// Sample process `pid`; `None` once it is gone.
    pub fn of(pid: u32) -> Option<ProcSample> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
        Some(ProcSample {
            rss_kib: field("VmRSS:"),
            hwm_kib: field("VmHWM:"),
            fds,
        })
    }
}

/// A server child process. Its stderr is collected line by line; a
/// background thread samples it every 50 ms and keeps the peaks. Dropping
/// it kills the child (by pid) if it is still running.
#[derive(Debug)]
pub struct ServerProc {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    peak: Arc<Mutex<ProcSample>>,
    stop_sampler: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    exit: Option<ExitStatus>,
}

/// How to start a server.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Program and arguments.
    pub cmd: Vec<String>,
    /// Pin every thread of the child to this CPU (set before `exec`).
    pub cpu: Option<usize>,
    /// Raise the child's soft `RLIMIT_NOFILE` to the hard limit before
    /// `exec` (for peers that do not do it themselves).
    pub raise_nofile: bool,
    /// Set the child's soft and hard `RLIMIT_NOFILE` to this before `exec`
    /// (so fd exhaustion comes early, whatever the server raises itself to).
    pub nofile: Option<u64>,
}

impl ServerProc {
    /// Start the server and wait until its stderr has `ready_lines` lines
    /// containing `ready` (or, if `ready` is empty, until `probe` connects).
    pub fn start(
        spec: &ServerSpec,
        ready: &str,
        ready_lines: usize,
        probe: std::net::SocketAddr,
    ) -> io::Result<ServerProc> {
        let (prog, args) = spec
            .cmd
            .split_first()
            .ok_or_else(|| io::Error::other("empty server command"))?;
        let mut cmd = Command::new(prog);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        crate::harness::child::prepare(&mut cmd, spec.cpu, spec.raise_nofile, true);
        if let Some(n) = spec.nofile {
            crate::harness::child::limit_nofile(&mut cmd, n);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {prog}: {e}")))?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        if let Some(err) = child.stderr.take() {
            let lines = lines.clone();
            threads.push(std::thread::spawn(move || {
                for l in BufReader::new(err).lines() {
                    let Ok(l) = l else { break };
                    if let Ok(mut v) = lines.lock() {
                        v.push(l);
                    }
                }
            }));
        }
        let pid = child.id();
        let peak = Arc::new(Mutex::new(ProcSample::default()));
        let stop_sampler = Arc::new(AtomicBool::new(false));
        {
            let (peak, stop) = (peak.clone(), stop_sampler.clone());
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Some(s) = ProcSample::of(pid) else { break };
                    if let Ok(mut p) = peak.lock() {
                        p.rss_kib = p.rss_kib.max(s.rss_kib).max(s.hwm_kib);
                        p.hwm_kib = p.hwm_kib.max(s.hwm_kib);
                        p.fds = p.fds.max(s.fds);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }));
        }
        let mut me = ServerProc {
            child,
            lines,
            peak,
            stop_sampler,
            threads,
            exit: None,
        };
        let t0 = Instant::now();
        loop {
            if let Some(st) = me.try_exit()? {
                return Err(io::Error::other(format!(
                    "server exited during start-up ({st}): {}",
                    me.stderr_tail(10)
                )));
            }
            let up = if ready.is_empty() {
                std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(200)).is_ok()
            } else {
                me.count_lines(ready) >= ready_lines
            };
            if up {
                return Ok(me);
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(io::Error::other(format!(
                    "server not ready after 60 s: {}",
                    me.stderr_tail(10)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `/proc` sample now (`None` if the process is gone).
    pub fn sample(&self) -> Option<ProcSample> {
        ProcSample::of(self.pid())
    }

    /// Peaks seen by the background sampler.
    pub fn peak(&self) -> ProcSample {
        self.peak.lock().map(|p| *p).unwrap_or_default()
    }

    /// Stderr lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// The shared list of stderr lines (for a thread that watches it).
    pub fn lines_handle(&self) -> Arc<Mutex<Vec<String>>> {
        self.lines.clone()
    }

    /// Number of stderr lines containing `pat`.
    pub fn count_lines(&self, pat: &str) -> usize {
        self.lines
            .lock()
            .map(|v| v.iter().filter(|l| l.contains(pat)).count())
            .unwrap_or(0)
    }

    /// The last `n` stderr lines, joined.
    pub fn stderr_tail(&self, n: usize) -> String {
        let v = self.lines();
        v[v.len().saturating_sub(n)..].join(" | ")
    }

    /// The exit status, if it has exited.
    pub fn try_exit(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait()?;
        }
        Ok(self.exit)
    }

    /// Send `sig` to the child (by pid), unless it has exited.
    pub fn signal(&mut self, sig: i32) -> io::Result<()> {
        if self.try_exit()?.is_some() {
            return Ok(());
        }
        // SAFETY: kill(2) on our own child's pid; it has not been reaped yet.
        if unsafe { libc::kill(self.child.id() as libc::pid_t, sig) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Wait up to `limit` for the child to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> io::Result<Option<ExitStatus>> {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.try_exit()? {
                return Ok(Some(st));
            }
            if t0.elapsed() > limit {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait until the open fd count is at most `target` (closes on io_uring
    /// complete asynchronously) or `limit` passes; returns the last sample.
    pub fn settle_fds(&self, target: u64, limit: Duration) -> Option<ProcSample> {
        let t0 = Instant::now();
        loop {
            let s = self.sample()?;
            if s.fds <= target || t0.elapsed() > limit {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL the child (if still running), reap it, stop the helper threads.
    pub fn kill(&mut self) {
        if matches!(self.try_exit(), Ok(None)) {
            let _ = self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
        self.stop_sampler.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free loopback port (bound then released; the server binds it next).
pub fn free_port() -> io::Result<u16> {
    Ok(crate::harness::child::free_addr()?.port())
}
