//! The input budget of `ringkit serve` is fair, on both backends: clients
//! that fill it cannot turn away a well-behaved upload whose body arrives
//! in two parts. Both cases were reproduced by a review against the first
//! fair budget (evict the largest holder, share = limit / holders):
//! - connections whose almost-complete bodies were completed, and which
//!   then download a large file without reading, kept their charge while
//!   the file was written: evicting them freed nothing, and every upload
//!   got 503;
//! - holders over 64 KiB each could not be evicted by an upload needing
//!   more than the share (limit / holders); now the share is never under
//!   64 KiB;
//! - the heads of requests whose bodies were being read were not charged;
//! - an evicted connection kept its input counted while its 503 could not
//!   be written, and the count refused newcomers at the hard limit.
//!
//! What the budget does not promise (more holders than limit / 64 KiB,
//! each holding at most 64 KiB, fill it) is in `crates/http/src/budget.rs`.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{backend_usable, start};
use ringkit_bench::torture::hostile::target::read_response;

/// `POST` 20 000 bytes in two writes 100 ms apart; the status.
fn upload(addr: SocketAddr) -> u16 {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
        .unwrap();
    let _ = c.write_all(&[b'u'; 10_000]);
    std::thread::sleep(Duration::from_millis(100));
    let _ = c.write_all(&[b'u'; 10_000]);
    read_response(&mut c).unwrap().0
}

/// A connection that sends all but the last byte of a `len`-byte body.
fn holder(addr: SocketAddr, len: usize) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    let head = format!("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n");
    c.write_all(head.as_bytes()).unwrap();
    c.write_all(&vec![b'b'; len - 1]).unwrap();
    c
}

fn served_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(dir.path().join("big.bin")).unwrap();
    f.set_len(256 << 20).unwrap();
    dir
}

fn downloads_after_a_body(backend: &str) {
    if !backend_usable(backend) {
        return;
    }
    let dir = served_dir();
    let d = dir.path().to_str().unwrap();
    let srv = start(&["serve", d, "--max-buffered-mib", "1"], backend, None);
    let mut held = Vec::new();
    // Four fill the budget; the fifth and sixth evict them (or are
    // refused).
    for _ in 0..6 {
        let mut c = holder(srv.addr, 256 * 1024);
        std::thread::sleep(Duration::from_millis(30));
        // The last byte, and a download the client never reads.
        c.write_all(b"bGET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        held.push(c);
    }
    std::thread::sleep(Duration::from_millis(300));
    let got: Vec<u16> = (0..6).map(|_| upload(srv.addr)).collect();
    eprintln!("{backend}: uploads beside 6 stalled downloads: {got:?}");
    assert!(got.iter().all(|&s| s < 500), "{backend}: {got:?}");
    drop(held);
}

#[test]
fn stalled_downloads_keep_no_charge_for_the_bodies_they_completed() {
    for backend in ["uring", "epoll"] {
        downloads_after_a_body(backend);
    }
}

fn holders_over_the_grant(backend: &str) {
    if !backend_usable(backend) {
        return;
    }
    let dir = served_dir();
    let d = dir.path().to_str().unwrap();
    let srv = start(&["serve", d, "--max-buffered-mib", "1"], backend, None);
    // 12 holders of ~85 KiB fill the 1 MiB budget: fewer than 1 MiB / 64
    // KiB holders, so some hold more than 64 KiB and make room.
    let held: Vec<TcpStream> = (0..12).map(|_| holder(srv.addr, 70 * 1024)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let got: Vec<u16> = (0..3).map(|_| upload(srv.addr)).collect();
    eprintln!("{backend}: uploads beside 12 holders of 70 KB: {got:?}");
    assert!(got.iter().all(|&s| s < 500), "{backend}: {got:?}");
    drop(held);
}

/// What the budget promises: while fewer than limit / 64 KiB connections
/// hold input, a request asking for at most 64 KiB is not refused.
#[test]
fn holders_over_the_minimum_grant_make_room_for_an_ordinary_upload() {
    for backend in ["uring", "epoll"] {
        holders_over_the_grant(backend);
    }
}

fn chunked_heads(backend: &str) {
    if !backend_usable(backend) {
        return;
    }
    let dir = served_dir();
    let d = dir.path().to_str().unwrap();
    let srv = start(&["serve", d, "--max-buffered-mib", "1"], backend, None);
    let pad = "p".repeat(15_000);
    let head = format!(
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Pad: {pad}\r\n\r\n"
    );
    let mut conns: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut c = TcpStream::connect(srv.addr).unwrap();
            c.write_all(head.as_bytes()).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut refused = 0;
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        if let Ok((s, _)) = read_response(c) {
            refused += (s == 503) as usize;
        }
    }
    eprintln!("{backend}: {refused} of 200 chunked requests with 15 KB heads refused");
    // 200 x 15 KB is ~3 MB: the heads count, so most are refused.
    assert!(refused >= 100, "{backend}: only {refused} refused");
}

/// The head of a request whose body is being read is charged: it was not,
/// and a chunked body starts with no buffer, so 2 000 such requests held
/// ~25-48 MB beside an empty 1 MiB budget.
#[test]
fn the_heads_of_requests_being_read_are_charged() {
    for backend in ["uring", "epoll"] {
        chunked_heads(backend);
    }
}

/// A TCP connection to `addr` whose receive buffer is `rcvbuf` bytes,
/// set before connecting (so the window never grows past it).
fn small_window(addr: SocketAddr, rcvbuf: i32) -> TcpStream {
    use std::os::fd::FromRawFd;
    // SAFETY: a fresh socket we own; the option is an int; the address is
    // a sockaddr_in built here.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let v = rcvbuf;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
        let SocketAddr::V4(a) = addr else {
            panic!("IPv4 only")
        };
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

/// A POST with a `pad`-byte header, `Content-Length: cl`, and `n` bytes of
/// its body.
fn partial_post(c: &mut TcpStream, pad: usize, cl: usize, n: usize) {
    let head = format!(
        "POST /x HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\nContent-Length: {cl}\r\n\r\n",
        "p".repeat(pad)
    );
    c.write_all(head.as_bytes()).unwrap();
    for chunk in vec![b'b'; n].chunks(4000) {
        c.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn evicted_behind_a_full_socket(backend: &str) {
    if !backend_usable(backend) {
        return;
    }
    let dir = served_dir();
    let d = dir.path().to_str().unwrap();
    let srv = start(&["serve", d, "--max-buffered-mib", "1"], backend, None);
    // X1 takes 2 MB it never reads (its socket's buffers hold it), then
    // sits on ~256 KiB of a body: the largest holder, and its 503 cannot
    // be written. X2 and X3 hold as much.
    let mut x1 = small_window(srv.addr, 4096);
    x1.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1999999\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    partial_post(&mut x1, 0, 300_000, 260_000);
    let mut xs = Vec::new();
    for _ in 0..2 {
        let mut x = TcpStream::connect(srv.addr).unwrap();
        partial_post(&mut x, 0, 300_000, 260_000);
        xs.push(x);
    }
    std::thread::sleep(Duration::from_millis(200));
    // Eleven newcomers of ~47 KB each: 14 holders at most, under 1 MiB /
    // 64 KiB = 16, so each must be admitted (evicting X1, X2, X3).
    let mut ns = Vec::new();
    for _ in 0..11 {
        let mut n = TcpStream::connect(srv.addr).unwrap();
        partial_post(&mut n, 15_000, 30_000, 25_000);
        ns.push(n);
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut refused = Vec::new();
    for (i, n) in ns.iter_mut().enumerate() {
        n.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        if let Ok((s, _)) = read_response(n) {
            refused.push((i + 1, s));
        }
    }
    eprintln!("{backend}: newcomers answered (refused) before their bodies: {refused:?}");
    assert!(refused.is_empty(), "{backend}: {refused:?}");
    drop((x1, xs));
}

/// An evicted connection gives up its input before its 503 is written:
/// that write can block (here on a socket full of a response its client
/// never reads), and its input stayed counted meanwhile, so the count sat
/// at the hard limit and refused newcomers within the promise.
#[test]
fn an_evicted_connection_drops_its_input_before_its_503_is_written() {
    for backend in ["uring", "epoll"] {
        evicted_behind_a_full_socket(backend);
    }
}

fn blank_lines_and_long_pipelines(backend: &str) {
    if !backend_usable(backend) {
        return;
    }
    let dir = served_dir();
    std::fs::write(dir.path().join("small.txt"), b"hi\n").unwrap();
    let d = dir.path().to_str().unwrap();
    let srv = start(
        &[
            "serve",
            d,
            "--max-buffered-mib",
            "1",
            "--header-timeout",
            "2",
        ],
        backend,
        None,
    );
    let get = b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n";
    // An empty line after a request is ignored, not a request in progress
    // (it was timed out with 408 after the header timeout).
    let mut c = TcpStream::connect(srv.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(&[&get[..], b"\r\n"].concat()).unwrap();
    assert_eq!(read_response(&mut c).unwrap().0, 200);
    std::thread::sleep(Duration::from_secs(3));
    c.write_all(get).unwrap();
    let again = read_response(&mut c).map(|r| r.0);
    assert!(
        matches!(again, Ok(200)),
        "{backend}: after an empty line and 3 s: {again:?}"
    );
    // A full budget (32 holders of 32 KiB, each within the grant), then
    // 100 pipelined requests: all answered (those past a batch of 64 are
    // complete requests, not input to charge; a review saw the 65th
    // refused with 503 beside 49 holders).
    let held: Vec<TcpStream> = (0..32)
        .map(|_| {
            let mut h = TcpStream::connect(srv.addr).unwrap();
            partial_post(&mut h, 0, 100_000, 30_000);
            h
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut p = TcpStream::connect(srv.addr).unwrap();
    p.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    p.write_all(&get.repeat(100)).unwrap();
    let statuses: Vec<u16> = (0..100)
        .map_while(|_| read_response(&mut p).ok().map(|r| r.0))
        .collect();
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    eprintln!("{backend}: {ok} of 100 pipelined requests answered 200 beside a full budget");
    assert_eq!(ok, 100, "{backend}: {statuses:?}");
    drop(held);
}

/// Input that is not part of a request in progress is not charged: an
/// empty line after a request, and complete requests past a full batch.
#[test]
fn blank_lines_and_requests_past_a_batch_are_not_charged() {
    for backend in ["uring", "epoll"] {
        blank_lines_and_long_pipelines(backend);
    }
}
