//! Shared test harness: a server on the test's runtime, blocking clients on
//! std threads, and a small response reader that checks framing.
//!
//! The server runs as a task on the runtime `ringkit::test_all!` built (so
//! every server test runs on both backends). Clients are plain blocking
//! `std::net` code on their own thread, so they cannot share the server's
//! bugs. When the client closure returns, the server is shut down
//! gracefully and must return `Ok`, so every test also checks shutdown.

#![allow(dead_code)]

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::time::Duration;

use ringkit::net::TcpListener;
use ringkit_http::{Handler, Server, ServerConfig};

/// Generous: the machine may be loaded.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Run `handler` on this runtime and `client(addr)` on a std thread; then
/// shut the server down and check it stopped cleanly.
pub async fn with_server<H, C>(config: ServerConfig, handler: H, client: C)
where
    H: Handler,
    C: FnOnce(SocketAddr) + Send + 'static,
{
    with_server_counted(config, handler, Rc::new(Cell::new(0)), client).await
}

/// As [`with_server`], counting accepted connections in `accepted`.
pub async fn with_server_counted<H, C>(
    config: ServerConfig,
    handler: H,
    accepted: Rc<Cell<u64>>,
    client: C,
) where
    H: Handler,
    C: FnOnce(SocketAddr) + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Rc::new(Cell::new(false));
    let stop2 = stop.clone();
    let server = ringkit::spawn(
        Server::from_listener(listener)
            .config(config)
            .count_accepted(accepted)
            .with_shutdown(async move {
                while !stop2.get() {
                    ringkit::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .serve(handler),
    );
    let t = std::thread::spawn(move || client(addr));
    while !t.is_finished() {
        ringkit::time::sleep(Duration::from_millis(2)).await;
    }
    stop.set(true);
    let res = t.join();
    let served = ringkit::time::timeout(Duration::from_secs(60), server)
        .await
        .expect("server did not stop within 60 s of shutdown");
    if let Err(p) = res {
        std::panic::resume_unwind(p);
    }
    served.expect("server task").expect("server result");
}

/// A connected client with timeouts.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Send `bytes`, half-close, and read everything until EOF.
pub fn exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = connect(addr);
    s.write_all(bytes).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    read_to_end(&mut s)
}

/// Read until EOF (a reset after the data counts as EOF).
pub fn read_to_end(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("read: {e} (after {} bytes)", out.len()),
        }
    }
}

/// One parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Parse one response from the start of `buf` (`head` says the request
/// was HEAD: no body follows despite Content-Length). Returns the response
/// and the bytes it took, or None if `buf` ends inside it.
pub fn parse_response(buf: &[u8], head: bool) -> Option<(Resp, usize)> {
    let mut hdrs = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut hdrs);
    let n = match r.parse(buf).expect("malformed response") {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return None,
    };
    let status = r.code.unwrap();
    let headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8(h.value.to_vec()).unwrap(),
            )
        })
        .collect();
    let cls: Vec<_> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .collect();
    assert!(cls.len() <= 1, "several Content-Length: {headers:?}");
    assert!(
        headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("date")) || status < 200,
        "no Date: {headers:?}"
    );
    let len: usize = if head || status < 200 || status == 204 || status == 304 {
        0
    } else {
        cls.first()
            .map(|(_, v)| v.parse().unwrap())
            .expect("response without Content-Length")
    };
    if buf.len() < n + len {
        return None;
    }
    Some((
        Resp {
            status,
            headers,
            body: buf[n..n + len].to_vec(),
        },
        n + len,
    ))
}

/// Parse all responses in `buf` (none of them to HEAD); every byte must
/// belong to one.
pub fn parse_all(mut buf: &[u8]) -> Vec<Resp> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let (r, n) = parse_response(buf, false)
            .unwrap_or_else(|| panic!("truncated response: {:?}", String::from_utf8_lossy(buf)));
        out.push(r);
        buf = &buf[n..];
    }
    out
}

/// Read exactly one response from a live connection.
pub fn read_response(s: &mut TcpStream, head: bool, carry: &mut Vec<u8>) -> Resp {
    loop {
        if let Some((r, n)) = parse_response(carry, head) {
            carry.drain(..n);
            return r;
        }
        let mut buf = [0u8; 16384];
        let n = s.read(&mut buf).expect("read response");
        assert!(
            n > 0,
            "EOF inside a response: {:?}",
            String::from_utf8_lossy(carry)
        );
        carry.extend_from_slice(&buf[..n]);
    }
}

/// Whether the server closed the connection (EOF or reset) within the
/// read timeout.
pub fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Run `f` on a std thread and wait for it without blocking the runtime
/// (a panic in `f` is the test's).
pub async fn client<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let h = std::thread::spawn(f);
    while !h.is_finished() {
        ringkit::time::sleep(Duration::from_millis(2)).await;
    }
    match h.join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Start `handler` on this runtime's listener with `config` until the
/// test ends (no shutdown); returns its address.
pub fn serve_forever<H: Handler>(config: ServerConfig, handler: H) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    ringkit::spawn(async move {
        let _ = Server::from_listener(listener)
            .config(config)
            .with_shutdown(std::future::pending())
            .serve(handler)
            .await;
    });
    addr
}
