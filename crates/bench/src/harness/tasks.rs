//! CPU time of each thread of a child process, watched while it runs:
//! how a study charges a tool for the threads that did its I/O (its job
//! thread, an io_uring SQPOLL poller, io-wq workers) without its start-up
//! and exit.
//!
//! [`run_watching`] runs a command to completion like
//! [`CpuTimes::of_command`] (the whole process tree's CPU from `wait4`) and
//! meanwhile reads `/proc/PID/task/*/stat` every [`EVERY`], keeping each
//! thread's last reading: a thread that exits before the process keeps the
//! CPU it had at most one period before it ended.

use std::collections::BTreeMap;
use std::io;
use std::process::{Command, Output};
use std::time::Duration;

use super::sysinfo::CpuTimes;

/// Time between two readings of the child's threads.
pub const EVERY: Duration = Duration::from_millis(5);

/// One thread's last reading.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadCpu {
    /// Its name (`/proc/PID/task/TID/comm`), e.g. `iou-sqp-1234`.
    pub comm: String,
    /// Its CPU time when last read.
    pub cpu: CpuTimes,
}

/// What [`run_watching`] saw.
#[derive(Debug, Clone)]
pub struct Watched {
    /// The command's output.
    pub output: Output,
    /// The whole process tree, from `wait4`.
    pub process: CpuTimes,
    /// Each thread by its id, as last read.
    pub threads: BTreeMap<u32, ThreadCpu>,
}

impl Watched {
    /// The CPU of the threads whose name starts with one of `prefixes`.
    pub fn named(&self, prefixes: &[&str]) -> CpuTimes {
        self.threads
            .values()
            .filter(|t| prefixes.iter().any(|p| t.comm.starts_with(p)))
            .fold(CpuTimes::default(), |a, t| CpuTimes {
                user: a.user + t.cpu.user,
                system: a.system + t.cpu.system,
            })
    }
}

/// Read every thread of `pid` once into `into` (threads gone since are
/// kept as last read).
pub fn read_threads(pid: u32, into: &mut BTreeMap<u32, ThreadCpu>) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cpu) = CpuTimes::of_path(&e.path().join("stat")) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_default();
        into.insert(tid, ThreadCpu { comm, cpu });
    }
}

/// Run `cmd` to completion, stdout and stderr captured, reading its
/// threads' CPU every [`EVERY`] until it exits.
pub fn run_watching(cmd: &mut Command) -> io::Result<Watched> {
    let mut threads = BTreeMap::new();
    let (output, process) =
        CpuTimes::of_command_watching(cmd, EVERY, &mut |pid| read_threads(pid, &mut threads))?;
    Ok(Watched {
        output,
        process,
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_of_a_child_is_seen_with_its_cpu() {
        // A shell that spins for about 300 ms of CPU, then exits.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"]);
        let w = run_watching(&mut cmd).unwrap();
        assert!(w.output.status.success());
        let seen: f64 = w.threads.values().map(|t| t.cpu.user + t.cpu.system).sum();
        let whole = w.process.user + w.process.system;
        assert!(!w.threads.is_empty());
        assert!(
            w.threads.values().any(|t| t.comm == "sh"),
            "{:?}",
            w.threads
        );
        // The last reading is at most one period (plus a clock tick) short.
        assert!(seen <= whole + 0.02, "{seen} > {whole}");
        assert!(seen >= 0.5 * whole, "{seen} << {whole}: {:?}", w.threads);
        assert_eq!(
            w.named(&["sh"]).user,
            w.threads.values().map(|t| t.cpu.user).sum::<f64>()
        );
    }
}
