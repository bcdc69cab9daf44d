//! The flusher: one task per log that takes what is queued as one batch
//! (a batch header, the records, in direct mode zeros to the next block)
//! and writes it with its own sync: one `RWF_DSYNC` write (or a write
//! linked to an `fdatasync`) when nothing is in flight before it, else a
//! write and, once the sync before it returned, an `fdatasync`. Up to the segment's depth
//! (`Options::batches_in_flight`, 2 by default) batches are in flight at
//! once: the next batch is framed and written while the one before it
//! syncs. Each append resolves once its batch's sync and every earlier
//! batch's have returned, in LSN order. A batch never spans segments; the
//! next segment is started only when nothing is in flight.
//!
//! Why acknowledging this way is safe: a batch is acknowledged when its
//! own sync has returned, and that sync covers the batch's bytes (an
//! `RWF_DSYNC` write's covers its own range; an `fdatasync` was issued
//! after the batch's write completed: linked on io_uring, in order on
//! epoll); every earlier batch was acknowledged first,
//! each on its own sync. No sync is relied on for a write it did not
//! follow. Syncs never overlap: a batch's write may run beside the sync
//! before it, but its own sync is issued only once that one has returned.
//! (Two `fdatasync`s at once on one file would be unsafe: a writeback
//! error is reported to one `fsync` caller of an open file, so the other
//! could return success over pages the kernel failed to write.) A crash
//! can leave every batch in flight torn or whole in any combination;
//! recovery (`segment::scan`) accepts exactly that: the oldest torn, at
//! most `depth - 1` whole ones after it, all within the segment's window,
//! and clears them (none was acknowledged: an acknowledgement waits for
//! every earlier batch's sync).
//!
//! # Two batches on one page
//!
//! With `O_DIRECT` each batch is padded to its own blocks, so the two
//! writes in flight never share a block; buffered, the second batch's first
//! page holds the first batch's last bytes, but it writes only bytes after
//! them, and a sector the page cache writes back holds the first batch's
//! bytes as they were written.
//!
//! The crash-state explorer found exactly that (an acknowledged record lost
//! after a fault on the 30th sync) before the syncs were serialized. An
//! `RWF_DSYNC` write vouches for no other bytes of the file, and the
//! explorer models it so (mutant 12 takes it for a sync of the file and is
//! killed).

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::Poll;

use futures_channel::oneshot;
use ringkit::fs::{File, OpenOptions};
use ringkit::JoinHandle;

use crate::ack::Ack;
use crate::batch::{BatchBuf, ALIGN};
use crate::edit;
use crate::frame::{BatchHeader, Manifest, SegmentHeader, BATCH_HEADER, SEGMENT_HEADER};
use crate::log::{failed, Control, Inner, Item, Pending, Segment, State};
use crate::manifest;
use crate::record::{self, HEADER};
use crate::segment;
use crate::spare;

/// A batch written (or being written) and not yet acknowledged.
struct InFlight {
    batch: Vec<Pending>,
    /// A hole of this many LSNs (see `salvage`), or 0.
    hole: u64,
    /// Its first LSN.
    first: u64,
    /// Where it starts in the last segment, and its length (padding
    /// included).
    start: u64,
    len: u64,
    /// Its write and sync.
    task: JoinHandle<(io::Result<()>, BatchBuf)>,
    /// Fires when its sync has returned: the next batch's sync waits for
    /// it (taken by that batch).
    synced: Option<oneshot::Receiver<()>>,
}

impl InFlight {
    fn lsns(&self) -> u64 {
        if self.hole > 0 {
            self.hole
        } else {
            self.batch.len() as u64
        }
    }
}

/// The flusher task: while the log lives, write what is queued, up to the
/// segment's depth of batches at once, and acknowledge them in order. It
/// keeps the log alive while a batch is in flight, so a batch written is
/// always acknowledged (or failed).
pub(crate) async fn flusher(log: Weak<Inner>) {
    let mut flight: VecDeque<InFlight> = VecDeque::new();
    let mut hold: Option<Rc<Inner>> = None;
    loop {
        let step = poll_fn(|cx| {
            let Some(inner) = hold.clone().or_else(|| log.upgrade()) else {
                return Poll::Ready(None);
            };
            if let Some(f) = flight.front_mut() {
                if let Poll::Ready(res) = Pin::new(&mut f.task).poll(cx) {
                    return Poll::Ready(Some((inner, Some(res))));
                }
            }
            if can_start(&inner, &inner.st.borrow(), &flight) {
                return Poll::Ready(Some((inner, None)));
            }
            *inner.flusher.borrow_mut() = Some(cx.waker().clone());
            let mut st = inner.st.borrow_mut();
            if flight.is_empty() && st.queue.is_empty() {
                for w in st.idle_waiters.drain(..) {
                    w.wake();
                }
            }
            Poll::Pending
        })
        .await;
        let Some((inner, done)) = step else { return };
        match done {
            Some(res) => {
                let f = flight.pop_front().expect("a batch in flight");
                complete(&inner, f, res);
            }
            None => start(&inner, &mut flight).await,
        }
        let mut st = inner.st.borrow_mut();
        st.flushing = !flight.is_empty();
        hold = st.flushing.then(|| inner.clone());
        if !st.flushing && st.queue.is_empty() {
            for w in st.idle_waiters.drain(..) {
                w.wake();
            }
        }
    }
}

/// Where the next batch goes: after the last one in flight, else where
/// the records end.
fn tail(st: &State, flight: &VecDeque<InFlight>) -> u64 {
    flight.back().map_or(st.end, |f| f.start + f.len)
}

/// The most record bytes the next batch may hold: the options' bound, and
/// what the segment's window leaves beside the batches in flight (a
/// segment made with a smaller `max_batch` or depth keeps its own bound).
fn batch_limit(inner: &Inner, st: &State, flight: &VecDeque<InFlight>) -> usize {
    let busy: u64 = flight.iter().map(|f| f.len).sum();
    let in_window = st
        .seg_window
        .saturating_sub(busy + (BATCH_HEADER + ALIGN) as u64) as usize;
    inner.opts.max_batch.min(in_window)
}

/// Whether the next batch can be started now: something is queued, and
/// either nothing is in flight (a failed log fails the queue; a segment
/// is started if need be), or the segment's depth and window leave room
/// for its first record in this segment.
fn can_start(inner: &Inner, st: &State, flight: &VecDeque<InFlight>) -> bool {
    let Some(front) = st.queue.front() else {
        return false;
    };
    if flight.is_empty() || st.failed.is_some() {
        return true;
    }
    // An edit waits for every batch before it.
    if front.is_edit() {
        return false;
    }
    if flight.len() >= st.seg_depth as usize || st.bufs.is_empty() {
        return false;
    }
    let first = HEADER + front.payload().len();
    first <= batch_limit(inner, st, flight) && fits(inner, st, tail(st, flight), first)
}

/// Frame what is queued into one batch and start its write and sync, or
/// fail the queue.
async fn start(inner: &Rc<Inner>, flight: &mut VecDeque<InFlight>) {
    let failed_before = failed(&inner.st.borrow());
    if let Some(err) = failed_before {
        fail_queue(inner, &err);
        return;
    }
    let is_edit = inner
        .st
        .borrow()
        .queue
        .front()
        .is_some_and(Pending::is_edit);
    if is_edit {
        debug_assert!(flight.is_empty());
        edit(inner).await;
        return;
    }
    // A batch never spans segments: if the first record does not fit what
    // is left of this one, start the next segment first (only with
    // nothing in flight: `can_start`).
    let needs_roll = {
        let st = inner.st.borrow();
        let first = HEADER + st.queue.front().expect("queue not empty").payload().len();
        first > batch_limit(inner, &st, flight) || !fits(inner, &st, tail(&st, flight), first)
    };
    if needs_roll {
        debug_assert!(flight.is_empty());
        if let Err(e) = roll(inner).await {
            // A full disk: these records fail; nothing was written, so the
            // log is sound and the next append tries again.
            let e = io::Error::new(e.kind(), format!("cannot start a new log segment: {e}"));
            fail_queue(inner, &e);
            return;
        }
    }
    let mut st = inner.st.borrow_mut();
    let limit = batch_limit(inner, &st, flight);
    let start = tail(&st, flight);
    let first = flight.back().map_or(st.next_lsn, |f| f.first + f.lsns());
    let mut bytes = 0usize;
    let mut batch = Vec::new();
    while let Some(p) = st.queue.front() {
        // A hole goes alone, in a batch of its own; an edit waits.
        if p.is_edit() || (!batch.is_empty() && p.hole() > 0) {
            break;
        }
        let need = HEADER + p.payload().len();
        if !batch.is_empty() && (bytes + need > limit || !fits(inner, &st, start, bytes + need)) {
            break;
        }
        bytes += need;
        let hole = p.hole() > 0;
        batch.push(st.queue.pop_front().expect("front exists"));
        if hole {
            break;
        }
    }
    let hole = batch.first().map_or(0, Pending::hole);
    let mut buf = st
        .bufs
        .pop()
        .expect("a free batch buffer per batch in flight");
    let space = buf.space();
    let mut at = BATCH_HEADER;
    for (lsn, p) in (first..).zip(&batch) {
        if hole > 0 {
            break;
        }
        let n = HEADER + p.payload().len();
        record::encode_into(lsn, p.payload(), &mut space[at..at + n]);
        at += n;
    }
    let align = if inner.opts.direct { ALIGN } else { 1 };
    let len = no_straddle(start, at.div_ceil(align) * align);
    space[at..len].fill(0);
    let h = BatchHeader {
        first,
        count: if hole > 0 {
            hole as u32
        } else {
            batch.len() as u32
        },
        len: (at - BATCH_HEADER) as u32,
        pad: (len - at) as u32,
        hole: hole > 0,
    };
    h.encode_into(inner.log_id, space);
    buf.set_len(len);
    // The batch lies inside its segment, after the one before it, on a
    // block in direct mode, within the depth.
    debug_assert!(
        start + len as u64 <= st.seg_size,
        "a batch past its segment"
    );
    debug_assert!(!inner.opts.direct || start % ALIGN as u64 == 0);
    debug_assert!(
        flight.len() < st.seg_depth as usize,
        "more batches in flight than the depth"
    );
    debug_assert_eq!(
        flight.back().map_or((st.end, st.next_lsn), |f| (
            f.start + f.len,
            f.first + f.lsns()
        )),
        (start, first),
        "a batch framed apart from the one before it"
    );
    let writer = st.writer.clone().expect("a log open for writing");
    let syncing = st.syncing.clone();
    let dsync = st.dsync.clone();
    drop(st);
    let before = flight.back_mut().and_then(|f| f.synced.take());
    let (synced_tx, synced) = oneshot::channel();
    let task = ringkit::spawn(write_and_sync(
        writer, buf, start, before, dsync, synced_tx, syncing,
    ));
    flight.push_back(InFlight {
        batch,
        hole,
        first,
        start,
        len: len as u64,
        task,
        synced: Some(synced),
    });
}

/// Write a batch and make it durable. With no batch before it in flight:
/// one submission (write linked to its sync, or with `dsync` one
/// `RWF_DSYNC` write). With one: the write goes at once, the sync only
/// after the one before it has returned (`before`), so no two syncs of the
/// segment ever overlap. `synced` fires when this sync has returned,
/// whatever it said.
async fn write_and_sync(
    writer: Rc<File>,
    buf: BatchBuf,
    start: u64,
    before: Option<oneshot::Receiver<()>>,
    dsync: Rc<Cell<bool>>,
    synced: oneshot::Sender<()>,
    syncing: Rc<Cell<bool>>,
) -> (io::Result<()>, BatchBuf) {
    let out = match before {
        None if dsync.get() => {
            let _one = OneSync::enter(&syncing);
            match writer.write_all_at_dsync(buf, start).await {
                // The kernel (or a sandbox) refuses the flag, before
                // writing anything: write and `fdatasync` from now on.
                (Err(e), buf) if refused(&e) => {
                    tracing::warn!("RWF_DSYNC refused ({e}): batches go as write and fdatasync");
                    dsync.set(false);
                    writer.write_all_at_sync(buf, start).await
                }
                out => out,
            }
        }
        None => {
            let _one = OneSync::enter(&syncing);
            writer.write_all_at_sync(buf, start).await
        }
        Some(before) => match writer.write_all_at(buf, start).await {
            (Ok(()), buf) => {
                // Dropped unsent only with its task: then this batch is
                // failed anyway (`complete`).
                let _ = before.await;
                let _one = OneSync::enter(&syncing);
                (writer.sync_data().await, buf)
            }
            failed => failed,
        },
    };
    let _ = synced.send(());
    out
}

/// Whether `e` says the kernel does not take `RWF_DSYNC` at all.
fn refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS))
}

/// A sync of the segment in flight: at most one at a time (Linux reports
/// a writeback error to one `fdatasync` of an open file, so a second one
/// could return success over pages the first failed to write). Checked in
/// debug builds.
struct OneSync(Rc<Cell<bool>>);

impl OneSync {
    fn enter(syncing: &Rc<Cell<bool>>) -> OneSync {
        let was = syncing.replace(true);
        debug_assert!(!was, "two syncs of one segment in flight");
        OneSync(syncing.clone())
    }
}

impl Drop for OneSync {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// A batch's write and sync returned: acknowledge its appends if it and
/// every batch before it are durable, else fail them (and the log).
fn complete(
    inner: &Inner,
    f: InFlight,
    res: Result<(io::Result<()>, BatchBuf), ringkit::JoinError>,
) {
    let mut st = inner.st.borrow_mut();
    let res = match res {
        Ok((res, buf)) => {
            st.bufs.push(buf);
            res
        }
        // The task panics only on a broken rule of the log's own (a debug
        // assertion: two syncs in flight); then its buffer is lost, and
        // the log refuses appends (it has no buffer to spare).
        Err(e) => Err(io::Error::other(format!("the batch's write task: {e}"))),
    };
    match (res, st.failed.is_some()) {
        (Ok(()), false) => {
            st.stats.batches += 1;
            st.stats.bytes_written += f.len;
            debug_assert_eq!((f.start, f.first), (st.end, st.next_lsn));
            let lsns = f.lsns();
            let mut off = f.start + BATCH_HEADER as u64;
            let seg = st.segments.last_mut().expect("a segment");
            if f.hole > 0 {
                // A hole's LSNs all sit at its own offset.
                seg.holes.push((f.first, f.hole));
                seg.offsets.extend((0..f.hole).map(|_| f.start as u32));
            } else {
                for p in &f.batch {
                    seg.offsets.push(off as u32);
                    off += (HEADER + p.payload().len()) as u64;
                }
            }
            st.end = f.start + f.len;
            st.next_lsn += lsns;
            st.stats.records += lsns;
            let half = st.seg_size / 2;
            if st.spare.is_none() && st.end > half {
                let dead = take_recyclable(inner, &mut st);
                let (dir, size) = (inner.dir.clone(), inner.opts.segment_size);
                st.spare = Some(ringkit::spawn(spare::ready(dir, size, dead)));
            }
            drop(st);
            for (i, p) in f.batch.into_iter().enumerate() {
                p.done.send(Ok(f.first + i as u64));
            }
        }
        (Err(e), false) => {
            st.failed = Some((e.kind(), e.to_string()));
            drop(st);
            tracing::error!("ringkit-log: {}: write failed: {e}", inner.dir.display());
            for p in f.batch {
                p.done.send(Err(io::Error::new(
                    e.kind(),
                    format!("log write failed: {e}"),
                )));
            }
            let err = failed(&inner.st.borrow()).expect("just set");
            fail_queue(inner, &err);
        }
        // A batch before this one failed: whatever this one's sync said,
        // it is not acknowledged (the log is failed until reopened).
        (_, true) => {
            let err = failed(&st).expect("failed");
            drop(st);
            for p in f.batch {
                p.done
                    .send(Err(io::Error::new(err.kind(), err.to_string())));
            }
        }
    }
}

/// Whether a batch of `bytes` record bytes at `at` fits the last segment
/// (with its header and, in direct mode, its padding). In direct mode a
/// batch must start on a block: an end left unaligned (a buffered log
/// reopened direct, with no room left to pad) fits nothing, so a new
/// segment starts.
fn fits(inner: &Inner, st: &State, at: u64, bytes: usize) -> bool {
    let end = at + (BATCH_HEADER + bytes) as u64;
    let align = if inner.opts.direct { ALIGN as u64 } else { 1 };
    let len = no_straddle(at, (end.div_ceil(align) * align - at) as usize);
    at % align == 0 && at + len as u64 <= st.seg_size
}

/// The length of a batch of `len` bytes at `start`, padded so that the
/// next batch's header does not straddle a 512-byte sector: a header then
/// lies in one sector, which a crash leaves whole or zero, so a header
/// that is neither is damage (see `segment::classify`).
pub(crate) fn no_straddle(start: u64, len: usize) -> usize {
    let next = (start + len as u64) % 512;
    if next > 512 - BATCH_HEADER as u64 {
        len + (512 - next) as usize
    } else {
        len
    }
}

/// Run the edit at the front of the queue (nothing in flight) and
/// resolve it. A purge past the end first queues the hole up to it. An
/// error of the edit's own checks (`InvalidInput`) fails only the edit;
/// any other leaves the disk in a state the log cannot vouch for, so the
/// log fails as after a failed write.
async fn edit(inner: &Rc<Inner>) {
    let p = inner.st.borrow_mut().queue.pop_front().expect("an edit");
    let Item::Edit(ctl) = &p.item else {
        unreachable!("an edit at the front")
    };
    if let Control::Purge(below) = *ctl {
        let mut st = inner.st.borrow_mut();
        if below - st.next_lsn.min(below) > u64::from(u32::MAX) {
            // More than one hole holds: no log skips that far (and
            // u64::MAX would leave no LSN to append at).
            let next = st.next_lsn;
            drop(st);
            p.done.send(Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purge below LSN {below}: at most {} past the next LSN ({next})",
                    u32::MAX
                ),
            )));
            return;
        }
        if below > st.next_lsn {
            let gap = below - st.next_lsn;
            st.queue.push_front(p);
            st.queue.push_front(Pending {
                item: Item::Hole(gap),
                done: Ack::nobody(),
            });
            return;
        }
    }
    let res = match p.item {
        Item::Edit(Control::Truncate(from)) => edit::truncate(inner, from).await,
        Item::Edit(Control::Purge(below)) => edit::purge(inner, below).await,
        Item::Edit(Control::State(state)) => edit::save_state(inner, state).await,
        _ => unreachable!("checked above"),
    };
    if let Err(e) = &res {
        if e.kind() != io::ErrorKind::InvalidInput {
            inner.st.borrow_mut().failed = Some((e.kind(), format!("an edit of the log: {e}")));
            tracing::error!("ringkit-log: {}: edit failed: {e}", inner.dir.display());
        }
    }
    p.done.send(res);
}

/// Fail every queued append with `err`.
fn fail_queue(inner: &Inner, err: &io::Error) {
    let queue = std::mem::take(&mut inner.st.borrow_mut().queue);
    for p in queue {
        p.done
            .send(Err(io::Error::new(err.kind(), err.to_string())));
    }
}

/// A purged segment to recycle as the next spare (`spare::recycle`), if
/// one is free: no read of this log holds it (a read in flight keeps its
/// bytes; the segment waits for a later spare).
fn take_recyclable(inner: &Inner, st: &mut State) -> Option<(std::path::PathBuf, Rc<File>)> {
    let i = st
        .recyclable
        .iter()
        .position(|(_, f)| Rc::strong_count(f) == 1)?;
    let (first, f) = st.recyclable.remove(i);
    Some((inner.dir.join(segment::name(first)), f))
}

/// Start the next segment at the next LSN: the spare got ready in the
/// background if it is ready and sound, else one got ready now.
async fn roll(inner: &Rc<Inner>) -> io::Result<()> {
    let spare = inner.st.borrow_mut().spare.take();
    let made = match spare {
        Some(h) => h
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e.to_string()))),
        None => Err(io::Error::other("no spare yet")),
    };
    let recycled = match made {
        Ok(recycled) => recycled,
        Err(_) => {
            let dead = take_recyclable(inner, &mut inner.st.borrow_mut());
            spare::ready(inner.dir.clone(), inner.opts.segment_size, dead).await?
        }
    };
    // Open the spare before it takes a segment's name (the descriptors
    // survive the rename): a failure here leaves no segment behind.
    let spare = inner.dir.join(spare::SPARE);
    let reader = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&spare)
        .await?;
    let writer = segment::open_write(&spare, inner.opts.direct).await?;
    let size = reader.metadata().await?.len();
    let first = inner.st.borrow().next_lsn;
    let window = inner.opts.window();
    let header = SegmentHeader {
        log_id: inner.log_id,
        first,
        window: window as u32,
        size,
        depth: inner.opts.batches_in_flight,
    };
    let start = inner.st.borrow().start;
    let manifest = Manifest {
        log_id: inner.log_id,
        start,
        newest: first,
    };
    // The segment, then the manifest naming it as the newest: a crash
    // between leaves a segment newer than the manifest says (allowed);
    // never a manifest naming a segment that is not there.
    let installed = match spare::install(&inner.dir, &reader, &header).await {
        Ok(_) => manifest::write_manifest(&inner.dir, &manifest).await,
        Err(e) => Err(e),
    };
    if let Err(e) = installed {
        // Renamed or not, the directory is in a state this log can no
        // longer vouch for: refuse appends until it is opened again.
        inner.st.borrow_mut().failed = Some((e.kind(), format!("starting a segment: {e}")));
        return Err(e);
    }
    let mut st = inner.st.borrow_mut();
    let end = st.end;
    if let Some(last) = st.segments.last_mut() {
        last.end = end;
    }
    st.segments.push(Segment {
        first,
        offsets: Vec::new(),
        end: SEGMENT_HEADER,
        reader: std::rc::Rc::new(reader),
        holes: Vec::new(),
    });
    st.writer = Some(Rc::new(writer));
    st.seg_size = size;
    st.seg_window = window;
    st.seg_depth = inner.opts.batches_in_flight;
    st.end = SEGMENT_HEADER;
    st.stats.segments_made += 1;
    st.stats.segments_recycled += u64::from(recycled);
    Ok(())
}
