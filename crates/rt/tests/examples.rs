//! The examples (`cargo run -p ringkit --example NAME`), built by `cargo
//! test` and run here on both backends: each must do its job and exit 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn example(name: &str) -> Option<PathBuf> {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/<name>
    let dir = std::env::current_exe()
        .ok()?
        .parent()?
        .parent()?
        .join("examples");
    let path = dir.join(name);
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "skipped: {} not built (run through `cargo test`)",
            path.display()
        );
        None
    }
}

fn backends() -> Vec<&'static str> {
    let mut v = vec!["epoll"];
    match ringkit::Builder::new()
        .backend(ringkit::Backend::Uring)
        .build()
    {
        Ok(_) => v.push("uring"),
        Err(e) => eprintln!("skipped on io_uring: {e}"),
    }
    v
}

/// Kills the child (ours, by its handle) if the test fails midway.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start a server example; wait for each `listening on ADDR` line it
/// prints (`lines` of them); returns the child and the address.
fn start(path: &PathBuf, args: &[&str], lines: usize) -> (Guard, SocketAddr) {
    let mut child = Command::new(path)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut addr = None;
    for _ in 0..lines {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let a = line
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        addr = Some(a.parse().unwrap());
    }
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = out.read_to_string(&mut rest);
        print!("{rest}");
    });
    (Guard(child), addr.unwrap())
}

/// SIGTERM, then the exit status must be 0 within 15 s.
fn stop(mut g: Guard) {
    // SAFETY: signalling our own, not yet reaped, child by its pid.
    unsafe { libc::kill(g.0.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    loop {
        if let Some(st) = g.0.try_wait().unwrap() {
            assert!(st.success(), "exit: {st}");
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a socket listens on TCP `port` (`/proc/net/tcp` and `tcp6`,
/// state `0A`).
fn listening_on(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
    })
}

fn echo_round_trip(addr: SocketAddr) {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for msg in [&b"a longer first message"[..], b"short", b"x"] {
        c.write_all(msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        c.read_exact(&mut back).unwrap();
        assert_eq!(back, msg);
    }
}

#[test]
fn echo() {
    let Some(path) = example("echo") else { return };
    for b in backends() {
        for round in 0..10 {
            let (g, addr) = start(&path, &["127.0.0.1:0", b], 1);
            echo_round_trip(addr);
            stop(g);
            // Nothing listens on the port the moment the process has
            // exited (on io_uring the ring's teardown used to keep the
            // listening socket for a few milliseconds more). Whether a
            // rebind works is not asked: under load another program's
            // outgoing connection may take the freed port as its own.
            assert!(
                !listening_on(addr.port()),
                "{b}: round {round}: {addr} still listened on after the process exited"
            );
        }
    }
}

#[test]
fn echo_threads() {
    let Some(path) = example("echo_threads") else {
        return;
    };
    for b in backends() {
        let (g, addr) = start(&path, &["127.0.0.1:0", "2", b], 2);
        echo_round_trip(addr);
        echo_round_trip(addr);
        // An idle connection is closed by the drain, and the process exits 0.
        let idle = std::net::TcpStream::connect(addr).unwrap();
        stop(g);
        let mut rest = Vec::new();
        let _ = (&idle).read_to_end(&mut rest);
        assert!(rest.is_empty());
    }
}

#[test]
fn file_copy() {
    let Some(path) = example("file_copy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let data: Vec<u8> = (0..3_000_001u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    for b in backends() {
        let dst = dir.path().join(format!("dst-{b}"));
        let out = Command::new(&path)
            .arg(&src)
            .arg(&dst)
            .arg(b)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            std::fs::read(&dst).unwrap() == data,
            "{b}: the copy differs"
        );
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("copied 3000001 bytes"));
    }
}

#[test]
fn timers() {
    let Some(path) = example("timers") else {
        return;
    };
    for b in backends() {
        let out = Command::new(&path).arg(b).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("tick 3 at"), "{text}");
        assert!(
            text.contains("read with a 50 ms timeout: Err(TimedOut)"),
            "{text}"
        );
        assert!(text.contains("then read \"late\""), "{text}");
        assert!(text.contains("slow work: deadline has elapsed"), "{text}");
    }
}
