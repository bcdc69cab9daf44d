//! Opening a log: making a new one durably, recovering one that exists
//! (read-write: a torn tail is cleared; read-only: nothing is written).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use ringkit::fs::OpenOptions;

use crate::batch::BatchBuf;
use crate::edit;
use crate::flush::flusher;
use crate::frame::{self, BatchHeader, Manifest, SegmentHeader, BATCH_HEADER, MIN_ALIGN};
use crate::log::{Inner, Log, Segment, State, Stats};
use crate::manifest::{self, MANIFEST_TMP};
use crate::recover::{self, Found, Layout};
use crate::segment;
use crate::spare;
use crate::Options;

impl Log {
    /// Open the log in `dir` for appending, making it if `dir` holds none
    /// (and `dir` itself if missing: its parent is synced so the new
    /// directory is durable), and recover it.
    ///
    /// Recovery reads the manifest, every segment's header and every batch.
    /// Records end at the first place that is not a whole batch of the next
    /// LSN. What lies after them is a torn tail (the batches in flight at a
    /// crash, the oldest cut before its sync: never acknowledged) only if
    /// it is in the last segment, within the bytes the segment's batches in
    /// flight can span, and no more whole batches of this log lie after it
    /// than could be in flight beside the torn one (none for a segment
    /// written with one in flight); it is then zeroed. Anything else (damage
    /// before acknowledged records, a missing, extra or foreign segment, a
    /// damaged header) fails with `InvalidData` naming the segment and
    /// offset, and nothing is written. One open log per directory (`LOCK`,
    /// `flock`): a second open fails with `ResourceBusy`, naming the lock
    /// file and, where `/proc/locks` tells, the process holding it. A log
    /// of this process that was just dropped keeps its lock until its
    /// flusher has finished the batch in hand; an open that finds the lock
    /// held by this process waits up to 2 s for that.
    /// Must be called inside a ringkit runtime; the log then lives on it.
    pub async fn open(dir: impl AsRef<Path>, opts: Options) -> io::Result<Log> {
        opts.check()?;
        let dir = dir.as_ref().to_path_buf();
        make_dir(&dir).await?;
        let lock = lock_dir_waiting(&dir).await?;
        // Whatever names the directory holds are made durable before
        // anything is built on them: a run whose directory sync failed
        // (after a segment's rename, a manifest's) left them in the page
        // cache only, and this open is about to append into them.
        ringkit::fs::sync_dir(&dir).await?;
        // The last segment is scanned with O_DIRECT whatever the log's mode:
        // after a failed writeback the page cache may hold a batch the disk
        // does not, and recovery must build on what the disk holds.
        let layout = match recover::recover(&dir, true).await? {
            Layout::Empty => {
                remove_strays(&dir).await?;
                create(&dir, &opts, frame::new_log_id(), opts.first_lsn).await?;
                recover::recover(&dir, true).await?
            }
            Layout::HalfMade(h) => {
                // Made up to its first segment: finish it.
                remove_strays(&dir).await?;
                let m = Manifest {
                    log_id: h.log_id,
                    start: h.first,
                    newest: h.first,
                };
                manifest::write_manifest(&dir, &m).await?;
                recover::recover(&dir, true).await?
            }
            log => {
                // Only once the log is known sound: a refused open writes
                // nothing (but `LOCK`, made if missing).
                remove_strays(&dir).await?;
                log
            }
        };
        let Layout::Log {
            manifest,
            segments,
            torn,
            truncation,
            purged,
        } = layout
        else {
            return Err(io::Error::other("a log just made is not there"));
        };
        // Finish what a crash cut short: a purge's deletions, a truncation.
        for first in &purged {
            match ringkit::fs::remove_file(dir.join(segment::name(*first))).await {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        if !purged.is_empty() {
            ringkit::fs::sync_dir(&dir).await?;
        }
        let manifest = match truncation {
            Some(t) => {
                tracing::info!(
                    "ringkit-log: {}: finishing a truncation from LSN {} cut short",
                    dir.display(),
                    t.from
                );
                edit::finish_truncation(&dir, &t, manifest).await?
            }
            None => manifest,
        };
        let last = segments.last().expect("a log has a segment");
        if last.first > manifest.newest {
            // A roll whose manifest write failed, or a crash between the
            // two: the manifest names the newest segment before anything
            // is appended to it.
            let m = Manifest {
                newest: last.first,
                ..manifest
            };
            remove_strays(&dir).await?;
            manifest::write_manifest(&dir, &m).await?;
        }
        let w = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&last.path)
            .await?;
        let block = segment::block_of(&w).await?;
        check_block(&opts, block)?;
        let mut end = last.end;
        // The page cache may hold bytes past the end that the disk does not
        // (a batch whose writeback failed): they go too.
        let cached = segment::Reader::new(&w, last.size)
            .last_nonzero(end, (end + last.window).min(last.size))
            .await?;
        if let Some(lastnz) = torn.max(cached) {
            segment::zero_range(&w, end, lastnz).await?;
            tracing::info!(
                "ringkit-log: {}: torn tail after LSN {} cleared ({} bytes, never acknowledged)",
                last.path.display(),
                last.first + last.offsets.len() as u64 - 1,
                lastnz + 1 - end
            );
        }
        // What recovery found may have reached only the page cache (a crash
        // between a batch's write and its sync): durable before anything is
        // built on it.
        w.sync_data().await?;
        // Direct batches go on 4096-byte blocks (`check_block` refused a
        // file system that asks more); a segment made buffered on one
        // that asks more says so in its header, and changes nothing here.
        let a = u64::from(MIN_ALIGN);
        if opts.direct && end % a != 0 {
            // Pad to the next block if that fits the segment; if not, the
            // end stays unaligned and the first batch starts a new segment.
            let next_block = (end + BATCH_HEADER as u64).div_ceil(a) * a;
            if next_block < last.size {
                let next = last.first + last.offsets.len() as u64;
                end = pad_to_block(&w, manifest.log_id, next, end, a).await?;
            }
        }
        let writer = segment::open_write(&last.path, opts.direct).await?;
        let state = edit::read_state(&dir, manifest.log_id).await?;
        build(
            dir,
            Some(lock),
            opts,
            manifest,
            segments,
            end,
            Some(writer),
            state,
            block,
        )
    }

    /// Open the log in `dir` to read it, writing nothing: no recovery
    /// writes, no lock, no file made. It works on a log another process
    /// has open and is appending to: it sees what the segment files held
    /// when it scanned (a scan that raced an append is tried again), which
    /// is every record durable by then and possibly the batches being
    /// written, whose syncs have not returned (their appends have not
    /// resolved; after a failed sync they never will, and recovery may drop
    /// them). A
    /// torn tail is left as it is (the records end before it); damage is
    /// `InvalidData` as for [`Log::open`]. [`Log::append`] fails with
    /// `PermissionDenied`.
    pub async fn open_read_only(dir: impl AsRef<Path>, opts: Options) -> io::Result<Log> {
        let dir = dir.as_ref().to_path_buf();
        if !dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no log at {}: not a directory", dir.display()),
            ));
        }
        let mut tries = 0;
        let layout = loop {
            match recover::recover(&dir, false).await {
                // A writer may have been mid-batch: look again.
                Err(e) if e.kind() == io::ErrorKind::InvalidData && tries < 3 => {
                    tries += 1;
                    ringkit::time::sleep(Duration::from_millis(20)).await;
                }
                other => break other?,
            }
        };
        let (manifest, segments, end) = match layout {
            Layout::Empty => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no log in {} (no MANIFEST, no segment)", dir.display()),
                ))
            }
            Layout::HalfMade(h) => {
                let m = Manifest {
                    log_id: h.log_id,
                    start: h.first,
                    newest: h.first,
                };
                return build(dir, None, opts, m, Vec::new(), 0, None, None, MIN_ALIGN);
            }
            Layout::Log {
                manifest, segments, ..
            } => {
                let end = segments.last().map_or(0, |s| s.end);
                (manifest, segments, end)
            }
        };
        let state = edit::read_state(&dir, manifest.log_id).await?;
        build(
            dir, None, opts, manifest, segments, end, None, state, MIN_ALIGN,
        )
    }
}

/// Remove what a cut-short segment or manifest making left.
async fn remove_strays(dir: &Path) -> io::Result<()> {
    for stray in [
        spare::SPARE,
        MANIFEST_TMP,
        edit::TRUNCATE_TMP,
        edit::STATE_TMP,
    ] {
        match ringkit::fs::remove_file(dir.join(stray)).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Make `dir` (and any missing ancestor) if missing, each made directory's
/// parent synced so its name is durable; and sync `dir`'s parent always,
/// not only when this call made it (a run that made it may have failed
/// before its sync).
async fn make_dir(dir: &Path) -> io::Result<()> {
    let parent_of = |d: &Path| match d.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let mut missing = Vec::new();
    let mut d = dir.to_path_buf();
    while !d.is_dir() {
        missing.push(d.clone());
        let p = parent_of(&d);
        if p == d || missing.len() > 64 {
            break;
        }
        d = p;
    }
    for d in missing.iter().rev() {
        match ringkit::fs::create_dir(d).await {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(io::Error::new(e.kind(), format!("log dir: {e}")))
            }
            _ => {}
        }
        ringkit::fs::sync_dir(parent_of(d)).await?;
    }
    if missing.is_empty() {
        ringkit::fs::sync_dir(parent_of(dir)).await?;
    }
    Ok(())
}

/// Make a new log in `dir`: its first segment, then its manifest (a
/// manifest always has a segment beside it).
async fn create(dir: &Path, opts: &Options, log_id: u64, start: u64) -> io::Result<()> {
    spare::make(dir, opts.segment_size).await?;
    let spare = OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(spare::SPARE))
        .await?;
    let block = segment::block_of(&spare).await?;
    check_block(opts, block)?;
    let header = SegmentHeader {
        log_id,
        first: start,
        window: opts.window(block) as u32,
        size: opts.segment_size,
        depth: opts.batches_in_flight,
        align: block,
    };
    spare::install(dir, &spare, &header).await?;
    let m = Manifest {
        log_id,
        start,
        newest: start,
    };
    manifest::write_manifest(dir, &m).await
}

/// A segment size the file system's direct I/O block divides (a segment
/// ends on a block), and, for a direct log, a block no larger than the
/// segment header: records start right after it, so the first batch of a
/// segment must start on a block there.
fn check_block(opts: &Options, block: u32) -> io::Result<()> {
    if opts.direct && block > MIN_ALIGN {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "the file system asks O_DIRECT for {block}-byte blocks; a direct log's records \
                 start {MIN_ALIGN} bytes into a segment, so it needs blocks of at most {MIN_ALIGN}: \
                 open it buffered (Options::direct false)"
            ),
        ));
    }
    if opts.segment_size % u64::from(block) != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "segment_size {} is not a multiple of the file system's O_DIRECT block ({block} bytes)",
                opts.segment_size
            ),
        ));
    }
    Ok(())
}

/// Direct mode after a buffered one left the records ending mid-block: an
/// empty batch whose padding reaches the next block, written and synced
/// through the buffered descriptor. Returns the new end.
async fn pad_to_block(
    w: &ringkit::fs::File,
    log_id: u64,
    next: u64,
    end: u64,
    a: u64,
) -> io::Result<u64> {
    let next_block = (end + BATCH_HEADER as u64).div_ceil(a) * a;
    let h = BatchHeader {
        first: next,
        count: 0,
        len: 0,
        pad: (next_block - end) as u32 - BATCH_HEADER as u32,
        hole: false,
    };
    let mut b = vec![0u8; BATCH_HEADER];
    h.encode_into(log_id, &mut b);
    w.write_all_at_sync(b, end).await.0?;
    Ok(next_block)
}

#[allow(clippy::too_many_arguments)]
fn build(
    dir: std::path::PathBuf,
    lock: Option<std::fs::File>,
    opts: Options,
    manifest: Manifest,
    found: Vec<Found>,
    end: u64,
    writer: Option<ringkit::fs::File>,
    state: Option<Vec<u8>>,
    block: u32,
) -> io::Result<Log> {
    let (seg_size, seg_window, seg_depth, seg_align) =
        found.last().map_or((0, 0, 1, MIN_ALIGN), |s| {
            (s.size, s.window, s.depth, s.align)
        });
    let next_lsn = found
        .last()
        .map_or(manifest.start, |s| s.first + s.offsets.len() as u64);
    let segments = found
        .into_iter()
        .map(|f| Segment {
            first: f.first,
            offsets: f.offsets,
            end: f.end,
            reader: Rc::new(f.file),
            holes: f.holes,
        })
        .collect();
    let writing = writer.is_some();
    let (bufs, pool) = if writing {
        // One per batch that may be in flight: in segments made from now
        // on, and in the last segment, which keeps the depth it was made
        // with (a log made with 2 reopened with 1 still has 2 in flight
        // until its next segment).
        let padded = seg_align.max(block) as usize;
        BatchBuf::new(
            BATCH_HEADER + opts.max_batch + padded,
            opts.batches_in_flight.max(seg_depth) as usize,
            opts.registered_buffers,
            padded,
        )
    } else {
        (Vec::new(), None)
    };
    let stats = Stats {
        registered_buffer: bufs.first().is_some_and(|b| b.is_registered()),
        ..Stats::default()
    };
    let dsync_writes = opts.dsync_writes;
    let inner = Rc::new(Inner {
        dir,
        _lock: lock,
        opts,
        log_id: manifest.log_id,
        block,
        st: RefCell::new(State {
            dsync: Rc::new(std::cell::Cell::new(dsync_writes)),
            segments,
            writer: writer.map(Rc::new),
            seg_size,
            seg_window,
            seg_depth,
            seg_align,
            end,
            start: manifest.start,
            next_lsn,
            state,
            queue: VecDeque::new(),
            failed: None,
            bufs,
            _pool: pool,
            spare: None,
            recyclable: Vec::new(),
            removing: None,
            stats,
            flushing: false,
            idle_waiters: Vec::new(),
        }),
        flusher: RefCell::new(None),
        acks: Default::default(),
    });
    if writing {
        ringkit::spawn(flusher(Rc::downgrade(&inner)));
    }
    Ok(Log::from_inner(inner))
}

/// How long an open waits for a lock held by this process (a log just
/// dropped, whose flusher is finishing its batch).
const OWN_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// [`lock_dir`], waiting up to [`OWN_LOCK_WAIT`] while the holder is this
/// process (or cannot be told): a dropped log releases its lock once its
/// flusher has finished the batch in hand (which may be the one that
/// acknowledged the last append).
async fn lock_dir_waiting(dir: &Path) -> io::Result<std::fs::File> {
    let until = std::time::Instant::now() + OWN_LOCK_WAIT;
    loop {
        match lock_dir(dir) {
            Err((e, holder))
                if e.kind() == io::ErrorKind::ResourceBusy
                    && holder.is_none_or(|pid| pid == std::process::id())
                    && std::time::Instant::now() < until =>
            {
                ringkit::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            r => return r.map_err(|(e, _)| e),
        }
    }
}

/// Hold `dir/LOCK` (`flock`, exclusive): one open log per directory, in
/// this process or another; released when the log is dropped (once its
/// flusher is done) or the process dies. Busy: the error, and the holder's
/// pid where `/proc/locks` tells.
fn lock_dir(dir: &Path) -> Result<std::fs::File, (io::Error, Option<u32>)> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("LOCK"))
        .map_err(|e| (e, None))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::WouldBlock {
            return Err((e, None));
        }
        let pid = f
            .metadata()
            .ok()
            .and_then(|m| lock_holder(std::os::unix::fs::MetadataExt::ino(&m)));
        let holder = pid.map_or_else(String::new, |pid| format!(" by process {pid}"));
        let e = io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "log {} is already open: its lock {} is held{holder}",
                dir.display(),
                dir.join("LOCK").display()
            ),
        );
        return Err((e, pid));
    }
    Ok(f)
}

/// The process holding a `flock` on the file with inode `ino`, from
/// `/proc/locks` (lines like `1: FLOCK ADVISORY WRITE 4242 fd:01:1234 0 EOF`);
/// `None` if it cannot be told.
fn lock_holder(ino: u64) -> Option<u32> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // A blocked waiter's line has "->" after the number.
        let f = if f.get(1) == Some(&"->") {
            &f[1..]
        } else {
            &f[..]
        };
        if f.get(1) != Some(&"FLOCK") {
            return None;
        }
        let file_ino: u64 = f.get(5)?.rsplit(':').next()?.parse().ok()?;
        (file_ino == ino).then(|| f.get(4)?.parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_log_refuses_a_block_its_segment_header_cannot_start_on() {
        // Records start at 4096, after the segment header: a direct log
        // on a file system that asks more of O_DIRECT could not start its
        // first batch on a block (the flusher's pipeline refuses that).
        let direct = Options {
            direct: true,
            ..Options::default()
        };
        assert!(check_block(&direct, 4096).is_ok());
        let e = check_block(&direct, 8192).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains("8192"), "{e}");
        // Buffered, nothing is padded: any block that divides a segment.
        let buffered = Options::default();
        assert!(check_block(&buffered, 8192).is_ok());
        let odd = Options {
            segment_size: (64 << 20) + 4096,
            ..Options::default()
        };
        assert_eq!(
            check_block(&odd, 8192).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
