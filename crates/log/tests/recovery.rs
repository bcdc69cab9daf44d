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
//!
//! After them, edges no other test reached (cargo-mutants found each
//! line's mutant surviving): salvage's search past more than 1 MiB of
//! damage and its refusal of the log's own directory under another name,
//! the window that bounds the batches a crash leaves in flight, `check` on
//! a segment cut short under it, and an open that cannot finish a purge.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use ringkit::fs::hook::{Fault, FsHook, FsOp};
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

/// Queue every record at once (so they share batches), then wait for
/// all of them.
async fn append_queued(log: &Log, recs: impl Iterator<Item = Vec<u8>>) {
    let commits: Vec<_> = recs.map(|r| log.append(r)).collect();
    for c in commits {
        c.await.unwrap();
    }
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
    append_queued(&log, (11..=40).map(rec)).await;
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

/// A record of 1500 bytes, every byte odd: its batch spans whole sectors,
/// no byte of it is zero, and it never holds a batch header's magic
/// ("RKB2": both `R` and `2` are even).
fn big(i: u64) -> Vec<u8> {
    (0..1500u64).map(|k| (k * 7 + i * 31) as u8 | 1).collect()
}

/// Where each batch header of a segment's bytes starts, in order.
fn batch_heads(data: &[u8]) -> Vec<usize> {
    (4096..data.len() - 32)
        .filter(|&p| &data[p + 4..p + 8] == b"RKB2")
        .collect()
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().unwrap())
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(data[at..at + 8].try_into().unwrap())
}

/// Give the batch header at `head` `pad` bytes of padding, its checksum
/// (over the log's id) made again: a whole, checked batch that reaches
/// further.
fn set_pad(dir: &Path, data: &mut [u8], head: usize, pad: u32) {
    let manifest = std::fs::read(dir.join("MANIFEST")).unwrap();
    let log_id = &manifest[16..24];
    data[head + 24..head + 28].copy_from_slice(&pad.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(log_id), &data[head + 4..head + 32]);
    data[head..head + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Salvage looks for the next batch header past damage in chunks of
/// 1 MiB: damage longer than one chunk must not end the search, or every
/// record after it is lost to the copy.
async fn salvage_searches_past_more_than_a_mebibyte_of_damage() {
    let t = tempfile::tempdir().unwrap();
    let o = Options {
        segment_size: 4 << 20,
        max_batch: 64 << 10,
        ..opts(false)
    };
    let log = Log::open(t.path(), o.clone()).await.unwrap();
    // 1000 records of 1500 bytes: about 1.5 MB of batches of at most 64 KiB.
    append_queued(&log, (1..=1000).map(big)).await;
    drop(log);
    let seg = segments(t.path())[0].clone();
    let mut data = std::fs::read(&seg).unwrap();
    let heads = batch_heads(&data);
    // Overwrite from the second batch up to a header more than 1 MiB on:
    // the first chunk searched holds no header at all.
    let from = heads[1];
    let to = *heads
        .iter()
        .find(|&&h| h >= from + (1 << 20) + 64)
        .expect("a batch more than 1 MiB after the second");
    let (lost, kept) = (u64_at(&data, from + 8), u64_at(&data, to + 8));
    data[from..to].fill(0xee);
    std::fs::write(&seg, &data).unwrap();
    let out = tempfile::tempdir().unwrap();
    let s = ringkit_log::salvage(t.path(), out.path().join("a"), o, None)
        .await
        .unwrap();
    assert_eq!(
        (s.copied, s.holes.clone(), s.next),
        (1000 - (kept - lost), vec![(lost, kept - lost)], 1001),
        "records {kept}..=1000 lie after the damage: {s:?}"
    );
}

/// Salvage refuses to write into the damaged log's directory however the
/// path names it: through a symlink, or with `..` in it (the path is
/// compared once its parent is resolved, not as written).
async fn salvage_refuses_the_log_directory_under_another_name() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("log");
    let log = Log::open(&dir, opts(false)).await.unwrap();
    for i in 1..=3 {
        log.append(rec(i)).await.unwrap();
    }
    drop(log);
    std::os::unix::fs::symlink(&dir, t.path().join("link")).unwrap();
    std::fs::create_dir(t.path().join("other")).unwrap();
    let before = snapshot(&dir);
    for into in [t.path().join("link/sub"), t.path().join("other/../log/sub")] {
        let e = ringkit_log::salvage(&dir, &into, opts(false), None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("inside"), "{}: {e}", into.display());
    }
    assert_eq!(
        snapshot(&dir),
        before,
        "nothing made in the log's directory"
    );
}

/// Damage after the records followed by a whole batch: with two batches
/// in flight that is the older one torn and the newer one written, but
/// only if together they lie within the window the segment header names
/// (the most bytes the log ever has unsynced). One byte more (here the
/// newer batch's padding reaching past it) is not what a crash leaves.
async fn batches_in_flight_spanning_more_than_the_window_are_damage(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let log = Log::open(t.path(), opts(direct)).await.unwrap();
    for i in 1..=10 {
        assert_eq!(log.append(big(i)).await.unwrap(), i);
    }
    drop(log);
    let seg = segments(t.path())[0].clone();
    let mut data = std::fs::read(&seg).unwrap();
    let window = u64::from(u32_at(&data, 32));
    // Ten records, each awaited alone: ten batches of one record each.
    let heads = batch_heads(&data);
    assert_eq!(heads.len(), 10, "{heads:?}");
    let (torn, newer) = (heads[8], heads[9]);
    // Batch 9 torn: a sector of its record never written.
    let sector = (torn + 32 + ringkit_log::record::HEADER).div_ceil(512) * 512;
    data[sector..sector + 512].fill(0);
    // Batch 10 padded so the two span `span` bytes from batch 9's start.
    let len = u64::from(u32_at(&data, newer + 20));
    let pad = |span: u64| (span - (newer - torn) as u64 - 32 - len) as u32;

    set_pad(t.path(), &mut data, newer, pad(window + 1));
    std::fs::write(&seg, &data).unwrap();
    let r = ringkit_log::check(t.path()).await.unwrap();
    let tail = r.segments[0].tail.clone().unwrap_or_default();
    assert!(
        tail.starts_with("CORRUPT") && tail.contains("span more than"),
        "{r:?}"
    );
    let e = Log::open(t.path(), opts(direct)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
    assert!(e.to_string().contains("span more than"), "{e}");

    // Exactly the window: a crash can leave that; both batches cleared.
    set_pad(t.path(), &mut data, newer, pad(window));
    std::fs::write(&seg, &data).unwrap();
    let log = Log::open(t.path(), opts(direct)).await.unwrap();
    assert_eq!(log.next_lsn(), 9);
    assert_eq!(log.read(8).await.unwrap(), big(8));
}

/// The window a segment's header names must hold the largest batches
/// the flusher writes, as many as are in flight: on `O_DIRECT` each is
/// padded to the next block (here 4 064 bytes of padding each). The last
/// two batches of a segment, one record of the largest size each, the
/// older torn: a crash leaves that, so the log opens, both cleared.
async fn the_largest_batches_in_flight_fit_the_window() {
    let t = tempfile::tempdir().unwrap();
    let log = Log::open(t.path(), opts(true)).await.unwrap();
    let max = log.max_record();
    for i in 1..=3u64 {
        let r: Vec<u8> = (0..max as u64)
            .map(|k| (k * 5 + i * 17) as u8 | 1)
            .collect();
        assert_eq!(log.append(r).await.unwrap(), i);
    }
    drop(log);
    let seg = segments(t.path())[0].clone();
    let mut data = std::fs::read(&seg).unwrap();
    let heads = batch_heads(&data);
    assert_eq!(heads.len(), 3, "{heads:?}");
    // Each batch padded to a block: 32 + max_batch bytes in 5 blocks.
    assert_eq!(heads[2] - heads[1], 20480);
    // The second batch torn: a sector in the middle of its record.
    let sector = heads[1] + 8192;
    data[sector..sector + 512].fill(0);
    std::fs::write(&seg, &data).unwrap();
    let log = Log::open(t.path(), opts(true)).await.unwrap();
    assert_eq!(log.next_lsn(), 2);
}

/// (`size`): another process shrinking a segment while `check` reads it.
struct CutAfterReadToEnd {
    path: PathBuf,
    size: u64,
    to: u64,
    done: std::cell::Cell<bool>,
}

impl FsHook for CutAfterReadToEnd {
    fn read_done(&self, _fd: std::os::fd::RawFd, offset: u64, data: &mut [u8]) {
        if !self.done.get() && offset + data.len() as u64 == self.size {
            self.done.set(true);
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&self.path)
                .unwrap();
            f.set_len(self.to).unwrap();
        }
    }
}

/// `check` reads a segment up to the size it saw when it opened it. When
/// the file is cut shorter meanwhile, the search of a damaged tail for a
/// later batch gets fewer bytes than it asked for, none at all at the
/// end: it must stop there (reporting what it saw), not step back over
/// the bytes it has and loop or overflow.
async fn check_survives_a_segment_cut_short_while_it_reads() {
    let t = tempfile::tempdir().unwrap();
    // A segment of several 1 MiB chunks: `check` reads it chunk by chunk
    // to its end (the cut comes then), and reads the tail again to judge
    // it, from the file as cut (a segment of one chunk would be judged
    // from the bytes already in hand).
    let o = Options {
        segment_size: 4 << 20,
        ..opts(false)
    };
    let log = Log::open(t.path(), o).await.unwrap();
    for i in 1..=3 {
        log.append(big(i)).await.unwrap();
    }
    drop(log);
    let seg = segments(t.path())[0].clone();
    let mut data = std::fs::read(&seg).unwrap();
    let last = *batch_heads(&data).last().unwrap();
    let end = last + 32 + u32_at(&data, last + 20) as usize + u32_at(&data, last + 24) as usize;
    // Junk a little after the records (a torn write, within the window),
    // the bytes where the next batch would start still zero.
    data[end + 100..end + 200].fill(0xee);
    std::fs::write(&seg, &data).unwrap();
    let cut = Rc::new(CutAfterReadToEnd {
        path: seg.clone(),
        size: data.len() as u64,
        to: end as u64 + 1,
        done: Default::default(),
    });
    let prev = ringkit::fs::hook::set_hook(Some(cut.clone()));
    let r = ringkit_log::check(t.path()).await;
    ringkit::fs::hook::set_hook(prev);
    assert!(cut.done.get(), "the segment was read to its end and cut");
    let r = r.unwrap();
    let tail = r.segments[0].tail.clone().unwrap_or_default();
    assert!(tail.starts_with("torn tail"), "{r:?}");
    // Recovery, which opens the segment afresh, sees it cut short.
    let e = r.error.unwrap_or_default();
    assert!(e.contains("cut short"), "{e}");
}

/// Fails the removal of one name with `EIO`.
struct FailRemove(std::ffi::OsString);

impl FsHook for FailRemove {
    fn before(&self, op: &FsOp<'_>) -> Option<Fault> {
        match op {
            FsOp::Remove { path } if path.file_name() == Some(&self.0) => {
                Some(Fault::Fail(std::io::Error::from_raw_os_error(libc::EIO)))
            }
            _ => None,
        }
    }
}

/// A purge cut short leaves segments wholly before the log's first LSN;
/// open deletes them. A deletion that fails for another reason than the
/// name being gone already (here `EIO`) fails the open: the log must not
/// go on as if the purge were finished.
async fn a_purged_segment_that_cannot_be_removed_fails_the_open() {
    let t = tempfile::tempdir().unwrap();
    let small = Options {
        segment_size: 64 << 10,
        ..opts(false)
    };
    let log = Log::open(t.path(), small.clone()).await.unwrap();
    append_queued(&log, (1..=600).map(rec)).await;
    let segs = segments(t.path());
    assert!(segs.len() >= 3, "{segs:?}");
    let first = std::fs::read(&segs[0]).unwrap();
    assert_eq!(log.purge(300).await.unwrap(), 300);
    log.close().await;
    assert!(!segs[0].exists(), "the purge deleted the first segment");
    // Put it back: a crash after the manifest's rename, before the unlink.
    std::fs::write(&segs[0], &first).unwrap();
    let name = segs[0].file_name().unwrap().to_owned();
    let prev = ringkit::fs::hook::set_hook(Some(Rc::new(FailRemove(name.clone()))));
    let res = Log::open(t.path(), small.clone()).await;
    ringkit::fs::hook::set_hook(prev);
    let e = match res {
        Ok(_) => panic!("opened though the purged segment could not be removed"),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(
        msg.contains(name.to_str().unwrap()) && msg.contains("os error 5"),
        "{msg}"
    );
    assert!(segs[0].exists());
    // Once the removal works, the open finishes the purge.
    let log = Log::open(t.path(), small).await.unwrap();
    assert!(!segs[0].exists());
    assert_eq!(log.first_lsn(), 300);
    assert_eq!(log.read(300).await.unwrap(), rec(300));
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
    async fn salvage_past_long_damage() {
        salvage_searches_past_more_than_a_mebibyte_of_damage().await;
    }
    async fn salvage_into_the_log_by_another_name() {
        salvage_refuses_the_log_directory_under_another_name().await;
    }
    async fn in_flight_window_buffered() {
        batches_in_flight_spanning_more_than_the_window_are_damage(false).await;
    }
    async fn in_flight_window_direct() {
        batches_in_flight_spanning_more_than_the_window_are_damage(true).await;
    }
    async fn largest_batches_fit_the_window() {
        the_largest_batches_in_flight_fit_the_window().await;
    }
    async fn check_segment_cut_short() {
        check_survives_a_segment_cut_short_while_it_reads().await;
    }
    async fn purged_segment_not_removed() {
        a_purged_segment_that_cannot_be_removed_fails_the_open().await;
    }
}
