//! Pooled receives with and without bundles (`IORING_RECVSEND_BUNDLE`),
//! and on epoll: every case runs three ways, on a ring of 64 small (256 B)
//! buffers so that bundles are long and the ring runs dry mid-bundle
//! (`ENOBUFS`). Nothing may be lost or reordered: bulk data, a peer that
//! sends one byte at a time, `read` mixed with `read_pooled`, a reset with
//! bundled buffers still queued, and streams dropped with bundled buffers
//! queued (which must go back to the ring).

mod common;

use std::future::Future;
use std::io::Write;
use std::net::Shutdown;

use common::{kernel_has_bundles, pair, pattern};
use ringkit::net::{TcpListener, TcpStream};
use ringkit::{Backend, Builder};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Bundle,
    NoBundle,
    Epoll,
}

/// Run `f` on a runtime in `mode`; `None` if the mode is not available here.
fn run<F: Future<Output = ()>>(
    mode: Mode,
    f: impl FnOnce() -> F,
) -> Option<ringkit::MetricsSnapshot> {
    ringkit::raise_nofile_limit();
    let b = Builder::new().recv_buffers(64, 256);
    let b = match mode {
        Mode::Bundle => b.backend(Backend::Uring).recv_bundle(true),
        Mode::NoBundle => b.backend(Backend::Uring).recv_bundle(false),
        Mode::Epoll => b.backend(Backend::Epoll),
    };
    let rt = match b.build() {
        Ok(rt) => rt,
        Err(e) if mode != Mode::Epoll => {
            eprintln!("skipped {mode:?}: io_uring unavailable here: {e}");
            return None;
        }
        Err(e) => panic!("epoll runtime: {e}"),
    };
    rt.block_on(f());
    Some(rt.metrics())
}

/// Check the bundle counters of a run that received bulk data.
fn check_bundles(mode: Mode, m: Option<ringkit::MetricsSnapshot>) {
    let Some(m) = m else { return };
    match mode {
        Mode::Bundle if !kernel_has_bundles() => {
            eprintln!(
                "no bundle check: this kernel lacks IORING_FEAT_RECVSEND_BUNDLE (Linux 6.10)"
            );
        }
        Mode::Bundle => assert!(m.recv_bundled > 0, "no bundle was received: {m:?}"),
        Mode::NoBundle => {
            assert!(m.recv_buffers > 0);
            assert_eq!(m.recv_bundled, 0, "bundles while switched off");
        }
        Mode::Epoll => assert_eq!(m.recv_buffers, 0),
    }
}

/// Read everything through `read_pooled` until end of stream. Buffers are
/// held in groups of up to 7 and given back in reverse, so the ring's order
/// stops following buffer ids (a bundle's later buffers must be found by
/// ring position, not by id).
async fn read_all(s: &TcpStream) -> std::io::Result<Vec<u8>> {
    let mut got = Vec::new();
    let mut held = Vec::new();
    loop {
        let rb = s.read_pooled().await?;
        if rb.is_empty() {
            return Ok(got);
        }
        got.extend_from_slice(&rb);
        held.push(rb);
        if held.len() == 7 {
            while let Some(rb) = held.pop() {
                drop(rb);
            }
        }
    }
}

fn bulk(mode: Mode) {
    let data = pattern(4 << 20);
    let sent = data.clone();
    let m = run(mode, || async move {
        let (s, t) = pair(move |mut c| {
            for chunk in sent.chunks(64 * 1024) {
                c.write_all(chunk).unwrap();
            }
        })
        .await;
        let got = read_all(&s).await.unwrap();
        t.join().unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "bytes lost or reordered");
    });
    check_bundles(mode, m);
}

fn one_byte_at_a_time(mode: Mode) {
    let data = pattern(3000);
    let sent = data.clone();
    run(mode, || async move {
        let (s, t) = pair(move |mut c| {
            c.set_nodelay(true).unwrap();
            for b in &sent {
                c.write_all(std::slice::from_ref(b)).unwrap();
            }
        })
        .await;
        let got = read_all(&s).await.unwrap();
        t.join().unwrap();
        assert!(got == data, "bytes lost or reordered");
    });
}

fn read_mixed_with_pooled(mode: Mode) {
    let data = pattern(1 << 20);
    let sent = data.clone();
    run(mode, || async move {
        let (s, t) = pair(move |mut c| c.write_all(&sent).unwrap()).await;
        // Let a lot arrive, so the first pooled read is a long bundle.
        ringkit::time::sleep(std::time::Duration::from_millis(50)).await;
        let mut got = s.read_pooled().await.unwrap().to_vec();
        loop {
            let (r, buf) = s.read(Vec::with_capacity(100)).await;
            if r.unwrap() == 0 {
                break;
            }
            got.extend_from_slice(&buf);
            // Alternate: a pooled read now and then.
            if got.len() % 7 == 0 {
                got.extend_from_slice(&s.read_pooled().await.unwrap());
            }
        }
        t.join().unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "bytes lost or reordered");
    });
}

fn reset_with_bundles_queued(mode: Mode) {
    let data = pattern(200 * 1024);
    let sent = data.clone();
    run(mode, || async move {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (s, t) = pair(move |mut c| {
            c.write_all(&sent).unwrap();
            rx.recv().unwrap();
            // SO_LINGER 0: the close sends a reset.
            socket2::SockRef::from(&c)
                .set_linger(Some(std::time::Duration::ZERO))
                .unwrap();
            drop(c);
        })
        .await;
        ringkit::time::sleep(std::time::Duration::from_millis(50)).await;
        let mut got = s.read_pooled().await.unwrap().to_vec();
        tx.send(()).unwrap();
        t.join().unwrap();
        ringkit::time::sleep(std::time::Duration::from_millis(50)).await;
        loop {
            match s.read_pooled().await {
                Ok(rb) if rb.is_empty() => break,
                Ok(rb) => got.extend_from_slice(&rb),
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
                    break;
                }
            }
        }
        assert!(!got.is_empty());
        assert!(
            data.starts_with(&got),
            "received bytes are not a prefix of what was sent"
        );
    });
}

fn dropped_streams_give_their_buffers_back(mode: Mode) {
    let m = run(mode, || async move {
        for _ in 0..20 {
            let (s, t) = pair(|mut c| {
                c.write_all(&pattern(64 * 1024)).unwrap();
                let _ = c.shutdown(Shutdown::Write);
            })
            .await;
            ringkit::time::sleep(std::time::Duration::from_millis(5)).await;
            // Read until a bundle has left buffers queued in the stream (on
            // io_uring with bundles), then drop it with them.
            let start = ringkit::metrics().recv_bundled;
            for _ in 0..8 {
                let rb = s.read_pooled().await.unwrap();
                if rb.is_empty() || ringkit::metrics().recv_bundled > start {
                    break;
                }
            }
            drop(s);
            t.join().unwrap();
        }
        let before = ringkit::metrics();
        let data = pattern(1 << 20);
        let sent = data.clone();
        let (s, t) = pair(move |mut c| c.write_all(&sent).unwrap()).await;
        let got = read_all(&s).await.unwrap();
        t.join().unwrap();
        assert!(got == data);
        let m = ringkit::metrics().since(&before);
        if ringkit::backend_report().expect("inside a runtime").chosen == Backend::Uring {
            // Leaked buffers would leave the ring dry: every multishot
            // would end at once with ENOBUFS and plain receives stand in.
            assert!(
                m.recv_buffers > 64,
                "the ring ran dry: buffers were not returned ({m:?})"
            );
        }
    });
    let _ = m;
}

/// An echo that sends whatever a bundle brought with one vectored send
/// (`take_pooled` + `write_all_pooled`); a client writes and reads 2 MiB
/// concurrently and checks every byte.
fn echo_in_batches(mode: Mode) {
    let data = pattern(2 << 20);
    let sent = data.clone();
    let mut batches = 0;
    run(mode, || async {
        let (s, t) = pair(move |c| {
            let mut w = c.try_clone().unwrap();
            let writer = std::thread::spawn(move || {
                for chunk in sent.chunks(10_000) {
                    w.write_all(chunk).unwrap();
                }
                w.shutdown(Shutdown::Write).unwrap();
            });
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut &c, &mut got).unwrap();
            writer.join().unwrap();
            assert_eq!(got.len(), data.len());
            assert!(got == data, "echoed bytes lost or reordered");
        })
        .await;
        loop {
            let rb = s.read_pooled().await.unwrap();
            if rb.is_empty() {
                break;
            }
            match s.take_pooled() {
                None => s.write_all(rb).await.0.unwrap(),
                Some(next) => {
                    batches += 1;
                    let mut v = vec![rb, next];
                    v.extend(std::iter::from_fn(|| s.take_pooled()));
                    s.write_all_pooled(v).await.unwrap();
                }
            }
        }
        s.shutdown(Shutdown::Write).await.unwrap();
        t.join().unwrap();
    });
    if mode == Mode::Bundle && kernel_has_bundles() {
        assert!(batches > 0, "no bundle was echoed as a batch");
    }
    if mode == Mode::Epoll {
        assert_eq!(batches, 0, "epoll has no received buffers queued");
    }
}

/// 32 connections at once, each a different byte stream, read by 32 tasks
/// that hold buffers for a while and give them back out of order: buffers
/// of one ring are taken and recycled by many streams in between, and every
/// stream must still get exactly its own bytes.
fn many_streams_interleaved(mode: Mode) {
    const STREAMS: usize = 32;
    const LEN: usize = 256 * 1024;
    let stream_data = |i: usize| -> Vec<u8> {
        (0..LEN as u64)
            .map(|j| ((j.wrapping_mul(2_654_435_761) >> 11) as u8) ^ (i as u8).wrapping_mul(37))
            .collect()
    };
    run(mode, || async move {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let clients: Vec<_> = (0..STREAMS)
            .map(|i| {
                let data = stream_data(i);
                std::thread::spawn(move || {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    c.write_all(&(i as u32).to_be_bytes()).unwrap();
                    let mut off = 0;
                    let mut step = 1 + i * 97;
                    while off < data.len() {
                        let end = (off + step).min(data.len());
                        c.write_all(&data[off..end]).unwrap();
                        off = end;
                        step = step * 7 % 9000 + 1;
                    }
                })
            })
            .collect();
        let mut tasks = Vec::new();
        for _ in 0..STREAMS {
            let (s, _) = l.accept().await.unwrap();
            tasks.push(ringkit::spawn(async move {
                let mut got = Vec::new();
                let mut held = Vec::new();
                loop {
                    let rb = s.read_pooled().await.unwrap();
                    if rb.is_empty() {
                        break;
                    }
                    got.extend_from_slice(&rb);
                    held.push(rb);
                    if held.len() == 3 {
                        held.swap(0, 2);
                        held.clear();
                        ringkit::time::sleep(std::time::Duration::from_micros(200)).await;
                    }
                }
                got
            }));
        }
        for t in tasks {
            let got = t.await.unwrap();
            let i = u32::from_be_bytes(got[..4].try_into().unwrap()) as usize;
            assert_eq!(got.len() - 4, LEN, "stream {i}: length");
            assert!(
                got[4..] == stream_data(i)[..],
                "stream {i}: bytes lost, reordered or mixed up"
            );
        }
        for c in clients {
            c.join().unwrap();
        }
    });
}

/// `write_all_pooled` to a peer that does not read for a while: the socket
/// fills, the vectored send comes back short or with `EAGAIN`, and it must
/// still deliver every byte in order once the peer reads.
fn vectored_send_into_a_full_socket(mode: Mode) {
    let data = pattern(8 << 20);
    let sent = data.clone();
    run(mode, || async move {
        let (s, t) = pair(move |c| {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut &c, &mut got).unwrap();
            assert_eq!(got.len(), data.len());
            assert!(got == data, "bytes lost or reordered");
        })
        .await;
        let bufs = sent
            .chunks(300_000)
            .map(|c| ringkit::net::RecvBuf::heap(c.to_vec()))
            .collect();
        s.write_all_pooled(bufs).await.unwrap();
        s.shutdown(Shutdown::Write).await.unwrap();
        t.join().unwrap();
    });
}

/// Streams dropped while their peers keep sending: completions (bundles
/// among them) keep arriving for receives whose owner is gone, and the
/// driver must give every buffer back without tripping over itself. Runs
/// on a ring without `DEFER_TASKRUN` too, where the kernel completes
/// receives whenever the thread enters it.
fn dropped_while_the_peer_keeps_sending(mode: Mode) {
    for flags in [None, Some(0u32)] {
        if flags.is_some() && mode == Mode::Epoll {
            continue;
        }
        // Enough buffers that the multishot is still armed (not run dry)
        // when the stream goes.
        let b = Builder::new().recv_buffers(512, 1024);
        let b = match mode {
            Mode::Bundle => b.backend(Backend::Uring).recv_bundle(true),
            Mode::NoBundle => b.backend(Backend::Uring).recv_bundle(false),
            Mode::Epoll => b.backend(Backend::Epoll),
        };
        let b = match flags {
            Some(f) => b.uring_flags(f),
            None => b,
        };
        let Ok(rt) = b.build() else {
            eprintln!("skipped {mode:?} flags {flags:?}: runtime unavailable");
            continue;
        };
        rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            for _ in 0..30 {
                let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let stop2 = stop.clone();
                let t = std::thread::spawn(move || {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    let chunk = pattern(64 * 1024);
                    while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                        if c.write_all(&chunk).is_err() {
                            break;
                        }
                    }
                });
                let (s, _) = l.accept().await.unwrap();
                for _ in 0..4 {
                    let rb = s.read_pooled().await.unwrap();
                    assert!(!rb.is_empty());
                }
                drop(s);
                // Let completions for the dropped receive arrive and be reaped.
                ringkit::time::sleep(std::time::Duration::from_millis(3)).await;
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                t.join().unwrap();
            }
            // Every buffer came back: a fresh stream still gets ring buffers.
            let before = ringkit::metrics();
            let data = pattern(256 * 1024);
            let sent = data.clone();
            let (s, t) = pair(move |mut c| c.write_all(&sent).unwrap()).await;
            let got = read_all(&s).await.unwrap();
            t.join().unwrap();
            assert!(got == data);
            if mode != Mode::Epoll {
                let m = ringkit::metrics().since(&before);
                assert!(
                    m.recv_buffers > 64,
                    "the ring ran dry: buffers were not returned ({m:?})"
                );
            }
        });
    }
}

macro_rules! three_ways {
    ($($case:ident),*) => {
        $(
            mod $case {
                use super::*;
                #[test]
                fn bundle() { super::$case(Mode::Bundle) }
                #[test]
                fn no_bundle() { super::$case(Mode::NoBundle) }
                #[test]
                fn epoll() { super::$case(Mode::Epoll) }
            }
        )*
    };
}

three_ways!(
    bulk,
    one_byte_at_a_time,
    read_mixed_with_pooled,
    reset_with_bundles_queued,
    dropped_streams_give_their_buffers_back,
    echo_in_batches,
    many_streams_interleaved,
    vectored_send_into_a_full_socket,
    dropped_while_the_peer_keeps_sending
);
