//! The echo load generators against small std-thread servers on loopback:
//! a faithful echo is counted, a corrupted byte or a closed connection is a
//! failed run. `ringkit` on both backends, and the `threads` generator.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use ringkit::Backend;
use ringkit_bench::echo::{self, EchoLoadConfig, EchoLoadResult};

#[derive(Clone, Copy)]
enum Server {
    /// Echo every byte.
    Faithful,
    /// Echo, but flip one bit of the byte at this offset of the stream.
    Corrupt(u64),
    /// Echo this many bytes, then close.
    CloseAfter(u64),
    /// Echo every byte, each read's worth this many ms late.
    Slow(u64),
    /// Read everything, answer nothing.
    Silent,
}

/// Start `kind` on a free loopback port; runs until the process ends.
fn start(kind: Server) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut at = 0u64;
                loop {
                    let n = match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    match kind {
                        Server::Faithful => {}
                        Server::Corrupt(off) => {
                            if (at..at + n as u64).contains(&off) {
                                buf[(off - at) as usize] ^= 1;
                            }
                        }
                        Server::CloseAfter(lim) => {
                            if at + n as u64 > lim {
                                return;
                            }
                        }
                        Server::Slow(ms) => std::thread::sleep(Duration::from_millis(ms)),
                        Server::Silent => continue,
                    }
                    at += n as u64;
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn cfg(addr: SocketAddr, backend: Backend) -> EchoLoadConfig {
    EchoLoadConfig {
        addr,
        conns: 4,
        len: 512,
        duration: Duration::from_millis(300),
        pipeline: 2,
        backend,
        rate: None,
    }
}

/// Run the ringkit generator on its own thread (it builds a runtime);
/// `None`, with the reason printed, when this kernel cannot build an
/// io_uring runtime at all.
fn ringkit_load(addr: SocketAddr, backend: Backend) -> Option<EchoLoadResult> {
    if backend == Backend::Uring {
        let probe = std::thread::spawn(|| {
            ringkit::Builder::new()
                .backend(Backend::Uring)
                .build()
                .map(drop)
        })
        .join()
        .unwrap();
        if let Err(e) = probe {
            eprintln!("skipped: io_uring unavailable here: {e}");
            return None;
        }
    }
    let c = cfg(addr, backend);
    let r = std::thread::spawn(move || echo::run_load(&c, &mut |_| {}))
        .join()
        .unwrap();
    Some(r.unwrap_or_else(|e| panic!("run_load on {backend:?}: {e}")))
}

#[test]
fn faithful_echo_is_counted_on_both_backends() {
    let addr = start(Server::Faithful);
    for backend in [Backend::Uring, Backend::Epoll] {
        let Some(r) = ringkit_load(addr, backend) else {
            continue;
        };
        assert!(r.ok(), "{backend:?}: {r:?}");
        assert_eq!((r.failed_conns, r.mismatches), (0, 0), "{r:?}");
        assert!(r.responses > 0 && r.responses <= r.requests, "{r:?}");
        assert!(r.p50_us > 0.0 && r.p99_us >= r.p50_us, "{r:?}");
    }
    let t = echo::run_load_threads(
        &EchoLoadConfig {
            pipeline: 1,
            ..cfg(addr, Backend::Epoll)
        },
        &mut |_| {},
    )
    .unwrap();
    assert!(t.ok(), "threads: {t:?}");
}

#[test]
fn one_flipped_bit_fails_the_run_on_both_backends() {
    for backend in [Backend::Uring, Backend::Epoll] {
        // Well inside the first round trips of one connection.
        let addr = start(Server::Corrupt(700));
        let Some(r) = ringkit_load(addr, backend) else {
            continue;
        };
        assert!(!r.ok(), "{backend:?}: {r:?}");
        assert!(r.mismatches >= 1, "{backend:?}: {r:?}");
        assert_eq!(r.failed_conns, r.mismatches, "{backend:?}: {r:?}");
    }
    let addr = start(Server::Corrupt(100));
    let t = echo::run_load_threads(
        &EchoLoadConfig {
            pipeline: 1,
            ..cfg(addr, Backend::Epoll)
        },
        &mut |_| {},
    )
    .unwrap();
    assert!(!t.ok() && t.mismatches >= 1, "threads: {t:?}");
}

#[test]
fn a_server_that_closes_fails_the_run_on_both_backends() {
    for backend in [Backend::Uring, Backend::Epoll] {
        let addr = start(Server::CloseAfter(3000));
        let Some(r) = ringkit_load(addr, backend) else {
            continue;
        };
        assert!(!r.ok(), "{backend:?}: {r:?}");
        assert_eq!(r.failed_conns, 4, "{backend:?}: {r:?}");
        assert!(r.first_error.is_some(), "{backend:?}: {r:?}");
    }
}

/// Open loop (`rate`): the generator sends at the asked rate, not as fast
/// as the server answers, on both backends; every connection is served
/// (Jain's index near 1); pipelining with a rate is refused clearly.
#[test]
fn open_loop_sends_at_the_asked_rate() {
    let addr = start(Server::Faithful);
    for backend in [Backend::Uring, Backend::Epoll] {
        if backend == Backend::Uring && ringkit_load(addr, backend).is_none() {
            continue;
        }
        let c = EchoLoadConfig {
            pipeline: 1,
            rate: Some(2000.0),
            duration: Duration::from_millis(500),
            ..cfg(addr, backend)
        };
        let r = std::thread::spawn(move || echo::run_load(&c, &mut |_| {}))
            .join()
            .unwrap()
            .unwrap();
        assert!(r.ok(), "{backend:?}: {r:?}");
        let rate = r.responses as f64 / r.secs;
        assert!(
            (1500.0..2500.0).contains(&rate),
            "{backend:?}: {rate:.0}/s: {r:?}"
        );
        assert!(r.conn_min > 0, "{backend:?}: {r:?}");
    }
    let c = EchoLoadConfig {
        pipeline: 2,
        rate: Some(100.0),
        ..cfg(addr, Backend::Epoll)
    };
    let e = echo::run_load(&c, &mut |_| {}).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
}

/// A true open loop: replies 40 ms late do not hold back the sends (at
/// one message in flight per connection, 4 connections could send only
/// ~100 a second); several messages are in flight on a connection. A
/// server that never answers: every scheduled message is recorded, with
/// its wait up to the window's end, none dropped.
#[test]
fn open_loop_sends_on_schedule_while_replies_are_late() {
    let slow = start(Server::Slow(40));
    let silent = start(Server::Silent);
    for backend in [Backend::Uring, Backend::Epoll] {
        if backend == Backend::Uring && ringkit_load(slow, backend).is_none() {
            continue;
        }
        let run = |addr| {
            let c = EchoLoadConfig {
                pipeline: 1,
                rate: Some(1000.0),
                duration: Duration::from_millis(600),
                ..cfg(addr, backend)
            };
            std::thread::spawn(move || echo::run_load(&c, &mut |_| {}))
                .join()
                .unwrap()
                .unwrap()
        };
        let r = run(slow);
        assert!(r.ok(), "{backend:?}: {r:?}");
        // Counted by the schedule (sent or not): the rate asked for.
        let sent = r.requests as f64 / r.secs;
        assert!(
            (900.0..1100.0).contains(&sent),
            "{backend:?}: {sent:.0}/s: {r:?}"
        );
        assert!(r.most_in_flight > 2, "{backend:?}: {r:?}");
        assert!(r.p50_us >= 40_000.0, "{backend:?}: {r:?}");
        assert_eq!(
            r.responses + r.unanswered + r.unsent,
            r.requests,
            "{backend:?}: {r:?}"
        );
        let r = run(silent);
        assert_eq!((r.responses, r.mismatches), (0, 0), "{backend:?}: {r:?}");
        assert_eq!(r.unanswered + r.unsent, r.requests, "{backend:?}: {r:?}");
        assert!(r.requests > 400, "{backend:?}: {r:?}");
        // The oldest waited about the whole window.
        assert!(r.max_us >= 0.9 * r.secs * 1e6, "{backend:?}: {r:?}");
    }
}

#[test]
fn fairness_index() {
    assert_eq!(echo::fairness(&[5, 5, 5, 5]), (5, 5, 5, 1.0));
    let (min, med, max, j) = echo::fairness(&[0, 0, 0, 12]);
    assert_eq!((min, med, max), (0, 0, 12));
    assert!((j - 0.25).abs() < 1e-9);
}
