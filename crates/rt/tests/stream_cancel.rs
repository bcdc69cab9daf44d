//! Stream sockets over real loopback TCP, on both backends (`test_all!`):
//! cancellation of reads (timeouts and drops at random points),
//! `read_timeout`, and mixing plain and pooled reads. Every byte that
//! crosses a socket is checked.

mod stream_common;

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

use stream_common::*;

ringkit::test_all! {
    /// A read timeout past the clock's range is no limit (no panic on
    /// either backend): the data that comes is returned.
    async fn read_timeout_of_duration_max_is_no_limit() {
        let (a, b) = pair().await;
        a.write_all(&b"late but here"[..]).await.0.unwrap();
        let (n, buf) = b.read_timeout(Vec::with_capacity(64), Duration::MAX).await;
        assert_eq!(&buf[..n.unwrap()], b"late but here");
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
