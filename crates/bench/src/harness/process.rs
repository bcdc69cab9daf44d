//! The one launcher of the servers a study measures or the torture attacks
//! ([`Process`]): started pinned (through [`super::child`]), ready by a port
//! that accepts or by a line it prints, sampled from `/proc` (RSS, open
//! fds), stopped by its own pid.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::child;

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

/// Where a process's output goes.
#[derive(Debug, Clone)]
pub enum Output {
    /// Stdout and stderr to this file (a study's server log).
    Log(PathBuf),
    /// Stderr kept line by line ([`Process::lines`]); stdout discarded.
    Lines,
}

/// When a process counts as started.
#[derive(Debug, Clone)]
pub enum Ready {
    /// `addr` accepts a connection.
    Port(SocketAddr),
    /// Stderr has `n` lines containing `pat` (needs [`Output::Lines`]).
    Lines {
        /// The text each line contains.
        pat: String,
        /// How many such lines.
        n: usize,
    },
}

/// How to start a process.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Program and arguments.
    pub cmd: Vec<String>,
    /// Pin every thread of the child to this CPU (set before `exec`; a pin
    /// that fails fails the start).
    pub cpu: Option<usize>,
    /// Raise the child's soft `RLIMIT_NOFILE` to the hard limit before
    /// `exec` (for peers that do not do it themselves).
    pub raise_nofile: bool,
    /// Set the child's soft and hard `RLIMIT_NOFILE` to this before `exec`
    /// (so fd exhaustion comes early, whatever the server raises itself to).
    pub nofile: Option<u64>,
    /// Where its output goes.
    pub output: Output,
    /// When it counts as started.
    pub ready: Ready,
    /// How long it may take to be ready.
    pub ready_within: Duration,
    /// Sample RSS and fds every 50 ms for [`Process::peak`] (a thread
    /// that reads `/proc`: off for a measured contender, where it would
    /// take CPU from the load).
    pub sample: bool,
}

impl Launch {
    /// `cmd` unpinned, its stderr kept, ready when `addr` accepts (60 s).
    pub fn new(cmd: Vec<String>, addr: SocketAddr) -> Launch {
        Launch {
            cmd,
            cpu: None,
            raise_nofile: false,
            nofile: None,
            output: Output::Lines,
            ready: Ready::Port(addr),
            ready_within: Duration::from_secs(60),
            sample: true,
        }
    }
}

/// A started process. With [`Output::Lines`] its stderr is collected line
/// by line. With [`Launch::sample`] a background thread samples it every
/// 50 ms and keeps the peaks.
/// Dropping it kills the child (`SIGKILL`, by pid) if it is still running.
#[derive(Debug)]
pub struct Process {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    peak: Arc<Mutex<ProcSample>>,
    stop_sampler: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    exit: Option<ExitStatus>,
}

impl Process {
    /// Start `l.cmd` and wait until it is ready.
    pub fn start(l: &Launch) -> io::Result<Process> {
        let (prog, args) = l
            .cmd
            .split_first()
            .ok_or_else(|| io::Error::other("empty server command"))?;
        let mut cmd = Command::new(prog);
        cmd.args(args)
            .stdin(Stdio::null())
            // The `ringkit` binary takes these as fallbacks of its flags: a
            // user's exported value must not change what is measured.
            .env_remove("RINGKIT_BACKEND")
            .env_remove("RINGKIT_FIXED_FILES")
            .env_remove("RINGKIT_RECV_BUNDLE")
            .env_remove("RINGKIT_SEND_BATCH")
            .env_remove("RINGKIT_BATCH_WAIT");
        match &l.output {
            Output::Log(path) => {
                let f = File::create(path)?;
                cmd.stdout(f.try_clone()?).stderr(f);
            }
            Output::Lines => {
                cmd.stdout(Stdio::null()).stderr(Stdio::piped());
            }
        }
        child::prepare(&mut cmd, l.cpu, l.raise_nofile, true);
        if let Some(n) = l.nofile {
            child::limit_nofile(&mut cmd, n);
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
        if l.sample {
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
        let mut me = Process {
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
                    "{prog} exited during start-up ({st}): {}",
                    me.output_tail(l)
                )));
            }
            let up = match &l.ready {
                Ready::Port(addr) => {
                    std::net::TcpStream::connect_timeout(addr, Duration::from_millis(200)).is_ok()
                }
                Ready::Lines { pat, n } => me.count_lines(pat) >= *n,
            };
            if up {
                return Ok(me);
            }
            if t0.elapsed() > l.ready_within {
                return Err(io::Error::other(format!(
                    "{prog} not ready after {:?}: {}",
                    l.ready_within,
                    me.output_tail(l)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What to say of a process that did not start: its last stderr lines,
    /// or where its log is.
    fn output_tail(&self, l: &Launch) -> String {
        match &l.output {
            Output::Log(path) => format!("see {}", path.display()),
            Output::Lines => self.stderr_tail(10),
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

    /// Stop the child: send `sig`, wait up to `grace` for it to exit, then
    /// `SIGKILL`; reap it and stop the helper threads.
    pub fn stop(&mut self, sig: i32, grace: Duration) {
        if matches!(self.try_exit(), Ok(None)) {
            let _ = self.signal(sig);
            if !matches!(self.wait_exit(grace), Ok(Some(_))) {
                let _ = self.signal(libc::SIGKILL);
                let _ = self.child.wait();
            }
        }
        self.stop_sampler.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// `SIGKILL` the child (if still running), reap it, stop the helper
    /// threads.
    pub fn kill(&mut self) {
        self.stop(libc::SIGKILL, Duration::ZERO);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        ["sh", "-c", script].map(String::from).to_vec()
    }

    fn unused_addr() -> SocketAddr {
        child::free_addr().unwrap()
    }

    #[test]
    fn ready_by_a_line_then_stopped_by_pid() {
        let l = Launch {
            ready: Ready::Lines {
                pat: "ready".into(),
                n: 2,
            },
            ..Launch::new(
                sh("echo ready >&2; echo ready >&2; exec sleep 30"),
                unused_addr(),
            )
        };
        let mut p = Process::start(&l).unwrap();
        assert_eq!(p.count_lines("ready"), 2);
        assert!(p.sample().is_some());
        let pid = p.pid();
        p.stop(libc::SIGTERM, Duration::from_secs(2));
        assert!(p.try_exit().unwrap().is_some());
        assert!(ProcSample::of(pid).is_none(), "reaped");
    }

    #[test]
    fn output_to_a_log_and_an_exit_at_start_up_says_where_to_look() {
        let dir = std::env::temp_dir().join(format!("ringkit-process-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("server.log");
        let l = Launch {
            output: Output::Log(log.clone()),
            ready_within: Duration::from_secs(5),
            ..Launch::new(sh("echo 'bad flag' >&2; exit 3"), unused_addr())
        };
        let e = Process::start(&l).unwrap_err().to_string();
        assert!(e.contains("exited during start-up"), "{e}");
        assert!(e.contains(&log.display().to_string()), "{e}");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "bad flag\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_server_never_ready_is_killed_with_its_last_lines() {
        let l = Launch {
            ready_within: Duration::from_millis(300),
            ..Launch::new(
                sh("echo 'still starting' >&2; exec sleep 30"),
                unused_addr(),
            )
        };
        let e = Process::start(&l).unwrap_err().to_string();
        assert!(
            e.contains("not ready after") && e.contains("still starting"),
            "{e}"
        );
    }
}
