//! The log against real files, on both backends: appends and reads, group
//! commit, segments, reopening, torn tails, damage, `O_DIRECT`, bad input.

use std::path::Path;

use ringkit_log::{Log, Options};

/// Deterministic payload of `len` bytes for `seed`.
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn small() -> Options {
    Options {
        segment_size: 64 << 10,
        max_batch: 16 << 10,
        ..Options::default()
    }
}

fn segments(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    v.sort();
    v
}

/// Append `n` records of varied sizes concurrently; returns their LSNs.
async fn append_many(log: &Log, from_seed: u64, n: u64) -> Vec<u64> {
    let commits: Vec<_> = (from_seed..from_seed + n)
        .map(|s| log.append(payload(s, (s as usize * 37) % 700)))
        .collect();
    let mut lsns = Vec::new();
    for c in commits {
        lsns.push(c.await.unwrap());
    }
    lsns
}

async fn check_all(log: &Log, lsns: &[u64], from_seed: u64) {
    for (i, &lsn) in lsns.iter().enumerate() {
        let s = from_seed + i as u64;
        assert_eq!(
            log.read(lsn).await.unwrap(),
            payload(s, (s as usize * 37) % 700),
            "lsn {lsn}"
        );
    }
}

/// Refuses every `RWF_DSYNC` write as a kernel without the flag does
/// (`EOPNOTSUPP`, nothing written), and counts them.
struct NoDsync(std::cell::Cell<u32>);

impl ringkit::fs::hook::FsHook for NoDsync {
    fn before(&self, op: &ringkit::fs::hook::FsOp<'_>) -> Option<ringkit::fs::hook::Fault> {
        if let ringkit::fs::hook::FsOp::WriteDsync { .. } = op {
            self.0.set(self.0.get() + 1);
            let e = std::io::Error::from_raw_os_error(libc::EOPNOTSUPP);
            return Some(ringkit::fs::hook::Fault::Fail(e));
        }
        None
    }
}

/// Refuses `RWF_DSYNC` as [`NoDsync`] does, then fails the first write
/// and `fdatasync` the log falls back to with `EIO`.
struct NoDsyncThenEio(std::cell::Cell<bool>);

impl ringkit::fs::hook::FsHook for NoDsyncThenEio {
    fn before(&self, op: &ringkit::fs::hook::FsOp<'_>) -> Option<ringkit::fs::hook::Fault> {
        use ringkit::fs::hook::{Fault, FsOp};
        match op {
            FsOp::WriteDsync { .. } => Some(Fault::Fail(std::io::Error::from_raw_os_error(
                libc::EOPNOTSUPP,
            ))),
            FsOp::WriteSync { .. } if !self.0.replace(true) => {
                Some(Fault::Fail(std::io::Error::from_raw_os_error(libc::EIO)))
            }
            _ => None,
        }
    }
}

ringkit::test_all! {
    async fn a_failed_write_after_a_refused_rwf_dsync_fails_the_append() {
        // The crash-state explorer plants one fault a run, so it cannot
        // fail the fallback after a refusal: here the write and fdatasync
        // the log falls back to fail, and the record is not acknowledged.
        for direct in [false, true] {
            let t = tempfile::tempdir().unwrap();
            let log = Log::open(t.path(), Options { direct, ..small() }).await.unwrap();
            let hook = std::rc::Rc::new(NoDsyncThenEio(Default::default()));
            let prev = ringkit::fs::hook::set_hook(Some(hook.clone()));
            let res = log.append(payload(0, 100)).await;
            ringkit::fs::hook::set_hook(prev);
            assert!(hook.0.get(), "the fallback's write and fdatasync ran (direct {direct})");
            let e = res.expect_err("acknowledged although its write failed");
            assert!(e.to_string().contains("Input/output error") || e.raw_os_error() == Some(libc::EIO), "{e}");
            log.close().await;
        }
    }

    async fn a_kernel_that_refuses_rwf_dsync_gets_write_and_fdatasync() {
        for direct in [false, true] {
            let t = tempfile::tempdir().unwrap();
            let hook = std::rc::Rc::new(NoDsync(Default::default()));
            let prev = ringkit::fs::hook::set_hook(Some(hook.clone()));
            let log = Log::open(t.path(), Options { direct, ..small() }).await.unwrap();
            let lsns = append_many(&log, 0, 200).await;
            assert_eq!(lsns, (1..=200).collect::<Vec<_>>());
            log.close().await;
            ringkit::fs::hook::set_hook(prev);
            assert_eq!(hook.0.get(), 1, "asked once, then write and fdatasync");
            let log = Log::open(t.path(), small()).await.unwrap();
            check_all(&log, &lsns, 0).await;
        }
    }

    async fn append_read_reopen_and_group_commit() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        assert_eq!((log.next_lsn(), log.durable_lsn()), (1, 0));
        let lsns = append_many(&log, 0, 300).await;
        assert_eq!(lsns, (1..=300).collect::<Vec<_>>());
        let st = log.stats();
        assert_eq!(st.records, 300);
        // On io_uring the batch buffer is registered: writes go WRITE_FIXED.
        let uring = ringkit::backend_report().expect("inside a runtime").chosen == ringkit::Backend::Uring;
        assert_eq!(st.registered_buffer, uring);
        // Queued together, they went in a few batches, one sync each.
        assert!(st.batches < 50, "{st:?}");
        // 300 records of up to 716 bytes do not fit one 64 KiB segment.
        assert!(segments(t.path()).len() >= 2, "{:?}", segments(t.path()));
        check_all(&log, &lsns, 0).await;
        // In order, a segment at a time at most.
        let mut next = 1;
        loop {
            let got = log.read_from(next, 1000).await.unwrap();
            if got.is_empty() {
                break;
            }
            for (lsn, p) in got {
                assert_eq!(lsn, next);
                let s = lsn - 1;
                assert_eq!(p, payload(s, (s as usize * 37) % 700));
                next += 1;
            }
        }
        assert_eq!(next, 301);
        assert!(log.read_from(301, 10).await.unwrap().is_empty());
        assert_eq!(log.read(302).await.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        drop(log);
        let log = Log::open(t.path(), small()).await.unwrap();
        assert_eq!(log.durable_lsn(), 300);
        check_all(&log, &lsns, 0).await;
        assert_eq!(log.append(&b"after"[..]).await.unwrap(), 301);
    }

    async fn direct_io_rewrites_partial_blocks_correctly() {
        let t = tempfile::tempdir().unwrap();
        let opts = Options { direct: true, ..small() };
        let log = match Log::open(t.path(), opts.clone()).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("skipped: O_DIRECT not supported here: {e}");
                return;
            }
        };
        // One at a time: every batch starts inside the previous one's block.
        let mut lsns = Vec::new();
        for s in 0..40 {
            lsns.push(log.append(payload(s, (s as usize * 37) % 700)).await.unwrap());
        }
        lsns.extend(append_many(&log, 40, 200).await);
        check_all(&log, &lsns, 0).await;
        drop(log);
        let log = Log::open(t.path(), opts).await.unwrap();
        assert_eq!(log.durable_lsn(), 240);
        check_all(&log, &lsns, 0).await;
        lsns.extend(append_many(&log, 240, 10).await);
        check_all(&log, &lsns, 0).await;
    }

    async fn a_segment_keeps_the_block_its_file_system_asks_of_direct_io() {
        // On a disk (the temp dir may be tmpfs): the block read from the
        // file (statx), at least 4096, is in every segment's header, and a
        // direct log's batches are whole blocks of it.
        let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let opts = Options { direct: true, ..small() };
        let log = match Log::open(t.path(), opts.clone()).await {
            Ok(l) => l,
            Err(e) => {
                println!("skipped: O_DIRECT not supported in {}: {e}", t.path().display());
                return;
            }
        };
        let seg = t.path().join(&segments(t.path())[0]);
        let f = ringkit::fs::File::open(&seg).await.unwrap();
        let told = f.dio_alignment().await.unwrap();
        let want = told.map_or(4096, |a| a.offset.max(a.memory).max(4096).next_power_of_two());
        let lsns = append_many(&log, 0, 300).await;
        for s in 0..5 {
            log.append(payload(1000 + s, 10)).await.unwrap();
        }
        let stats = log.stats();
        assert!(stats.segments_made >= 1, "{stats:?}: the appends filled a segment");
        assert_eq!(stats.bytes_written % u64::from(want), 0, "{stats:?}: batches of {want}-byte blocks");
        check_all(&log, &lsns, 0).await;
        log.close().await;
        let r = ringkit_log::check(t.path()).await.unwrap();
        assert!(r.segments.len() >= 2);
        for s in &r.segments {
            assert_eq!(s.block, Some(want), "{}: told {told:?}", s.name);
        }
        println!("O_DIRECT alignment {told:?}: {want}-byte blocks");
    }

    async fn a_segment_made_by_format_3_opens_and_goes_on() {
        // Format 3 had no block in its header (bytes 48..52 zero): it
        // reads as 4096, and the log appends to it.
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        let lsns = append_many(&log, 0, 20).await;
        log.close().await;
        let seg = t.path().join(&segments(t.path())[0]);
        let mut b = std::fs::read(&seg).unwrap();
        assert_eq!(&b[12..16], &4u32.to_le_bytes(), "written as format 4");
        b[12..16].copy_from_slice(&3u32.to_le_bytes());
        b[48..52].fill(0);
        let crc = crc32c::crc32c(&b[4..64]);
        b[..4].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&seg, &b).unwrap();
        let r = ringkit_log::check(t.path()).await.unwrap();
        assert_eq!(r.segments[0].block, Some(4096));
        let log = Log::open(t.path(), small()).await.unwrap();
        check_all(&log, &lsns, 0).await;
        assert_eq!(log.append(&b"after"[..]).await.unwrap(), 21);
    }

    async fn a_torn_tail_recovers_to_the_last_whole_batch_and_leaves_no_ghosts() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        // Four batches of one record, then one batch of six.
        let mut lsns = Vec::new();
        for s in 0..4 {
            lsns.push(log.append(payload(s, (s as usize * 37) % 700)).await.unwrap());
        }
        lsns.extend(append_many(&log, 4, 6).await);
        assert_eq!(log.stats().batches, 5);
        drop(log);
        let seg = t.path().join(&segments(t.path())[0]);
        // Record 6 lies in the last batch.
        let data = std::fs::read(&seg).unwrap();
        let mut off = 4096;
        for i in 0..4 {
            off += 32 + 16 + ((i * 37) % 700);
        }
        // Past the batch header, record 5 (seed 4: 148 bytes) and a header.
        let rec6 = off + 32 + 16 + 148 + 16;
        // A flipped byte in the last batch, every sector of it written:
        // no crash does that, so it is damage, refused.
        let mut damaged = data.clone();
        damaged[rec6 + 3] ^= 0x40;
        std::fs::write(&seg, &damaged).unwrap();
        let e = Log::open(t.path(), small()).await.unwrap_err();
        assert!(e.to_string().contains("every sector"), "{e}");
        // The last batch torn: the sector holding record 6 never written
        // (its part of the batch still zeros), the rest written.
        let mut torn = data.clone();
        let sector = (rec6 + 3) / 512 * 512;
        torn[sector.max(off)..sector + 512].fill(0);
        std::fs::write(&seg, &torn).unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        assert_eq!(log.durable_lsn(), 4);
        check_all(&log, &lsns[..4], 0).await;
        // Records 5..10 were in the torn batch: zeroed, so a new record 5
        // is not followed by the old 6.
        assert_eq!(log.append(&b"new five"[..]).await.unwrap(), 5);
        drop(log);
        let log = Log::open(t.path(), small()).await.unwrap();
        assert_eq!(log.durable_lsn(), 5);
        assert_eq!(log.read(5).await.unwrap(), b"new five");
        drop(log);
        // A file cut short: segments are made full size, so it is damage.
        let data = std::fs::read(&seg).unwrap();
        std::fs::write(&seg, &data[..off + 40]).unwrap();
        let e = Log::open(t.path(), small()).await.unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
        std::fs::write(&seg, &data).unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        assert_eq!(log.durable_lsn(), 5);
    }

    async fn damage_before_the_tail_is_an_error_not_a_loss() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        append_many(&log, 0, 300).await;
        drop(log);
        let segs = segments(t.path());
        assert!(segs.len() >= 2);
        let first = t.path().join(&segs[0]);
        let before = std::fs::read(&first).unwrap();
        for (at, says) in [(5000, "not the last"), (100, "no valid header")] {
            let mut data = before.clone();
            data[at] ^= 1;
            std::fs::write(&first, &data).unwrap();
            let e = Log::open(t.path(), small()).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
            assert!(e.to_string().contains(says) && e.to_string().contains(&segs[0]), "{e}");
            assert_eq!(std::fs::read(&first).unwrap(), data, "nothing written");
        }
    }

    async fn bad_input_gets_a_clear_error_and_the_log_goes_on() {
        let t = tempfile::tempdir().unwrap();
        // Too small, not a multiple of a block, past what a u32 offset
        // names: each refused before anything is written.
        for size in [1000, (64 << 10) + 512, 8 << 30] {
            let e = Log::open(t.path(), Options { segment_size: size, ..small() }).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{size}: {e}");
        }
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0, "nothing written");
        let log = Log::open(t.path(), small()).await.unwrap();
        let e = log.append(vec![0u8; 20_000]).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("max_batch"), "{e}");
        // The largest record that fits, and an empty one.
        let max = log.max_record();
        let a = log.append(vec![7u8; max]).await.unwrap();
        let b = log.append(Vec::new()).await.unwrap();
        assert_eq!(log.read(a).await.unwrap(), vec![7u8; max]);
        assert_eq!(log.read(b).await.unwrap(), b"");
        assert_eq!(log.read(0).await.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        // The next LSN is not there yet; a read of nothing is nothing.
        let next = log.next_lsn();
        assert_eq!(log.read(next).await.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        assert!(log.read_from(a, 0).await.unwrap().is_empty());
        // From the next LSN: nothing yet; past it: not there.
        assert!(log.read_from(next, 8).await.unwrap().is_empty());
        let e = log.read_from(next + 1, 8).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
        // One open log per directory.
        let e = Log::open(t.path(), small()).await.unwrap_err();
        assert!(e.to_string().contains("already open"), "{e}");
        // Busy, not "try again" (WouldBlock): a caller's retry loop would
        // spin on it. The message names the lock file and who holds it.
        assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy, "{e}");
        let lock = t.path().join("LOCK");
        assert!(e.to_string().contains(&lock.display().to_string()), "{e}");
        assert!(e.to_string().contains(&format!("process {}", std::process::id())), "{e}");
    }

    async fn an_empty_log_reads_nothing_and_a_smaller_reopen_reads_everything() {
        let t = tempfile::tempdir().unwrap();
        let log = Log::open(t.path(), small()).await.unwrap();
        assert_eq!(log.read(1).await.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        // Records up to the largest a batch takes, over several segments.
        let big = log.max_record();
        let mut lsns = Vec::new();
        for s in 0..12u64 {
            lsns.push(log.append(payload(s, big - (s as usize) * 100)).await.unwrap());
        }
        drop(log);
        // Reopened with smaller batches: every record still reads back,
        // the last of each full segment too.
        let smaller = Options { max_batch: 4096, ..small() };
        let log = Log::open(t.path(), smaller).await.unwrap();
        for (s, lsn) in lsns.iter().enumerate() {
            let s = s as u64;
            assert_eq!(log.read(*lsn).await.unwrap(), payload(s, big - (s as usize) * 100));
        }
    }

    async fn a_runtime_dropped_mid_batch_panics_nowhere() {
        // A log (its batch buffer registered on io_uring) whose runtime
        // ends while a batch is in flight: the buffer's pool goes while the
        // driver is busy shutting down.
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().to_path_buf();
        let backend = ringkit::backend_report().expect("inside a runtime").chosen;
        std::thread::spawn(move || {
            let rt = ringkit::Builder::new().backend(backend).build().unwrap();
            rt.block_on(async {
                let log = Log::open(&dir, small()).await.unwrap();
                // Queued, not awaited: the record goes whatever happens to the future.
                drop(log.append(vec![1u8; 10_000]));
                drop(log.append(vec![2u8; 10_000]));
                ringkit::yield_now().await;
            });
            drop(rt);
            // A new runtime on the thread frees what the old one left.
            let rt = ringkit::Builder::new().backend(backend).build().unwrap();
            rt.block_on(async {
                let log = Log::open(&dir, small()).await.unwrap();
                assert!(log.durable_lsn() <= 2);
                log.append(&b"after"[..]).await.unwrap();
            });
        })
        .join()
        .expect("no panic");
    }
}
