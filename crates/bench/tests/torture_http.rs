//! The HTTP chaos client's verdict on a 408 (Request Timeout): a failure,
//! unless the run says the server's request timeout may have passed (a
//! faulty link can hold a request back that long). Against a real socket
//! server that answers every request 408; the client on both backends.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use ringkit::Backend;
use ringkit_bench::torture::http::{self, HttpChaos, HttpCounts};

/// A server that answers the first bytes of every connection with a 408
/// and closes after reading what the client still sends.
fn times_out_everything() -> SocketAddr {
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
                let _ = s.write_all(
                    b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                let _ = s.shutdown(Shutdown::Write);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

fn chaos(addr: SocketAddr, backend: Backend, request_timeout: Option<Duration>) -> HttpCounts {
    let cfg = HttpChaos {
        addr,
        conns: 4,
        seed: 7,
        stop_at: Instant::now() + Duration::from_millis(700),
        stall: Duration::from_secs(10),
        graceful_stop: false,
        request_timeout,
    };
    http::run(cfg, backend, &mut || {}, &mut |_| {}).unwrap()
}

#[test]
fn a_408_before_the_request_timeout_is_a_mismatch() {
    let addr = times_out_everything();
    for backend in [Backend::Uring, Backend::Epoll] {
        let c = chaos(addr, backend, None);
        assert!(c.tally.mismatches > 0, "{backend:?}: {c:?}");
        assert_eq!(c.timed_out, 0, "{backend:?}");
        // Within the timeout (an hour): still a mismatch.
        let c = chaos(addr, backend, Some(Duration::from_secs(3600)));
        assert!(c.tally.mismatches > 0, "{backend:?}: {c:?}");
        assert_eq!(c.timed_out, 0, "{backend:?}");
    }
}

#[test]
fn a_408_after_the_request_timeout_is_the_servers_right() {
    let addr = times_out_everything();
    for backend in [Backend::Uring, Backend::Epoll] {
        let c = chaos(addr, backend, Some(Duration::ZERO));
        assert_eq!(c.tally.mismatches, 0, "{backend:?}: {:?}", c.tally.errors);
        assert!(c.timed_out > 0, "{backend:?}: {c:?}");
        assert_eq!(c.timed_out, c.responses_verified, "{backend:?}");
    }
}
