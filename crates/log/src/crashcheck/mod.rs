//! The crash-state explorer: a check, state by state, that a crash never
//! loses or changes an acknowledged record (every state at a point of the
//! trace while there are at most `budget`, a seeded sample past that: a
//! batch of 17 sectors alone has 2^17 tear patterns).
//!
//! A seeded workload appends to a log (one record or several at once,
//! more while a batch is in flight, reopening it now and then, and now
//! and then truncating it, purging it or saving its state, queued among
//! the appends) while a
//! [`trace::Recorder`], installed as `ringkit::fs`'s hook, records every
//! write with its bytes, every sync,
//! `fallocate`, create, rename, removal and directory sync, and the
//! workload notes each acknowledgement. Then, at every point of the trace,
//! [`model::Model`] enumerates the states a crash there could leave on
//! disk (every synced prefix, plus any subset of the writes since the last
//! sync, each torn at sector boundaries, and unsynced names lost), each is
//! written to a scratch directory, and recovery runs on it: read-only,
//! read-write, then read-only again. A state passes when:
//!
//! - recovery succeeds (a state a crash can leave must open), never panics;
//! - every record acknowledged before that point is there, byte for byte,
//!   at its LSN;
//! - every record there was appended by the workload, once, and the LSNs
//!   run without a gap from the log's first (but where a purge past the
//!   end skips them);
//! - no record an acknowledged truncation removed, and none before an
//!   acknowledged purge, comes back; a truncation under way at the crash
//!   happened whole or not at all;
//! - the state is the last one acknowledged or one saved since;
//! - the read-only and read-write recoveries agree, and the read-write
//!   recovery's writes change nothing a later recovery reads.
//!
//! With a [`FaultPlan`], the k-th operation of one kind fails (`EIO`,
//! `ENOSPC`, or a short write; on an `RWF_DSYNC` write, `EOPNOTSUPP` or
//! `ENOSYS` is the kernel refusing the flag, nothing written, which the
//! log answers with a write and an `fdatasync`, and is not a failure),
//! deterministically; the run then also checks that every append
//! resolves, that a log whose write or sync failed acknowledges nothing
//! more until it is reopened, and the crash states explored are those of
//! the faulted run.
//!
//! # What it does not model
//!
//! The hook records the requests `ringkit::fs` makes, not what the kernel
//! ran: a sync replaced under it (`sync_file_range` for `fdatasync`) is for
//! the power-loss file system's test to catch
//! (`crates/powerfs/tests/log.rs`, which does).
//!
//! Not modelled or checked: report a writeback error to the other
//! descriptors open on the file when it happened (Linux shows it to each
//! once; ringkit-log syncs a segment through one descriptor); a short write
//! from a registered buffer (a planted short write on the linked path is
//! made from an unregistered copy whose tail is unmapped, so the kernel
//! cuts it, then cancels the sync: the log's handling is the same, the
//! opcode is `WRITE`, not `WRITE_FIXED`; on an `O_DIRECT` file, whose
//! writes pin every page first, the first bytes are written alone and the
//! sync is not issued); dense sweeps of faults other than a failed sync, a
//! short write and a refused `RWF_DSYNC` (the other kinds fail at four
//! positions each); faults together with crashes, or more than one fault a run;
//! damage to synced bytes (only unsynced writes tear; `tests/recovery.rs`
//! damages synced batches by hand); directory changes made durable out of
//! order (ext4 and xfs journal them in order; btrfs and f2fs need not);
//! clean pages evicted after a failed writeback (a later buffered read
//! would see the disk); a kill is over when the trace is quiet for 2 ms (a
//! late completion of the dead log after that would be charged to the next
//! process); a failed truncation is settled as done when none of its
//! records is left (so a loss inside its range is excused: the caller asked
//! for them to go); and sectors that are garbled rather than torn (a
//! garbled sector makes `open` refuse, which is the intended answer).

mod cache;
mod crash;
mod judge;
mod kill;
pub mod model;
pub mod trace;
mod watch;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use crate::{Log, Options};
use judge::{check_state, state_bytes, Seen};
use model::{Model, Rng};
pub use trace::{Edit, FaultPlan, OpKind};
use trace::{Event, Recorder};

/// What to explore.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workload steps (each appends 1-4 records).
    pub ops: usize,
    /// The seed of the workload and of the state draws.
    pub seed: u64,
    /// Write with `O_DIRECT`.
    pub direct: bool,
    /// The most states explored at one point of the trace.
    pub budget: usize,
    /// A scratch directory (best on tmpfs); the explorer works in a new
    /// directory inside it and removes that when done.
    pub scratch: PathBuf,
    /// A fault to inject, if any.
    pub fault: Option<FaultPlan>,
    /// Print every event of the trace to stderr.
    pub print_trace: bool,
    /// At about every other reopen after the first, crash instead: put a
    /// crash state of the trace so far in place and recover from it
    /// (`crash.rs`).
    pub crashes: bool,
    /// How each log makes its batches durable: `Some(true)` one
    /// `RWF_DSYNC` write, `Some(false)` a write linked to an `fdatasync`,
    /// `None` drawn at every open (`Options::dsync_writes`).
    pub dsync: Option<bool>,
}

impl Config {
    /// `ops` steps of seed `seed`, buffered, 64 states per point.
    pub fn new(ops: usize, seed: u64, scratch: impl AsRef<Path>) -> Config {
        Config {
            ops,
            seed,
            direct: false,
            budget: 64,
            scratch: scratch.as_ref().to_path_buf(),
            fault: None,
            print_trace: false,
            crashes: true,
            dsync: None,
        }
    }
}

/// What an exploration found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Events in the trace.
    pub events: usize,
    /// Points of the trace where states were explored.
    pub points: usize,
    /// Crash states checked.
    pub states: u64,
    /// Distinct states among them, each written out and recovered (the
    /// same files give the same recovery, so a state seen before is judged
    /// by its recovery then, against what the workload had seen now).
    pub distinct: u64,
    /// Records acknowledged by the workload.
    pub acked: u64,
    /// Edits (truncations, purges, states saved) acknowledged.
    pub edits: u64,
    /// Whether the planned fault fired.
    pub fault_fired: bool,
    /// Whether it refused an `RWF_DSYNC` write (the log then writes and
    /// syncs its batches apart).
    pub fault_refused: bool,
    /// Syncs that returned with a later batch already written beside them
    /// (not covered by them): the pipelined states explored.
    pub overlapped: u64,
    /// Crashes the workload went through (a crash state put in place,
    /// recovered and appended to).
    pub crashes: u64,
    /// Of those, the ones whose state left out sectors of a write in
    /// flight (a batch torn or lost).
    pub torn_crashes: u64,
    /// Process kills: no file operation issued from a point on (a batch
    /// written, its sync not issued), the log dropped and reopened in
    /// place, the page cache kept (a power cut may follow later).
    pub kills: u64,
    /// Of those, the ones that struck inside a linked write+sync: its
    /// write in the page cache, its sync never run.
    pub kill_splits: u64,
    /// Writes that carried their own sync, as in production: a write
    /// linked to an `fdatasync` (`write_at_sync`) or an `RWF_DSYNC` write
    /// (`write_at_dsync`).
    pub linked: u64,
    /// Of those, the `RWF_DSYNC` writes.
    pub dsync_writes: u64,
    /// Purged segments recycled as a new segment (the logs' own count).
    pub recycled: u64,
    /// Ranges zeroed in place with `FALLOC_FL_ZERO_RANGE` (a recycled
    /// segment on a file system that has it; tmpfs has not, and gets
    /// zeros written).
    pub zeroed_ranges: u64,
    /// Whether a log of the run wrote from registered buffers
    /// (`WRITE_FIXED` on io_uring, as in production).
    pub registered: bool,
    /// Writes a failed sync left in the page cache only (the disk kept
    /// its old bytes there).
    pub lost_ranges: u64,
    /// `O_DIRECT` reads that saw the disk's bytes where the page cache
    /// held others.
    pub disk_reads: u64,
    /// Everything that went wrong, each with how to replay it.
    pub violations: Vec<String>,
}

/// The options of every explored log: small segments (rolls happen) and
/// small batches (few sectors per write).
pub fn options(direct: bool) -> Options {
    Options {
        direct,
        segment_size: 64 << 10,
        max_batch: 8 << 10,
        registered_buffers: false,
        first_lsn: 1,
        batches_in_flight: 2,
        dsync_writes: true,
        recycle_segments: true,
    }
}

/// The payload of append `id` of run `seed`: its id, then seeded bytes.
pub fn payload(seed: u64, id: u64, len: usize) -> Vec<u8> {
    let mut r = Rng((seed << 20 ^ id).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut out = Vec::with_capacity(16 + len);
    out.extend_from_slice(&seed.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend((0..len).map(|_| r.next_u64() as u8));
    out
}

/// The payload number of `p` if it is a payload of run `seed` (its first
/// 16 bytes; the rest unchecked).
pub(crate) fn payload_id(seed: u64, p: &[u8]) -> Option<u64> {
    (p.len() >= 16 && p[..8] == seed.to_le_bytes())
        .then(|| u64::from_le_bytes(p[8..16].try_into().expect("8 bytes")))
}

/// Run the workload and explore its crash states. Must run inside a
/// ringkit runtime (the backend under test); installs and removes the
/// thread's `ringkit::fs` hook.
pub async fn explore(cfg: &Config) -> io::Result<Report> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let work = cfg.scratch.join(format!(
        "ringkit-crashcheck-{}-{run}-{}",
        std::process::id(),
        cfg.seed
    ));
    if work.exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists: not touching it", work.display()),
        ));
    }
    std::fs::create_dir_all(work.join("run"))?;
    let res = explore_in(cfg, &work).await;
    let _ = std::fs::remove_dir_all(&work);
    res
}

async fn explore_in(cfg: &Config, work: &Path) -> io::Result<Report> {
    let root = work.join("run");
    let rec = Rc::new(Recorder::new(&root, cfg.fault));
    let prev = ringkit::fs::hook::set_hook(Some(rec.clone()));
    let mut report = Report::default();
    let outcome = workload(cfg, &root.join("log"), &rec, &mut report).await;
    ringkit::fs::hook::set_hook(prev);
    report.fault_fired = rec.fired();
    report.fault_refused = rec.refused();
    (report.linked, report.dsync_writes) = rec.linked();
    report.crashes = rec.crashes();
    report.kill_splits = rec.kill.splits();
    (report.lost_ranges, report.disk_reads) = rec.cache_split();
    report.violations.extend(rec.violations());
    if let Err(v) = outcome {
        report.violations.push(v);
    }
    let events = rec.events();
    report.events = events.len();
    report.zeroed_ranges = rec.zeroed_ranges();
    if cfg.print_trace {
        for (i, e) in events.iter().enumerate() {
            eprintln!("{i:5} {}", short(e));
        }
    }
    check_poison(cfg, &events, &mut report);
    report.overlapped = overlapped(&events);
    explore_trace(cfg, &events, work, &mut report).await?;
    Ok(report)
}

/// The workload: appends of 1-4 records at once, a reopen now and then.
/// `Err` is a violation (an append that never resolved).
async fn workload(
    cfg: &Config,
    dir: &Path,
    rec: &Recorder,
    report: &mut Report,
) -> Result<(), String> {
    let mut rng = Rng(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut id = 0u64;
    let mut states = 0u64;
    let mut log = None;
    // Whether the planted fault had fired before the open log was opened:
    // then it is not that log's to fail on.
    let mut fired_before_open = false;
    // Its own generator: the workload's steps are the same with crashes
    // on or off. Not in fault runs: a crash would put a durable copy in
    // place of the page cache apart from the disk that a failed sync left,
    // which is what those runs check.
    let crashes = cfg.crashes && cfg.fault.is_none();
    let mut crash_rng = Rng(cfg.seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
    let work = dir
        .parent()
        .and_then(Path::parent)
        .expect("the log's directory is two below the work directory")
        .to_path_buf();
    let mut dir = dir.to_path_buf();
    let mut generation = 0u64;
    // Edits that failed: the next recovery finishes them or not, and the
    // judge is told which.
    let mut unsettled = Vec::new();
    let replay = || {
        format!(
            "(replay: seed {}, ops {}, direct {}, dsync {:?})",
            cfg.seed, cfg.ops, cfg.direct, cfg.dsync
        )
    };
    for step in 0..cfg.ops {
        if log.is_none() || rng.below(15) == 0 {
            retire(log.take(), report);
            rec.note(Event::Reopen);
            let fired = rec.fired();
            fired_before_open = fired;
            // Now and then with other options: batches of another size, the
            // other mode (a buffered log reopened direct, and back).
            let mut o = options(cfg.direct);
            // Registered buffers as in production (`WRITE_FIXED`); the
            // judge's many recoveries do without.
            o.registered_buffers = true;
            // Batches made durable either way: one `RWF_DSYNC` write (the
            // default) or a write linked to an `fdatasync`.
            let drawn = rng.below(2) == 0;
            o.dsync_writes = cfg.dsync.unwrap_or(drawn);
            if step > 0 && rng.below(2) == 0 {
                o.max_batch = [8 << 10, 12 << 10, 16 << 10][rng.below(3) as usize];
                o.direct = cfg.direct ^ (rng.below(3) == 0);
                // A log reopened with the other depth (its last segment
                // keeps the depth it was made with).
                o.batches_in_flight = if rng.below(3) == 0 { 1 } else { 2 };
            }
            match Log::open(&dir, o).await {
                Ok(l) => {
                    report.registered |= l.stats().registered_buffer;
                    for e in settle(cfg, &l, unsettled.drain(..)).await {
                        rec.note(Event::Edit(e));
                    }
                    // What recovery shows is the log from now on (a Raft
                    // follower reports it to its leader): it must survive
                    // as if acknowledged, though a kill left it unsynced.
                    for (lsn, id) in recovered(cfg, &l).await {
                        rec.note(Event::Ack { lsn, id });
                    }
                    let state = l.state_probe();
                    rec.watch
                        .set(Some(Box::new(move || watch::state_number(&state()?))));
                    log = Some(l);
                }
                Err(_) if !fired && rec.fired() => {
                    // A fault in recovery: it failed cleanly; open again.
                    rec.disarm();
                    continue;
                }
                Err(e) => {
                    return Err(format!(
                        "step {step}: open failed without a fault: {e} {}",
                        replay()
                    ))
                }
            }
        }
        let l = log.as_ref().expect("open");
        let n = 1 + rng.below(4);
        // Half the steps append again after letting the flusher start the
        // first batch, so a second batch goes in flight beside it.
        let again = if rng.below(2) == 0 {
            1 + rng.below(3)
        } else {
            0
        };
        let mut commits = Vec::new();
        // Now and then an edit, queued among the appends.
        let edit_at = (rng.below(6) == 0).then(|| rng.below(n + again + 1));
        for k in 0..=n + again {
            if edit_at == Some(k) {
                let e = issue_edit(cfg, l, &mut rng, id, &mut states);
                rec.note(Event::Edit(e.0));
                commits.push((Op::Edit(e.0), e.1));
            }
            if k == n + again {
                break;
            }
            if k == n {
                for _ in 0..1 + rng.below(3) {
                    ringkit::yield_now().await;
                }
            }
            // Mostly small; now and then up to the largest record a batch
            // takes (16 bytes of it are the payload's id).
            let len = if rng.below(6) == 0 {
                rng.below(l.max_record() as u64 - 15) as usize
            } else {
                rng.below(1500) as usize
            };
            rec.note(Event::Appended { id });
            commits.push((Op::Append(id), l.append(payload(cfg.seed, id, len))));
            id += 1;
        }
        // Now and then a crash in the middle of the step, an edit under
        // way too (the next recovery settles it). Half are power cuts,
        // after some of the step's commits resolved, the rest (and their
        // batches) in flight. Half are process kills, struck by the
        // recorder once a few more of the log's file operations completed,
        // or inside the next linked write+sync (its write done, its sync
        // never run: `kill::Kill`).
        let crash_after = (crashes && crash_rng.below(6) == 0)
            .then(|| crash_rng.below(commits.len() as u64 + 1) as usize);
        let kill = crash_after.is_some() && crash_rng.below(2) == 0;
        if kill && crash_rng.below(2) == 0 {
            rec.kill.arm_linked();
        } else if kill {
            rec.kill.arm(1 + crash_rng.below(6));
        }
        for (k, (op, c)) in commits.into_iter().enumerate() {
            if !kill && crash_after.is_some_and(|at| k >= at) {
                if let Op::Edit(e) = op {
                    unsettled.push(e);
                }
                continue;
            }
            match ringkit::time::timeout(Duration::from_secs(20), c).await {
                Ok(Ok(lsn)) => match op {
                    Op::Append(pid) => {
                        rec.note(Event::Ack { lsn, id: pid });
                        report.acked += 1;
                    }
                    Op::Edit(e) => {
                        rec.note(Event::Edit(acknowledged(e)));
                        report.edits += 1;
                    }
                },
                // Nothing planted for this log (no fault since it was
                // opened, no kill): nothing may fail. A bug the log's own
                // assertions catch in a task fails the batch rather than
                // the test; this is where it shows.
                Ok(Err(e)) if !kill && (fired_before_open || !rec.fired()) => {
                    return Err(format!(
                        "step {step}: {op:?} failed without a fault: {e} {}",
                        replay()
                    ));
                }
                Ok(Err(_)) => {
                    if let Op::Edit(e) = op {
                        unsettled.push(e);
                    }
                }
                Err(_) => {
                    return Err(format!(
                        "step {step}: an append never resolved {}",
                        replay()
                    ))
                }
            }
        }
        if kill {
            // The process is dead (if the step's operations ran out before
            // the kill struck, now): the log goes, the page cache stays.
            // Its operations in the kernel complete before the next open;
            // the dead log's tasks wind down, refused; then the next
            // process reopens in place.
            rec.kill.now();
            retire(log.take(), report);
            let mut quiet = (rec.event_count(), rec.kill.refused());
            for _ in 0..50 {
                ringkit::time::sleep(Duration::from_millis(2)).await;
                let now = (rec.event_count(), rec.kill.refused());
                if now == quiet {
                    break;
                }
                quiet = now;
            }
            rec.kill.revive();
            report.kills += 1;
        } else if crash_after.is_some() {
            // The power goes: the log and its appends in flight are
            // dropped, and the workload goes on in a new directory holding
            // a crash state of this point.
            retire(log.take(), report);
            generation += 1;
            let root = work.join(format!("gen{generation}"));
            let seed = cfg.seed ^ generation.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let torn = crash::crash(rec, &root, seed)
                .map_err(|e| format!("step {step}: putting a crash state in place: {e}"))?;
            report.torn_crashes += u64::from(torn);
            dir = root.join("log");
        }
    }
    if let Some(l) = log {
        report.recycled += l.stats().segments_recycled;
        l.close().await;
    }
    Ok(())
}

/// What the workload awaits: an append (its payload number) or an edit.
#[derive(Debug)]
enum Op {
    Append(u64),
    Edit(Edit),
}

/// Drop `log` (if any), counting the segments it recycled.
fn retire(log: Option<Log>, report: &mut Report) {
    if let Some(l) = log {
        report.recycled += l.stats().segments_recycled;
    }
}

/// Queue a truncation, a purge or a state save on `l`, chosen by `rng`;
/// `next_id` is the next payload to be appended, `states` the states
/// saved so far. Only edits valid when they run: a truncation from an LSN
/// up to the next one now (queued appends only raise the next), a purge
/// anywhere (past the end too).
fn issue_edit(
    cfg: &Config,
    l: &Log,
    rng: &mut Rng,
    next_id: u64,
    states: &mut u64,
) -> (Edit, crate::Commit) {
    let (first, next) = (l.first_lsn(), l.next_lsn());
    match rng.below(10) {
        0..=3 => {
            // Mostly near the end (a Raft conflict), now and then far back.
            let back = if rng.below(3) == 0 {
                next - first
            } else {
                (next - first).min(12)
            };
            let from = next - rng.below(back + 1);
            (Edit::Truncate { from, next_id }, l.truncate(from))
        }
        4..=6 => {
            let below = if rng.below(4) == 0 {
                next + 1 + rng.below(4)
            } else {
                first + rng.below((next - first) / 2 + 1)
            };
            (Edit::Purge { below }, l.purge(below))
        }
        _ => {
            *states += 1;
            let n = *states;
            (
                Edit::SaveState { n },
                l.save_state(state_bytes(cfg.seed, n)),
            )
        }
    }
}

/// What the recovery that opened `l` made of edits that failed: each
/// done (as if acknowledged) or not.
async fn settle(cfg: &Config, l: &Log, failed: impl Iterator<Item = Edit>) -> Vec<Edit> {
    let mut out = Vec::new();
    for e in failed {
        let done = match e {
            // Done if no record it removes is left.
            Edit::Truncate { from, next_id } => {
                let mut left = false;
                let mut next = from.max(l.first_lsn());
                while let Ok(got) = l.read_from(next, 256).await {
                    let Some(&(last, _)) = got.last() else { break };
                    left |= got
                        .iter()
                        .any(|(_, p)| payload_id(cfg.seed, p).is_some_and(|id| id < next_id));
                    next = last + 1;
                }
                !left
            }
            Edit::Purge { below } if l.first_lsn() < below && l.next_lsn() >= below => {
                // Past the end and cut short after its hole: the LSN before
                // `below` is skipped, not a record.
                let before = l.read_from(below - 1, 1).await.ok();
                if before.is_some_and(|r| r.first().is_none_or(|&(lsn, _)| lsn != below - 1)) {
                    out.push(Edit::PurgeHole { below });
                    continue;
                }
                false
            }
            Edit::Purge { below } => l.first_lsn() >= below,
            Edit::SaveState { n } => l.state() == Some(state_bytes(cfg.seed, n)),
            _ => continue,
        };
        out.push(match (e, done) {
            (e, true) => acknowledged(e),
            (Edit::Truncate { from, next_id }, false) => Edit::NotTruncated { from, next_id },
            (Edit::Purge { below }, false) => Edit::NotPurged { below },
            (Edit::SaveState { n }, false) => Edit::NotSaved { n },
            (e, false) => e,
        });
    }
    out
}

/// Every record of `l` that is one of this run's payloads: LSN and
/// payload number.
async fn recovered(cfg: &Config, l: &Log) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut next = l.first_lsn();
    while let Ok(got) = l.read_from(next, 256).await {
        let Some(&(last, _)) = got.last() else { break };
        out.extend(
            got.iter()
                .filter_map(|(lsn, p)| Some((*lsn, payload_id(cfg.seed, p)?))),
        );
        next = last + 1;
    }
    out
}

/// The acknowledgement of edit `e`.
fn acknowledged(e: Edit) -> Edit {
    match e {
        Edit::Truncate { from, next_id } => Edit::Truncated { from, next_id },
        Edit::Purge { below } => Edit::Purged { below },
        Edit::SaveState { n } => Edit::StateSaved { n },
        done => done,
    }
}

/// How many file syncs returned with a write of the same file recorded
/// after the sync was issued (so not covered by it).
fn overlapped(events: &[Event]) -> u64 {
    let mut n = 0;
    for (i, e) in events.iter().enumerate() {
        let (node, from) = match e {
            Event::SyncFile { node, upto } => (node, *upto),
            Event::SyncWrite { node, write } => (node, write + 1),
            _ => continue,
        };
        let later = events[from..i]
            .iter()
            .any(|w| matches!(w, Event::Write { node: m, .. } if m == node));
        n += u64::from(later);
    }
    n
}

/// A log whose segment write or sync failed acknowledges no record of the
/// failed batch or later until it is reopened, and writes no batch framed
/// after it: only the one other batch that may have been in flight beside
/// it (two in flight). (Acknowledgements are
/// noted when the workload's task runs, which may be after the flusher
/// went on, so they are judged by LSN: a batch's first LSN is in its
/// header. A failed sync is charged to the oldest batch written and not
/// yet covered by a sync that returned.)
fn check_poison(cfg: &Config, events: &[Event], report: &mut Report) {
    let mut names: BTreeMap<usize, String> = BTreeMap::new();
    // Per segment, the batches written and not yet covered by a sync that
    // returned: (trace index, first LSN).
    let mut unsynced: BTreeMap<usize, Vec<(usize, u64)>> = BTreeMap::new();
    // (what failed, the failed batch's first LSN, batches written since)
    let mut poisoned: Option<(String, u64, u32)> = None;
    let batch_lsn = |d: &[u8]| -> u64 {
        if d.len() >= 16 && &d[4..8] == crate::frame::BATCH_MAGIC {
            u64::from_le_bytes(d[8..16].try_into().expect("8 bytes"))
        } else {
            0
        }
    };
    let fail = |msg: String, report: &mut Report| {
        report
            .violations
            .push(format!("{msg} (seed {}, fault {:?})", cfg.seed, cfg.fault));
    };
    for (i, e) in events.iter().enumerate() {
        match e {
            Event::Create { name, node, .. } => {
                names.insert(*node, name.to_string_lossy().into_owned());
            }
            Event::SyncFile { node, upto } => {
                if let Some(v) = unsynced.get_mut(node) {
                    v.retain(|&(at, _)| at >= *upto);
                }
            }
            Event::SyncWrite { node, write } => {
                if let Some(v) = unsynced.get_mut(node) {
                    v.retain(|&(at, _)| at != *write);
                }
            }
            Event::Rename { from, to, .. } => {
                for v in names.values_mut() {
                    if **v == *from.to_string_lossy() {
                        *v = to.to_string_lossy().into_owned();
                    }
                }
            }
            Event::Write { node, data, .. }
                if names.get(node).is_some_and(|s| s.ends_with(".seg")) =>
            {
                let lsn = batch_lsn(data);
                if let Some((w, first, since)) = &mut poisoned {
                    if data.iter().any(|&b| b != 0) {
                        // The other batch in flight beside the failed one
                        // (before it: its write completes after the
                        // failure is recorded; or after it).
                        if lsn > 0 && lsn != *first && *since == 0 {
                            *since += 1;
                        } else {
                            let w = w.clone();
                            fail(format!("a batch written after a failed {w}"), report);
                            poisoned = None;
                        }
                    }
                }
                if lsn > 0 {
                    unsynced.entry(*node).or_default().push((i, lsn));
                }
            }
            Event::Faulted {
                what,
                node: Some(n),
                data,
            } if (what.starts_with("write") || what.starts_with("fdatasync"))
                && names.get(n).is_some_and(|s| s.ends_with(".seg")) =>
            {
                let first = if what.starts_with("write") {
                    batch_lsn(data)
                } else {
                    unsynced
                        .get(n)
                        .and_then(|v| v.iter().map(|&(_, l)| l).min())
                        .unwrap_or(0)
                };
                if first > 0 {
                    poisoned = Some((what.clone(), first, 0));
                }
            }
            Event::Reopen => poisoned = None,
            Event::Crash { files, .. } => {
                poisoned = None;
                unsynced.clear();
                for (path, node, _) in files {
                    if let Some(name) = path.file_name() {
                        names.insert(*node, name.to_string_lossy().into_owned());
                    }
                }
            }
            Event::Ack { lsn, .. } => {
                if let Some((w, first, _)) = &poisoned {
                    if lsn >= first {
                        fail(
                            format!("record {lsn} acknowledged after a failed {w}"),
                            report,
                        );
                        poisoned = None;
                    }
                }
            }
            _ => {}
        }
    }
}

async fn explore_trace(
    cfg: &Config,
    events: &[Event],
    work: &Path,
    report: &mut Report,
) -> io::Result<()> {
    let mut model = Model::new();
    let mut seen = Seen::default();
    let mut rng = Rng(cfg.seed ^ 0xC0FF_EE00_D15C_0001);
    let state_dir = work.join("state");
    let mut cache = std::collections::HashMap::new();
    for (i, e) in events.iter().enumerate() {
        model.apply(e);
        match e {
            // A crash right after an acknowledgement is judged there, not
            // only at the next file operation (a record acknowledged
            // before its sync returned fails at once): once per run of
            // acknowledgements, whose states differ only in what was seen.
            Event::Ack { lsn, id } => {
                seen.ack(*lsn, *id);
                if matches!(events.get(i + 1), Some(Event::Ack { .. })) {
                    continue;
                }
            }
            Event::Appended { id } => {
                seen.appended(*id);
                continue;
            }
            Event::Edit(edit) => {
                seen.edit(edit);
                if matches!(events.get(i + 1), Some(Event::Edit(_))) {
                    continue;
                }
            }
            Event::Reopen | Event::Faulted { .. } | Event::Crash { .. } => continue,
            _ => {}
        }
        report.points += 1;
        for choice in model.states(cfg.budget, &mut rng) {
            report.states += 1;
            let files = model.materialize(&choice);
            if let Err(v) = check_state(cfg, &files, &seen, &state_dir, &mut cache).await? {
                report.violations.push(format!(
                    "after event {i} ({}), state [{}]: {v} (replay: ringkit log crashcheck --seed {} \
                     --ops {}{}{})",
                    short(e),
                    choice.describe(),
                    cfg.seed,
                    cfg.ops,
                    if cfg.direct { " --direct" } else { "" },
                    match cfg.dsync {
                        Some(true) => " --sync dsync",
                        Some(false) => " --sync linked",
                        None => "",
                    }
                ));
                if report.violations.len() >= 20 {
                    report.distinct = cache.len() as u64;
                    return Ok(());
                }
            }
        }
    }
    report.distinct = cache.len() as u64;
    Ok(())
}

fn short(e: &Event) -> String {
    match e {
        Event::Write { node, offset, data } => format!("write node {node} {}@{offset}", data.len()),
        Event::Crash { files, choice } => {
            format!("crash: {} files and directories [{choice}]", files.len())
        }
        Event::Faulted { what, node, .. } => format!("faulted {what} (node {node:?})"),
        other => format!("{other:?}").chars().take(80).collect(),
    }
}
