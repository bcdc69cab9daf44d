//! Truncate, purge and state against real files, on both backends,
//! buffered and `O_DIRECT`: what each leaves, that it survives a reopen,
//! that LSNs are reused after a truncation and never the removed bytes,
//! and bad input. (Crashes part way are the crash-state explorer's:
//! `crashcheck.rs`.)

use std::cell::Cell;
use std::io::ErrorKind;
use std::path::Path;
use std::rc::Rc;

use ringkit::fs::hook::{Fault, FsHook, FsOp};

use ringkit_log::{Log, Options};

fn opts(direct: bool) -> Options {
    Options {
        direct,
        segment_size: 64 << 10,
        max_batch: 8 << 10,
        ..Options::default()
    }
}

/// Record `tag` at LSN `lsn`: says both, so a resurrected old record is
/// told from its replacement.
fn rec(tag: &str, lsn: u64) -> Vec<u8> {
    let mut v = format!("{tag}:{lsn}:").into_bytes();
    v.resize(200 + (lsn as usize * 97) % 900, b'x');
    v
}

/// Append `tag`'s records for `lsns`, a few at a time (several batches).
async fn fill(log: &Log, tag: &str, lsns: std::ops::Range<u64>) {
    let want: Vec<u64> = lsns.collect();
    for chunk in want.chunks(5) {
        let cs: Vec<_> = chunk.iter().map(|&l| log.append(rec(tag, l))).collect();
        for (c, &l) in cs.into_iter().zip(chunk) {
            assert_eq!(c.await.unwrap(), l);
        }
    }
}

async fn all(log: &Log) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = log.first_lsn();
    loop {
        let got = log.read_from(next, 64).await.unwrap();
        let Some(&(last, _)) = got.last() else { break };
        next = last + 1;
        out.extend(got);
    }
    out
}

/// The log holds exactly `expect` (tag per LSN range), read now and after
/// a reopen, read-only and read-write.
async fn holds(dir: &Path, direct: bool, log: Log, expect: &[(&str, std::ops::Range<u64>)]) -> Log {
    let want: Vec<(u64, Vec<u8>)> = expect
        .iter()
        .flat_map(|(tag, r)| r.clone().map(move |l| (l, rec(tag, l))))
        .collect();
    let first = want.first().map(|w| w.0);
    let check = |got: Vec<(u64, Vec<u8>)>, how: &str| {
        let lsns: Vec<u64> = got.iter().map(|g| g.0).collect();
        let wl: Vec<u64> = want.iter().map(|w| w.0).collect();
        assert_eq!(lsns, wl, "{how}: LSNs");
        assert!(got == want, "{how}: payloads differ");
    };
    check(all(&log).await, "live");
    drop(log);
    let ro = Log::open_read_only(dir, opts(direct)).await.unwrap();
    check(all(&ro).await, "read-only reopen");
    drop(ro);
    let log = Log::open(dir, opts(direct)).await.unwrap();
    check(all(&log).await, "reopen");
    if let Some(f) = first {
        assert_eq!(log.first_lsn(), f);
    }
    log
}

fn segments(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".seg")
        })
        .count()
}

async fn truncate_then_reuse(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let log = Log::open(dir, opts(direct)).await.unwrap();
    // ~100 records of 200-1100 bytes: several 64 KiB segments.
    fill(&log, "a", 1..101).await;
    assert!(segments(dir) >= 2, "the test wants several segments");
    // Mid-batch (kept records stay where they are), in the last segment.
    assert_eq!(log.truncate(98).await.unwrap(), 98);
    assert_eq!(log.next_lsn(), 98);
    fill(&log, "b", 98..103).await;
    let log = holds(dir, direct, log, &[("a", 1..98), ("b", 98..103)]).await;
    // Into the first segment: the later segments go.
    log.truncate(7).await.unwrap();
    assert_eq!(segments(dir), 1);
    fill(&log, "c", 7..40).await;
    let log = holds(dir, direct, log, &[("a", 1..7), ("c", 7..40)]).await;
    // At the end: nothing. Everything: an empty log that goes on at 1.
    assert_eq!(log.truncate(40).await.unwrap(), 40);
    log.truncate(1).await.unwrap();
    assert_eq!((log.first_lsn(), log.next_lsn()), (1, 1));
    fill(&log, "d", 1..4).await;
    let log = holds(dir, direct, log, &[("d", 1..4)]).await;
    // Out of range: refused, and the log goes on.
    let e = log.truncate(9).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = log.truncate(0).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    fill(&log, "e", 4..6).await;
    let log = holds(dir, direct, log, &[("d", 1..4), ("e", 4..6)]).await;
    assert!(!dir.join("TRUNCATE").exists());
    drop(log);
}

/// Appends queued before a truncate are written (and removed), those
/// after it follow it; all resolve.
async fn truncate_in_queue_order(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let log = Log::open(dir, opts(direct)).await.unwrap();
    fill(&log, "a", 1..11).await;
    let before: Vec<_> = (11..15).map(|l| log.append(rec("a", l))).collect();
    let cut = log.truncate(9);
    let after: Vec<_> = (9..12).map(|l| log.append(rec("b", l))).collect();
    for (c, l) in before.into_iter().zip(11..) {
        assert_eq!(c.await.unwrap(), l);
    }
    assert_eq!(cut.await.unwrap(), 9);
    for (c, l) in after.into_iter().zip(9..) {
        assert_eq!(c.await.unwrap(), l);
    }
    drop(holds(dir, direct, log, &[("a", 1..9), ("b", 9..12)]).await);
}

/// Descriptors of this process on segment files that no longer have a
/// name.
fn deleted_segments_open() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| {
            let p = p.to_string_lossy();
            p.contains(".seg") && p.ends_with("(deleted)")
        })
        .count()
}

/// A purge removes names only: a read-only log opened before it (with
/// `reader`), and a hard-linked copy of the segments (with `links`), keep
/// every byte, though the log goes on through segments enough to reuse
/// the purged ones (a purge that punched holes in the unlinked files
/// zeroed both; a recycled segment would be zeroed too). Each alone, so
/// neither check hides the other.
async fn purge_leaves_other_holders_whole(direct: bool, links: bool, reader: bool) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    let bak = t.path().join("bak");
    std::fs::create_dir_all(&bak).unwrap();
    let log = Log::open(&dir, opts(direct)).await.unwrap();
    fill(&log, "a", 1..301).await;
    let mut linked = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if links && p.extension().is_some_and(|x| x == "seg") {
            let to = bak.join(p.file_name().unwrap());
            std::fs::hard_link(&p, &to).unwrap();
            linked.push((to.clone(), std::fs::read(&to).unwrap()));
        }
    }
    let ro = if reader {
        let ro = Log::open_read_only(&dir, opts(direct)).await.unwrap();
        assert_eq!(ro.read(5).await.unwrap(), rec("a", 5));
        Some(ro)
    } else {
        None
    };
    assert_eq!(log.purge(200).await.unwrap(), 200);
    fill(&log, "b", 301..700).await;
    let made = log.stats().segments_made;
    assert!(made >= 3, "{made} segments made after the purge");
    assert_eq!(
        log.stats().segments_recycled,
        0,
        "a held segment was reused"
    );
    ringkit::time::sleep(std::time::Duration::from_millis(300)).await;
    if let Some(ro) = ro {
        assert_eq!(ro.read(5).await.unwrap(), rec("a", 5), "read-only log");
        assert_eq!(ro.read_from(100, 10).await.unwrap().len(), 10);
    }
    // The purged segments' copies (the live ones were appended to).
    for (p, bytes) in linked {
        if !dir.join(p.file_name().unwrap()).exists() {
            assert!(
                std::fs::read(&p).unwrap() == bytes,
                "{} changed",
                p.display()
            );
        }
    }
}

/// Another process's open of the spare while it is being recycled (a
/// backup, `grep -r`) breaks the lease that proves the spare is the log's
/// alone: that must cost the recycling, never the process (a lease break
/// is signalled, and `SIGIO`'s default action ends a process).
async fn opens_of_the_spare_harm_nothing(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().to_path_buf();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opener = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::os::unix::fs::OpenOptionsExt;
            let mut opened = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(dir.join("spare.seg.tmp"))
                    .is_ok()
                {
                    opened += 1;
                }
            }
            opened
        })
    };
    let log = Log::open(&dir, opts(direct)).await.unwrap();
    let mut next = 1;
    for _ in 0..20 {
        fill(&log, "a", next..next + 150).await;
        next += 150;
        log.purge(next - 40).await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = opener.join().unwrap();
    let s = log.stats();
    println!("{opened} opens of the spare; {s:?}");
    assert!(s.segments_made >= 20, "{s:?}");
    drop(holds(&dir, direct, log, &[("a", next - 40..next)]).await);
}

/// The inode number of each segment file in `dir`.
fn segment_inodes(dir: &Path) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .map(|p| std::fs::metadata(p).unwrap().ino())
        .collect();
    v.sort_unstable();
    v
}

/// Segments a purge leaves, held by nothing else, become later segments
/// (the same files, zeroed in place), and the log reads back whole,
/// before and after a reopen; `close` removes any kept for later.
async fn purged_segments_are_recycled(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let log = Log::open(dir, opts(direct)).await.unwrap();
    fill(&log, "a", 1..301).await;
    let old = segment_inodes(dir);
    assert_eq!(log.purge(250).await.unwrap(), 250);
    fill(&log, "b", 301..700).await;
    let recycled = log.stats().segments_recycled;
    assert!(recycled >= 1, "{:?}", log.stats());
    let reused = segment_inodes(dir)
        .iter()
        .filter(|i| old.contains(i))
        .count();
    // The segment of LSN 250 is kept, and each recycled one is an old file.
    assert!(
        reused as u64 > recycled,
        "{reused} old files, {recycled} recycled"
    );
    let log = holds(dir, direct, log, &[("a", 250..301), ("b", 301..700)]).await;
    // Purge again: the purged segments are kept for later, then closing
    // removes them (only the log's live segments stay).
    let before = segment_inodes(dir).len();
    assert_eq!(log.purge(650).await.unwrap(), 650);
    log.close().await;
    let after = segment_inodes(dir).len();
    assert!(
        after < before,
        "{after} segments after close, {before} before"
    );
    let log = Log::open(dir, opts(direct)).await.unwrap();
    drop(holds(dir, direct, log, &[("b", 650..700)]).await);
}

/// With `recycle_segments` off, as past the segments kept for reuse.
async fn purge_prefix(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let o = Options {
        recycle_segments: false,
        ..opts(direct)
    };
    let log = Log::open(dir, o).await.unwrap();
    fill(&log, "a", 1..301).await;
    let before = segments(dir);
    assert!(before >= 3, "the test wants several segments: {before}");
    assert_eq!(log.purge(200).await.unwrap(), 200);
    assert_eq!(log.first_lsn(), 200);
    // Deleted just after the purge resolves, in the background.
    for _ in 0..100 {
        if segments(dir) < before {
            break;
        }
        ringkit::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        segments(dir) < before,
        "whole segments before 200 are deleted"
    );
    let e = log.read(199).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    // The purged segments' blocks are given back after the purge returns
    // (held open past the unlink, then released): none stays open.
    let mut open = deleted_segments_open();
    for _ in 0..100 {
        if open == 0 {
            break;
        }
        ringkit::time::sleep(std::time::Duration::from_millis(10)).await;
        open = deleted_segments_open();
    }
    assert_eq!(open, 0, "purged segments still open a second later");
    // A purge at or before the start does nothing.
    assert_eq!(log.purge(10).await.unwrap(), 200);
    let log = holds(dir, direct, log, &[("a", 200..301)]).await;
    // Past the end: the next append gets the purge's LSN.
    assert_eq!(log.purge(500).await.unwrap(), 500);
    assert_eq!((log.first_lsn(), log.next_lsn()), (500, 500));
    fill(&log, "b", 500..520).await;
    let log = holds(dir, direct, log, &[("b", 500..520)]).await;
    // A purge too far past the end (more than one hole's u32 of LSNs) is
    // refused at once, not ground through in holes; the log goes on.
    let far = ringkit::time::timeout(std::time::Duration::from_secs(5), log.purge(u64::MAX))
        .await
        .expect("a purge to u64::MAX resolves at once");
    assert_eq!(far.unwrap_err().kind(), ErrorKind::InvalidInput);
    // Truncating below the start is refused; at it empties the log.
    let e = log.truncate(499).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    log.truncate(500).await.unwrap();
    fill(&log, "c", 500..503).await;
    drop(holds(dir, direct, log, &[("c", 500..503)]).await);
}

async fn state_saved(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let log = Log::open(dir, opts(direct)).await.unwrap();
    assert_eq!(log.state(), None);
    let a = log.append(rec("a", 1));
    let s = log.save_state(&b"vote 3"[..]);
    // Queued after the append: durable after it.
    assert_eq!(a.await.unwrap(), 1);
    s.await.unwrap();
    assert_eq!(log.state().as_deref(), Some(&b"vote 3"[..]));
    log.save_state(Vec::new()).await.unwrap();
    log.save_state(&b"vote 4"[..]).await.unwrap();
    let e = log.save_state(vec![0u8; 65 << 10]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    drop(log);
    let ro = Log::open_read_only(dir, opts(direct)).await.unwrap();
    assert_eq!(ro.state().as_deref(), Some(&b"vote 4"[..]));
    let e = ro.save_state(&b"x"[..]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    let e = ro.truncate(1).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    drop(ro);
    // A damaged state is refused, never read as none.
    let mut b = std::fs::read(dir.join("STATE")).unwrap();
    let n = b.len();
    b[n - 1] ^= 1;
    std::fs::write(dir.join("STATE"), &b).unwrap();
    let e = Log::open(dir, opts(direct)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
    assert!(e.to_string().contains("STATE"), "{e}");
}

/// A truncation after a purge past the end (into its hole's successor),
/// on a log reopened direct after buffered; `check` counts the records
/// from the first LSN, and `salvage` copies exactly what the log holds.
async fn truncate_after_a_purge_then_salvage() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    let log = Log::open(&dir, opts(false)).await.unwrap();
    for i in 1..=10u64 {
        assert_eq!(log.append(format!("a{i}")).await.unwrap(), i);
    }
    assert_eq!(log.purge(30).await.unwrap(), 30); // a hole 11..30
    for i in 30..=40u64 {
        assert_eq!(log.append(format!("b{i}")).await.unwrap(), i);
    }
    drop(log);
    let log = Log::open(&dir, opts(true)).await.unwrap();
    assert_eq!(log.truncate(35).await.unwrap(), 35);
    for i in 35..=37u64 {
        assert_eq!(log.append(format!("c{i}")).await.unwrap(), i);
    }
    let e = log.truncate(29).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    drop(log);
    let rep = ringkit_log::check(&dir).await.unwrap();
    assert_eq!((rep.records, rep.error), (8, None));
    let into = t.path().join("salvaged");
    ringkit_log::salvage(&dir, &into, opts(false), None)
        .await
        .unwrap();
    let out = Log::open(&into, opts(false)).await.unwrap();
    let got: Vec<String> = out
        .read_from(30, 100)
        .await
        .unwrap()
        .iter()
        .map(|(l, p)| format!("{l}:{}", String::from_utf8_lossy(p)))
        .collect();
    assert_eq!(
        got,
        ["30:b30", "31:b31", "32:b32", "33:b33", "34:b34", "35:c35", "36:c36", "37:c37"]
    );
}

/// Counts the removals issued once `after_drop` is set.
struct Removals {
    after_drop: Cell<bool>,
    seen: Cell<u32>,
}

impl FsHook for Removals {
    fn before(&self, op: &FsOp<'_>) -> Option<Fault> {
        if matches!(op, FsOp::Remove { .. }) && self.after_drop.get() {
            self.seen.set(self.seen.get() + 1);
        }
        None
    }
}

/// A dropped log touches no file: the removals a purge left to run in the
/// background end with it (the next open deletes what is left). Else they
/// would unlink by name in a directory that may hold another log by then
/// (removed and made again, a segment starting at the same LSN).
async fn dropped_log_removes_nothing(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    let log = Log::open(&dir, opts(direct)).await.unwrap();
    fill(&log, "a", 1..301).await;
    let before = segments(&dir);
    assert!(before >= 3, "the test wants several segments: {before}");
    let hook = Rc::new(Removals {
        after_drop: Cell::new(false),
        seen: Cell::new(0),
    });
    let prev = ringkit::fs::hook::set_hook(Some(hook.clone()));
    // Two purges: the second's removals wait for the first's.
    assert_eq!(log.purge(150).await.unwrap(), 150);
    assert_eq!(log.purge(250).await.unwrap(), 250);
    drop(log);
    hook.after_drop.set(true);
    ringkit::time::sleep(std::time::Duration::from_millis(100)).await;
    ringkit::fs::hook::set_hook(prev);
    assert_eq!(
        hook.seen.get(),
        0,
        "removals issued after the log was dropped"
    );
    // The next open finishes the purge.
    let log = Log::open(&dir, opts(direct)).await.unwrap();
    assert_eq!(log.first_lsn(), 250);
    assert!(segments(&dir) < before);
    holds(&dir, direct, log, &[("a", 250..301)]).await;
}

ringkit::test_all! {
    async fn a_dropped_log_removes_nothing_after_a_purge() {
        dropped_log_removes_nothing(false).await;
        dropped_log_removes_nothing(true).await;
    }
    async fn a_truncation_after_a_purge_survives_check_and_salvage() {
        truncate_after_a_purge_then_salvage().await;
    }
    async fn truncate_removes_the_suffix_and_its_lsns_are_reused() {
        truncate_then_reuse(false).await;
        truncate_then_reuse(true).await;
    }
    async fn truncate_runs_in_queue_order_with_the_appends() {
        truncate_in_queue_order(false).await;
        truncate_in_queue_order(true).await;
    }
    async fn a_purge_leaves_readers_and_hard_links_whole() {
        for (links, reader) in [(true, false), (false, true)] {
            purge_leaves_other_holders_whole(false, links, reader).await;
            purge_leaves_other_holders_whole(true, links, reader).await;
        }
    }
    async fn opens_of_the_spare_by_others_harm_nothing() {
        opens_of_the_spare_harm_nothing(false).await;
        opens_of_the_spare_harm_nothing(true).await;
    }
    async fn purged_segments_become_later_segments() {
        purged_segments_are_recycled(false).await;
        purged_segments_are_recycled(true).await;
    }
    async fn purge_removes_the_prefix_and_may_skip_past_the_end() {
        purge_prefix(false).await;
        purge_prefix(true).await;
    }
    async fn state_is_saved_in_order_and_damage_is_refused() {
        state_saved(false).await;
        state_saved(true).await;
    }
}
