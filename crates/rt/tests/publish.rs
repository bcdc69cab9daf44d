//! `publish`: a thread's counters written to `PATH.<thread>` and read back
//! (summed over threads) by another process's reader.
#![cfg(feature = "publish")]

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream};
use ringkit::publish::{spawn_writer, Published};

ringkit::test_all! {
    async fn counters_reach_the_file_and_sum_over_threads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats");
        // Nothing published yet: zeros, not an error.
        assert_eq!(Published::read_all(&path), Published::default());
        // Another thread's file, as a second server thread would write it.
        let other = Published { accepted: 5, ..Published::default() };
        std::fs::write(
            dir.path().join("stats.7"),
            serde_json::to_string(&other).unwrap(),
        )
        .unwrap();
        let accepted = Rc::new(Cell::new(0u64));
        spawn_writer(path.clone(), 0, accepted.clone());
        // Some real I/O so the counters move.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        accepted.set(1);
        c.write_all(&b"hi"[..]).await.0.unwrap();
        let (n, _) = s.read(Vec::with_capacity(8)).await;
        assert_eq!(n.unwrap(), 2);
        let mine = ringkit::metrics();
        let t = Instant::now();
        let got = loop {
            let p = Published::read_all(&path);
            if p.accepted == 6 && p.metrics.syscalls() >= mine.syscalls() {
                break p;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "never published: {p:?}");
            ringkit::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(got.metrics.syscalls() > 0, "{got:?}");
        // A half-written file (the writer renames into place, so a reader
        // never sees one; a foreign one is skipped, not fatal).
        std::fs::write(dir.path().join("stats.9"), "{\"metr").unwrap();
        assert_eq!(Published::read_all(&path).accepted, 6);
        // since() never underflows when a reading is missing.
        let zero = Published::default().since(&got);
        assert_eq!(zero, Published::default());
    }
}

ringkit::test_all! {
    /// `flush` makes every writer publish at once: with unasked writes a
    /// minute apart, the figures it returns are the ones of the moment.
    async fn flush_publishes_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats");
        let accepted = Rc::new(Cell::new(0u64));
        ringkit::publish::spawn_writer_every(path.clone(), 0, accepted.clone(), Duration::from_secs(60));
        ringkit::publish::spawn_writer_every(path.clone(), 1, accepted.clone(), Duration::from_secs(60));
        // The first writes.
        let t = Instant::now();
        while Published::read_each(&path).map_or(0, |v| v.len()) < 2 {
            assert!(t.elapsed() < Duration::from_secs(5), "never published");
            ringkit::time::sleep(Duration::from_millis(5)).await;
        }
        for round in 1..=3u64 {
            accepted.set(round * 10);
            let p = path.clone();
            let flusher = std::thread::spawn(move || {
                ringkit::publish::flush(std::process::id(), &p, Duration::from_secs(10))
            });
            while !flusher.is_finished() {
                ringkit::time::sleep(Duration::from_millis(1)).await;
            }
            let got = flusher.join().unwrap().expect("flush");
            assert_eq!(got.accepted, 2 * round * 10, "round {round}");
            for (_, p) in Published::read_each(&path).unwrap() {
                assert!(p.seq > round, "seq {} after {round} flushes", p.seq);
            }
        }
    }
}
