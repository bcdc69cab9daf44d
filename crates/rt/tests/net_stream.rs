//! Stream sockets over real loopback TCP, on both backends (`test_all!`):
//! many connections, partial writes, resets, half-close, cancellation of
//! reads (timeouts and drops at random points), `read_timeout`, pooled reads
//! (multishot receive with the provided-buffer ring on io_uring) and mixing
//! both reading styles. Every byte that crosses a socket is checked.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream};
use ringkit::time::{sleep, timeout};
use ringkit::{Backend, Builder};

// ---------------------------------------------------------------- helpers

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }
}

/// Byte `i` of test stream `seed`: a hash of the position, so a lost,
/// duplicated or reordered chunk of any length shows up.
fn byte_at(seed: u64, i: usize) -> u8 {
    let mut x = (i as u64 ^ seed.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 56) as u8
}

/// Bytes `start..start + len` of test stream `seed`.
fn pattern(seed: u64, start: usize, len: usize) -> Vec<u8> {
    (start..start + len).map(|i| byte_at(seed, i)).collect()
}

/// Panics at the first byte of `got` that differs from stream `seed`.
fn check_stream(seed: u64, got: &[u8]) {
    if let Some(i) = (0..got.len()).find(|&i| got[i] != byte_at(seed, i)) {
        panic!(
            "byte stream corrupted at offset {i} of {} (lost, duplicated or reordered data)",
            got.len()
        );
    }
}

/// A connected (client, server) pair over loopback.
async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, peer) = l.accept().await.unwrap();
    assert_eq!(peer, c.local_addr().unwrap());
    (c, s)
}

/// Await `fut`, failing (instead of hanging) if it makes no progress for
/// 20 s: a lost byte or a lost wake-up would otherwise block a read forever.
async fn guarded<F: Future>(what: &str, fut: F) -> F::Output {
    match timeout(Duration::from_secs(20), fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: stuck for 20 s (lost data or lost wake-up)"),
    }
}

/// Read exactly `n` bytes with reads of at most about `chunk` bytes.
async fn read_exact(s: &TcpStream, n: usize, chunk: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let want = chunk.min(n - out.len());
        let (res, buf) = guarded("read_exact", s.read(Vec::with_capacity(want))).await;
        let k = res.unwrap();
        assert!(k > 0, "unexpected EOF after {} of {n} bytes", out.len());
        out.extend_from_slice(&buf[..k]);
    }
    out
}

/// Read until EOF.
async fn read_to_end(s: &TcpStream, chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let (res, buf) = guarded("read_to_end", s.read(Vec::with_capacity(chunk))).await;
        match res.unwrap() {
            0 => return out,
            k => out.extend_from_slice(&buf[..k]),
        }
    }
}

/// Poll `fut` during at most `turns + 1` runtime turns; `None` (and `fut` is
/// dropped, wherever it was) if it did not finish by then.
async fn poll_turns<F: Future>(turns: u32, fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut left = turns;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if left == 0 {
            return Poll::Ready(None);
        }
        left -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// Writes test stream `seed` in random chunks (yielding now and then so data
/// arrives continuously) until `stop` is set, then shuts down writing.
/// Returns how many bytes it sent.
async fn stream_writer(c: TcpStream, seed: u64, stop: Rc<Cell<bool>>, max_chunk: usize) -> usize {
    let mut rng = Rng::new(seed ^ 0x5555);
    let mut off = 0;
    while !stop.get() {
        let len = rng.range(1, max_chunk);
        let (res, _) = c.write_all(pattern(seed, off, len)).await;
        res.unwrap();
        off += len;
        match rng.below(8) {
            0 => sleep(Duration::from_micros(rng.below(300))).await,
            1..=3 => ringkit::yield_now().await,
            _ => {}
        }
    }
    c.shutdown(Shutdown::Write).await.unwrap();
    off
}

fn is_uring() -> bool {
    ringkit::backend_report().chosen == Backend::Uring
}

/// Blocks SIGPIPE on this thread for the guard's life, so a SIGPIPE raised by
/// a write on this thread stays pending where we can see it (blocked signals
/// are never discarded as ignored). Restores the mask on drop.
struct SigpipeBlocked {
    old: libc::sigset_t,
}

fn sigpipe_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        set
    }
}

impl SigpipeBlocked {
    fn new() -> SigpipeBlocked {
        let set = sigpipe_set();
        // SAFETY: valid sigset pointers; only this thread's mask changes.
        let old = unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            assert_eq!(
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old),
                0,
                "pthread_sigmask"
            );
            old
        };
        SigpipeBlocked { old }
    }

    fn pending(&self) -> bool {
        // SAFETY: valid sigset pointer.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            assert_eq!(libc::sigpending(&mut set), 0);
            libc::sigismember(&set, libc::SIGPIPE) == 1
        }
    }
}

impl Drop for SigpipeBlocked {
    fn drop(&mut self) {
        if self.pending() {
            let set = sigpipe_set();
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: consume the pending SIGPIPE so unblocking cannot raise it.
            unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) };
        }
        // SAFETY: restoring the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Set an integer socket option (buffer sizes) on a connected stream.
fn set_sock_int(s: &TcpStream, opt: libc::c_int, v: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket fd and a pointer to a live c_int of the given size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt: {}", io::Error::last_os_error());
}

/// One short echo on a fresh connection: proves the runtime still works.
async fn quick_echo(msg: &[u8]) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = ringkit::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let got = read_to_end(&s, 1024).await;
        s.write_all(got).await.0.unwrap();
    });
    let c = TcpStream::connect(addr).await.unwrap();
    c.write_all(msg.to_vec()).await.0.unwrap();
    c.shutdown(Shutdown::Write).await.unwrap();
    assert_eq!(read_to_end(&c, 1024).await, msg);
    server.await.unwrap();
}

/// Echo server for `read_pooled`: echoes every pooled buffer as it is.
/// Returns (bytes echoed, buffers that were provided-ring slots, heap buffers).
async fn pooled_echo(s: TcpStream) -> (usize, usize, usize) {
    let (mut n, mut ring, mut heap) = (0, 0, 0);
    loop {
        let rb = s.read_pooled().await.unwrap();
        if rb.is_empty() {
            return (n, ring, heap);
        }
        if rb.is_ring_buffer() {
            ring += 1;
        } else {
            heap += 1;
        }
        n += rb.len();
        let (res, rb) = s.write_all(rb).await;
        res.unwrap();
        drop(rb);
    }
}

/// Build a runtime for `backend` with a tiny provided-buffer ring (2 x 64 B)
/// and run `fut` on it; skips (printing why) if io_uring is unavailable.
fn run_with_tiny_buffer_ring<F: Future<Output = ()>>(backend: Backend, fut: impl FnOnce() -> F) {
    let rt = match Builder::new()
        .backend(backend)
        .ignore_env()
        .recv_buffers(2, 64)
        .build()
    {
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

    /// A read dropped by `timeout` (nothing had arrived) loses nothing: the
    /// next read returns every byte written afterwards. Also a read whose
    /// data arrived but that was dropped before being polled again.
    async fn cancelled_read_loses_nothing() {
        let (c, s) = pair().await;
        for (i, msg) in [&b"first message"[..], b"a second, longer message: 0123456789"]
            .iter()
            .enumerate()
        {
            let t0 = Instant::now();
            let r = timeout(Duration::from_millis(10), s.read(Vec::with_capacity(4096))).await;
            assert!(r.is_err(), "round {i}: read completed with no data sent");
            assert!(t0.elapsed() >= Duration::from_millis(10));
            c.write_all(msg.to_vec()).await.0.unwrap();
            let (res, buf) = guarded("read", s.read(Vec::with_capacity(4096))).await;
            assert_eq!(&buf[..res.unwrap()], *msg, "round {i}");
        }
        // Data arrives while the read is in flight, but the read is dropped
        // without being polled again.
        for round in 0..20u64 {
            let msg = pattern(round, 0, 100 + round as usize * 37);
            {
                let mut read = pin!(s.read(Vec::with_capacity(8192)));
                let polled = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx).is_ready())).await;
                assert!(!polled, "read completed with no data sent");
                c.write_all(msg.clone()).await.0.unwrap();
                sleep(Duration::from_millis(2)).await;
                // dropped here: on io_uring its receive may well have completed
            }
            // The next read returns every byte, first; odd rounds read with
            // read_pooled (which must also serve the bytes of dropped reads first).
            if round % 2 == 0 {
                let (res, buf) = guarded("read", s.read(Vec::with_capacity(8192))).await;
                assert_eq!(&buf[..res.unwrap()], &msg[..], "round {round}");
            } else {
                let mut got = Vec::new();
                while got.len() < msg.len() {
                    let rb = guarded("read_pooled", s.read_pooled()).await.unwrap();
                    assert!(!rb.is_empty(), "round {round}: unexpected EOF");
                    got.extend_from_slice(&rb);
                }
                assert_eq!(got, msg, "round {round}");
            }
        }
        // Plain reads after pooled ones still see every byte in order.
        for round in 0..5u64 {
            let msg = pattern(100 + round, 0, 3000);
            c.write_all(msg.clone()).await.0.unwrap();
            let got = read_exact(&s, msg.len(), 1000).await;
            assert_eq!(got, msg, "plain round {round}");
        }
    }

    /// Thousands of reads dropped at random points (timeouts of random length,
    /// drops after a random number of runtime turns) while data arrives
    /// continuously: the received stream is exactly the sent one.
    async fn cancelled_reads_stress() {
        const ITERS: usize = 4000;
        const SEED: u64 = 0xC0FFEE;
        let (c, s) = pair().await;
        let stop = Rc::new(Cell::new(false));
        let writer = ringkit::spawn(stream_writer(c, SEED, stop.clone(), 2048));
        let mut rng = Rng::new(5);
        let mut got = Vec::new();
        let (mut dropped, mut completed) = (0usize, 0usize);
        let t0 = Instant::now();
        for _ in 0..ITERS {
            let buf = Vec::with_capacity(rng.range(1, 4096));
            let out = match rng.below(3) {
                0 => timeout(Duration::from_micros(rng.below(300)), s.read(buf)).await.ok(),
                1 => poll_turns(rng.below(4) as u32, s.read(buf)).await,
                _ => Some(s.read(buf).await),
            };
            match out {
                Some((res, buf)) => {
                    let n = res.unwrap();
                    assert!(n > 0, "EOF before the writer stopped");
                    got.extend_from_slice(&buf[..n]);
                    completed += 1;
                }
                None => dropped += 1,
            }
        }
        stop.set(true);
        got.extend(read_to_end(&s, 65536).await);
        let sent = writer.await.unwrap();
        eprintln!(
            "{ITERS} reads: {dropped} dropped, {completed} completed, {sent} bytes in {:?}",
            t0.elapsed()
        );
        assert_eq!(got.len(), sent, "received byte count differs from sent");
        check_stream(SEED, &got);
        assert!(dropped >= ITERS / 20, "too few reads were dropped to test anything");
    }

    /// read_timeout: TimedOut when nothing arrives, the data when it does,
    /// and no byte lost after timeouts.
    async fn read_timeout_semantics() {
        let (c, s) = pair().await;
        // Nothing arrives.
        let t0 = Instant::now();
        let (res, buf) = s.read_timeout(Vec::with_capacity(64), Duration::from_millis(20)).await;
        assert_eq!(res.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() >= Duration::from_millis(20));
        assert!(buf.capacity() >= 64, "the buffer must come back");
        // Data arrives before the deadline.
        let w = ringkit::spawn(async move {
            sleep(Duration::from_millis(10)).await;
            c.write_all(&b"hello"[..]).await.0.unwrap();
            c
        });
        let (res, buf) = s.read_timeout(Vec::with_capacity(64), Duration::from_secs(20)).await;
        assert_eq!(&buf[..res.unwrap()], b"hello");
        let c = w.await.unwrap();
        // After a timeout the connection works and nothing is lost.
        for i in 0..30usize {
            let (res, _) = s.read_timeout(Vec::with_capacity(64), Duration::from_millis(1)).await;
            assert_eq!(res.unwrap_err().kind(), io::ErrorKind::TimedOut, "iteration {i}");
            let msg = pattern(i as u64, 0, 1 + i * 101);
            c.write_all(msg.clone()).await.0.unwrap();
            let got = read_exact(&s, msg.len(), 4096).await;
            assert!(got == msg, "iteration {i}: data differs");
        }
        // Racing: data arrives at random times relative to short deadlines.
        const SEED: u64 = 77;
        let stop = Rc::new(Cell::new(false));
        let writer = ringkit::spawn(stream_writer(c, SEED, stop.clone(), 512));
        let mut rng = Rng::new(9);
        let mut got = Vec::new();
        let mut timeouts = 0;
        for _ in 0..400 {
            let dur = Duration::from_micros(rng.below(400));
            let (res, buf) = s.read_timeout(Vec::with_capacity(rng.range(1, 2048)), dur).await;
            match res {
                Ok(0) => panic!("EOF before the writer stopped"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => timeouts += 1,
                Err(e) => panic!("read_timeout: {e}"),
            }
        }
        stop.set(true);
        got.extend(read_to_end(&s, 65536).await);
        let sent = writer.await.unwrap();
        eprintln!("read_timeout race: {timeouts} timeouts of 400, {sent} bytes");
        assert_eq!(got.len(), sent);
        check_stream(SEED, &got);
    }

    /// An echo server built on read_pooled() + write_all(RecvBuf).
    async fn read_pooled_echo() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = ringkit::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            pooled_echo(s).await
        });
        let c = TcpStream::connect(addr).await.unwrap();
        let mut rng = Rng::new(11);
        let mut total = 0;
        for round in 0..200u64 {
            let len = rng.range(1, 20_000);
            c.write_all(pattern(round, 0, len)).await.0.unwrap();
            let got = read_exact(&c, len, 8192).await;
            check_stream(round, &got);
            total += len;
        }
        c.shutdown(Shutdown::Write).await.unwrap();
        let (res, _) = c.read(Vec::with_capacity(16)).await;
        assert_eq!(res.unwrap(), 0);
        let (n, ring, heap) = server.await.unwrap();
        assert_eq!(n, total);
        eprintln!("read_pooled echo: {ring} ring buffers, {heap} heap buffers");
        if is_uring() {
            assert!(ring > 0, "io_uring read_pooled never used the provided-buffer ring");
        }
    }

    /// read() and read_pooled() alternating at random on one stream.
    async fn mixed_read_and_read_pooled() {
        const SEED: u64 = 4242;
        const LEN: usize = 1 << 20;
        let (c, s) = pair().await;
        let writer = ringkit::spawn(async move {
            let mut rng = Rng::new(1);
            let mut off = 0;
            while off < LEN {
                let len = rng.range(1, 3000).min(LEN - off);
                c.write_all(pattern(SEED, off, len)).await.0.unwrap();
                off += len;
                if rng.below(3) == 0 {
                    ringkit::yield_now().await;
                }
            }
            c.shutdown(Shutdown::Write).await.unwrap();
        });
        let mut rng = Rng::new(2);
        let mut got = Vec::with_capacity(LEN);
        let (mut plain, mut pooled) = (0, 0);
        loop {
            let n = if rng.below(2) == 0 {
                plain += 1;
                let (res, buf) = s.read(Vec::with_capacity(rng.range(1, 300))).await;
                let n = res.unwrap();
                got.extend_from_slice(&buf[..n]);
                n
            } else {
                pooled += 1;
                let rb = s.read_pooled().await.unwrap();
                got.extend_from_slice(&rb);
                rb.len()
            };
            if n == 0 {
                break;
            }
        }
        writer.await.unwrap();
        eprintln!("mixed: {plain} read(), {pooled} read_pooled()");
        assert_eq!(got.len(), LEN);
        check_stream(SEED, &got);
    }

    /// Both reading styles mixed, and reads of both styles dropped at random
    /// points, while data arrives continuously.
    async fn mixed_reads_with_drops() {
        const SEED: u64 = 0xFEED;
        const ITERS: usize = 3000;
        let (c, s) = pair().await;
        let stop = Rc::new(Cell::new(false));
        let writer = ringkit::spawn(stream_writer(c, SEED, stop.clone(), 1500));
        let mut rng = Rng::new(3);
        let mut got = Vec::new();
        let mut dropped = 0usize;
        for _ in 0..ITERS {
            let pooled = rng.below(2) == 0;
            let how = rng.below(3);
            let dur = Duration::from_micros(rng.below(300));
            let turns = rng.below(4) as u32;
            let cap = rng.range(1, 3000);
            let data: Option<Vec<u8>> = if pooled {
                let fut = async { s.read_pooled().await.unwrap().to_vec() };
                match how {
                    0 => timeout(dur, fut).await.ok(),
                    1 => poll_turns(turns, fut).await,
                    _ => Some(fut.await),
                }
            } else {
                let fut = async {
                    let (res, buf) = s.read(Vec::with_capacity(cap)).await;
                    buf[..res.unwrap()].to_vec()
                };
                match how {
                    0 => timeout(dur, fut).await.ok(),
                    1 => poll_turns(turns, fut).await,
                    _ => Some(fut.await),
                }
            };
            match data {
                Some(d) => {
                    assert!(!d.is_empty(), "EOF before the writer stopped");
                    got.extend_from_slice(&d);
                }
                None => dropped += 1,
            }
        }
        stop.set(true);
        loop {
            let d = if rng.below(2) == 0 {
                s.read_pooled().await.unwrap().to_vec()
            } else {
                let (res, buf) = s.read(Vec::with_capacity(4096)).await;
                buf[..res.unwrap()].to_vec()
            };
            if d.is_empty() {
                break;
            }
            got.extend_from_slice(&d);
        }
        let sent = writer.await.unwrap();
        eprintln!("mixed with drops: {dropped} dropped of {ITERS}, {sent} bytes");
        assert_eq!(got.len(), sent, "received byte count differs from sent");
        check_stream(SEED, &got);
    }
}
