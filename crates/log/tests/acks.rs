//! What each append's `Commit` resolves to, through the log's one
//! acknowledgement table (`ack.rs`), on both backends: its own LSN in any
//! order of awaiting, with commits dropped and awaited from other tasks;
//! edits through the same table; "closed" for what a dropped log never
//! wrote; and `Commit` is not `Send` (it shares the log's table).

use std::future::Future;

use ringkit_log::{Log, Options};

fn small() -> Options {
    Options {
        segment_size: 64 << 10,
        max_batch: 16 << 10,
        ..Options::default()
    }
}

ringkit::test_all! {
    async fn dropped_log_fails_queued_commits_closed() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        let a = log.append(&b"a"[..]);
        let b = log.append(&b"b"[..]);
        drop(log);
        for c in [a, b] {
            let e = c.await.expect_err("queued, never written");
            assert!(e.to_string().contains("closed"), "{e}");
        }
    }

    async fn dropped_log_keeps_in_flight_commits() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        let a = log.append(&b"a"[..]);
        ringkit::yield_now().await; // the flusher takes it
        let b = log.append(&b"b"[..]);
        drop(log);
        assert_eq!(a.await.unwrap(), 1);
        let _ = b.await; // queued after: closed or written
    }

    async fn each_commit_gets_its_own_lsn_in_any_order_and_with_drops() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        let first = log.append(&b"x"[..]);
        let mut cs: Vec<_> = (0..3000u32).map(|i| (i, log.append(i.to_le_bytes().to_vec()))).collect();
        // Every third dropped, the rest awaited in reverse, the first last.
        let mut kept = Vec::new();
        for (i, c) in cs.drain(..) { if i % 3 == 0 { drop(c) } else { kept.push((i, c)) } }
        // Some polled from another task.
        let mut handles = Vec::new();
        for (i, c) in kept.drain(..).rev() {
            if i % 7 == 0 {
                handles.push(ringkit::spawn(async move { (i, c.await.unwrap()) }));
            } else {
                assert_eq!(c.await.unwrap(), 2 + u64::from(i), "record {i}");
            }
        }
        for h in handles { let (i, l) = h.await.unwrap(); assert_eq!(l, 2 + u64::from(i)); }
        assert_eq!(first.await.unwrap(), 1);
        let later = log.append(&b"y"[..]);
        assert_eq!(later.await.unwrap(), 3002);
        // Edits return their own values through the same table.
        let s = log.save_state(&b"st"[..]);
        let p = log.purge(10);
        let tr = log.truncate(3002);
        let after = log.append(&b"z"[..]);
        assert_eq!(after.await.unwrap(), 3002);
        assert_eq!(tr.await.unwrap(), 3002);
        assert_eq!(p.await.unwrap(), 10);
        assert_eq!(s.await.unwrap(), 0);
        // Purge past the end: its hole has no commit.
        let p = log.purge(5000);
        let a = log.append(&b"w"[..]);
        assert_eq!(p.await.unwrap(), 5000);
        assert_eq!(a.await.unwrap(), 5000);
    }

    async fn commit_polled_then_awaited_on_another_task() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        let mut c = log.append(&b"a"[..]);
        let pending = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::pin::Pin::new(&mut c).poll(cx).is_pending())
        })
        .await;
        assert!(pending);
        let h = ringkit::spawn(c);
        // A stale waker (the first task's) would leave it pending for good.
        let got = ringkit::time::timeout(std::time::Duration::from_secs(10), h)
            .await
            .expect("the commit woke the task that awaits it now");
        assert_eq!(got.unwrap().unwrap(), 1);
    }

    async fn a_dropped_commit_at_the_front_leaves_the_next_its_own_lsn() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        drop(log.append(&b"a"[..]));
        let b = log.append(&b"b"[..]);
        assert_eq!(b.await.unwrap(), 2);
        drop(log.append(&b"c"[..]));
        let d = log.truncate(4);
        assert_eq!(d.await.unwrap(), 4);
    }
}

/// `Commit` is not `Send`: it holds the log's table (`Rc`). The check
/// compiles only while that holds (`Ambiguous` has two impls for a `Send`
/// type, so the item could not be named).
#[test]
fn commit_is_not_send() {
    trait Ambiguous<A> {
        fn item() {}
    }
    impl<T: ?Sized> Ambiguous<()> for T {}
    #[allow(dead_code)]
    struct IfSend;
    impl<T: ?Sized + Send> Ambiguous<IfSend> for T {}
    <ringkit_log::Commit as Ambiguous<_>>::item();
}
