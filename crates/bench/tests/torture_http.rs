//! The HTTP chaos client's verdict on a 408 (Request Timeout). Across a
//! faulty link it is the server's right for a request the link held back
//! past the server's timeout, and for no other: not sooner, and not for a
//! request the server's kernel had whole (a server waiting for bytes it is
//! not owed, [`ringkit_bench::torture::sendq`]). Against real socket
//! servers on loopback; the client on both backends.
//!
//! The fake server below serves the torture's files correctly, with an
//! optional decoder bug: a chunked body whose final `0\r\n\r\n` ends
//! exactly at the end of the bytes received is not seen as complete until
//! one more byte comes. Mid-burst the next request's bytes come; when the
//! POST is the last of its burst the server answers 408 after its timeout.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringkit::Backend;
use ringkit_bench::harness::rng::ByteGen;
use ringkit_bench::torture::http::{self, file_id, file_size, HttpChaos, HttpCounts};

const SEED: u64 = 7;
const T: Duration = Duration::from_millis(300);

enum Parsed {
    Incomplete,
    Done {
        used: usize,
        resp: Vec<u8>,
        close: bool,
        post: bool,
    },
    Bad,
}

/// A bug the fake server can have: each one a server engineer could write.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bug {
    None,
    /// The chunked decoder above.
    Decoder,
    /// Bytes written after a response that said `Connection: close`.
    AfterClose,
    /// `Content-Length` one more than the file.
    LengthOffByOne,
    /// One body byte flipped.
    FlippedByte,
    /// A HEAD answered with the body too.
    HeadWithBody,
    /// `Connection: close` asked for, neither said nor done.
    IgnoresClose,
    /// A POST's `Content-Length` body left unread (taken as the next request).
    BodyLeftUnread,
    /// Half the body, then a close.
    TruncatedBody,
    /// One response in 10 never written.
    DropsResponse,
    /// Some existing files answered 404.
    NotFoundForFile,
    /// A POST that arrived whole answered 408 after the timeout, as a
    /// server whose timer counts time it spent elsewhere would.
    TimesOutWholeRequest,
    /// Not a bug: the server stops reading in the middle of a large body
    /// (its small receive buffer full, so the client's socket keeps the
    /// rest unacknowledged) and times the request out. The 408 a faulty
    /// link can cause, and the server's right.
    HoldsBack,
}

/// Every planted bug.
const PLANTED: [Bug; 11] = [
    Bug::Decoder,
    Bug::AfterClose,
    Bug::LengthOffByOne,
    Bug::FlippedByte,
    Bug::HeadWithBody,
    Bug::IgnoresClose,
    Bug::BodyLeftUnread,
    Bug::TruncatedBody,
    Bug::DropsResponse,
    Bug::NotFoundForFile,
    Bug::TimesOutWholeRequest,
];

fn parse(buf: &[u8], bug: Bug) -> Parsed {
    let mut hdrs = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut hdrs);
    let h = match req.parse(buf) {
        Ok(httparse::Status::Complete(h)) => h,
        Ok(httparse::Status::Partial) => return Parsed::Incomplete,
        Err(_) => return Parsed::Bad,
    };
    let (mut cl, mut chunked, mut close) = (0usize, false, false);
    for x in req.headers.iter() {
        if x.name.eq_ignore_ascii_case("content-length") {
            cl = std::str::from_utf8(x.value)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
        } else if x.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = true;
        } else if x.name.eq_ignore_ascii_case("connection") {
            close = x.value.eq_ignore_ascii_case(b"close");
        }
    }
    let end = if chunked {
        let mut p = h;
        loop {
            let Some(nl) = buf[p..].windows(2).position(|w| w == b"\r\n") else {
                return Parsed::Incomplete;
            };
            let n =
                usize::from_str_radix(std::str::from_utf8(&buf[p..p + nl]).unwrap(), 16).unwrap();
            p += nl + 2;
            if n == 0 {
                if buf.len() < p + 2 {
                    return Parsed::Incomplete;
                }
                p += 2;
                // The bug: the terminator at the very end of the input.
                if bug == Bug::Decoder && p == buf.len() {
                    return Parsed::Incomplete;
                }
                break p;
            }
            if buf.len() < p + n + 2 {
                return Parsed::Incomplete;
            }
            p += n + 2;
        }
    } else if bug == Bug::BodyLeftUnread {
        h
    } else {
        if buf.len() < h + cl {
            return Parsed::Incomplete;
        }
        h + cl
    };
    let method = req.method.unwrap();
    let path = req.path.unwrap();
    let close = close && bug != Bug::IgnoresClose;
    let conn = if close { "Connection: close\r\n" } else { "" };
    let mut cut = false;
    let file = path
        .strip_prefix("/f")
        .and_then(|s| s.strip_suffix(".bin"))
        .and_then(|s| s.parse::<usize>().ok());
    let resp = match (method, file) {
        ("POST", _) => {
            format!("HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n{conn}\r\n")
                .into_bytes()
        }
        (_, None) => {
            format!("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n{conn}\r\n").into_bytes()
        }
        (_, Some(i)) if bug == Bug::NotFoundForFile && i % 7 == 3 => {
            format!("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n{conn}\r\n").into_bytes()
        }
        (m, Some(i)) => {
            let size = file_size(SEED, i);
            let len = size + usize::from(bug == Bug::LengthOffByOne);
            let mut r =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n{conn}\r\n").into_bytes();
            if m == "GET" || bug == Bug::HeadWithBody {
                let mut body = ByteGen::message(file_id(i), 0, size);
                if bug == Bug::FlippedByte && size > 0 {
                    body[size / 2] ^= 1;
                }
                if bug == Bug::TruncatedBody && size > 1 {
                    body.truncate(size / 2);
                    cut = true;
                }
                r.extend_from_slice(&body);
            }
            r
        }
    };
    Parsed::Done {
        used: end,
        resp,
        close: close || cut,
        post: method == "POST",
    }
}

fn serve_conn(mut s: TcpStream, bug: Bug, n408: Arc<AtomicU64>) {
    let mut buf = Vec::new();
    let mut tmp = vec![0u8; 64 * 1024];
    let mut answered = 0u64;
    loop {
        match parse(&buf, bug) {
            Parsed::Done {
                used,
                resp,
                close,
                post,
            } => {
                if bug == Bug::TimesOutWholeRequest && post && used == buf.len() {
                    std::thread::sleep(T);
                    return time_out(s, &n408);
                }
                answered += 1;
                let dropped = bug == Bug::DropsResponse && answered % 10 == 0;
                if !dropped && s.write_all(&resp).is_err() {
                    return;
                }
                buf.drain(..used);
                if close {
                    if bug == Bug::AfterClose {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nxyz");
                    }
                    let _ = s.shutdown(Shutdown::Write);
                    return;
                }
                continue;
            }
            Parsed::Bad => return,
            Parsed::Incomplete => {}
        }
        if bug == Bug::HoldsBack && big_body_pending(&buf) {
            std::thread::sleep(T);
            return time_out(s, &n408);
        }
        let mid = !buf.is_empty();
        let _ = s.set_read_timeout(if mid {
            Some(T)
        } else {
            Some(Duration::from_secs(30))
        });
        match s.read(&mut tmp) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e)
                if mid
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                return time_out(s, &n408);
            }
            Err(_) => return,
        }
    }
}

/// Whether `buf` starts with a POST head whose `Content-Length` body has
/// more than 32 KiB still to come.
fn big_body_pending(buf: &[u8]) -> bool {
    let mut hdrs = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut hdrs);
    let Ok(httparse::Status::Complete(h)) = req.parse(buf) else {
        return false;
    };
    let cl: usize = req
        .headers
        .iter()
        .find(|x| x.name.eq_ignore_ascii_case("content-length"))
        .and_then(|x| std::str::from_utf8(x.value).ok()?.trim().parse().ok())
        .unwrap_or(0);
    req.method == Some("POST") && h + cl > buf.len() + 32 * 1024
}

/// Answer 408 and close, reading what the client still sends first (a
/// close with unread input would reset the connection).
fn time_out(mut s: TcpStream, n408: &AtomicU64) {
    n408.fetch_add(1, Ordering::Relaxed);
    let _ = s.write_all(TIMEOUT_408);
    let _ = s.shutdown(Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut tmp = [0u8; 16 * 1024];
    while matches!(s.read(&mut tmp), Ok(n) if n > 0) {}
}

fn server(bug: Bug) -> (SocketAddr, Arc<AtomicU64>) {
    let l = if bug == Bug::HoldsBack {
        // A small receive buffer, inherited by every accepted socket.
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        sock.listen(128).unwrap();
        TcpListener::from(sock)
    } else {
        TcpListener::bind("127.0.0.1:0").unwrap()
    };
    let addr = l.local_addr().unwrap();
    let n408 = Arc::new(AtomicU64::new(0));
    let n = n408.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let n = n.clone();
            std::thread::spawn(move || serve_conn(s, bug, n));
        }
    });
    (addr, n408)
}

fn chaos(
    addr: SocketAddr,
    backend: Backend,
    secs: f64,
    request_timeout: Option<Duration>,
) -> HttpCounts {
    let cfg = HttpChaos {
        addr,
        conns: 16,
        seed: SEED,
        stop_at: Instant::now() + Duration::from_secs_f64(secs),
        stall: Duration::from_secs(3),
        graceful_stop: false,
        request_timeout,
    };
    http::run(cfg, backend, &mut || {}, &mut |_| {}).unwrap()
}

/// A server that answers the first bytes of every connection with
/// `response` and closes after reading what the client still sends.
fn answers_at_once(response: &'static [u8]) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                if !matches!(s.read(&mut buf), Ok(n) if n > 0) {
                    return;
                }
                let _ = s.write_all(response);
                let _ = s.shutdown(Shutdown::Write);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

const TIMEOUT_408: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 15\r\nConnection: close\r\n\r\nRequest Timeout";

#[test]
fn the_fake_server_is_right() {
    let (addr, _) = server(Bug::None);
    for backend in [Backend::Uring, Backend::Epoll] {
        let c = chaos(addr, backend, 1.5, Some(T));
        let t = &c.tally;
        assert_eq!(
            t.mismatches + t.losses + t.stalls,
            0,
            "{backend:?}: {:?}",
            t.errors
        );
        assert!(
            c.posts_chunked > 0 && c.responses_verified > 100,
            "{backend:?}: {c:?}"
        );
    }
}

#[test]
fn the_decoder_bug_is_caught_on_a_clean_link() {
    for backend in [Backend::Uring, Backend::Epoll] {
        let (addr, n408) = server(Bug::Decoder);
        let c = chaos(addr, backend, 1.5, None);
        assert!(
            n408.load(Ordering::Relaxed) > 0,
            "{backend:?}: the bug did not trigger"
        );
        assert!(c.tally.mismatches > 0, "{backend:?}: {c:?}");
    }
}

#[test]
fn the_decoder_bug_is_caught_across_a_faulty_link() {
    for backend in [Backend::Uring, Backend::Epoll] {
        let (addr, n408) = server(Bug::Decoder);
        let c = chaos(addr, backend, 1.5, Some(T));
        assert!(
            n408.load(Ordering::Relaxed) > 0,
            "{backend:?}: the bug did not trigger"
        );
        assert!(
            c.tally.mismatches > 0,
            "{backend:?}: a 408 for a request that had wholly arrived passed: {c:?}"
        );
    }
}

#[test]
fn a_408_before_the_request_timeout_is_a_mismatch() {
    let addr = answers_at_once(TIMEOUT_408);
    for backend in [Backend::Uring, Backend::Epoll] {
        for timeout in [None, Some(Duration::from_secs(3600))] {
            let c = chaos(addr, backend, 0.7, timeout);
            assert!(c.tally.mismatches > 0, "{backend:?} {timeout:?}: {c:?}");
            assert_eq!(c.timed_out, 0, "{backend:?} {timeout:?}");
        }
    }
}

#[test]
fn bytes_after_a_response_that_says_close_are_a_mismatch() {
    let (addr, _) = server(Bug::AfterClose);
    for backend in [Backend::Uring, Backend::Epoll] {
        let c = chaos(addr, backend, 1.5, None);
        assert!(c.tally.mismatches > 0, "{backend:?}: {c:?}");
    }
}

/// The verifier's reach: every planted server bug fails the run, on a
/// clean link and under the faulty link's 408 rule, with the client on
/// both backends.
#[test]
fn every_planted_server_bug_is_caught() {
    let mut missed = Vec::new();
    for bug in PLANTED {
        let (addr, _) = server(bug);
        for timeout in [None, Some(T)] {
            for backend in [Backend::Uring, Backend::Epoll] {
                let c = chaos(addr, backend, 0.5, timeout);
                let t = &c.tally;
                eprintln!(
                    "{bug:?} {timeout:?} {backend:?}: {} mismatches, {} losses, {} stalls, {} timed out",
                    t.mismatches, t.losses, t.stalls, c.timed_out
                );
                if t.mismatches + t.losses + t.stalls == 0 {
                    missed.push((bug, timeout, backend));
                }
            }
        }
    }
    assert!(missed.is_empty(), "planted bugs let through: {missed:?}");
}

#[test]
fn a_408_for_a_body_held_back_is_the_servers_right() {
    for backend in [Backend::Uring, Backend::Epoll] {
        let (addr, n408) = server(Bug::HoldsBack);
        let c = chaos(addr, backend, 1.5, Some(T));
        let t = &c.tally;
        assert!(
            n408.load(Ordering::Relaxed) > 0,
            "{backend:?}: no body was held back"
        );
        assert_eq!(
            t.mismatches + t.losses + t.stalls,
            0,
            "{backend:?}: {:?}",
            t.errors
        );
        assert!(c.timed_out > 0, "{backend:?}: {c:?}");
        // On a clean link the same 408s are mismatches.
        let c = chaos(addr, backend, 1.5, None);
        assert!(c.tally.mismatches > 0, "{backend:?}: {c:?}");
    }
}

/// Over TLS: a server that holds a whole GET for the timeout and answers
/// 408 fails the run under the faulty link's rule, as on a clean link.
#[test]
fn over_tls_a_408_for_a_whole_request_is_a_mismatch() {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let ca: CertificateDer<'static> = ck.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![ca.clone()], key)
        .unwrap();
    let cfg = Arc::new(cfg);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let cfg = cfg.clone();
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(cfg).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, s);
                let mut buf = vec![0u8; 4096];
                let mut have = Vec::new();
                while !have.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(n) if n > 0 => have.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                std::thread::sleep(T);
                let _ = tls.write_all(TIMEOUT_408);
                let _ = tls.flush();
            });
        }
    });
    // The TLS chaos clients are blocking threads: no runtime backend.
    let c = ringkit_bench::torture::tls::run(
        addr,
        &ca,
        4,
        SEED,
        Instant::now() + Duration::from_millis(1500),
        Duration::from_secs(3),
        Some(T),
    )
    .unwrap();
    assert!(c.mismatches > 0, "{c:?}");
    assert_eq!(c.timed_out, 0);
}
