//! Thread-per-core launch, a tiny ring (full SQ, CQ overflow), incoming().

use std::io::{Read, Write};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ringkit::fs::File;
use ringkit::net::TcpListener;
use ringkit::Backend;

fn runtime(backend: Backend, entries: u32) -> Option<ringkit::Runtime> {
    match ringkit::Builder::new()
        .backend(backend)
        .entries(entries)
        .build()
    {
        Ok(rt) => Some(rt),
        Err(e) if backend == Backend::Uring => {
            eprintln!("skipped: io_uring unavailable: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// 600 concurrent file reads on a ring of 4 SQ entries (CQ 16): the SQ fills
/// (submit and retry) and the CQ overflows (NODROP flush); every read must
/// complete with the right bytes.
fn tiny_ring(backend: Backend) {
    let Some(rt) = runtime(backend, 4) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let data: Vec<u8> = (0..600u32 * 8).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let data = Rc::new(data);
    rt.block_on(async {
        let f = Rc::new(File::open(&path).await.unwrap());
        let mut handles = Vec::new();
        for i in 0..600u64 {
            let (f, data) = (f.clone(), data.clone());
            handles.push(ringkit::spawn(async move {
                let (res, buf) = f.read_at(Vec::with_capacity(8), i * 8).await;
                assert_eq!(res.unwrap(), 8);
                assert_eq!(&buf[..], &data[i as usize * 8..i as usize * 8 + 8]);
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        let m = ringkit::metrics();
        eprintln!("{backend}: {m}");
        if backend == Backend::Uring {
            assert!(m.sqes_submitted >= 600);
            // 600 completions into a 16-entry CQ between two reaps: it must overflow.
            assert!(m.cq_overflows > 0, "expected CQ overflow: {m}");
            assert_eq!(rt_entries(), (4, 16));
        }
        Rc::try_unwrap(f).unwrap().close().await.unwrap();
    });
}

fn rt_entries() -> (u32, u32) {
    ringkit::backend_report().expect("inside a runtime").entries
}

#[test]
fn tiny_ring_uring() {
    tiny_ring(Backend::Uring);
}

#[test]
fn tiny_ring_epoll() {
    tiny_ring(Backend::Epoll);
}

/// Two runtimes on two threads, each with its own SO_REUSEPORT listener on
/// the same port, serve every client; connections spread over both.
fn launch_reuseport(backend: Backend) {
    if backend == Backend::Uring && runtime_probe().is_err() {
        eprintln!("skipped: io_uring unavailable");
        return;
    }
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let served = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let tx = Arc::new(std::sync::Mutex::new(tx));
    let served2 = served.clone();
    let cfg = ringkit::LaunchConfig::new(2)
        .backend(backend)
        .cpus(vec![0, 1]);
    let _handles = ringkit::launch(cfg, move |_i| {
        let served = served2.clone();
        let tx = tx.clone();
        async move {
            let l = TcpListener::bind_reuseport(("127.0.0.1", port)).unwrap();
            let _ = tx.lock().unwrap().send(());
            let mut incoming = l.incoming();
            while let Some(s) = incoming.next().await {
                let s = s.unwrap();
                let served = served.clone();
                ringkit::spawn(async move {
                    let (res, buf) = s.read(Vec::with_capacity(16)).await;
                    res.unwrap();
                    s.write_all(buf).await.0.unwrap();
                    served.fetch_add(1, Ordering::SeqCst);
                });
            }
        }
    })
    .unwrap();
    rx.recv().unwrap();
    rx.recv().unwrap();
    for i in 0..64u8 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(&[i; 5]).unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
        assert_eq!(b, [i; 5]);
    }
    // The server counts after its write, so the last count may trail our read.
    let t = std::time::Instant::now();
    while served.load(Ordering::SeqCst) < 64 && t.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(served.load(Ordering::SeqCst), 64);
    // The server threads run forever; the test process exits around them.
}

fn runtime_probe() -> std::io::Result<()> {
    std::thread::spawn(|| {
        ringkit::Builder::new()
            .backend(Backend::Uring)
            .build()
            .map(drop)
    })
    .join()
    .unwrap()
}

#[test]
fn launch_reuseport_uring() {
    launch_reuseport(Backend::Uring);
}

#[test]
fn launch_reuseport_epoll() {
    launch_reuseport(Backend::Epoll);
}

/// A read and its linked timeout go into the ring together or not at all:
/// on a ring with room for one SQE the pair cannot fit, and the read says
/// so, instead of running without its timeout (the pair used to be split
/// across two submissions: the read then waited forever).
#[test]
fn a_linked_timeout_is_never_split_from_its_read() {
    let Some(rt) = runtime(Backend::Uring, 1) else {
        return;
    };
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().await.unwrap();
        let got = ringkit::time::timeout(
            std::time::Duration::from_secs(3),
            s.read_timeout(Vec::with_capacity(64), std::time::Duration::from_millis(50)),
        )
        .await;
        let (r, _) = got.expect("the read ran without its linked timeout and hung");
        let e = r.expect_err("no data was sent");
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::TimedOut
            ),
            "{e}"
        );
    });
}
