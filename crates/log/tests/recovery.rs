//! The defects an outside review reproduced, each a test that failed on the
//! format-1 log (both backends, buffered and `O_DIRECT`):
//!
//! 1. one flipped bit in acknowledged records erased every later record;
//! 2. reading a log (`dump`) wrote to it;
//! 3. a missing first segment opened as a log that starts later;
//!
//! and what replaces them: a refusal that names the segment and offset and
//! writes nothing, read-only opening beside a live writer, `check`, and
//! `salvage` into a new log. (Item 3 of the review, `log bench` deleting a
//! live log, is tested with the CLI in `crates/cli/tests/log.rs`.)

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use ringkit_log::{Log, Options};

fn opts(direct: bool) -> Options {
    Options {
        direct,
        segment_size: 256 << 10,
        max_batch: 16 << 10,
        ..Options::default()
    }
}

fn rec(i: u64) -> Vec<u8> {
    (0..200 + i % 300).map(|k| (k ^ (i * 31)) as u8).collect()
}

/// Every file of `dir` and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let d = std::fs::read(&p).unwrap();
            (p, d)
        })
        .collect()
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}

/// 200 records, each awaited alone (200 batches, each synced).
async fn two_hundred(dir: &Path, direct: bool) -> Log {
    let log = Log::open(dir, opts(direct)).await.unwrap();
    for i in 1..=200 {
        assert_eq!(log.append(rec(i)).await.unwrap(), i);
    }
    log
}

/// The segment that holds record `lsn`'s payload, its bytes, and where.
fn find(dir: &Path, lsn: u64) -> (PathBuf, Vec<u8>, usize) {
    let needle = rec(lsn);
    for seg in segments(dir) {
        let data = std::fs::read(&seg).unwrap();
        if let Some(at) = data.windows(needle.len()).position(|w| w == needle) {
            return (seg, data, at);
        }
    }
    panic!("record {lsn} not on disk");
}

async fn a_flipped_bit_in_acknowledged_records_is_refused_not_erased(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    drop(two_hundred(t.path(), direct).await);
    let (seg, mut data, at) = find(t.path(), 3);
    let seg = &seg;
    data[at + 5] ^= 0x10;
    std::fs::write(seg, &data).unwrap();
    let before = snapshot(t.path());
    for read_only in [false, true] {
        let e = if read_only {
            Log::open_read_only(t.path(), opts(direct))
                .await
                .unwrap_err()
        } else {
            Log::open(t.path(), opts(direct)).await.unwrap_err()
        };
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
        let msg = e.to_string();
        let name = seg.file_name().unwrap().to_str().unwrap();
        assert!(
            msg.contains(name) && msg.contains("offset") && msg.contains("record 3"),
            "{msg}"
        );
    }
    // Nothing written: every byte of every file is as it was (LOCK too).
    assert_eq!(snapshot(t.path()), before);
    // check reports it; salvage copies the readable records out.
    let r = ringkit_log::check(t.path()).await.unwrap();
    assert!(
        r.error.is_some() && r.segments[0].tail.as_ref().unwrap().starts_with("CORRUPT"),
        "{r:?}"
    );
    let out = tempfile::tempdir().unwrap();
    let into = out.path().join("salvaged");
    // Every readable record at its LSN; the lost one a hole, never reused.
    let s = ringkit_log::salvage(t.path(), &into, opts(direct), None)
        .await
        .unwrap();
    assert_eq!(
        (s.copied, s.holes.clone(), s.next),
        (199, vec![(3, 1)], 201)
    );
    let log = Log::open(&into, opts(direct)).await.unwrap();
    assert_eq!(log.read(2).await.unwrap(), rec(2));
    let e = log.read(3).await.unwrap_err();
    assert!(e.to_string().contains("lost"), "{e}");
    assert_eq!(log.read(4).await.unwrap(), rec(4));
    assert_eq!(log.read(200).await.unwrap(), rec(200));
    let got = log.read_from(1, 10).await.unwrap();
    let lsns: Vec<u64> = got.iter().map(|(l, _)| *l).collect();
    assert_eq!(lsns, [1, 2]);
    let got = log.read_from(3, 3).await.unwrap();
    assert_eq!(got.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [4, 5, 6]);
    assert_eq!(log.append(&b"after"[..]).await.unwrap(), 201);
    drop(log);
    // And after a reopen (the hole is on disk).
    let log = Log::open(&into, opts(direct)).await.unwrap();
    assert!(log.read(3).await.is_err());
    assert_eq!(log.read(201).await.unwrap(), b"after");
    drop(log);
    assert_eq!(snapshot(t.path()), before, "salvage only reads");
}

async fn reading_writes_nothing_even_beside_a_live_writer(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let log = two_hundred(t.path(), direct).await;
    // The writer holds the log open (and its LOCK); a reader opens anyway.
    let before = snapshot(t.path());
    let ro = Log::open_read_only(t.path(), opts(direct)).await.unwrap();
    assert_eq!(ro.durable_lsn(), 200);
    assert_eq!(ro.read(200).await.unwrap(), rec(200));
    assert_eq!(
        ro.append(&b"no"[..]).await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    assert_eq!(snapshot(t.path()), before);
    drop(ro);
    // A torn tail: read-only reads to before it and leaves it in place.
    drop(log);
    // A torn last batch: the sector holding record 200's payload start was
    // never written (the batch's part of it reads as zeros).
    let (seg, mut data, at) = find(t.path(), 200);
    let batch = at - 16 - 32;
    let sector = (at + 3) / 512 * 512;
    data[sector.max(batch)..sector + 512].fill(0);
    std::fs::write(&seg, &data).unwrap();
    let before = snapshot(t.path());
    let ro = Log::open_read_only(t.path(), opts(direct)).await.unwrap();
    assert_eq!(ro.durable_lsn(), 199);
    drop(ro);
    assert_eq!(snapshot(t.path()), before);
    // The read-write open clears it (the last batch: never acknowledged).
    let log = Log::open(t.path(), opts(direct)).await.unwrap();
    assert_eq!(log.durable_lsn(), 199);
}

async fn a_missing_extra_or_foreign_segment_is_refused(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let log = Log::open(
        t.path(),
        Options {
            segment_size: 64 << 10,
            ..opts(direct)
        },
    )
    .await
    .unwrap();
    for i in 1..=600 {
        drop(log.append(rec(i)));
    }
    log.close().await;
    let segs = segments(t.path());
    assert!(segs.len() >= 3, "{segs:?}");
    let small = Options {
        segment_size: 64 << 10,
        ..opts(direct)
    };
    // The first segment gone.
    let first = std::fs::read(&segs[0]).unwrap();
    std::fs::remove_file(&segs[0]).unwrap();
    let e = Log::open(t.path(), small.clone()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
    assert!(e.to_string().contains("missing"), "{e}");
    std::fs::write(&segs[0], &first).unwrap();
    // A segment of another log, under a name that fits.
    let other = tempfile::tempdir().unwrap();
    let o = Log::open(other.path(), small.clone()).await.unwrap();
    o.append(&b"x"[..]).await.unwrap();
    drop(o);
    let middle = std::fs::read(&segs[1]).unwrap();
    std::fs::copy(&segments(other.path())[0], &segs[1]).unwrap();
    let e = Log::open(t.path(), small.clone()).await.unwrap_err();
    assert!(e.to_string().contains("another log"), "{e}");
    std::fs::write(&segs[1], &middle).unwrap();
    // An extra segment past the end.
    let extra = t.path().join(format!("{:020}.seg", 100_000));
    std::fs::copy(&segs[2], &extra).unwrap();
    let e = Log::open(t.path(), small.clone()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
    std::fs::remove_file(&extra).unwrap();
    // Put back, it opens with everything.
    let log = Log::open(t.path(), small).await.unwrap();
    assert_eq!(log.durable_lsn(), 600);
    assert_eq!(log.read(1).await.unwrap(), rec(1));
}

/// Salvage's edges: a damaged record inside a batch of many (the others
/// are kept), lost LSNs at the end (reserved, never reused), nothing
/// readable (an error), the new log inside the damaged one's directory
/// (refused), a missing newest segment (the next LSN must be given).
async fn salvage_keeps_what_checks_and_reuses_no_lsn(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let log = Log::open(t.path(), opts(direct)).await.unwrap();
    for i in 1..=10 {
        log.append(rec(i)).await.unwrap();
    }
    // Then 30 records in one batch: LSNs 11..=40.
    let commits: Vec<_> = (11..=40).map(|i| log.append(rec(i))).collect();
    for c in commits {
        c.await.unwrap();
    }
    drop(log);
    let out = tempfile::tempdir().unwrap();
    // Three records damaged in the middle of the batch (one hole of three
    // LSNs), one at its end.
    for lsn in [20, 21, 22, 40] {
        let (seg, mut data, at) = find(t.path(), lsn);
        data[at + 7] ^= 0x20;
        std::fs::write(&seg, &data).unwrap();
    }
    let s = ringkit_log::salvage(t.path(), out.path().join("a"), opts(direct), None)
        .await
        .unwrap();
    assert_eq!(s.copied, 36, "{s:?}");
    assert_eq!(s.holes, vec![(20, 3), (40, 1)], "{s:?}");
    assert_eq!(s.next, 41, "the lost last LSN is reserved: {s:?}");
    let l = Log::open(out.path().join("a"), opts(direct)).await.unwrap();
    assert_eq!(l.read(23).await.unwrap(), rec(23));
    assert_eq!(l.read(21).await.unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(l.append(&b"new"[..]).await.unwrap(), 41);
    drop(l);
    // check counts records, not the holes' LSNs.
    let c = ringkit_log::check(out.path().join("a")).await.unwrap();
    assert_eq!((c.records, c.error.clone()), (37, None), "{c:?}");
    // Inside the damaged log's directory: refused, nothing made.
    let e = ringkit_log::salvage(t.path(), t.path().join("sub"), opts(direct), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("inside"), "{e}");
    assert!(!t.path().join("sub").exists());
    // Nothing readable: an error, no log.
    let seg = segments(t.path())[0].clone();
    let mut data = std::fs::read(&seg).unwrap();
    data[4096..].fill(0xff);
    std::fs::write(&seg, &data).unwrap();
    let e = ringkit_log::salvage(t.path(), out.path().join("b"), opts(direct), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("nothing readable"), "{e}");
    assert!(!out.path().join("b").exists());
}

async fn salvage_wants_the_next_lsn_when_the_newest_segment_is_gone(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let small = Options {
        segment_size: 64 << 10,
        ..opts(direct)
    };
    let log = Log::open(t.path(), small.clone()).await.unwrap();
    for i in 1..=600 {
        drop(log.append(rec(i)));
    }
    log.close().await;
    let segs = segments(t.path());
    let newest = segs.last().unwrap().clone();
    std::fs::remove_file(&newest).unwrap();
    let out = tempfile::tempdir().unwrap();
    let e = ringkit_log::salvage(t.path(), out.path().join("a"), small.clone(), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    let s = ringkit_log::salvage(t.path(), out.path().join("a"), small, Some(601))
        .await
        .unwrap();
    assert_eq!(s.next, 601, "{s:?}");
}

ringkit::test_all! {
    async fn salvage_edges_buffered() {
        salvage_keeps_what_checks_and_reuses_no_lsn(false).await;
        salvage_wants_the_next_lsn_when_the_newest_segment_is_gone(false).await;
    }
    async fn salvage_edges_direct() {
        salvage_keeps_what_checks_and_reuses_no_lsn(true).await;
        salvage_wants_the_next_lsn_when_the_newest_segment_is_gone(true).await;
    }
    async fn flipped_bit_buffered() {
        a_flipped_bit_in_acknowledged_records_is_refused_not_erased(false).await;
    }
    async fn flipped_bit_direct() {
        a_flipped_bit_in_acknowledged_records_is_refused_not_erased(true).await;
    }
    async fn read_only_buffered() {
        reading_writes_nothing_even_beside_a_live_writer(false).await;
    }
    async fn read_only_direct() {
        reading_writes_nothing_even_beside_a_live_writer(true).await;
    }
    async fn segments_buffered() {
        a_missing_extra_or_foreign_segment_is_refused(false).await;
    }
    async fn segments_direct() {
        a_missing_extra_or_foreign_segment_is_refused(true).await;
    }
}
