//! Lifetimes across runtimes and shared waiters, on both backends where the
//! point is not backend-specific:
//! - a cross-thread wake racing `Runtime::drop` never writes into a file
//!   that reuses the runtime's eventfd number (a bounded stress test);
//! - two tasks accepting on one listener (and receiving on one UDP socket)
//!   are both served;
//! - a `JoinHandle`, a `Sleep` or a waker of a dropped runtime never acts
//!   on the next runtime of the same thread, and the handle resolves to
//!   `Cancelled`;
//! - `Duration::MAX` sleeps and timeouts;
//! - a dropped listener refuses connections and frees its port at once.

use std::cell::Cell;
use std::future::Future;
use std::io::Read;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream, UdpSocket};
use ringkit::time::{sleep, timeout, Elapsed};
use ringkit::{Backend, Builder, JoinError, Runtime};

/// A runtime of `backend`, or `None` (printing why) without io_uring.
fn runtime(backend: Backend) -> Option<Runtime> {
    match Builder::new().backend(backend).build() {
        Ok(rt) => Some(rt),
        Err(e) if backend == Backend::Uring => {
            eprintln!("skipped on io_uring: unavailable here: {e}");
            None
        }
        Err(e) => panic!("cannot build an epoll runtime: {e}"),
    }
}

/// Poll `fut` once with the current task's waker (to register it), then
/// give it back.
async fn poll_once<F: Future + Unpin>(mut fut: F) -> F {
    std::future::poll_fn(|cx| {
        let _ = std::pin::Pin::new(&mut fut).poll(cx);
        Poll::Ready(())
    })
    .await;
    fut
}

/// Two threads wake a waker of a runtime that is being dropped; right after
/// the drop a socketpair takes the lowest free fd numbers (where the
/// eventfd was). Nothing may ever arrive on it.
#[test]
fn late_remote_wake_never_writes_into_a_reused_fd() {
    for backend in [Backend::Uring, Backend::Epoll] {
        if runtime(backend).is_none() {
            continue;
        }
        let current: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (current, stop) = (current.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let w = current.lock().unwrap().clone();
                        if let Some(w) = w {
                            w.wake();
                        }
                    }
                })
            })
            .collect();
        let until = Instant::now() + Duration::from_secs(2);
        let mut rounds = 0u64;
        while Instant::now() < until {
            let rt = runtime(backend).unwrap();
            let w = rt.block_on(std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())));
            *current.lock().unwrap() = Some(w);
            drop(rt);
            let mut fds = [0i32; 2];
            // SAFETY: socketpair into a valid two-int array.
            let rc = unsafe {
                libc::socketpair(
                    libc::AF_UNIX,
                    libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    0,
                    fds.as_mut_ptr(),
                )
            };
            assert_eq!(rc, 0);
            // Let the wakers race for a moment with the fds in place.
            for _ in 0..200 {
                std::hint::spin_loop();
            }
            *current.lock().unwrap() = None;
            for fd in fds {
                let mut b = [0u8; 16];
                // SAFETY: non-blocking read into a valid buffer from our fd.
                let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
                assert!(
                    n < 0,
                    "{backend}: round {rounds}: a dead runtime's wake wrote {:?} into a new fd",
                    &b[..n as usize]
                );
            }
            for fd in fds {
                // SAFETY: closing our own fd.
                unsafe { libc::close(fd) };
            }
            rounds += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for t in wakers {
            t.join().unwrap();
        }
        eprintln!("{backend}: {rounds} rounds, no stray write");
    }
}

#[test]
fn a_dropped_runtimes_handles_and_timers_never_touch_the_next() {
    for backend in [Backend::Uring, Backend::Epoll] {
        let Some(a) = runtime(backend) else { continue };
        // A task that never finishes, its handle kept past its runtime.
        let stuck = a.spawn(std::future::pending::<()>());
        // A 60 s sleep registered in A (timer id 1 there).
        let old_sleep = a.block_on(poll_once(Box::pin(sleep(Duration::from_secs(60)))));
        a.block_on(ringkit::yield_now());
        drop(a);

        let b = runtime(backend).unwrap();
        b.block_on(async {
            // The handle of a task its runtime dropped resolves, as cancelled.
            let got = timeout(Duration::from_secs(5), stuck).await;
            assert!(
                matches!(got, Ok(Err(JoinError::Cancelled))),
                "{backend}: {got:?}"
            );
            let ran = Rc::new(Cell::new(false));
            let r2 = ran.clone();
            let t = ringkit::spawn(async move {
                sleep(Duration::from_millis(20)).await;
                r2.set(true);
            });
            // B's first timer has the id of A's 60 s sleep: dropping that
            // sleep here must not cancel it.
            let mine = poll_once(Box::pin(sleep(Duration::from_millis(30)))).await;
            drop(old_sleep);
            let fired = timeout(Duration::from_secs(5), mine).await;
            assert_eq!(
                fired,
                Ok(()),
                "{backend}: a dead runtime's Sleep cancelled this runtime's timer"
            );
            t.await.unwrap();
            assert!(ran.get());
        });
    }
}

#[test]
fn abort_through_a_dead_runtimes_handle_is_a_no_op() {
    for backend in [Backend::Uring, Backend::Epoll] {
        let Some(a) = runtime(backend) else { continue };
        let old = a.spawn(std::future::pending::<()>());
        drop(a);
        let b = runtime(backend).unwrap();
        b.block_on(async {
            let t = ringkit::spawn(async {
                sleep(Duration::from_millis(20)).await;
                7
            });
            old.abort();
            let got = timeout(Duration::from_secs(5), t).await.unwrap();
            assert_eq!(
                got.unwrap(),
                7,
                "{backend}: a dead runtime's handle aborted a task here"
            );
        });
    }
}

ringkit::test_all! {
    /// Two tasks accept on one listener; two clients connect: both accept.
    async fn concurrent_accepts_on_one_listener() {
        let l = Rc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = l.local_addr().unwrap();
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                ringkit::spawn(async move { l.accept_stream().await.map(|_| ()) })
            })
            .collect();
        // Both are waiting before anyone connects.
        for _ in 0..3 {
            ringkit::yield_now().await;
        }
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let _c2 = TcpStream::connect(addr).await.unwrap();
        for (i, t) in tasks.into_iter().enumerate() {
            let r = timeout(Duration::from_secs(5), t).await;
            assert!(
                matches!(r, Ok(Ok(Ok(())))),
                "accepting task {i} never woke though a connection was pending: {r:?}"
            );
        }
    }

    /// Two tasks receive on one UDP socket; two datagrams: both return.
    async fn concurrent_receives_on_one_udp_socket() {
        let s = Rc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let addr = s.local_addr().unwrap();
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                ringkit::spawn(async move {
                    let (r, _) = s.recv_from(Vec::with_capacity(64)).await;
                    r.map(|(n, _)| n)
                })
            })
            .collect();
        for _ in 0..3 {
            ringkit::yield_now().await;
        }
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for m in [&b"one"[..], &b"two!"[..]] {
            tx.send_to(m, addr).await.0.unwrap();
        }
        let mut got = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match timeout(Duration::from_secs(5), t).await {
                Ok(Ok(Ok(n))) => got.push(n),
                r => panic!("receiving task {i} never woke: {r:?}"),
            }
        }
        got.sort();
        assert_eq!(got, [3, 4]);
    }

    /// `Duration::MAX` means "never", not a panic.
    async fn duration_max_sleeps_and_timeouts() {
        assert_eq!(timeout(Duration::MAX, async { 5 }).await, Ok(5));
        assert_eq!(
            timeout(Duration::MAX, sleep(Duration::from_millis(5))).await,
            Ok(())
        );
        let forever = sleep(Duration::MAX);
        assert!(forever.deadline() > Instant::now() + Duration::from_secs(3600 * 24 * 365));
        assert_eq!(
            timeout(Duration::from_millis(20), forever).await,
            Err(Elapsed)
        );
        let mut s = pin!(sleep(Duration::MAX));
        s.as_mut().reset(Instant::now() + Duration::from_millis(5));
        assert_eq!(timeout(Duration::from_secs(5), s).await, Ok(()));
    }

    /// Once a listener (with an accept armed) is dropped, connecting is
    /// refused and the port can be bound again at once.
    async fn a_dropped_listener_frees_its_port_at_once() {
        for round in 0..20 {
            let l = Rc::new(TcpListener::bind("127.0.0.1:0").unwrap());
            let addr = l.local_addr().unwrap();
            let l2 = l.clone();
            let acceptor = ringkit::spawn(async move {
                let _ = l2.accept_stream().await;
            });
            ringkit::yield_now().await;
            ringkit::yield_now().await;
            acceptor.abort();
            let _ = acceptor.await;
            drop(l);
            let e = std::net::TcpStream::connect(addr).map(|mut s| {
                let mut b = [0u8; 1];
                s.read(&mut b)
            });
            assert!(
                matches!(&e, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused),
                "round {round}: connect after the listener's drop: {e:?}"
            );
            // (Refused is the proof that nothing listens; a rebind is not
            // asked: under load another program's outgoing connection may
            // take the freed port.)
        }
    }
}

/// A pooled receive buffer kept past its runtime, dropped while the next
/// runtime reads: the next runtime's reads keep working.
#[test]
fn a_pooled_buffer_outliving_its_runtime_leaves_the_next_one_alone() {
    use std::io::Write;
    for backend in [Backend::Uring, Backend::Epoll] {
        let Some(a) = runtime(backend) else { continue };
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut peer_a = std::net::TcpStream::connect(addr).unwrap();
        let (sa, _) = l.accept().unwrap();
        peer_a.write_all(b"from a").unwrap();
        let old = a.block_on(async {
            let s = TcpStream::from_std(sa).unwrap();
            s.read_pooled().await.unwrap()
        });
        assert_eq!(&old[..], b"from a");
        drop(a);

        let b = runtime(backend).unwrap();
        let mut peer_b = std::net::TcpStream::connect(addr).unwrap();
        let (sb, _) = l.accept().unwrap();
        b.block_on(async {
            let s = TcpStream::from_std(sb).unwrap();
            peer_b.write_all(b"one").unwrap();
            let first = s.read_pooled().await.unwrap();
            assert_eq!(&first[..], b"one");
            drop(old);
            for msg in [&b"two"[..], b"three"] {
                peer_b.write_all(msg).unwrap();
                let got = timeout(Duration::from_secs(5), s.read_pooled())
                    .await
                    .expect("read stuck");
                let got = got.unwrap_or_else(|e| {
                    panic!("{backend}: a read after the old buffer's drop failed: {e}")
                });
                assert_eq!(&got[..], msg);
            }
        });
    }
}

ringkit::test_all! {
    /// The echo loop everyone writes first: read, write back, reuse the
    /// buffer. Messages that shrink come back exactly, never padded with
    /// older bytes.
    async fn a_reused_read_buffer_holds_exactly_what_was_read() {
        for pooled in [false, true] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let server = ringkit::spawn(async move {
                let (s, _) = l.accept().await.unwrap();
                if pooled {
                    // Mixing in a pooled read arms the multishot receive:
                    // later plain reads are served from it.
                    let first = s.read_pooled().await.unwrap();
                    s.write_all(first.to_vec()).await.0.unwrap();
                }
                let mut buf = Vec::with_capacity(4096);
                loop {
                    let (n, b) = s.read(buf).await;
                    let n = n.unwrap();
                    if n == 0 {
                        return;
                    }
                    assert_eq!(b.len(), n, "the buffer holds more than was read");
                    let (r, b) = s.write_all(b).await;
                    r.unwrap();
                    buf = b;
                }
            });
            let c = TcpStream::connect(addr).await.unwrap();
            if pooled {
                c.write_all(&b"x"[..]).await.0.unwrap();
                let (n, _) = c.read(Vec::with_capacity(8)).await;
                assert_eq!(n.unwrap(), 1);
            }
            for len in [3000usize, 100, 2000, 7, 1] {
                let msg: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ len as u8).collect();
                c.write_all(msg.clone()).await.0.unwrap();
                let mut got = Vec::new();
                while got.len() < len {
                    let (n, b) = timeout(Duration::from_secs(5), c.read(Vec::with_capacity(4096)))
                        .await
                        .expect("echo stuck");
                    let n = n.unwrap();
                    assert!(n > 0);
                    got.extend_from_slice(&b[..n]);
                }
                // Nothing more than the message comes back.
                let (extra, _) = timeout(Duration::from_millis(50), c.read(Vec::with_capacity(64)))
                    .await
                    .map_or((Ok(0), Vec::new()), |r| r);
                assert_eq!(extra.unwrap(), 0, "message of {len}: extra bytes came back");
                assert!(got == msg, "message of {len} came back as {} bytes", got.len());
            }
            drop(c);
            server.await.unwrap();
        }
    }

    /// `read(Vec::new())` is an error, not an end of stream.
    async fn a_read_with_no_room_is_invalid_input() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (_s, _) = l.accept().await.unwrap();
        let (r, _) = timeout(Duration::from_secs(2), c.read(Vec::new()))
            .await
            .expect("a read with no room hung");
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        let (r, _) = timeout(
            Duration::from_secs(2),
            c.read_timeout(Vec::new(), Duration::from_millis(10)),
        )
        .await
        .expect("a read with no room hung");
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"data").unwrap();
        let f = ringkit::fs::File::open(&path).await.unwrap();
        let (r, _) = f.read_at(Vec::new(), 0).await;
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        // A file read into a used buffer holds exactly what it read.
        let (r, b) = f.read_at(vec![b'z'; 64], 0).await;
        assert_eq!(r.unwrap(), 4);
        assert_eq!(b, b"data");
    }
}

#[test]
fn a_bind_error_names_the_address() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let e = TcpListener::bind(addr).expect_err("bound a busy address");
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
}

/// An operation in flight that escapes its runtime (a future returned from
/// `block_on`, still pending) and is dropped under a later runtime on the
/// same thread: its slot key means nothing to the new driver, so it must
/// neither cancel nor take over what that key names there (the new
/// runtime's own read must complete), and its buffers are leaked, counted.
#[test]
fn an_operation_dropped_under_a_later_runtime_touches_nothing_of_it() {
    use std::task::Context;

    let Ok(rt) = Builder::new().backend(Backend::Uring).build() else {
        return eprintln!("skipped: io_uring unavailable here");
    };
    let (escaped, _peer) = rt.block_on(async {
        let (a, b) = ringkit::net::UnixStream::pair().unwrap();
        let mut fut = Box::pin(async move {
            let r = a.read(vec![0u8; 64]).await;
            (r, a)
        });
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        (fut, b)
    });
    drop(rt);
    let rt = Builder::new().backend(Backend::Uring).build().unwrap();
    let (read, leaked) = rt.block_on(async move {
        let (c, d) = ringkit::net::UnixStream::pair().unwrap();
        let mut read = pin!(c.read(vec![0u8; 64]));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(read.as_mut().poll(&mut cx).is_pending());
        drop(escaped);
        d.write_all(b"ping".to_vec()).await.0.unwrap();
        let r = ringkit::time::timeout(std::time::Duration::from_secs(5), read).await;
        let (n, buf) = r.expect("the new runtime's read completes");
        (
            buf[..n.expect("and reads the bytes")].to_vec(),
            ringkit::metrics().ops_leaked,
        )
    });
    assert_eq!(read, b"ping");
    assert_eq!(leaked, 1, "the old operation's buffers are leaked, counted");
}
