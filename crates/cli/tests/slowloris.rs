//! Slowloris against `ringkit http`, on both backends: 1000 connections
//! that send one header byte per second must not stop a normal client from
//! being served, and the server closes them at its header timeout (2 s
//! here), answering 408. No timing is asserted beyond generous bounds that
//! only a server that never closes them would exceed.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SLOW: usize = 1000;

struct Server(Child, tempfile::NamedTempFile);

impl Server {
    /// Whether it still runs, and what it wrote to stderr: for a failure's
    /// message (a refused connection means nothing listens any more).
    fn state(&mut self) -> String {
        let status = self.0.try_wait();
        let err = std::fs::read_to_string(self.1.path()).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(20).collect();
        format!(
            "server exit status {status:?}; its stderr ends:\n{}",
            tail.join("\n")
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_addr() -> SocketAddr {
    // Never a port this process handed out before: servers here bind with
    // SO_REUSEPORT, so two tests on one port would share connections.
    ringkit_bench::harness::child::free_addr().unwrap()
}

fn start(backend: &str) -> Option<(Server, SocketAddr)> {
    if backend == "uring" {
        if let Err(e) = ringkit::Builder::new()
            .backend(ringkit::Backend::Uring)
            .build()
        {
            eprintln!("skipped: io_uring unavailable here: {e}");
            return None;
        }
    }
    let addr = free_addr();
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["http", "--addr", &addr.to_string(), "--backend", backend])
        .args(["--header-timeout", "2"])
        .env_remove("RINGKIT_BACKEND")
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .expect("start ringkit http");
    let server = Server(child, log);
    let t = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Some((server, addr))
}

/// One normal keep-alive request on a fresh connection: 200, empty body.
fn normal_request(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(
        resp.starts_with("HTTP/1.1 200"),
        "normal client got: {resp:?}"
    );
    assert!(resp.contains("Content-Length: 0"), "{resp:?}");
}

fn slowloris(backend: &str) {
    ringkit::raise_nofile_limit();
    let Some((mut server, addr)) = start(backend) else {
        return;
    };
    let head = b"GET / HTTP/1.1\r\nHost: slow\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut slow: Vec<Option<TcpStream>> = (0..SLOW)
        .map(|i| {
            let s = TcpStream::connect(addr).unwrap_or_else(|e| {
                panic!("{backend}: slow connection {i}: {e}; {}", server.state())
            });
            s.set_nonblocking(true).unwrap();
            Some(s)
        })
        .collect();
    let start = Instant::now();
    let mut sent = 0usize;
    let mut served = 0;
    let mut got_408 = 0;
    // One header byte per connection per second, a normal request every
    // 100 ms in between, until every slow connection has been closed.
    while slow.iter().any(Option::is_some) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "slow connections still open after 30 s (header timeout is 2 s): {} left",
            slow.iter().filter(|s| s.is_some()).count()
        );
        if sent < head.len() {
            for s in slow.iter_mut().flatten() {
                // A write can fail once the server closed: seen below.
                let _ = s.write(&head[sent..sent + 1]);
            }
            sent += 1;
        }
        for _ in 0..10 {
            normal_request(addr);
            served += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        for slot in slow.iter_mut() {
            let Some(s) = slot else { continue };
            let mut buf = [0u8; 512];
            match s.read(&mut buf) {
                Ok(0) => *slot = None,
                Ok(n) => {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    assert!(text.starts_with("HTTP/1.1 408"), "slow client got {text:?}");
                    got_408 += 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => *slot = None, // reset after the 408: closed too
            }
        }
    }
    let took = start.elapsed();
    eprintln!(
        "{backend}: {SLOW} slow connections closed after {took:?} ({got_408} saw a 408); \
         {served} normal requests served meanwhile"
    );
    assert!(served >= 10);
    // The server is still fine afterwards.
    normal_request(addr);
}

#[test]
fn slowloris_uring() {
    slowloris("uring");
}

#[test]
fn slowloris_epoll() {
    slowloris("epoll");
}
