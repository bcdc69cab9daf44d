//! The crash-state explorer on seeded workloads, on both backends,
//! buffered and `O_DIRECT`: every state a crash could leave recovers with
//! every acknowledged record, no truncated or purged one, and the state
//! last saved (see `ringkit_log::crashcheck`). Then faults:
//! `EIO`, `ENOSPC` and short writes on the k-th operation of each kind.

use std::path::PathBuf;

use ringkit_log::crashcheck::{self, Config, FaultPlan, OpKind};

/// Scratch space: tmpfs when there is one (each state is written out and
/// recovered; on a disk every sync would be real).
fn scratch() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

async fn explore(ops: usize, seed: u64, direct: bool, budget: usize) -> crashcheck::Report {
    let mut cfg = Config::new(ops, seed, scratch());
    cfg.direct = direct;
    cfg.budget = budget;
    let r = crashcheck::explore(&cfg).await.unwrap();
    println!(
        "seed {seed} direct {direct} on {:?}: {} events, {} points, {} states ({} distinct), \
         {} acked, {} edits acked, {} syncs with a later batch in flight, {} writes with \
         their own sync ({} RWF_DSYNC), registered buffers {}, {} crashes recovered and appended to ({} torn), {} kills ({} inside a linked write+sync), {} segments recycled",
        ringkit::backend_report().expect("inside a runtime").chosen,
        r.events,
        r.points,
        r.states,
        r.distinct,
        r.acked,
        r.edits,
        r.overlapped,
        r.linked,
        r.dsync_writes,
        r.registered,
        r.crashes,
        r.torn_crashes,
        r.kills,
        r.kill_splits,
        r.recycled
    );
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    // The production path ran: the write linked to its sync, and on
    // io_uring from registered buffers (`WRITE_FIXED`).
    assert!(r.linked > 0, "no linked write and sync ran");
    assert!(r.dsync_writes > 0, "no RWF_DSYNC write ran");
    assert!(
        r.dsync_writes < r.linked,
        "no write linked to an fdatasync ran"
    );
    if ringkit::backend_report().expect("inside a runtime").chosen == ringkit::Backend::Uring {
        assert!(r.registered, "the log wrote without registered buffers");
    }
    r
}

/// On io_uring two batches are in flight at once, and the explorer saw
/// it (syncs that returned with the next batch already written). On epoll
/// a write and its sync run inline on the loop, so batches never overlap.
fn pipelined(overlapped: u64) {
    let backend = ringkit::backend_report().expect("inside a runtime").chosen;
    if backend == ringkit::Backend::Uring {
        assert!(
            overlapped >= 20,
            "{overlapped} syncs with a later batch in flight"
        );
    } else {
        assert_eq!(overlapped, 0, "{backend:?}");
    }
}

ringkit::test_all! {
    async fn every_crash_state_keeps_every_acknowledged_record_buffered() {
        let (mut states, mut overlapped, mut edits, mut crashes, mut torn) = (0, 0, 0, 0, 0);
        let (mut kills, mut splits, mut recycled) = (0, 0, 0);
        for seed in 1..=5 {
            let r = explore(60, seed, false, 96).await;
            states += r.states;
            overlapped += r.overlapped;
            edits += r.edits;
            crashes += r.crashes;
            torn += r.torn_crashes;
            kills += r.kills;
            splits += r.kill_splits;
            recycled += r.recycled;
        }
        // Purged segments reused as later ones (zeroed in place).
        assert!(recycled >= 1, "no purged segment was recycled");
        // Generations built on a crash state; on io_uring some of them torn
        // (on epoll a batch's write and sync run inline on the loop, so no
        // batch write is ever pending when the workload crashes).
        assert!(crashes >= 5, "{crashes} crashes");
        // Process kills reopened in place, on the page cache.
        assert!(kills >= 5, "{kills} kills");
        // Some of them between a linked write and its sync (the write in
        // the page cache only): what the next recovery finds must be made
        // durable by it.
        assert!(splits >= 5, "{splits} kills inside a linked write+sync");
        if ringkit::backend_report().expect("inside a runtime").chosen == ringkit::Backend::Uring {
            assert!(torn >= 2, "{torn} crashes left a write in flight out");
        }
        assert!(states >= 25_000, "{states} states");
        // Truncations, purges and states saved among the appends.
        assert!(edits >= 20, "{edits} edits acknowledged");
        pipelined(overlapped);
    }

    async fn every_crash_state_keeps_every_acknowledged_record_direct() {
        let (mut states, mut overlapped, mut edits, mut crashes, mut torn) = (0, 0, 0, 0, 0);
        let (mut kills, mut splits, mut recycled) = (0, 0, 0);
        for seed in 11..=15 {
            let r = explore(60, seed, true, 96).await;
            states += r.states;
            overlapped += r.overlapped;
            edits += r.edits;
            crashes += r.crashes;
            torn += r.torn_crashes;
            kills += r.kills;
            splits += r.kill_splits;
            recycled += r.recycled;
        }
        // Purged segments reused as later ones (zeroed in place).
        assert!(recycled >= 1, "no purged segment was recycled");
        // Generations built on a crash state; on io_uring some of them torn
        // (on epoll a batch's write and sync run inline on the loop, so no
        // batch write is ever pending when the workload crashes).
        assert!(crashes >= 5, "{crashes} crashes");
        // Process kills reopened in place, on the page cache.
        assert!(kills >= 5, "{kills} kills");
        // Some of them between a linked write and its sync (the write in
        // the page cache only): what the next recovery finds must be made
        // durable by it.
        assert!(splits >= 5, "{splits} kills inside a linked write+sync");
        if ringkit::backend_report().expect("inside a runtime").chosen == ringkit::Backend::Uring {
            assert!(torn >= 2, "{torn} crashes left a write in flight out");
        }
        assert!(states >= 25_000, "{states} states");
        // Truncations, purges and states saved among the appends.
        assert!(edits >= 20, "{edits} edits acknowledged");
        pipelined(overlapped);
    }
}

/// One run of `steps` steps with `plan` in `dir`, 4 states per point,
/// batches made durable as `dsync` says (`None`: drawn at each open): no
/// violation.
async fn fault_run(
    dir: &std::path::Path,
    steps: usize,
    seed: u64,
    direct: bool,
    dsync: Option<bool>,
    plan: FaultPlan,
) -> crashcheck::Report {
    let mut cfg = Config::new(steps, seed, dir);
    cfg.direct = direct;
    cfg.dsync = dsync;
    cfg.budget = 4;
    cfg.fault = Some(plan);
    let r = crashcheck::explore(&cfg).await.unwrap();
    assert!(
        r.violations.is_empty(),
        "{plan:?} seed {seed} direct {direct}: {:#?}",
        r.violations
    );
    r
}

/// Every kind of operation failing at the 1st, 3rd, 12th and 30th time, with
/// `EIO`, `ENOSPC` and (writes) a short write: every append resolves, a
/// failed segment write or sync poisons the log until it is reopened, and
/// every crash state of the faulted run keeps every acknowledged record.
async fn faults(direct: bool) {
    let mut fired = 0;
    let mut runs = 0;
    for (i, kind) in OpKind::ALL.into_iter().enumerate() {
        for nth in [1, 3, 12, 30] {
            let mut errors = vec![Some(libc::EIO), Some(libc::ENOSPC)];
            if kind == OpKind::Write {
                errors.push(None);
            }
            for error in errors {
                let seed = 100 + i as u64 * 10 + nth;
                // 40 steps: a segment roll and a reopen or two happen.
                let plan = FaultPlan { kind, nth, error };
                let r = fault_run(&scratch(), 40, seed, direct, None, plan).await;
                runs += 1;
                fired += u32::from(r.fault_fired);
            }
        }
    }
    println!("{runs} fault runs, {fired} faults fired (direct {direct})");
    // Every kind the log uses fails at least once (mkdir only at creation).
    assert!(fired >= 30, "{fired} of {runs} faults fired");
}

ringkit::test_all! {
    async fn faults_on_every_operation_lose_nothing_acknowledged() {
        faults(false).await;
        faults(true).await;
    }
}

/// Dense sweeps: every position from 1 to 32 of a sync failing with `EIO`
/// and of a short write (the linked write and sync, and the `RWF_DSYNC`
/// write, among them), on two seeds (one buffered, one `O_DIRECT`), each
/// with batches made durable both ways. A bug that shows only when the
/// fault lands in one window (two syncs in flight, a short write taken as
/// complete) is hit on every run, not by chance.
async fn dense(kind: OpKind, error: Option<i32>) -> (u32, u32, u32) {
    let (mut runs, mut fired, mut disk_reads, mut refused) = (0, 0, 0, 0);
    for (seed, direct, dsync) in [
        (201, false, false),
        (202, true, false),
        (201, false, true),
        (202, true, true),
    ] {
        for nth in 1..=32 {
            let plan = FaultPlan { kind, nth, error };
            let r = fault_run(&scratch(), 30, seed, direct, Some(dsync), plan).await;
            runs += 1;
            fired += u32::from(r.fault_fired);
            refused += u32::from(r.fault_refused);
            disk_reads += r.disk_reads;
        }
    }
    println!(
        "{kind:?} {error:?}: {runs} runs, {fired} faults fired ({refused} refused an RWF_DSYNC \
         write), {disk_reads} O_DIRECT reads saw the disk apart from the page cache"
    );
    if kind == OpKind::Sync {
        // After a failed sync the reopen's O_DIRECT scan read the disk's
        // bytes where the page cache held the batch (the cached tail that
        // recovery must zero).
        assert!(
            disk_reads > 0,
            "the page cache was never apart from the disk"
        );
    }
    (runs, fired, refused)
}

ringkit::test_all! {
    async fn dense_sync_failures_lose_nothing_acknowledged() {
        let (runs, fired, _) = dense(OpKind::Sync, Some(libc::EIO)).await;
        assert!(fired * 4 >= runs * 3, "{fired} of {runs} faults fired");
    }

    async fn dense_short_writes_lose_nothing_acknowledged() {
        let (runs, fired, _) = dense(OpKind::Write, None).await;
        assert!(fired * 4 >= runs * 3, "{fired} of {runs} faults fired");
    }

    /// A kernel that refuses `RWF_DSYNC` (`EOPNOTSUPP`, nothing written)
    /// at every position: where the refused write is a batch's, the log
    /// writes it again with `fdatasync` and goes on that way, and every
    /// crash state still keeps every acknowledged record. A fallback that
    /// wrote without the sync acknowledged records that no sync covered.
    async fn dense_rwf_dsync_refusals_lose_nothing_acknowledged() {
        let (runs, fired, refused) = dense(OpKind::Write, Some(libc::EOPNOTSUPP)).await;
        assert!(fired * 4 >= runs * 3, "{fired} of {runs} faults fired");
        assert!(refused >= 8, "{refused} faults refused an RWF_DSYNC write");
    }
}

ringkit::test_all! {
    /// Sweeps of short writes and refused `RWF_DSYNC` writes on `O_DIRECT`
    /// logs on a disk file system (the build directory): tmpfs takes
    /// direct I/O from unaligned memory, a disk refuses it (`EINVAL`) as it
    /// would in production, so a write from a misaligned copy (the rest of
    /// a short write, say) fails here.
    async fn dense_direct_faults_on_a_disk_lose_nothing_acknowledged() {
        let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        if on_tmpfs(disk.path()) {
            println!("skipped: the build directory {} is on tmpfs", disk.path().display());
            return;
        }
        let started = std::time::Instant::now();
        let (mut runs, mut fired) = (0, 0);
        for (kind, error) in [(OpKind::Write, None), (OpKind::Write, Some(libc::EOPNOTSUPP))] {
            for dsync in [false, true] {
                for nth in 1..=10 {
                    let plan = FaultPlan { kind, nth, error };
                    let r = fault_run(disk.path(), 30, 202, true, Some(dsync), plan).await;
                    runs += 1;
                    fired += u32::from(r.fault_fired);
                }
            }
        }
        println!(
            "on {}: {runs} runs, {fired} faults fired in {:.1} s",
            disk.path().display(),
            started.elapsed().as_secs_f64()
        );
        assert!(fired * 4 >= runs * 3, "{fired} of {runs} faults fired");
    }

    /// On a disk file system (the temp dir, ext4 on the machines this
    /// runs on) a recycled segment is zeroed with `FALLOC_FL_ZERO_RANGE`
    /// rather than written over, as on tmpfs: the explorer models that
    /// range as zeros written, and every state still recovers.
    async fn recycled_segments_zeroed_in_place_lose_nothing() {
        let disk = tempfile::tempdir().unwrap();
        if on_tmpfs(disk.path()) {
            println!(
                "skipped: the temp dir {} is on tmpfs, which has no FALLOC_FL_ZERO_RANGE \
                 (set TMPDIR to a directory on a disk file system)",
                disk.path().display()
            );
            return;
        }
        let mut cfg = Config::new(60, 12, disk.path());
        cfg.direct = true;
        cfg.budget = 16;
        let r = crashcheck::explore(&cfg).await.unwrap();
        println!(
            "on {}: {} states, {} purged segments recycled, {} ranges zeroed in place",
            disk.path().display(),
            r.states,
            r.recycled,
            r.zeroed_ranges
        );
        assert!(r.violations.is_empty(), "{:#?}", r.violations);
        assert!(r.recycled >= 1, "no purged segment was recycled");
        assert!(r.zeroed_ranges >= 1, "no FALLOC_FL_ZERO_RANGE ran");
    }
}

/// Whether `p` is on tmpfs (`statfs`).
fn on_tmpfs(p: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a zeroed statfs is a valid out-parameter; `c` is a
    // NUL-terminated path.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut s) };
    rc == 0 && s.f_type == libc::TMPFS_MAGIC
}
