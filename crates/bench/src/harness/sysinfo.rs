//! What ran where: kernel, CPU, cores, tool versions, recorded with every
//! result (docs/ARCHITECTURE.md, "How studies measure").

use serde::Serialize;

/// Facts about this machine and tool.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SystemInfo {
    /// `uname -sr`.
    pub kernel: String,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// Online CPUs.
    pub cores: usize,
    /// ringkit version.
    pub tool_version: String,
    /// The command line of this run.
    pub command: String,
    /// When (UTC, RFC 3339-ish).
    pub date: String,
}

impl SystemInfo {
    /// Gather it now.
    pub fn gather() -> SystemInfo {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        SystemInfo {
            kernel: ringkit_uring::kernel_version(),
            cpu_model,
            // Online CPUs of the machine (not this process's affinity mask,
            // which `compare` narrows to the load generator's CPU).
            // SAFETY: sysconf has no preconditions.
            cores: unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            date: utc_now(),
        }
    }
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// CPU time of a process (all threads), from /proc/PID/stat.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// User seconds.
    pub user: f64,
    /// System seconds.
    pub system: f64,
}

impl CpuTimes {
    /// Read `/proc/<pid>/stat` (utime, stime).
    pub fn of(pid: u32) -> std::io::Result<CpuTimes> {
        CpuTimes::of_path(std::path::Path::new(&format!("/proc/{pid}/stat")))
    }

    /// Read a `/proc/.../stat` file (a process's, or a thread's under
    /// `/proc/PID/task/TID/stat`).
    pub fn of_path(path: &std::path::Path) -> std::io::Result<CpuTimes> {
        let pid = path.display();
        let s = std::fs::read_to_string(path)?;
        // Fields after the parenthesised comm; utime and stime are fields 14 and 15.
        let rest = s
            .rsplit_once(')')
            .map(|(_, r)| r)
            .ok_or_else(|| std::io::Error::other("bad /proc stat"))?;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let get = |i: usize| {
            f.get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| std::io::Error::other(format!("{pid}: no field {}", i + 3)))
        };
        Ok(CpuTimes {
            user: get(11)? / hz,
            system: get(12)? / hz,
        })
    }

    /// A server's CPU times and, for a ringkit server publishing to
    /// `stats`, its counters flushed at this moment
    /// ([`ringkit::publish::flush`]): what a study reads at each edge of
    /// its window. Any failure is an error, never a silent zero.
    pub fn edge(
        pid: u32,
        stats: Option<&std::path::Path>,
    ) -> std::io::Result<(CpuTimes, ringkit::publish::Published)> {
        let published = match stats {
            Some(path) => ringkit::publish::flush(pid, path, std::time::Duration::from_secs(2))?,
            None => ringkit::publish::Published::default(),
        };
        Ok((CpuTimes::of(pid)?, published))
    }

    /// This process's own CPU time, from `getrusage(RUSAGE_SELF)`
    /// (microsecond resolution, unlike /proc's clock ticks).
    pub fn own() -> CpuTimes {
        // SAFETY: an all-zero rusage is valid; getrusage fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage. RUSAGE_SELF on a valid
        // buffer cannot fail.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        debug_assert_eq!(rc, 0);
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        CpuTimes {
            user: tv(ru.ru_utime),
            system: tv(ru.ru_stime),
        }
    }

    /// Run `cmd` to completion (its stdout and stderr captured) and return
    /// its output with the CPU time of the whole process tree: every
    /// thread of the child (an io_uring SQPOLL poller, io-wq workers) and
    /// of the children it waited for, from `wait4`'s resource usage. A
    /// tool's own figure is often one thread's (`RUSAGE_THREAD`), which
    /// leaves those out.
    pub fn of_command(
        cmd: &mut std::process::Command,
    ) -> std::io::Result<(std::process::Output, CpuTimes)> {
        CpuTimes::of_command_watching(cmd, std::time::Duration::ZERO, &mut |_| {})
    }

    /// [`CpuTimes::of_command`], calling `watch(pid)` every `every` while
    /// the child runs (never, for a zero `every`).
    pub fn of_command_watching(
        cmd: &mut std::process::Command,
        every: std::time::Duration,
        watch: &mut dyn FnMut(u32),
    ) -> std::io::Result<(std::process::Output, CpuTimes)> {
        use std::io::Read;
        use std::os::unix::process::ExitStatusExt;
        use std::process::Stdio;
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let drain = |r: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut v);
                }
                v
            })
        };
        let out = drain(
            child
                .stdout
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        );
        let err = drain(
            child
                .stderr
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        );
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if every.is_zero() { 0 } else { libc::WNOHANG };
        loop {
            if !every.is_zero() {
                watch(pid as u32);
            }
            // SAFETY: waiting for our own child by its pid; `status` and
            // `ru` are valid and writable. `child` is never waited on by
            // std after this (dropping a Child does not wait).
            let r = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
            if r == pid {
                break;
            }
            if r == 0 {
                std::thread::sleep(every);
                continue;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let output = std::process::Output {
            status: std::process::ExitStatus::from_raw(status),
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        };
        Ok((
            output,
            CpuTimes {
                user: tv(ru.ru_utime),
                system: tv(ru.ru_stime),
            },
        ))
    }

    /// `self - earlier`.
    pub fn since(&self, e: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user - e.user,
            system: self.system - e.system,
        }
    }
}
