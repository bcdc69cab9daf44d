//! Two batches in flight (`Options::batches_in_flight`): what recovery
//! accepts as the batches a crash interrupted, what it still refuses, and
//! acknowledgements in LSN order under many writers. (The crash-state
//! explorer, `tests/crashcheck.rs`, checks every state of seeded runs; these
//! are the layouts named one by one.)

use std::cell::RefCell;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use ringkit_log::{Log, Options};

fn opts(direct: bool, depth: u32) -> Options {
    Options {
        direct,
        segment_size: 256 << 10,
        max_batch: 16 << 10,
        batches_in_flight: depth,
        ..Options::default()
    }
}

/// Record `i`: 1500 bytes, so its batch spans whole sectors.
fn rec(i: u64) -> Vec<u8> {
    (0..1500u64).map(|k| (k * 7 + i * 31) as u8 | 1).collect()
}

/// Ten records, each awaited alone: ten batches.
async fn ten(dir: &Path, direct: bool, depth: u32) {
    let log = Log::open(dir, opts(direct, depth)).await.unwrap();
    for i in 1..=10 {
        assert_eq!(log.append(rec(i)).await.unwrap(), i);
    }
}

fn segment(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .unwrap()
}

/// Zero one whole 512-byte sector inside record `lsn`'s payload: what a
/// crash leaves of a batch whose write was cut (that sector never written).
fn tear(dir: &Path, lsn: u64) {
    let seg = segment(dir);
    let mut data = std::fs::read(&seg).unwrap();
    let at = data
        .windows(1500)
        .position(|w| w == rec(lsn))
        .expect("record on disk");
    let sector = at.div_ceil(512) * 512;
    data[sector..sector + 512].fill(0);
    std::fs::write(&seg, &data).unwrap();
}

async fn open_err(dir: &Path, direct: bool) -> String {
    let e = Log::open(dir, opts(direct, 2)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
    e.to_string()
}

async fn layouts(direct: bool) {
    // Depth 2: the older batch torn, the newer whole. A crash leaves this
    // when both were in flight; neither was acknowledged (the newer waits
    // for the older's sync), so both are cleared.
    let t = tempfile::tempdir().unwrap();
    ten(t.path(), direct, 2).await;
    tear(t.path(), 9);
    let log = Log::open_read_only(t.path(), opts(direct, 2))
        .await
        .unwrap();
    assert_eq!(log.next_lsn(), 9);
    drop(log);
    let log = Log::open(t.path(), opts(direct, 2)).await.unwrap();
    assert_eq!(log.next_lsn(), 9);
    assert_eq!(log.read(8).await.unwrap(), rec(8));
    assert_eq!(log.append(rec(99)).await.unwrap(), 9);
    drop(log);
    let log = Log::open(t.path(), opts(direct, 2)).await.unwrap();
    assert_eq!(log.read(9).await.unwrap(), rec(99));
    assert!(log.read(10).await.is_err(), "record 10 was cleared");
    drop(log);

    // Depth 1 (a segment written with one batch in flight): the same
    // layout is damage to an acknowledged record.
    let t = tempfile::tempdir().unwrap();
    ten(t.path(), direct, 1).await;
    tear(t.path(), 9);
    let msg = open_err(t.path(), direct).await;
    assert!(msg.contains("one batch in flight"), "{msg}");

    // Depth 2, but two whole batches after the torn one: more than a
    // crash leaves in flight.
    let t = tempfile::tempdir().unwrap();
    ten(t.path(), direct, 2).await;
    tear(t.path(), 8);
    let msg = open_err(t.path(), direct).await;
    assert!(msg.contains("more whole batches follow"), "{msg}");

    // Depth 2, a flipped bit (every sector written) in the older one: not
    // a torn write, whatever follows.
    let t = tempfile::tempdir().unwrap();
    ten(t.path(), direct, 2).await;
    let seg = segment(t.path());
    let mut data = std::fs::read(&seg).unwrap();
    let at = data.windows(1500).position(|w| w == rec(9)).unwrap();
    data[at + 700] ^= 0x40;
    std::fs::write(&seg, &data).unwrap();
    let msg = open_err(t.path(), direct).await;
    assert!(msg.contains("record 9"), "{msg}");

    // Depth 2, the torn batch's header whole (LSN 9, one record), and a
    // whole batch after it that skips LSNs (20): the flusher never writes
    // that, so it is damage, not the batches in flight (a review found it
    // accepted).
    let t = tempfile::tempdir().unwrap();
    ten(t.path(), direct, 2).await;
    tear(t.path(), 9);
    relabel(t.path(), 10, 20);
    let msg = open_err(t.path(), direct).await;
    assert!(msg.contains("does not start at LSN 10"), "{msg}");
}

/// Rewrite the batch holding only record `lsn` as a whole, checked batch
/// of LSN `to` (its record framed again, its header's CRC over the log id
/// made again).
fn relabel(dir: &Path, lsn: u64, to: u64) {
    use ringkit_log::record::{self, HEADER};
    let manifest = std::fs::read(dir.join("MANIFEST")).unwrap();
    let log_id = &manifest[16..24];
    let seg = segment(dir);
    let mut data = std::fs::read(&seg).unwrap();
    let at = data.windows(1500).position(|w| w == rec(lsn)).unwrap();
    let (rec_at, head_at) = (at - HEADER, at - HEADER - 32);
    assert_eq!(&data[head_at + 4..head_at + 8], b"RKB2", "a batch header");
    record::encode_into(to, &rec(lsn), &mut data[rec_at..rec_at + HEADER + 1500]);
    data[head_at + 8..head_at + 16].copy_from_slice(&to.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(log_id), &data[head_at + 4..head_at + 32]);
    data[head_at..head_at + 4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg, &data).unwrap();
}

/// A log whose last segment was made with two batches in flight, reopened
/// with `batches_in_flight: 1`: that segment keeps its depth, and the log
/// has a buffer for each batch in flight (a review saw the flusher panic
/// for want of one, and every later append hang).
async fn reopened_with_the_other_depth(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    for (made, reopened) in [(2, 1), (1, 2)] {
        let dir = t.path().join(format!("{made}-{reopened}"));
        let log = Log::open(&dir, opts(direct, made)).await.unwrap();
        log.append(rec(0)).await.unwrap();
        drop(log);
        let log = Log::open(&dir, opts(direct, reopened)).await.unwrap();
        let mut tasks = Vec::new();
        for w in 0..64u64 {
            let log = log.clone();
            tasks.push(ringkit::spawn(async move {
                for i in 0..20 {
                    let c = log.append(rec(w * 100 + i));
                    ringkit::time::timeout(std::time::Duration::from_secs(20), c)
                        .await
                        .expect("an append never resolved")
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // Past a segment roll: the new segments have the reopened depth.
        assert!(log.stats().segments_made >= 1, "{:?}", log.stats());
        drop(log);
        let log = Log::open(&dir, opts(direct, reopened)).await.unwrap();
        assert_eq!(log.next_lsn(), 2 + 64 * 20);
    }
}

/// 64 writers, 50 records each: every append resolves with its LSN, and
/// they resolve in LSN order (a batch is acknowledged only after every
/// batch before it).
async fn acks_in_order(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let log = Log::open(t.path(), opts(direct, 2)).await.unwrap();
    let order = Rc::new(RefCell::new(Vec::new()));
    let mut tasks = Vec::new();
    for w in 0..64u64 {
        let (log, order) = (log.clone(), order.clone());
        tasks.push(ringkit::spawn(async move {
            for i in 0..50 {
                let lsn = log.append(rec(w * 1000 + i)).await.unwrap();
                order.borrow_mut().push(lsn);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.borrow().clone();
    assert_eq!(order.len(), 3200);
    assert!(order.windows(2).all(|w| w[0] < w[1]), "out of LSN order");
    let s = log.stats();
    assert_eq!(s.records, 3200);
    drop(log);
    let log = Log::open(t.path(), opts(direct, 2)).await.unwrap();
    assert_eq!(log.next_lsn(), 3201);
}

/// A careless caller: the log dropped while two batches are in flight and
/// more appends are queued. Every append resolves (none hangs), and every
/// one that resolved `Ok` is there after a reopen, at its LSN.
async fn dropped_with_batches_in_flight(direct: bool) {
    let t = tempfile::tempdir().unwrap();
    let log = Log::open(t.path(), opts(direct, 2)).await.unwrap();
    let commits: Vec<_> = (0..160u64).map(|i| (i, log.append(rec(i)))).collect();
    // Let the flusher start the first batches, then drop the log.
    ringkit::yield_now().await;
    drop(log);
    let mut durable = Vec::new();
    for (i, c) in commits {
        let r = ringkit::time::timeout(std::time::Duration::from_secs(20), c)
            .await
            .expect("an append never resolved after the log was dropped");
        if let Ok(lsn) = r {
            durable.push((lsn, i));
        }
    }
    let log = Log::open(t.path(), opts(direct, 2)).await.unwrap();
    for (lsn, i) in durable {
        assert_eq!(log.read(lsn).await.unwrap(), rec(i), "record {lsn}");
    }
}

/// Depths other than 1 and 2 are refused, clearly.
async fn depth_out_of_range() {
    let t = tempfile::tempdir().unwrap();
    for depth in [0, 3, u32::MAX] {
        let e = Log::open(t.path(), opts(false, depth)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("batches_in_flight"), "{e}");
    }
}

ringkit::test_all! {
    async fn a_log_dropped_with_batches_in_flight_resolves_every_append() {
        dropped_with_batches_in_flight(false).await;
        dropped_with_batches_in_flight(true).await;
    }
    async fn batches_in_flight_out_of_range_is_refused() {
        depth_out_of_range().await;
    }
    async fn pipelined_crash_layouts_buffered() {
        layouts(false).await;
    }
    async fn pipelined_crash_layouts_direct() {
        layouts(true).await;
    }
    async fn a_log_reopened_with_the_other_depth_keeps_appending() {
        reopened_with_the_other_depth(false).await;
        reopened_with_the_other_depth(true).await;
    }
    async fn acknowledgements_stay_in_lsn_order() {
        acks_in_order(false).await;
        acks_in_order(true).await;
    }
}
