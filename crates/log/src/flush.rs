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
//! # Decisions and I/O apart
//!
//! Every decision above (what a batch takes, where it goes, when its sync
//! may start, when it is acknowledged) is made by [`Pipeline`], which does
//! no I/O and is unit-tested without a runtime (`pipeline_tests.rs`). This
//! file frames the batches it plans and polls their I/O itself: no task
//! per batch, no channel per batch or per record.
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
use std::task::{Context, Poll};

use ringkit::fs::{File, OpenOptions};

use crate::ack::Ack;
use crate::batch::BatchBuf;
use crate::edit;
use crate::frame::{BatchHeader, Manifest, SegmentHeader, BATCH_HEADER, MIN_ALIGN, SEGMENT_HEADER};
use crate::log::{failed, Control, Inner, Item, Pending, Segment, State};
use crate::manifest;
use crate::pipeline::{Done, Geometry, Next, Pipeline, Plan, Queued, Tail};
use crate::record::{self, HEADER};
use crate::segment;
use crate::spare;

/// What a batch's I/O returned.
enum Event {
    /// Its write (with its sync when linked or `RWF_DSYNC`).
    Written(io::Result<()>, BatchBuf),
    /// Its `fdatasync`.
    Synced(io::Result<()>),
}

/// A batch's I/O in flight: owned by the flusher, polled by it (no task
/// per batch).
type Io = Pin<Box<dyn Future<Output = Event>>>;

/// A batch in flight: its appends and its I/O. Slots are in batch order,
/// beside the pipeline's batches.
struct Slot {
    plan: Plan,
    batch: Vec<Pending>,
    writer: Rc<File>,
    /// Back when its write returned.
    buf: Option<BatchBuf>,
    io: Option<Io>,
    /// The first error its write or sync returned.
    err: Option<io::Error>,
}

/// The flusher task: while the log lives, write what is queued, up to the
/// segment's depth of batches at once, and acknowledge them in order (as
/// [`Pipeline`] decides). It keeps the log alive while a batch is in
/// flight, so a batch written is always acknowledged (or failed).
pub(crate) async fn flusher(log: Weak<Inner>) {
    // Declared first, dropped last: if a rule of the pipeline breaks (an
    // assertion), the log fails rather than waiting for a flusher that
    // is gone.
    let _failing = FailOnUnwind(log.clone());
    let mut pipe = Pipeline::default();
    let mut slots: VecDeque<Slot> = VecDeque::new();
    let mut hold: Option<Rc<Inner>> = None;
    loop {
        let step = poll_fn(|cx| {
            let Some(inner) = hold.clone().or_else(|| log.upgrade()) else {
                return Poll::Ready(None);
            };
            drive(cx, &mut pipe, &mut slots);
            debug_assert_eq!(pipe.len(), slots.len());
            let st = inner.st.borrow();
            if let Some(done) = pipe.done(tail(&st)) {
                drop(st);
                return Poll::Ready(Some((inner, Some(done))));
            }
            let next = match st.queue.front() {
                Some(_) if st.failed.is_some() => Next::Batch,
                front => pipe.next(
                    &geometry(&inner, &st),
                    tail(&st),
                    front.map(queued),
                    !st.bufs.is_empty(),
                ),
            };
            if next != Next::Wait {
                drop(st);
                return Poll::Ready(Some((inner, None)));
            }
            drop(st);
            *inner.flusher.borrow_mut() = Some(cx.waker().clone());
            let st = inner.st.borrow_mut();
            if slots.is_empty() && st.queue.is_empty() {
                wake_idle(st);
            }
            Poll::Pending
        })
        .await;
        let Some((inner, done)) = step else { return };
        match done {
            Some(done) => {
                let slot = slots.pop_front().expect("a batch in flight");
                debug_assert_eq!(slot.plan.id, done.plan.id);
                complete(&inner, slot, done);
            }
            None => start(&inner, &mut pipe, &mut slots).await,
        }
        let mut st = inner.st.borrow_mut();
        st.flushing = !slots.is_empty();
        hold = st.flushing.then(|| inner.clone());
        if !st.flushing && st.queue.is_empty() {
            wake_idle(st);
        }
    }
}

/// Fails the log if the flusher unwinds: a broken rule of its own (a
/// pipeline assertion) leaves what the disk holds unknown, as a failed
/// write does. The batches in flight fail with their flusher; every
/// queued and later append fails at once.
struct FailOnUnwind(Weak<Inner>);

impl Drop for FailOnUnwind {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        let Ok(mut st) = inner.st.try_borrow_mut() else {
            return;
        };
        let why = "its flusher broke a rule of its own (a bug in ringkit-log)";
        st.failed = Some((io::ErrorKind::Other, why.into()));
        tracing::error!("ringkit-log: {}: {why}", inner.dir.display());
        drop(st);
        let err = failed(&inner.st.borrow()).expect("just set");
        fail_queue(&inner, &err);
        wake_idle(inner.st.borrow_mut());
    }
}

fn wake_idle(mut st: std::cell::RefMut<'_, State>) {
    for w in st.idle_waiters.drain(..) {
        w.wake();
    }
}

/// Poll every batch's I/O, tell the pipeline what returned, and issue the
/// syncs it allows, until nothing more moves.
fn drive(cx: &mut Context<'_>, pipe: &mut Pipeline, slots: &mut VecDeque<Slot>) {
    loop {
        let mut moved = false;
        for slot in slots.iter_mut() {
            let Some(io) = slot.io.as_mut() else { continue };
            let Poll::Ready(event) = io.as_mut().poll(cx) else {
                continue;
            };
            slot.io = None;
            moved = true;
            let (res, with_write) = match event {
                Event::Written(res, buf) => {
                    slot.buf = Some(buf);
                    (res, slot.plan.sync_with_write)
                }
                Event::Synced(res) => (res, true),
            };
            let ok = res.is_ok();
            if let Err(e) = res {
                slot.err.get_or_insert(e);
            }
            if with_write {
                pipe.synced(slot.plan.id, ok);
            } else {
                pipe.written(slot.plan.id, ok);
            }
        }
        while let Some(id) = pipe.sync_to_start() {
            let slot = slots
                .iter_mut()
                .find(|s| s.plan.id == id)
                .expect("a slot per batch");
            let writer = slot.writer.clone();
            slot.io = Some(Box::pin(
                async move { Event::Synced(writer.sync_data().await) },
            ));
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

/// The last segment and the options, for the pipeline.
fn geometry(inner: &Inner, st: &State) -> Geometry {
    // Direct batches start on and fill 4096-byte blocks: a direct log
    // refuses a file system that asks more (`open::check_block`), and
    // records start 4096 bytes into a segment. The window keeps room for
    // the larger of that and the segment's block.
    let block = u64::from(st.seg_align.max(inner.block));
    Geometry {
        size: st.seg_size,
        window: st.seg_window,
        depth: st.seg_depth as usize,
        align: if inner.opts.direct {
            u64::from(MIN_ALIGN)
        } else {
            1
        },
        block,
        max_batch: inner.opts.max_batch,
    }
}

/// Where the acknowledged records end.
fn tail(st: &State) -> Tail {
    Tail {
        end: st.end,
        next_lsn: st.next_lsn,
    }
}

/// A queued item as the pipeline sees it.
fn queued(p: &Pending) -> Queued {
    match &p.item {
        Item::Record(r) => Queued::Record(r.len()),
        Item::Hole(n) => Queued::Hole(*n),
        Item::Edit(_) => Queued::Edit,
    }
}

/// Frame what is queued into one batch and start its write (and sync),
/// or run an edit, start the next segment, or fail the queue.
async fn start(inner: &Rc<Inner>, pipe: &mut Pipeline, slots: &mut VecDeque<Slot>) {
    let failed_before = failed(&inner.st.borrow());
    if let Some(err) = failed_before {
        fail_queue(inner, &err);
        return;
    }
    #[cfg(test)]
    if tests::BREAK_A_RULE.with(|b| b.replace(false)) {
        panic!("a rule of the pipeline broken on purpose (test)");
    }
    let next = {
        let st = inner.st.borrow();
        let front = st.queue.front().map(queued);
        pipe.next(&geometry(inner, &st), tail(&st), front, !st.bufs.is_empty())
    };
    match next {
        Next::Wait => return,
        Next::Edit => return edit(inner).await,
        // A batch never spans segments: the first record does not fit
        // what is left of this one (and nothing is in flight).
        Next::Roll => {
            if let Err(e) = roll(inner).await {
                // A full disk: these records fail; nothing was written, so
                // the log is sound and the next append tries again.
                let e = io::Error::new(e.kind(), format!("cannot start a new log segment: {e}"));
                fail_queue(inner, &e);
                return;
            }
        }
        Next::Batch => {}
    }
    let mut st = inner.st.borrow_mut();
    let geo = geometry(inner, &st);
    let plan = pipe.plan(&geo, tail(&st), st.queue.iter().map(queued));
    let batch: Vec<Pending> = st.queue.drain(..plan.take).collect();
    let mut buf = st
        .bufs
        .pop()
        .expect("a free batch buffer per batch in flight");
    let space = buf.space();
    let mut at = BATCH_HEADER;
    if plan.hole == 0 {
        for (lsn, p) in (plan.first..).zip(&batch) {
            let n = HEADER + p.payload().len();
            record::encode_into(lsn, p.payload(), &mut space[at..at + n]);
            at += n;
        }
    }
    debug_assert_eq!(at, BATCH_HEADER + plan.body);
    space[at..plan.len].fill(0);
    BatchHeader {
        first: plan.first,
        count: plan.lsns() as u32,
        len: plan.body as u32,
        pad: (plan.len - at) as u32,
        hole: plan.hole > 0,
    }
    .encode_into(inner.log_id, space);
    buf.set_len(plan.len);
    pipe.start(&geo, tail(&st), plan.clone());
    let writer = st.writer.clone().expect("a log open for writing");
    let io: Io = if plan.sync_with_write {
        Box::pin(write_synced(
            writer.clone(),
            buf,
            plan.start,
            st.dsync.clone(),
        ))
    } else {
        let (w, start) = (writer.clone(), plan.start);
        Box::pin(async move {
            let (res, buf) = w.write_all_at(buf, start).await;
            Event::Written(res, buf)
        })
    };
    slots.push_back(Slot {
        plan,
        batch,
        writer,
        buf: None,
        io: Some(io),
        err: None,
    });
}

/// Write a batch and make it durable in one submission, with nothing in
/// flight before it: a write linked to its sync, or with `dsync` one
/// `RWF_DSYNC` write.
async fn write_synced(writer: Rc<File>, buf: BatchBuf, start: u64, dsync: Rc<Cell<bool>>) -> Event {
    let (res, buf) = if dsync.get() {
        match writer.write_all_at_dsync(buf, start).await {
            // The kernel (or a sandbox) refuses the flag, before writing
            // anything: write and `fdatasync` from now on.
            (Err(e), buf) if refused(&e) => {
                tracing::warn!("RWF_DSYNC refused ({e}): batches go as write and fdatasync");
                dsync.set(false);
                writer.write_all_at_sync(buf, start).await
            }
            out => out,
        }
    } else {
        writer.write_all_at_sync(buf, start).await
    };
    Event::Written(res, buf)
}

/// Whether `e` says the kernel does not take `RWF_DSYNC` at all.
fn refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS))
}

/// A batch is settled ([`Pipeline::done`], in order): acknowledge its
/// appends if it and every batch before it are durable, else fail them
/// (and the log).
fn complete(inner: &Inner, slot: Slot, done: Done) {
    let mut st = inner.st.borrow_mut();
    match slot.buf {
        Some(buf) => st.bufs.push(buf),
        // Its write never returned: the flusher holds its I/O to the end,
        // so only a broken rule of the log's own gets here.
        None => debug_assert!(false, "a batch settled before its write returned"),
    }
    let f = &done.plan;
    let res = match (done.ok, slot.err) {
        (true, _) => Ok(()),
        (false, Some(e)) => Err(e),
        (false, None) => Err(io::Error::other("a batch before it failed")),
    };
    match (res, st.failed.is_some()) {
        (Ok(()), false) => {
            st.stats.batches += 1;
            st.stats.bytes_written += f.len as u64;
            debug_assert_eq!((f.start, f.first), (st.end, st.next_lsn));
            let lsns = f.lsns();
            let mut off = f.start + BATCH_HEADER as u64;
            let seg = st.segments.last_mut().expect("a segment");
            if f.hole > 0 {
                // A hole's LSNs all sit at its own offset.
                seg.holes.push((f.first, f.hole));
                seg.offsets.extend((0..f.hole).map(|_| f.start as u32));
            } else {
                for p in &slot.batch {
                    seg.offsets.push(off as u32);
                    off += (HEADER + p.payload().len()) as u64;
                }
            }
            st.end = f.start + f.len as u64;
            st.next_lsn += lsns;
            st.stats.records += lsns;
            let half = st.seg_size / 2;
            if st.spare.is_none() && st.end > half {
                let dead = take_recyclable(inner, &mut st);
                let (dir, size) = (inner.dir.clone(), inner.opts.segment_size);
                st.spare = Some(ringkit::spawn(spare::ready(dir, size, dead)));
            }
            drop(st);
            for (i, p) in slot.batch.into_iter().enumerate() {
                p.done.send(Ok(f.first + i as u64));
            }
        }
        (Err(e), false) => {
            st.failed = Some((e.kind(), e.to_string()));
            drop(st);
            tracing::error!("ringkit-log: {}: write failed: {e}", inner.dir.display());
            for p in slot.batch {
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
            for p in slot.batch {
                p.done
                    .send(Err(io::Error::new(err.kind(), err.to_string())));
            }
        }
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
    let window = inner.opts.window(inner.block);
    let header = SegmentHeader {
        log_id: inner.log_id,
        first,
        window: window as u32,
        size,
        depth: inner.opts.batches_in_flight,
        align: inner.block,
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
    st.seg_align = inner.block;
    st.end = SEGMENT_HEADER;
    st.stats.segments_made += 1;
    st.stats.segments_recycled += u64::from(recycled);
    Ok(())
}

#[cfg(test)]
#[path = "flush_tests.rs"]
mod tests;
