//! rust_echo_bench itself as the echo study's client
//! (`compare echo --client rust-echo-bench`): the binary (`echo_bench`,
//! built from its own source) runs as a child on the client CPU, and its
//! output is read.
//!
//! # What its figure means
//! rust_echo_bench starts one OS thread per connection, each of which
//! connects and starts its loop at once; only when the last thread is
//! spawned does the main thread sleep for `-t` seconds, then it stops them
//! and divides what they counted by `-t`. With 1 000 threads on one CPU
//! the spawning takes seconds while the threads already started load the
//! server, so its "Speed" counts more than `-t` seconds of work, and how
//! much more depends on how long the spawning took (which the server's
//! speed changes). A thread also ends for good on a read shorter than a
//! message ("Read error!"), which TCP allows.
//!
//! So the sample keeps its own figure (`tool_rps`) and measures its own:
//! responses over the child's whole run, wall clock (`secs`), with the
//! server's CPU taken over the same run; `connect_secs` is how much longer
//! than `-t` the run took (spawning, connecting, stopping), and
//! `dead_conns` counts the threads that gave up on a short read.
//! `Write error!` and `Read error! length=0` (the server closed) count as
//! failed connections; a read that fails (a reset) ends its thread without
//! a line, and only shows as fewer responses. A run that has not ended a
//! minute past `-t` (the tool waits forever for a thread whose connect
//! failed) is killed and fails the sample.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::load::{EchoLoadConfig, EchoLoadResult};
use crate::harness::phase::Phase;

/// The binary's name as its `cargo build` makes it.
pub const BINARY: &str = "echo_bench";

/// `path`, or `echo_bench` on `PATH`; an error that says how to build it.
pub fn find(path: Option<&Path>) -> io::Result<PathBuf> {
    if let Some(p) = path {
        // Absolute: `Command` would look a bare name up on PATH.
        return std::fs::canonicalize(p)
            .ok()
            .filter(|p| p.is_file())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "--echo-bench {}: no such file (cargo install --git \
                         https://github.com/haraldh/rust_echo_bench builds echo_bench)",
                        p.display()
                    ),
                )
            });
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(BINARY))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "rust_echo_bench's binary (echo_bench) is not on PATH: build it from its \
                 source (cargo install --git https://github.com/haraldh/rust_echo_bench) \
                 or pass --echo-bench PATH",
            )
        })
}

/// What one run of the tool printed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Output {
    pub(crate) requests: u64,
    pub(crate) responses: u64,
    /// Its "Speed: ... response/sec".
    pub(crate) speed: f64,
    /// "Read error! length=N" lines with N > 0: threads that gave up on
    /// a short read.
    pub(crate) dead: u64,
    /// "Write error!" and "Read error! length=0": the server failed or
    /// closed the connection.
    pub(crate) failed: u64,
}

pub(crate) fn parse(text: &str) -> io::Result<Output> {
    let mut out = Output::default();
    let num = |s: &str| {
        s.split_whitespace()
            .next()
            .and_then(|w| w.parse::<u64>().ok())
    };
    let (mut req, mut resp) = (None, None);
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Requests:") {
            req = num(v);
        } else if let Some(v) = line.strip_prefix("Responses:") {
            resp = num(v);
        } else if let Some(v) = line.strip_prefix("Speed:") {
            // "Speed: 1 request/sec, 2 response/sec"
            out.speed = v.split(',').nth(1).and_then(num).map_or(0.0, |x| x as f64);
        } else if let Some(v) = line.strip_prefix("Read error! length=") {
            if num(v).unwrap_or(0) == 0 {
                out.failed += 1;
            } else {
                out.dead += 1;
            }
        } else if line.starts_with("Write error!") {
            out.failed += 1;
        }
    }
    match (req, resp) {
        (Some(a), Some(b)) => {
            out.requests = a;
            out.responses = b;
            Ok(out)
        }
        _ => Err(io::Error::other(format!(
            "rust_echo_bench printed no Requests/Responses lines: {}",
            text.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        ))),
    }
}

/// Run `bin` against `cfg.addr` (`-c conns -l len -t secs`, whole
/// seconds, at least 1); `hook` marks the child's start and end.
pub fn run(
    bin: &Path,
    cfg: &EchoLoadConfig,
    hook: &mut dyn FnMut(Phase),
) -> io::Result<EchoLoadResult> {
    super::load::closed_loop_only(cfg, "rust_echo_bench")?;
    let secs = cfg.duration.as_secs().max(1);
    let mut cmd = Command::new(bin);
    cmd.args(["-a", &cfg.addr.to_string()])
        .args(["-c", &cfg.conns.to_string()])
        .args(["-l", &cfg.len.to_string()])
        .args(["-t", &secs.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    let cpu0 = children_cpu();
    hook(Phase::WindowStart);
    let t0 = Instant::now();
    let mut child = cmd.spawn()?;
    // Its output, read meanwhile (a pipe left full would stop it).
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let read_all = |r: Option<Box<dyn io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out_t = read_all(stdout.map(|s| Box::new(s) as Box<dyn io::Read + Send>));
    let err_t = read_all(stderr.map(|s| Box::new(s) as Box<dyn io::Read + Send>));
    let limit = std::time::Duration::from_secs(secs + 60);
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let wall = t0.elapsed().as_secs_f64();
    hook(Phase::WindowEnd);
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    let Some(status) = status else {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "rust_echo_bench still running {} s past -t: killed",
                limit.as_secs() - secs
            ),
        ));
    };
    if !status.success() {
        return Err(io::Error::other(format!(
            "rust_echo_bench: {status}: {}",
            String::from_utf8_lossy(&stderr).trim()
        )));
    }
    let out = parse(&String::from_utf8_lossy(&stdout))?;
    Ok(EchoLoadResult {
        requests: out.requests,
        responses: out.responses,
        secs: wall,
        connect_secs: (wall - secs as f64).max(0.0),
        tool_rps: out.speed,
        dead_conns: out.dead,
        failed_conns: out.failed,
        client_cpu_s: children_cpu() - cpu0,
        ..EchoLoadResult::default()
    })
}

/// CPU seconds (user + system) of this process's waited-for children.
fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_output_is_read_and_its_dead_threads_counted() {
        let text = "Read error! length=300\nBenchmarking: 127.0.0.1:1\n1000 clients, running 512 bytes, 5 sec.\n\nSpeed: 240015 request/sec, 240013 response/sec\nRequests: 1200075\nResponses: 1200065\nWrite error!\n";
        assert_eq!(
            parse(text).unwrap(),
            Output {
                requests: 1200075,
                responses: 1200065,
                speed: 240013.0,
                dead: 1,
                failed: 1
            }
        );
        assert!(parse("Sorry, but all threads died already.\n").is_err());
    }

    /// The child's flags, its whole run as the window, its lines read: a
    /// stand-in script prints what the tool prints.
    #[test]
    fn a_run_times_the_whole_child() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join(BINARY);
        std::fs::write(
            &bin,
            "#!/bin/sh\nsleep 1.2\necho \"$@\" > \"$(dirname \"$0\")/args\"\n\
             echo 'Read error! length=100'\necho 'Speed: 9 request/sec, 8 response/sec'\n\
             echo 'Requests: 9'\necho 'Responses: 8'\n",
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cfg = EchoLoadConfig {
            addr: "127.0.0.1:9".parse().unwrap(),
            conns: 7,
            len: 64,
            duration: std::time::Duration::from_secs(1),
            pipeline: 1,
            backend: ringkit::Backend::Auto,
            rate: None,
        };
        let mut phases = Vec::new();
        let r = run(&bin, &cfg, &mut |p| phases.push(p)).unwrap();
        assert_eq!(phases, [Phase::WindowStart, Phase::WindowEnd]);
        let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
        assert_eq!(args.trim(), "-a 127.0.0.1:9 -c 7 -l 64 -t 1");
        assert_eq!(
            (r.requests, r.responses, r.dead_conns, r.failed_conns),
            (9, 8, 1, 0)
        );
        assert_eq!(r.tool_rps, 8.0);
        assert!(
            r.secs >= 1.2 && r.connect_secs >= 0.2,
            "{} {}",
            r.secs,
            r.connect_secs
        );
    }

    #[test]
    fn a_missing_binary_says_how_to_get_one() {
        let e = find(Some(Path::new("/nonexistent/echo_bench"))).unwrap_err();
        assert!(e.to_string().contains("no such file"), "{e}");
        assert!(e.to_string().contains("cargo install"), "{e}");
    }
}
