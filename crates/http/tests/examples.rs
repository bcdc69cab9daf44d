//! The `json_api` example (`cargo run -p ringkit-http --features json
//! --example json_api`), built by `cargo test` and run on both backends
//! with real HTTP requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn request(addr: SocketAddr, raw: &str) -> String {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(raw.as_bytes()).unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn json_api() {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("examples")))
    else {
        return;
    };
    let path = dir.join("json_api");
    if !path.exists() {
        eprintln!("skipped: {} not built", path.display());
        return;
    }
    let mut backends = vec!["epoll"];
    if ringkit::Builder::new()
        .backend(ringkit::Backend::Uring)
        .build()
        .is_ok()
    {
        backends.push("uring");
    }
    for b in backends {
        let mut child = Command::new(&path)
            .args(["127.0.0.1:0", b])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let g = Guard(child);
        let addr: SocketAddr = line
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        let body = r#"{"name":"Ada"}"#;
        let created = request(
            addr,
            &format!(
                "POST /users HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        );
        assert!(created.starts_with("HTTP/1.1 201"), "{created}");
        assert!(created.ends_with(r#"{"id":1,"name":"Ada"}"#), "{created}");
        let got = request(
            addr,
            "GET /users/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(got.contains("application/json"), "{got}");
        assert!(got.ends_with(r#"{"id":1,"name":"Ada"}"#), "{got}");
        let missing = request(
            addr,
            "GET /users/9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let bad = request(
            addr,
            "POST /users HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        );
        assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
        let mut g = g;
        // SAFETY: signalling our own, not yet reaped, child by its pid.
        unsafe { libc::kill(g.0.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        loop {
            if let Some(st) = g.0.try_wait().unwrap() {
                assert!(st.success(), "{b}: exit {st}");
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(15), "did not stop");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
