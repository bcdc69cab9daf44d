//! ringkit-hyper's connection limits, on both backends: clients that ask
//! for a large body and never read are closed once nothing has moved for
//! the send timeout (they used to hold their connection forever), a cap on
//! connections holds, a client that never finishes its request head is
//! closed after the header timeout, and a new client is served throughout.
//! An idle keep-alive connection that once sent 1 MiB keeps at most a few
//! KiB of write buffer.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use ringkit::net::TcpListener;
use ringkit_hyper::ConnLimits;

const BIG: usize = 32 << 20;

fn big() -> Bytes {
    static B: OnceLock<Bytes> = OnceLock::new();
    B.get_or_init(|| Bytes::from(vec![9u8; BIG])).clone()
}

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hi" }))
        .route("/big", get(|| async { big() }))
}

fn start() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = ConnLimits {
        send_timeout: Duration::from_secs(1),
        header_timeout: Duration::from_secs(1),
        max_connections: 3,
        grace: Duration::from_secs(1),
        ..Default::default()
    };
    ringkit::spawn(ringkit_hyper::serve_listener(
        listener,
        app(),
        None,
        std::future::pending(),
        limits,
    ));
    addr
}

fn small_window(addr: SocketAddr) -> std::net::TcpStream {
    let c = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    c.set_recv_buffer_size(4096).unwrap();
    c.connect(&addr.into()).unwrap();
    c.into()
}

fn get_root(addr: SocketAddr) -> Vec<u8> {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    out
}

/// Seconds until the server closed `c` (FIN or RST seen), without ever
/// reading from it; `None` if it has not within `limit`.
fn seen_closed_within(c: &std::net::TcpStream, limit: Duration) -> Option<f64> {
    use std::os::fd::AsRawFd;
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        let mut p = libc::pollfd {
            fd: c.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd; a 50 ms timeout.
        unsafe { libc::poll(&mut p, 1, 50) };
        if p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return Some(t0.elapsed().as_secs_f64());
        }
    }
    None
}

/// Read until EOF or an error; the bytes read.
fn drain(mut c: std::net::TcpStream) -> usize {
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut n = 0;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return n,
            Ok(k) => n += k,
        }
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let h = std::thread::spawn(f);
    while !h.is_finished() {
        ringkit::time::sleep(Duration::from_millis(5)).await;
    }
    h.join().unwrap()
}

ringkit::test_all! {
    async fn stalled_readers_and_slow_heads_are_closed() {
        let addr = start();
        blocking(move || {
            let stalled: Vec<_> = (0..3)
                .map(|_| {
                    let mut c = small_window(addr);
                    c.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                    c
                })
                .collect();
            std::thread::sleep(Duration::from_millis(300));
            // Over the cap: accepted and closed at once.
            let over = get_root(addr);
            assert!(over.is_empty(), "a fourth connection was served over the cap");
            std::thread::sleep(Duration::from_secs(3));
            let t0 = Instant::now();
            let got = get_root(addr);
            assert!(got.starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&got));
            assert!(t0.elapsed() < Duration::from_secs(5));
            for c in stalled {
                let n = drain(c);
                assert!(n < BIG / 2, "a stalled reader kept its connection ({n} bytes)");
            }
            // Half a request head, then silence: closed after the header timeout.
            let mut slow = std::net::TcpStream::connect(addr).unwrap();
            slow.write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
            let t0 = Instant::now();
            assert_eq!(drain(slow), 0);
            assert!(t0.elapsed() < Duration::from_secs(10), "slow head held {:?}", t0.elapsed());
        })
        .await;
    }

    /// A client that asks for a large body and never reads sees the
    /// server close (a reset) soon after the send timeout and the close
    /// grace, without reading a byte. A lingering close used to queue its
    /// FIN behind the unread body, where a peer that never reads never sees
    /// it (the hostile battery's never-read attack, 1 of 8 connections).
    async fn a_reader_that_never_reads_sees_the_close() {
        let addr = start();
        blocking(move || {
            let mut c = small_window(addr);
            c.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            // Send timeout 1 s, close grace 1 s: 2 s, and slack for a busy machine.
            let after = seen_closed_within(&c, Duration::from_secs(6));
            assert!(after.is_some(), "no FIN or RST within 6 s of a never-read request");
        })
        .await;
    }

    /// After a 1 MiB response, an idle keep-alive connection's bridge
    /// holds at most a few KiB of write buffer.
    async fn an_idle_connection_keeps_little_write_buffer() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let mut got = vec![0u8; 1 << 20];
            c.read_exact(&mut got).unwrap();
            c
        });
        let (s, _) = l.accept().await.unwrap();
        let mut io = s.into_poll_io();
        let chunk = vec![1u8; 1 << 20];
        let mut left = &chunk[..];
        while !left.is_empty() {
            let n = std::future::poll_fn(|cx| io.poll_write(cx, left)).await.unwrap();
            left = &left[n..];
        }
        std::future::poll_fn(|cx| io.poll_flush(cx)).await.unwrap();
        let held = io.buffer_capacity();
        assert!(held <= 4096, "{held} bytes of write buffer kept after the flush");
        let _c = blocking(move || client.join().unwrap()).await;
    }
}
