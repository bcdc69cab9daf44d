//! What the hostile-client tests share: a server child started as a user
//! would (optionally with a lowered fd limit), its RSS and fds, and small
//! blocking clients.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server child, killed and reaped on drop.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: signalling our own, not yet reaped, child by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Server {
    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Resident memory, kB.
    pub fn rss_kb(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Open fds.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

/// Whether io_uring can be used here (prints why not).
pub fn backend_usable(backend: &str) -> bool {
    if backend != "uring" {
        return true;
    }
    match ringkit::Builder::new()
        .backend(ringkit::Backend::Uring)
        .build()
    {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped on uring: io_uring unavailable here: {e}");
            false
        }
    }
}

/// A free loopback address.
pub fn free_addr() -> SocketAddr {
    // Never a port this process handed out before: servers here bind with
    // SO_REUSEPORT, so two tests on one port would share connections.
    ringkit_bench::harness::child::free_addr().unwrap()
}

/// Start `ringkit <args> --addr A --backend B`; `nofile`: the child's fd
/// limit (soft and hard). Waits until it accepts.
pub fn start(args: &[&str], backend: &str, nofile: Option<u64>) -> Server {
    let addr = free_addr();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringkit"));
    cmd.args(args)
        .args(["--addr", &addr.to_string(), "--backend", backend])
        .env_remove("RINGKIT_BACKEND")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(n) = nofile {
        ringkit_bench::harness::child::limit_nofile(&mut cmd, n);
    }
    let mut child = cmd.spawn().unwrap();
    // Keep draining its stderr so it never blocks on a full pipe.
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { return };
            if line.contains("WARN") || line.contains("ERROR") {
                eprintln!("server: {line}");
            }
        }
    });
    let t = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Server { child, addr }
}

/// Read until the peer closes or `within` passes; returns whether it
/// closed (EOF or reset).
pub fn closed_within(c: &mut TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut b = [0u8; 16 * 1024];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        c.set_read_timeout(Some(left)).unwrap();
        match c.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}
