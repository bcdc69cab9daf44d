//! Counting a server process's syscalls over a measured window, for peers
//! whose runtime does not count its own: `perf stat` on the syscall
//! tracepoint, or `strace -c` without perf.

use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::phase::Phase;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
