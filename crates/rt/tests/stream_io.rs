//! Stream sockets over real loopback TCP, on both backends (`test_all!`):
//! many connections, partial writes, resets, half-close, pooled reads
//! (multishot receive with the provided-buffer ring on io_uring) running
//! out of buffers. Every byte that crosses a socket is checked.

mod stream_common;

use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::time::Duration;

use ringkit::net::{TcpListener, TcpStream};
use ringkit::time::sleep;
use ringkit::{Backend, Builder};

use stream_common::*;

/// Build a runtime for `backend` with a tiny provided-buffer ring (2 x 64 B)
/// and run `fut` on it; skips (printing why) if io_uring is unavailable.
fn run_with_tiny_buffer_ring<F: Future<Output = ()>>(backend: Backend, fut: impl FnOnce() -> F) {
    let rt = match Builder::new().backend(backend).recv_buffers(2, 64).build() {
        Ok(rt) => rt,
        Err(e) if backend == Backend::Uring => {
            eprintln!("skipped: io_uring unavailable here: {e}");
            return;
        }
        Err(e) => panic!("cannot build a {backend} runtime: {e}"),
    };
    assert_eq!(rt.backend_report().chosen, backend);
    rt.block_on(fut());
}

/// 20 connections each send 10 KiB through a read_pooled echo server whose
/// runtime has only two 64-byte ring buffers: the multishot receive keeps
/// running out (ENOBUFS) and must recover without losing or reordering data.
async fn enobufs_echo() {
    const CONNS: usize = 20;
    const LEN: usize = 10 * 1024;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = ringkit::spawn(async move {
        let mut hs = Vec::new();
        for _ in 0..CONNS {
            let (s, _) = l.accept().await.unwrap();
            hs.push(ringkit::spawn(pooled_echo(s)));
        }
        let (mut n, mut ring, mut heap) = (0, 0, 0);
        for h in hs {
            let (a, b, c) = h.await.unwrap();
            n += a;
            ring += b;
            heap += c;
        }
        (n, ring, heap)
    });
    let clients: Vec<_> = (0..CONNS)
        .map(|i| {
            ringkit::spawn(async move {
                let c = TcpStream::connect(addr).await.unwrap();
                let seed = 1000 + i as u64;
                let msg = pattern(seed, 0, LEN);
                c.write_all(msg).await.0.unwrap();
                let got = read_exact(&c, LEN, 4096).await;
                check_stream(seed, &got);
                c.shutdown(Shutdown::Write).await.unwrap();
                let (res, _) = c.read(Vec::with_capacity(16)).await;
                assert_eq!(res.unwrap(), 0, "echo server sent more than it got");
            })
        })
        .collect();
    for h in clients {
        h.await.unwrap();
    }
    let (n, ring, heap) = server.await.unwrap();
    assert_eq!(n, CONNS * LEN);
    eprintln!(
        "tiny buffer ring: {ring} ring buffers, {heap} heap buffers (ENOBUFS fallbacks and EOFs)"
    );
}

#[test]
fn enobufs_recovery_uring() {
    run_with_tiny_buffer_ring(Backend::Uring, enobufs_echo);
}

#[test]
fn enobufs_recovery_epoll() {
    run_with_tiny_buffer_ring(Backend::Epoll, enobufs_echo);
}

// ---------------------------------------------------------------- tests

ringkit::test_all! {
    async fn pooled_reads_say_whether_they_copy() {
        // The capability protocol code asks instead of the backend: a
        // pooled read hands out the kernel's buffer on io_uring, a copy
        // out of the scratch buffer on epoll.
        let uring = ringkit::backend_report().unwrap().chosen == ringkit::Backend::Uring;
        assert_eq!(ringkit::net::pooled_reads_are_copy_free(), uring);
    }

    async fn dead_peer_timeout_takes_any_duration() {
        // The kernel takes keepalive times of 1 to 32 767 s and reads a
        // user timeout of 0 ms as none: every value maps into those
        // ranges (Duration::MAX was EINVAL: its user timeout in ms went
        // past i32; 1 ns turned the limit off).
        use std::os::fd::AsRawFd;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        // SAFETY: `c` owns the fd and outlives this borrow.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(c.as_raw_fd()) };
        let sock = socket2::SockRef::from(&fd);
        for (limit, user_ms, idle_s) in [
            (Duration::from_nanos(1), 1, 1),
            (Duration::from_secs(10), 10_000, 5),
            (Duration::MAX, i32::MAX as u128, 32_767),
        ] {
            c.set_dead_peer_timeout(Some(limit)).unwrap();
            assert!(sock.keepalive().unwrap());
            let user = sock.tcp_user_timeout().unwrap().unwrap().as_millis();
            assert!(user >= 1 && user <= user_ms, "{limit:?}: user timeout {user} ms");
            assert_eq!(sock.keepalive_time().unwrap().as_secs(), idle_s, "{limit:?}");
        }
        c.set_dead_peer_timeout(None).unwrap();
        assert!(!sock.keepalive().unwrap());
        assert_eq!(sock.tcp_user_timeout().unwrap(), None);
        c.set_dead_peer_timeout(Some(Duration::ZERO)).unwrap();
        assert!(!sock.keepalive().unwrap());
    }

    /// 300 connections, one after another, each echoing through
    /// `read_pooled` (a multishot receive on io_uring) and closing: the
    /// driver's tracked operations return to their baseline. (A multishot
    /// receive's slot leaked when its last CQE was handed out: ~100 bytes
    /// per connection, found by the 10-minute torture run.)
    async fn pooled_reads_leave_no_ops_behind() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = ringkit::spawn(async move {
            for _ in 0..300 {
                let s = l.accept_stream().await.unwrap();
                pooled_echo(s).await;
            }
        });
        // Let the listener's multishot accept get armed, then take the baseline.
        sleep(Duration::from_millis(20)).await;
        let before = ringkit::metrics().ops_in_flight;
        for i in 0..300u32 {
            let c = TcpStream::connect(addr).await.unwrap();
            let msg = i.to_le_bytes().to_vec();
            c.write_all(msg.clone()).await.0.unwrap();
            c.shutdown(Shutdown::Write).await.unwrap();
            assert_eq!(read_to_end(&c, 16).await, msg);
        }
        server.await.unwrap();
        // Closes and cancellations of the last connections settle.
        let mut after = ringkit::metrics().ops_in_flight;
        for _ in 0..100 {
            if after <= before {
                break;
            }
            sleep(Duration::from_millis(10)).await;
            after = ringkit::metrics().ops_in_flight;
        }
        assert!(after <= before, "driver ops grew from {before} to {after} over 300 connections");
    }

    /// 1000 connections on one thread, several rounds each, every byte checked.
    async fn echo_1000_connections() {
        const CONNS: usize = 1000;
        const ROUNDS: usize = 4;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = ringkit::spawn(async move {
            let mut hs = Vec::with_capacity(CONNS);
            for _ in 0..CONNS {
                let (s, _) = l.accept().await.unwrap();
                hs.push(ringkit::spawn(async move {
                    let mut n = 0usize;
                    loop {
                        let (res, buf) = s.read(Vec::with_capacity(4096)).await;
                        match res.unwrap() {
                            0 => return n,
                            k => {
                                n += k;
                                s.write_all(buf).await.0.unwrap();
                            }
                        }
                    }
                }));
            }
            let mut total = 0;
            for h in hs {
                total += h.await.unwrap();
            }
            total
        });
        let before = ringkit::metrics();
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                ringkit::spawn(async move {
                    let c = TcpStream::connect(addr).await.unwrap();
                    let mut rng = Rng::new(i as u64 + 1);
                    let mut sent = 0;
                    for round in 0..ROUNDS {
                        let len = rng.range(1, 3000);
                        let seed = (i * ROUNDS + round) as u64;
                        c.write_all(pattern(seed, 0, len)).await.0.unwrap();
                        let got = read_exact(&c, len, 4096).await;
                        check_stream(seed, &got);
                        sent += len;
                    }
                    sent
                })
            })
            .collect();
        let mut sent = 0;
        for h in clients {
            sent += h.await.unwrap();
        }
        assert_eq!(server.await.unwrap(), sent);
        eprintln!("1000 connections: {}", ringkit::metrics().since(&before));
    }

    /// A 4 MiB write_all against a peer reading 1000 bytes at a time (small
    /// socket buffers force many partial sends); then a single write() whose
    /// short count must be exact.
    async fn partial_writes_4mib() {
        const LEN: usize = 4 << 20;
        let (c, s) = pair().await;
        set_sock_int(&s, libc::SO_SNDBUF, 32 * 1024);
        set_sock_int(&c, libc::SO_RCVBUF, 32 * 1024);
        let writer = ringkit::spawn(async move {
            let (res, buf) = s.write_all(pattern(7, 0, LEN)).await;
            res.unwrap();
            assert_eq!(buf.len(), LEN, "write_all must give the buffer back intact");
            // Now one write(): it may be short; what it reports must be what was sent.
            let (res, _) = s.write(pattern(7, LEN, LEN)).await;
            let n = res.unwrap();
            assert!(n > 0 && n <= LEN);
            eprintln!("single write() of {LEN} bytes sent {n}");
            let (res, _) = s.write_all(pattern(7, LEN + n, LEN - n)).await;
            res.unwrap();
            s.shutdown(Shutdown::Write).await.unwrap();
        });
        let mut got = Vec::with_capacity(2 * LEN);
        let mut reads = 0usize;
        loop {
            let (res, buf) = c.read(Vec::with_capacity(1000)).await;
            let k = res.unwrap();
            if k == 0 {
                break;
            }
            assert!(k <= buf.capacity());
            reads += 1;
            got.extend_from_slice(&buf[..k]);
            if reads % 64 == 0 {
                ringkit::yield_now().await;
            }
        }
        writer.await.unwrap();
        assert_eq!(got.len(), 2 * LEN);
        check_stream(7, &got);
        assert!(reads >= 2 * LEN / 1000);
    }

    /// The peer resets (SO_LINGER 0) while we write_all a large buffer: an
    /// error, no SIGPIPE, and the runtime keeps working.
    async fn peer_reset_mid_write() {
        let sig = SigpipeBlocked::new();
        assert!(!sig.pending(), "SIGPIPE already pending before the test");
        let (c, s) = pair().await;
        c.set_linger(Some(Duration::ZERO)).unwrap();
        let writer = ringkit::spawn(async move {
            let (res, _) = s.write_all(vec![0x5a_u8; 32 << 20]).await;
            // Writing again after the reset fails too, still without SIGPIPE.
            let (again, _) = s.write(vec![1u8; 1024]).await;
            (res, again)
        });
        // Data is flowing and the writer is blocked in write_all.
        let got = read_exact(&c, 256 * 1024, 64 * 1024).await;
        assert!(got.iter().all(|&b| b == 0x5a));
        sleep(Duration::from_millis(5)).await;
        assert!(!writer.is_finished(), "32 MiB cannot fit in loopback socket buffers");
        drop(c); // RST
        let (res, again) = writer.await.unwrap();
        let err = res.expect_err("write_all to a reset peer must fail");
        assert!(
            matches!(err.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe),
            "unexpected error: {err:?}"
        );
        let err = again.expect_err("write after reset must fail");
        assert!(
            matches!(err.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe),
            "unexpected error: {err:?}"
        );
        assert!(!sig.pending(), "a write raised SIGPIPE (MSG_NOSIGNAL missing?)");
        quick_echo(b"still alive after a reset").await;
        drop(sig);
    }

    async fn shutdown_runs_in_place_and_the_peer_sees_eof() {
        // io_uring hands IORING_OP_SHUTDOWN to an io-wq thread (which can
        // fail it with ECANCELED under load); the driver makes the call in
        // place: no SQE, and the peer still sees the half-close.
        let (c, s) = pair().await;
        c.write_all(b"bye".to_vec()).await.0.unwrap();
        let before = ringkit::metrics();
        c.shutdown(Shutdown::Write).await.unwrap();
        let m = ringkit::metrics().since(&before);
        assert_eq!(m.sqes_submitted, 0, "{m:?}");
        assert_eq!(m.other_syscalls, 1, "{m:?}");
        assert_eq!(read_to_end(&s, 64).await, b"bye");
        // The other way still works: the server answers after EOF.
        s.write_all(b"ok".to_vec()).await.0.unwrap();
        s.shutdown(Shutdown::Write).await.unwrap();
        assert_eq!(read_to_end(&c, 64).await, b"ok");
    }

    /// shutdown(Write) → the server reads EOF → replies → the client reads it.
    async fn half_close() {
        let (c, s) = pair().await;
        let server = ringkit::spawn(async move {
            let req = read_to_end(&s, 1000).await;
            // EOF is sticky.
            let (res, _) = s.read(Vec::with_capacity(16)).await;
            assert_eq!(res.unwrap(), 0);
            let reply: Vec<u8> = req.iter().rev().copied().collect();
            s.write_all(reply).await.0.unwrap();
            s.shutdown(Shutdown::Write).await.unwrap();
            req.len()
        });
        let req = pattern(3, 0, 100_000);
        c.write_all(req.clone()).await.0.unwrap();
        c.shutdown(Shutdown::Write).await.unwrap();
        let reply = read_to_end(&c, 4096).await;
        let want: Vec<u8> = req.iter().rev().copied().collect();
        assert_eq!(reply.len(), want.len());
        assert!(reply == want, "reply differs");
        assert_eq!(server.await.unwrap(), req.len());
    }
}

#[test]
fn pooled_reads_copy_outside_a_runtime() {
    assert!(!ringkit::net::pooled_reads_are_copy_free());
}
