//! `ringkit http --pad N`: every `GET /` response is exactly N bytes
//! longer, on both backends.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

fn response_len(backend: &str, pad: usize) -> Option<usize> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args([
            "http",
            "--addr",
            &addr,
            "--backend",
            backend,
            "--pad",
            &pad.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    if !line.contains("listening on") {
        // io_uring unavailable here: the command says why and exits.
        let _ = child.wait();
        eprintln!("skipped on {backend}: {line}");
        return None;
    }
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    // SAFETY: signalling our own, not yet reaped, child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    assert!(child.wait().unwrap().success());
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    Some(got.len())
}

#[test]
fn pad_lengthens_the_response_by_exactly_n_bytes() {
    for backend in ["epoll", "uring"] {
        let (Some(plain), Some(padded)) = (response_len(backend, 0), response_len(backend, 39))
        else {
            continue;
        };
        assert_eq!(padded, plain + 39, "{backend}");
    }
}
