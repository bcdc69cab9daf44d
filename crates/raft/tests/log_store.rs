//! What openraft's suite does not check: that [`LogStore`] survives a
//! reopen (truncation, purge, vote and committed index are on disk, not
//! only in memory), that entries are readable as soon as `append`
//! returns, and that the callback fires only once they are durable. On
//! both backends.

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::testing::{blank_ent, log_id};
use openraft::type_config::alias::VoteOf;
use openraft::{LogState, RaftLogReader};
use openraft_rt::{AsyncRuntime, Oneshot};
use ringkit_log::Options;
use ringkit_raft::kv::KvConfig;
use ringkit_raft::{LogStore, RingkitRuntime};

type Store = LogStore<KvConfig>;

fn opts() -> Options {
    Options {
        segment_size: 64 << 10,
        max_batch: 16 << 10,
        ..Options::default()
    }
}

/// Append `term`'s blank entries `from..to`; returns when durable.
async fn append(store: &mut Store, term: u64, from: u64, to: u64) {
    let (tx, rx) = <RingkitRuntime as AsyncRuntime>::Oneshot::channel();
    let entries: Vec<_> = (from..to)
        .map(|i| blank_ent::<KvConfig>(term, 1, i))
        .collect();
    store.append(entries, IOFlushed::signal(tx)).await.unwrap();
    rx.await.unwrap().unwrap();
}

async fn terms(store: &mut Store, from: u64, to: u64) -> Vec<(u64, u64)> {
    let mut r = store.get_log_reader().await;
    r.try_get_log_entries(from..to)
        .await
        .unwrap()
        .iter()
        .map(|e| (e.index(), e.log_id().leader_id.term))
        .collect()
}

fn expect(ranges: &[(u64, std::ops::Range<u64>)]) -> Vec<(u64, u64)> {
    ranges
        .iter()
        .flat_map(|(t, r)| r.clone().map(move |i| (i, *t)))
        .collect()
}

async fn survives_reopen() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    let mut s = Store::open(&dir, opts()).await.unwrap();
    append(&mut s, 1, 0, 40).await;
    let vote = VoteOf::<KvConfig>::new(3, 2);
    s.save_vote(&vote).await.unwrap();
    s.save_committed(Some(log_id::<KvConfig>(1, 1, 10)))
        .await
        .unwrap();
    s.truncate_after(Some(log_id::<KvConfig>(1, 1, 19)))
        .await
        .unwrap();
    append(&mut s, 2, 20, 30).await;
    s.purge(log_id::<KvConfig>(1, 1, 5)).await.unwrap();
    let want = expect(&[(1, 6..20), (2, 20..30)]);
    assert_eq!(terms(&mut s, 0, 100).await, want);
    drop(s);

    let mut s = Store::open(&dir, opts()).await.unwrap();
    assert_eq!(terms(&mut s, 0, 100).await, want, "after reopen");
    assert_eq!(
        s.get_log_state().await.unwrap(),
        LogState {
            last_purged_log_id: Some(log_id::<KvConfig>(1, 1, 5)),
            last_log_id: Some(log_id::<KvConfig>(2, 1, 29)),
        }
    );
    assert_eq!(
        s.get_log_reader().await.read_vote().await.unwrap(),
        Some(vote)
    );
    assert_eq!(
        s.read_committed().await.unwrap(),
        Some(log_id::<KvConfig>(1, 1, 10))
    );
    // A purge past the end: the log goes on after it, also once reopened.
    s.purge(log_id::<KvConfig>(3, 1, 100)).await.unwrap();
    drop(s);
    let mut s = Store::open(&dir, opts()).await.unwrap();
    assert_eq!(terms(&mut s, 0, 200).await, vec![]);
    assert_eq!(
        s.get_log_state().await.unwrap().last_log_id,
        Some(log_id::<KvConfig>(3, 1, 100))
    );
    append(&mut s, 3, 101, 105).await;
    // A purge past u32::MAX LSNs beyond the end is refused and saves
    // nothing (the store still opens).
    let far = s.purge(log_id::<KvConfig>(3, 1, u64::MAX - 1)).await;
    assert_eq!(far.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    drop(s);
    let mut s = Store::open(&dir, opts()).await.unwrap();
    assert_eq!(terms(&mut s, 0, 200).await, expect(&[(3, 101..105)]));
}

/// The committed id as a read-only open of `dir` sees it on disk now.
async fn committed_on_disk(dir: &std::path::Path) -> Option<u64> {
    let log = ringkit_log::Log::open_read_only(dir, opts()).await.unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&log.state().unwrap()).unwrap();
    meta["committed"]["index"].as_u64()
}

async fn committed_saved_lazily() {
    use std::time::Duration;
    let (t1, t2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A long interval: not on disk after the calls; a vote carries the
    // latest one with it.
    let dir = t1.path().join("log");
    let mut s = Store::open(&dir, opts()).await.unwrap();
    s.set_committed_every(Duration::from_secs(3600));
    append(&mut s, 1, 0, 40).await;
    s.save_vote(&VoteOf::<KvConfig>::new(1, 1)).await.unwrap();
    for i in [10, 12] {
        s.save_committed(Some(log_id::<KvConfig>(1, 1, i)))
            .await
            .unwrap();
    }
    assert_eq!(committed_on_disk(&dir).await, None, "not saved at once");
    s.save_vote(&VoteOf::<KvConfig>::new(2, 1)).await.unwrap();
    assert_eq!(committed_on_disk(&dir).await, Some(12), "with the vote");

    // The default, 50 ms: on disk soon after, the latest one.
    let dir = t2.path().join("log");
    let mut s = Store::open(&dir, opts()).await.unwrap();
    append(&mut s, 1, 0, 40).await;
    for i in [20, 22] {
        s.save_committed(Some(log_id::<KvConfig>(1, 1, i)))
            .await
            .unwrap();
    }
    ringkit::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        committed_on_disk(&dir).await,
        Some(22),
        "saved within 50 ms"
    );

    // Zero: durable when the call returns.
    s.set_committed_every(Duration::ZERO);
    s.save_committed(Some(log_id::<KvConfig>(1, 1, 30)))
        .await
        .unwrap();
    assert_eq!(committed_on_disk(&dir).await, Some(30), "at once");
    drop(s);
    let mut s = Store::open(&dir, opts()).await.unwrap();
    assert_eq!(
        s.read_committed().await.unwrap(),
        Some(log_id::<KvConfig>(1, 1, 30))
    );
}

/// A pending committed save must not keep the log open once the store is
/// dropped: a reopen right after works at once, whatever the interval.
async fn dropped_store_lets_go_of_the_log() {
    use std::time::{Duration, Instant};
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    let mut s = Store::open(&dir, opts()).await.unwrap();
    s.set_committed_every(Duration::from_secs(5));
    append(&mut s, 1, 0, 10).await;
    s.save_committed(Some(log_id::<KvConfig>(1, 1, 5)))
        .await
        .unwrap();
    drop(s);
    let t0 = Instant::now();
    let mut s = Store::open(&dir, opts()).await.unwrap();
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "the reopen waited {:?} for the old store's log",
        t0.elapsed()
    );
    // The pending save went with the store (as in a crash): older, never newer.
    assert_eq!(s.read_committed().await.unwrap(), None);
    assert_eq!(terms(&mut s, 0, 100).await, expect(&[(1, 0..10)]));
}

/// Fails every rename onto `STATE` while armed.
struct FailState(std::cell::Cell<bool>);

impl ringkit::fs::hook::FsHook for FailState {
    fn before(&self, op: &ringkit::fs::hook::FsOp<'_>) -> Option<ringkit::fs::hook::Fault> {
        match op {
            ringkit::fs::hook::FsOp::Rename { to, .. } if self.0.get() && to.ends_with("STATE") => {
                Some(ringkit::fs::hook::Fault::Fail(std::io::Error::other(
                    "injected: STATE rename",
                )))
            }
            _ => None,
        }
    }
}

/// A committed id's save that fails in the background is the error of
/// the next write openraft asks for, whichever it is.
async fn failed_background_save_is_reported() {
    use std::time::Duration;
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    let mut s = Store::open(&dir, opts()).await.unwrap();
    s.set_committed_every(Duration::from_millis(20));
    append(&mut s, 1, 0, 10).await;
    let hook = std::rc::Rc::new(FailState(std::cell::Cell::new(true)));
    ringkit::fs::hook::set_hook(Some(hook.clone()));
    s.save_committed(Some(log_id::<KvConfig>(1, 1, 5)))
        .await
        .unwrap();
    ringkit::time::sleep(Duration::from_millis(300)).await;
    hook.0.set(false);
    ringkit::fs::hook::set_hook(None);
    // A truncation that has nothing to cut still reports it.
    let e = s
        .truncate_after(Some(log_id::<KvConfig>(1, 1, 9)))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("injected"), "{e}");
}

async fn readable_before_durable() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    let mut s = Store::open(&dir, opts()).await.unwrap();
    // The first append on an empty log may start anywhere.
    append(&mut s, 1, 5, 8).await;
    let (tx, mut rx) = <RingkitRuntime as AsyncRuntime>::Oneshot::channel();
    let entries: Vec<_> = (8..20).map(|i| blank_ent::<KvConfig>(1, 1, i)).collect();
    s.append(entries, IOFlushed::signal(tx)).await.unwrap();
    // Not durable yet (the flusher has not run), but readable.
    assert!(s.log().durable_lsn() < 20);
    assert!(futures_util::poll!(&mut rx).is_pending());
    assert_eq!(terms(&mut s, 0, 100).await, expect(&[(1, 5..20)]));
    rx.await.unwrap().unwrap();
    assert_eq!(s.log().durable_lsn(), 20);
    // A hole or an overwrite without truncate_after is refused.
    let (tx, _rx) = <RingkitRuntime as AsyncRuntime>::Oneshot::channel();
    let e = s
        .append([blank_ent::<KvConfig>(1, 1, 25)], IOFlushed::signal(tx))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    // A refused append queues none of its entries (20 would fit; 22 not).
    let (tx, _rx) = <RingkitRuntime as AsyncRuntime>::Oneshot::channel();
    let two = [
        blank_ent::<KvConfig>(1, 1, 20),
        blank_ent::<KvConfig>(1, 1, 22),
    ];
    let e = s.append(two, IOFlushed::signal(tx)).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    append(&mut s, 1, 20, 21).await;
    drop(s);
    let mut s = Store::open(&dir, opts()).await.unwrap();
    assert_eq!(terms(&mut s, 0, 100).await, expect(&[(1, 5..21)]));
}

/// Reads while appends become durable: every read of `0..next` is whole
/// and in order (entries leave the in-memory tail as they become durable,
/// possibly while a read waits on the file).
async fn read_while_becoming_durable(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let opts = Options {
        direct,
        segment_size: 8 << 20,
        max_batch: 4096,
        ..Options::default()
    };
    let mut s = Store::open(t.path().join("log"), opts).await.unwrap();
    let mut r = s.get_log_reader().await;
    let (mut bad, mut reads, mut next) = (0, 0, 0u64);
    for _ in 0..20 {
        let mut rxs = Vec::new();
        for _ in 0..200 {
            let (tx, rx) = <RingkitRuntime as AsyncRuntime>::Oneshot::channel();
            let e = vec![blank_ent::<KvConfig>(1, 1, next)];
            s.append(e, IOFlushed::signal(tx)).await.unwrap();
            next += 1;
            rxs.push(rx);
        }
        for _ in 0..5 {
            reads += 1;
            let got = r.try_get_log_entries(0..next).await.unwrap();
            let idx: Vec<u64> = got.iter().map(|e| e.index()).collect();
            bad += usize::from(idx != (0..next).collect::<Vec<_>>());
        }
        for rx in rxs {
            rx.await.unwrap().unwrap();
        }
    }
    assert_eq!(
        bad, 0,
        "{bad} of {reads} reads short or with a gap (direct {direct})"
    );
}

ringkit::test_all! {
    async fn reads_are_whole_while_appends_become_durable() {
        read_while_becoming_durable(false).await;
        read_while_becoming_durable(true).await;
    }
    async fn truncation_purge_vote_and_committed_survive_a_reopen() {
        survives_reopen().await;
    }
    async fn the_committed_id_is_saved_within_its_interval_or_at_once() {
        committed_saved_lazily().await;
    }
    async fn a_dropped_store_lets_go_of_its_log_at_once() {
        dropped_store_lets_go_of_the_log().await;
    }
    async fn a_failed_background_save_is_the_next_writes_error() {
        failed_background_save_is_reported().await;
    }
    async fn appended_entries_are_readable_before_they_are_durable() {
        readable_before_durable().await;
    }
}
