//! The flusher when a rule of its own breaks.

use std::cell::Cell;
use std::io;
use std::time::Duration;

use crate::{Log, Options};

thread_local! {
    /// Make the flusher panic at its next batch, as a broken assertion of
    /// the pipeline would.
    pub(super) static BREAK_A_RULE: Cell<bool> = const { Cell::new(false) };
}

ringkit::test_all! {
    async fn a_flusher_that_breaks_a_rule_fails_the_log_instead_of_hanging_it() {
        let t = tempfile::tempdir().unwrap();
        let opts = Options {
            segment_size: 64 << 10,
            max_batch: 16 << 10,
            ..Options::default()
        };
        let log = Log::open(t.path(), opts).await.unwrap();
        assert_eq!(log.append(&b"before"[..]).await.unwrap(), 1);
        BREAK_A_RULE.with(|b| b.set(true));
        let wait = Duration::from_secs(5);
        let broken = ringkit::time::timeout(wait, log.append(&b"broken"[..]))
            .await
            .expect("the append in hand fails, it does not hang");
        assert!(broken.is_err());
        // Every later append fails at once: the log is failed until it is
        // opened again.
        let later = ringkit::time::timeout(wait, log.append(&b"later"[..]))
            .await
            .expect("a later append fails, it does not hang")
            .unwrap_err();
        assert!(later.to_string().contains("open it again"), "{later}");
        assert_eq!(later.kind(), io::ErrorKind::Other);
        drop(log);
        let log = Log::open(t.path(), Options { segment_size: 64 << 10, max_batch: 16 << 10, ..Options::default() })
            .await
            .unwrap();
        assert_eq!(log.read(1).await.unwrap(), b"before");
        assert_eq!(log.append(&b"after"[..]).await.unwrap(), 2);
    }
}
