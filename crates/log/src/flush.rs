//! The flusher: one task per log that takes what is queued as one batch
//! (a batch header, the records, in direct mode zeros to the next block),
//! writes it with one `fdatasync`, and resolves each append once that sync
//! has returned. It starts the next segment when a batch does not fit.

use std::future::poll_fn;
use std::io;
use std::rc::{Rc, Weak};
use std::task::Poll;

use ringkit::buf::IoBuf;
use ringkit::fs::OpenOptions;

use crate::batch::ALIGN;
use crate::frame::{BatchHeader, Manifest, SegmentHeader, BATCH_HEADER, SEGMENT_HEADER};
use crate::log::{failed, Inner, Pending, Segment, State};
use crate::open::window;
use crate::record::{self, HEADER};
use crate::recover;
use crate::segment;

/// The flusher task: while the log lives, take what is queued as one batch.
pub(crate) async fn flusher(log: Weak<Inner>) {
    loop {
        let ready = poll_fn(|cx| {
            let Some(inner) = log.upgrade() else {
                return Poll::Ready(None);
            };
            let empty = inner.st.borrow().queue.is_empty();
            if empty {
                *inner.flusher.borrow_mut() = Some(cx.waker().clone());
                let mut st = inner.st.borrow_mut();
                for w in st.idle_waiters.drain(..) {
                    w.wake();
                }
                Poll::Pending
            } else {
                Poll::Ready(Some(inner))
            }
        })
        .await;
        let Some(inner) = ready else { return };
        inner.st.borrow_mut().flushing = true;
        flush_one(&inner).await;
        let mut st = inner.st.borrow_mut();
        st.flushing = false;
        if st.queue.is_empty() {
            for w in st.idle_waiters.drain(..) {
                w.wake();
            }
        }
    }
}

/// The most record bytes one batch may hold in the last segment: the
/// options' bound, and the segment's window (a segment made with a smaller
/// `max_batch` keeps its own bound).
fn batch_limit(inner: &Inner, st: &State) -> usize {
    let in_window = st.seg_window.saturating_sub((BATCH_HEADER + ALIGN) as u64) as usize;
    inner.opts.max_batch.min(in_window)
}

/// Write one batch of what is queued, or fail it.
async fn flush_one(inner: &Rc<Inner>) {
    let failed_before = failed(&inner.st.borrow());
    if let Some(err) = failed_before {
        fail_queue(inner, &err);
        return;
    }
    // A batch never spans segments: if the first record does not fit what
    // is left of this one, start the next segment first.
    let needs_roll = {
        let st = inner.st.borrow();
        let first = HEADER + st.queue.front().expect("queue not empty").payload.len();
        first > batch_limit(inner, &st) || !fits(inner, &st, first)
    };
    if needs_roll {
        if let Err(e) = roll(inner).await {
            // A full disk: these records fail; nothing was written, so the
            // log is sound and the next append tries again.
            let e = io::Error::new(e.kind(), format!("cannot start a new log segment: {e}"));
            fail_queue(inner, &e);
            return;
        }
    }
    let (batch, hole, buf, start, writer) = {
        let mut st = inner.st.borrow_mut();
        let limit = batch_limit(inner, &st);
        let mut bytes = 0usize;
        let mut batch = Vec::new();
        while let Some(p) = st.queue.front() {
            // A hole goes alone, in a batch of its own.
            if !batch.is_empty() && p.hole > 0 {
                break;
            }
            let need = HEADER + p.payload.len();
            if !batch.is_empty() && (bytes + need > limit || !fits(inner, &st, bytes + need)) {
                break;
            }
            bytes += need;
            let hole = p.hole > 0;
            batch.push(st.queue.pop_front().expect("front exists"));
            if hole {
                break;
            }
        }
        let hole = batch.first().map_or(0, |p: &Pending| p.hole);
        let mut buf = st.buf.take().expect("one batch at a time");
        let start = st.end;
        let space = buf.space();
        let mut at = BATCH_HEADER;
        for (lsn, p) in (st.next_lsn..).zip(&batch) {
            if hole > 0 {
                break;
            }
            let n = HEADER + p.payload.len();
            record::encode_into(lsn, &p.payload, &mut space[at..at + n]);
            at += n;
        }
        let align = if inner.opts.direct { ALIGN } else { 1 };
        let len = no_straddle(start, at.div_ceil(align) * align);
        space[at..len].fill(0);
        let h = BatchHeader {
            first: st.next_lsn,
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
        let writer = st.writer.clone().expect("a log open for writing");
        (batch, hole, buf, start, writer)
    };
    let (res, buf) = writer.write_all_at_sync(buf, start).await;
    let mut st = inner.st.borrow_mut();
    match res {
        Ok(()) => {
            st.stats.batches += 1;
            st.stats.bytes_written += buf.bytes_init() as u64;
            let mut off = start + BATCH_HEADER as u64;
            let first = st.next_lsn;
            let seg = st.segments.last_mut().expect("a segment");
            let lsns = if hole > 0 {
                // A hole's LSNs all sit at its own offset.
                seg.holes.push((first, hole));
                seg.offsets.extend((0..hole).map(|_| start as u32));
                hole
            } else {
                for p in &batch {
                    seg.offsets.push(off as u32);
                    off += (HEADER + p.payload.len()) as u64;
                }
                batch.len() as u64
            };
            st.end = start + buf.bytes_init() as u64;
            st.next_lsn += lsns;
            st.stats.records += lsns;
            st.buf = Some(buf);
            let half = st.seg_size / 2;
            if st.spare.is_none() && st.end > half {
                let (dir, size) = (inner.dir.clone(), inner.opts.segment_size);
                st.spare = Some(ringkit::spawn(async move {
                    segment::make_spare(&dir, size).await
                }));
            }
            drop(st);
            for (i, p) in batch.into_iter().enumerate() {
                let _ = p.done.send(Ok(first + i as u64));
            }
        }
        Err(e) => {
            st.buf = Some(buf);
            st.failed = Some((e.kind(), e.to_string()));
            drop(st);
            tracing::error!("ringkit-log: {}: write failed: {e}", inner.dir.display());
            for p in batch {
                let _ = p.done.send(Err(io::Error::new(
                    e.kind(),
                    format!("log write failed: {e}"),
                )));
            }
            let err = failed(&inner.st.borrow()).expect("just set");
            fail_queue(inner, &err);
        }
    }
}

/// Whether a batch of `bytes` record bytes fits the last segment (with
/// its header and, in direct mode, its padding). In direct mode a batch
/// must start on a block: an end left unaligned (a buffered log reopened
/// direct, with no room left to pad) fits nothing, so a new segment starts.
fn fits(inner: &Inner, st: &State, bytes: usize) -> bool {
    let end = st.end + (BATCH_HEADER + bytes) as u64;
    let align = if inner.opts.direct { ALIGN as u64 } else { 1 };
    let len = no_straddle(st.end, (end.div_ceil(align) * align - st.end) as usize);
    st.end % align == 0 && st.end + len as u64 <= st.seg_size
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

/// Fail every queued append with `err`.
fn fail_queue(inner: &Inner, err: &io::Error) {
    let queue = std::mem::take(&mut inner.st.borrow_mut().queue);
    for p in queue {
        let _ = p
            .done
            .send(Err(io::Error::new(err.kind(), err.to_string())));
    }
}

/// Start the next segment at the next LSN: the spare made in the
/// background if it is ready and sound, else one made now.
async fn roll(inner: &Rc<Inner>) -> io::Result<()> {
    let spare = inner.st.borrow_mut().spare.take();
    let made = match spare {
        Some(h) => h
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e.to_string()))),
        None => Err(io::Error::other("no spare yet")),
    };
    if made.is_err() {
        segment::make_spare(&inner.dir, inner.opts.segment_size).await?;
    }
    // Open the spare before it takes a segment's name (the descriptors
    // survive the rename): a failure here leaves no segment behind.
    let spare = inner.dir.join(segment::SPARE);
    let reader = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&spare)
        .await?;
    let writer = segment::open_write(&spare, inner.opts.direct).await?;
    let size = reader.metadata().await?.len();
    let first = inner.st.borrow().next_lsn;
    let window = window(&inner.opts);
    let header = SegmentHeader {
        log_id: inner.log_id,
        first,
        window: window as u32,
        size,
    };
    let start = inner
        .st
        .borrow()
        .segments
        .first()
        .map_or(first, |s| s.first);
    let manifest = Manifest {
        log_id: inner.log_id,
        start,
        newest: first,
    };
    // The segment, then the manifest naming it as the newest: a crash
    // between leaves a segment newer than the manifest says (allowed);
    // never a manifest naming a segment that is not there.
    let installed = match segment::install_spare(&inner.dir, &reader, &header).await {
        Ok(_) => recover::write_manifest(&inner.dir, &manifest).await,
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
    st.end = SEGMENT_HEADER;
    st.stats.segments_made += 1;
    Ok(())
}
