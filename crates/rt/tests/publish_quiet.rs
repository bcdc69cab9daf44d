//! `publish` writes when the server starts and when asked, never on a
//! timer: a serving thread that publishes its counters does no periodic
//! work a user's server would not. (Its own test binary: `flush` signals
//! the whole process, and nothing here may ask.)
#![cfg(feature = "publish")]

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringkit::publish::{spawn_writer, Published};

ringkit::test_all! {
    async fn nothing_is_written_unasked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats");
        let accepted = Rc::new(Cell::new(3u64));
        spawn_writer(path.clone(), 0, accepted.clone());
        let t = Instant::now();
        let first = loop {
            if let Ok(v) = Published::read_each(&path) {
                break v[0].1;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "never published");
            ringkit::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!((first.seq, first.accepted), (1, 3));
        // Ten of the old 50 ms periods, with the counters moving.
        for _ in 0..10 {
            accepted.set(accepted.get() + 1);
            ringkit::time::sleep(Duration::from_millis(50)).await;
        }
        let now = Published::read_each(&path).unwrap()[0].1;
        assert_eq!((now.seq, now.accepted), (1, 3), "written unasked: {now:?}");
    }
}
