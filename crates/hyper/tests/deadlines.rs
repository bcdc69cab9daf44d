//! ringkit-hyper's connection deadlines, on both backends. Sockets that
//! connect and say nothing, a full HTTP/2 preface then silence, and an
//! idle keep-alive connection are closed at their deadlines (the first
//! two were held forever: a cap's worth of silent sockets locked every
//! new client out for good); a new client is served once they are gone;
//! and a handler that runs past the idle timeout is not cut off. Heads
//! that never end are held only up to the thread's input budget, and a
//! small request is served while they hold it; past twice the budget only
//! minimal heads get through; a full budget does not cut an HTTP/2
//! download (its WINDOW_UPDATEs are not charged), and a stream its peer
//! grants no window is closed at the send timeout though PINGs flow.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use ringkit::net::TcpListener;
use ringkit_hyper::ConnLimits;

const IDLE: Duration = Duration::from_secs(2);
const HEADER: Duration = Duration::from_secs(1);
const CAP: usize = 4;

fn start() -> SocketAddr {
    start_with(64 << 20)
}

fn start_with(max_buffered_bytes: usize) -> SocketAddr {
    start_limits(ConnLimits {
        idle_timeout: IDLE,
        header_timeout: HEADER,
        max_connections: CAP,
        max_buffered_bytes,
        ..Default::default()
    })
}

fn start_limits(limits: ConnLimits) -> SocketAddr {
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .route(
            "/slow",
            get(|| async {
                ringkit::time::sleep(Duration::from_secs(3)).await;
                "slow"
            }),
        )
        .route("/big", get(|| async { vec![b'm'; 16 << 20] }))
        .route(
            "/quiet",
            get(|| async { axum::body::Body::from_stream(Quiet::default()) }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    ringkit::spawn(ringkit_hyper::serve_listener(
        listener,
        app,
        None,
        std::future::pending(),
        limits,
    ));
    addr
}

/// Seconds until the server closed `c` (reading and dropping what it
/// sends), or `None` within 10 s.
fn closed_after(mut c: std::net::TcpStream) -> Option<f64> {
    let t0 = Instant::now();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return Some(t0.elapsed().as_secs_f64()),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(t0.elapsed().as_secs_f64())
            }
            Err(_) => return None,
        }
    }
}

/// `GET path` on a new connection; the response, or what came before EOF.
fn get_path(addr: SocketAddr, path: &str) -> String {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let _ = c.write_all(req.as_bytes());
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A streamed body that sends `a`, is quiet for 4 s (an event stream
/// between events), then sends `b`.
#[derive(Default)]
struct Quiet {
    step: u8,
    until: Option<Instant>,
}

impl tokio_stream::Stream for Quiet {
    type Item = Result<&'static [u8], std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        match self.step {
            0 => {
                self.step = 1;
                Poll::Ready(Some(Ok(b"a")))
            }
            1 => {
                let until = *self.until.get_or_insert_with(|| {
                    let w = cx.waker().clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs(4));
                        w.wake();
                    });
                    Instant::now() + Duration::from_secs(4)
                });
                if Instant::now() < until {
                    return Poll::Pending;
                }
                self.step = 2;
                Poll::Ready(Some(Ok(b"b")))
            }
            _ => Poll::Ready(None),
        }
    }
}

/// How many of `conns` the server closes within `window` (all watched at
/// once; what they receive is dropped).
fn closed_within(conns: &[std::net::TcpStream], window: Duration) -> usize {
    let t0 = Instant::now();
    let mut closed = vec![false; conns.len()];
    let mut buf = [0u8; 4096];
    for c in conns {
        c.set_nonblocking(true).unwrap();
    }
    while t0.elapsed() < window && closed.iter().any(|c| !c) {
        for (i, mut c) in conns.iter().enumerate() {
            if closed[i] {
                continue;
            }
            match c.read(&mut buf) {
                Ok(0) => closed[i] = true,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Ok(_) => {}
                Err(_) => closed[i] = true,
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    closed.iter().filter(|c| **c).count()
}

/// Connections each holding `bytes` of a request head that never ends.
fn unfinished_heads(addr: SocketAddr, conns: usize, bytes: usize) -> Vec<std::net::TcpStream> {
    (0..conns)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ")
                .unwrap();
            c.write_all(&vec![b'a'; bytes - 32]).unwrap();
            c
        })
        .collect()
}

fn curl_missing() -> bool {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: curl is not installed (apt-get install curl)");
        return true;
    }
    false
}

/// An HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

/// On a new HTTP/2 connection, 1 MiB of PINGs (answers read), then
/// `GET /`: its body, or `None` if the connection closed first.
fn pings_then_get(addr: SocketAddr) -> Option<Vec<u8>> {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    c.write_all(&frame(4, 0, 0, &[])).unwrap();
    let pings = frame(6, 0, 0, b"pingping").repeat(1024);
    let reader = c.try_clone().unwrap();
    let drain = std::thread::spawn(move || drain_frames(reader));
    for _ in 0..(1 << 20) / pings.len() + 1 {
        if c.write_all(&pings).is_err() {
            break;
        }
    }
    let block = [&[0x82u8, 0x86, 0x84, 0x41, 1][..], b"x"].concat();
    let _ = c.write_all(&frame(1, 0x5, 1, &block));
    drain.join().unwrap()
}

/// Read frames until stream 1's body ends (its DATA, collected) or the
/// connection closes (`None`).
fn drain_frames(mut c: std::net::TcpStream) -> Option<Vec<u8>> {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut body = Vec::new();
    loop {
        let mut head = [0u8; 9];
        c.read_exact(&mut head).ok()?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        c.read_exact(&mut payload).ok()?;
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
        match head[3] {
            0 if stream == 1 => {
                body.extend(&payload);
                if head[4] & 1 != 0 {
                    return Some(body);
                }
            }
            1 if stream == 1 && head[4] & 1 != 0 => return Some(body),
            7 => return None,
            _ => {}
        }
    }
}

/// `GET path` over HTTP/2 with the default 64 KiB windows, granting
/// window back for every DATA frame (two WINDOW_UPDATEs each, as most
/// clients do); the body's length, or how far it got.
fn h2_download(addr: SocketAddr, path: &str) -> Result<usize, usize> {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(4, 0, 0, &[]));
    let block = [
        &[0x82u8, 0x86, 0x44, path.len() as u8][..],
        path.as_bytes(),
        &[0x41, 1, b'x'],
    ]
    .concat();
    out.extend(frame(1, 0x5, 1, &block));
    c.write_all(&out).unwrap();
    let mut body = 0;
    loop {
        let mut head = [0u8; 9];
        if c.read_exact(&mut head).is_err() {
            return Err(body);
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        if c.read_exact(&mut payload).is_err() {
            return Err(body);
        }
        match (head[3], head[4]) {
            (0, flags) => {
                body += len;
                if len > 0 {
                    let inc = (len as u32).to_be_bytes();
                    let mut wu = frame(8, 0, 0, &inc);
                    wu.extend(frame(8, 0, 1, &inc));
                    if c.write_all(&wu).is_err() {
                        return Err(body);
                    }
                }
                if flags & 1 != 0 {
                    return Ok(body);
                }
            }
            (4, 0) => {
                let _ = c.write_all(&frame(4, 1, 0, &[]));
            }
            (6, 0) => {
                let _ = c.write_all(&frame(6, 1, 0, &payload));
            }
            (7, _) | (3, _) => return Err(body),
            _ => {}
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
    async fn silent_sockets_cannot_hold_the_cap() {
        let addr = start();
        blocking(move || {
            let silent: Vec<_> = (0..CAP)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            std::thread::sleep(Duration::from_millis(200));
            let t0 = Instant::now();
            // The cap is full: retried until served, which is once the
            // silent sockets reach their idle deadline.
            loop {
                let got = get_path(addr, "/");
                if got.starts_with("HTTP/1.1 200") {
                    break;
                }
                assert!(t0.elapsed() < IDLE + Duration::from_secs(3), "locked out: {got:?}");
                std::thread::sleep(Duration::from_millis(100));
            }
            for c in silent {
                let after = closed_after(c);
                assert!(after.is_some(), "a silent socket was held past its idle deadline");
            }
        })
        .await;
    }

    async fn a_preface_then_silence_and_an_idle_keep_alive_are_closed() {
        let addr = start();
        blocking(move || {
            let mut h2 = std::net::TcpStream::connect(addr).unwrap();
            h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                .unwrap();
            let after = closed_after(h2).expect("an h2 preface then silence was held");
            assert!(after < (HEADER + Duration::from_secs(2)).as_secs_f64(), "{after} s");

            let mut ka = std::net::TcpStream::connect(addr).unwrap();
            ka.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut buf = [0u8; 256];
            let n = ka.read(&mut buf).unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
            let after = closed_after(ka).expect("an idle keep-alive connection was held");
            assert!(after < (IDLE + Duration::from_secs(2)).as_secs_f64(), "{after} s");
        })
        .await;
    }

    async fn unfinished_heads_are_bounded_by_the_thread_budget() {
        // Three connections of 40 KiB unfinished heads against a 64 KiB
        // budget: at least one is closed at once, not at the header
        // timeout; a small request is served meanwhile.
        let addr = start_with(64 << 10);
        blocking(move || {
            let big: Vec<_> = (0..3)
                .map(|_| {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ").unwrap();
                    for _ in 0..40 {
                        let _ = c.write_all(&[b'a'; 1024]);
                    }
                    c
                })
                .collect();
            std::thread::sleep(Duration::from_millis(300));
            let got = get_path(addr, "/");
            assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
            let early = big
                .into_iter()
                .filter_map(closed_after)
                .filter(|&s| s < HEADER.as_secs_f64() * 0.5)
                .count();
            assert!(early >= 1, "no connection over the budget was closed early");
        })
        .await;
    }

    /// An HTTP/2 download that keeps moving, slower than the idle timeout,
    /// is not cut (the idle deadline used to start when the handler
    /// returned, and cut h2 bodies still being sent).
    async fn a_slow_h2_download_is_not_cut() {
        if curl_missing() {
            return;
        }
        let addr = start();
        let out = blocking(move || {
            std::process::Command::new("curl")
                .args(["-sS", "--http2-prior-knowledge", "--limit-rate", "2M"])
                .args(["-o", "/dev/null", "-w", "%{http_version} %{size_download}"])
                .arg(format!("http://{addr}/big"))
                .output()
                .unwrap()
        })
        .await;
        let got = String::from_utf8_lossy(&out.stdout).into_owned();
        // About 8 s at 2 MB/s; the server is still sending well past the
        // 2 s idle timeout (socket buffers hold a few MB at most).
        assert_eq!(got, "2 16777216", "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// A full input budget does not cut another client's HTTP/2 download:
    /// the download's WINDOW_UPDATE frames, read while its response is on
    /// its way, used to be charged, and it was closed mid-body.
    async fn a_full_budget_does_not_cut_an_h2_download() {
        let addr = start_limits(ConnLimits {
            idle_timeout: Duration::from_secs(20),
            header_timeout: Duration::from_secs(20),
            max_connections: 64,
            max_buffered_bytes: 64 << 10,
            ..Default::default()
        });
        let got = blocking(move || {
            // Eight heads of 15 000 bytes (each under the free 16 KiB)
            // fill the 64 KiB budget.
            let held = unfinished_heads(addr, 8, 15_000);
            std::thread::sleep(Duration::from_millis(300));
            let got = h2_download(addr, "/big");
            drop(held);
            got
        })
        .await;
        assert_eq!(got, Ok(16 << 20), "the download was cut");
    }

    /// Control frames on an idle HTTP/2 connection are consumed as they
    /// come: 1 MiB of PINGs (answers read) is not charged as bytes that
    /// wait, and the connection still makes a request after them (it was
    /// closed once the count passed the budget).
    async fn h2_control_frames_are_not_held_input() {
        let addr = start_limits(ConnLimits {
            idle_timeout: Duration::from_secs(20),
            header_timeout: Duration::from_secs(20),
            max_connections: 64,
            max_buffered_bytes: 128 << 10,
            ..Default::default()
        });
        let got = blocking(move || {
            pings_then_get(addr)
        })
        .await;
        assert_eq!(got, Some(b"hi".to_vec()), "closed before its request");
    }

    /// A request whose method is `PRI` is HTTP/1 (only the whole preface
    /// makes HTTP/2): its unfinished head is charged as one (it was taken
    /// for HTTP/2 from four bytes, charged at most 64 KiB, never closed).
    async fn an_http1_pri_request_is_charged_as_http1() {
        let addr = start_limits(ConnLimits {
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(60),
            max_connections: 64,
            max_buffered_bytes: 128 << 10,
            ..Default::default()
        });
        let closed = blocking(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"PRI /x HTTP/1.1\r\nHost: x\r\nX-Pad: ").unwrap();
            let _ = c.write_all(&vec![b'a'; 200 << 10]);
            closed_within(&[c], Duration::from_secs(3))
        })
        .await;
        assert_eq!(closed, 1, "a 200 KiB head over a 128 KiB budget was held");
    }

    /// Idle HTTP/2 connections are charged at most an ordinary head: with
    /// the budget full of others' heads, one that sent 1 MiB of PINGs is
    /// not closed and still makes its request.
    async fn a_full_budget_does_not_close_an_h2_connection_for_pings() {
        let addr = start_limits(ConnLimits {
            idle_timeout: Duration::from_secs(20),
            header_timeout: Duration::from_secs(20),
            max_connections: 64,
            max_buffered_bytes: 128 << 10,
            ..Default::default()
        });
        let got = blocking(move || {
            // 9 x 15 000 bytes: over the 128 KiB budget.
            let held = unfinished_heads(addr, 9, 15_000);
            std::thread::sleep(Duration::from_millis(300));
            let got = pings_then_get(addr);
            drop(held);
            got
        })
        .await;
        assert_eq!(got, Some(b"hi".to_vec()), "closed before its request");
    }

    /// An HTTP/2 stream whose body is quiet for longer than the send
    /// timeout (an event stream between events) is not cut: nothing waits
    /// to be sent (it was, once PINGs stopped counting as progress).
    async fn a_quiet_h2_stream_outlives_the_send_timeout() {
        let addr = start_limits(ConnLimits {
            idle_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(2),
            max_connections: CAP,
            ..Default::default()
        });
        let got = blocking(move || h2_download(addr, "/quiet")).await;
        assert_eq!(got, Ok(2), "the stream was cut while quiet");
    }

    /// Past twice the budget only a minimal head gets through: many small
    /// holders cannot push the total up without bound, and a small request
    /// is still served.
    async fn small_holders_cannot_push_the_total_without_bound() {
        let addr = start_limits(ConnLimits {
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(60),
            max_connections: 64,
            max_buffered_bytes: 32 << 10,
            ..Default::default()
        });
        blocking(move || {
            // 16 x 6 000 bytes, each well under an ordinary head: 94 KiB
            // against a 32 KiB budget.
            let held = unfinished_heads(addr, 16, 6_000);
            std::thread::sleep(Duration::from_millis(300));
            let got = get_path(addr, "/");
            assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
            let early = closed_within(&held, Duration::from_secs(3));
            // At most 64 KiB held: 10 connections; so at least 5 closed.
            assert!(early >= 5, "only {early} of 16 holders were closed");
        })
        .await;
    }

    /// A stream the peer grants no window is closed at the send timeout,
    /// though the peer answers every PING (any write used to count as
    /// progress, so PINGs and their answers held it forever).
    async fn a_zero_window_h2_stream_is_closed_though_pings_flow() {
        let send = Duration::from_secs(2);
        let addr = start_limits(ConnLimits {
            idle_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(30),
            send_timeout: send,
            max_connections: CAP,
            ..Default::default()
        });
        let after = blocking(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            // SETTINGS_INITIAL_WINDOW_SIZE = 0: no stream may send DATA.
            out.extend(frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]));
            // GET /big (HPACK: :method GET, :scheme http, :path /big
            // literal, :authority x literal), END_STREAM | END_HEADERS.
            let block = [&[0x82u8, 0x86, 0x44, 4][..], b"/big", &[0x41, 1, b'x']].concat();
            out.extend(frame(1, 0x5, 1, &block));
            c.write_all(&out).unwrap();
            c.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
            let t0 = Instant::now();
            let mut buf = [0u8; 65536];
            while t0.elapsed() < Duration::from_secs(15) {
                // A PING every 300 ms; whatever comes is read.
                if c.write_all(&frame(6, 0, 0, b"12345678")).is_err() {
                    return Some(t0.elapsed().as_secs_f64());
                }
                match c.read(&mut buf) {
                    Ok(0) => return Some(t0.elapsed().as_secs_f64()),
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                        return Some(t0.elapsed().as_secs_f64())
                    }
                    _ => {}
                }
            }
            None
        })
        .await;
        let after = after.expect("a stream with no window was held 15 s while PINGs flowed");
        assert!(after < send.as_secs_f64() + 4.0, "closed after {after} s");
    }

    async fn a_handler_may_run_past_the_idle_timeout() {
        let addr = start();
        let got = blocking(move || get_path(addr, "/slow")).await;
        assert!(got.starts_with("HTTP/1.1 200") && got.ends_with("slow"), "{got:?}");
    }
}
