//! After an HTTP/2 connection error (a GOAWAY), the server reads only
//! what a lingering close needs: a peer that keeps flooding frames gets
//! little more in before the connection is closed. The lingering close
//! read and discarded up to 1 MiB before (about 64 000 WINDOW_UPDATE
//! frames of an attacker's per connection, against 2 500 on tokio). A
//! clean close still lingers over 1 MiB: an upload answered without being
//! read gets its answer. Both backends.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use ringkit::net::TcpListener;
use ringkit_hyper::ConnLimits;

/// Socket buffers asked for on both ends (the kernel doubles them), so
/// that what the peer gets in is mostly what the server read.
const SOCK_BUF: libc::c_int = 32 * 1024;

fn set_buf(fd: libc::c_int, opt: libc::c_int) {
    // SAFETY: setsockopt on a socket this test owns, with an int option of
    // the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&SOCK_BUF as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

fn start() -> SocketAddr {
    let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    set_buf(std_l.as_raw_fd(), libc::SO_RCVBUF);
    let addr = std_l.local_addr().unwrap();
    let listener = TcpListener::from_std(std_l).unwrap();
    ringkit::spawn(ringkit_hyper::serve_listener(
        listener,
        Router::new().route("/", get(|| async { "hi" })),
        None,
        std::future::pending(),
        ConnLimits::default(),
    ));
    addr
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

/// Read frames until one of `kind`; false if the connection ended first.
fn read_until(c: &mut std::net::TcpStream, kind: u8) -> bool {
    loop {
        let mut head = [0u8; 9];
        if c.read_exact(&mut head).is_err() {
            return false;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        if c.read_exact(&mut payload).is_err() {
            return false;
        }
        if head[3] == kind {
            return true;
        }
    }
}

/// A request answered, then a connection error (DATA on stream 0), then
/// WINDOW_UPDATE frames without end: the bytes the server let in after its
/// GOAWAY arrived, until it closed the connection.
fn flood_after_goaway(addr: SocketAddr) -> usize {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    set_buf(c.as_raw_fd(), libc::SO_SNDBUF);
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(4, 0, 0, &[]));
    out.extend(frame(1, 0x5, 1, &[0x82, 0x86, 0x84, 0x41, 1, b'x']));
    c.write_all(&out).unwrap();
    // The response's DATA (its END_STREAM ends the request).
    assert!(read_until(&mut c, 0), "no response");
    c.write_all(&frame(0, 0, 0, b"bad")).unwrap();
    assert!(read_until(&mut c, 7), "no GOAWAY for DATA on stream 0");
    let flood = frame(8, 0, 0, &1u32.to_be_bytes()).repeat(1024);
    c.set_nonblocking(true).unwrap();
    let (mut sent, mut stuck_since) = (0, Instant::now());
    let mut sink = [0u8; 4096];
    while stuck_since.elapsed() < Duration::from_secs(3) {
        // What the server still sends (its close) is read and dropped.
        let _ = c.read(&mut sink);
        match c.write(&flood) {
            Ok(n) => {
                sent += n;
                stuck_since = Instant::now();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            // Reset, or the pipe closed: the server is done with it.
            Err(_) => return sent,
        }
    }
    sent
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let h = std::thread::spawn(f);
    while !h.is_finished() {
        ringkit::time::sleep(Duration::from_millis(5)).await;
    }
    h.join().unwrap()
}

/// `POST /` (a GET-only route: 405, answered without reading the body)
/// with a `size`-byte body sent in full, as a simple client does, then the
/// answer read: the write error if any, and the answer's first line.
fn upload_answered_unread(addr: SocketAddr, size: usize) -> (Option<ErrorKind>, String) {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req =
        format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n").into_bytes();
    req.extend(vec![b'x'; size]);
    let mut err = None;
    for chunk in req.chunks(16 * 1024) {
        if let Err(e) = c.write_all(chunk) {
            err = Some(e.kind());
            break;
        }
        // Slow enough for the answer to be on its way meanwhile.
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    (err, text.lines().next().unwrap_or("").to_string())
}

ringkit::test_all! {
    async fn an_upload_answered_unread_still_gets_its_answer() {
        // The lingering close reads the rest of it (up to 1 MiB): at a
        // 64 KiB limit a 900 KB upload was reset part-way.
        let addr = start();
        let (err, line) = blocking(move || upload_answered_unread(addr, 900_000)).await;
        assert_eq!(err, None, "the upload was cut off");
        assert!(line.starts_with("HTTP/1.1 405"), "{line:?}");
    }

    async fn after_a_goaway_a_flood_gets_little_in() {
        let addr = start();
        let sent = blocking(move || flood_after_goaway(addr)).await;
        // The lingering close's 64 KiB, socket buffers (32 KiB asked,
        // doubled, each side) and what one read takes.
        const BOUND: usize = 384 * 1024;
        assert!(
            sent <= BOUND,
            "{sent} bytes of frames got in after the GOAWAY (bound {BOUND})"
        );
        eprintln!("{sent} bytes got in after the GOAWAY");
    }
}
