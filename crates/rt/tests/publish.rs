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
        // The first write, then one on request.
        let t = Instant::now();
        while Published::read_each(&path).is_err() {
            assert!(t.elapsed() < Duration::from_secs(5), "never published");
            ringkit::time::sleep(Duration::from_millis(5)).await;
        }
        let got = flushed(&path).await;
        assert_eq!(got.accepted, 1, "{got:?}");
        assert!(got.metrics.syscalls() >= mine.syscalls(), "{got:?} {mine:?}");
        assert!(got.metrics.syscalls() > 0, "{got:?}");
        // Another thread's file, as a second server thread would write it:
        // the reader sums them.
        let other = Published { accepted: 5, ..Published::default() };
        std::fs::write(
            dir.path().join("stats.7"),
            serde_json::to_string(&other).unwrap(),
        )
        .unwrap();
        assert_eq!(Published::read_all(&path).accepted, 6);
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
    /// `flush` makes every writer publish at once: the figures it returns
    /// are the ones of the moment.
    async fn flush_publishes_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats");
        let accepted = Rc::new(Cell::new(0u64));
        spawn_writer(path.clone(), 0, accepted.clone());
        spawn_writer(path.clone(), 1, accepted.clone());
        // The first writes.
        let t = Instant::now();
        while Published::read_each(&path).map_or(0, |v| v.len()) < 2 {
            assert!(t.elapsed() < Duration::from_secs(5), "never published");
            ringkit::time::sleep(Duration::from_millis(5)).await;
        }
        for round in 1..=3u64 {
            accepted.set(round * 10);
            let got = flushed(&path).await;
            assert_eq!(got.accepted, 2 * round * 10, "round {round}");
            for (_, p) in Published::read_each(&path).unwrap() {
                assert!(p.seq > round, "seq {} after {round} flushes", p.seq);
            }
        }
    }
}

/// `flush` from another thread, while this one's runtime keeps running.
async fn flushed(path: &std::path::Path) -> Published {
    let p = path.to_path_buf();
    let flusher = std::thread::spawn(move || {
        ringkit::publish::flush(std::process::id(), &p, Duration::from_secs(10))
    });
    while !flusher.is_finished() {
        ringkit::time::sleep(Duration::from_millis(1)).await;
    }
    flusher.join().unwrap().expect("flush")
}
