//! The log: appends queue, one flusher task (`flush.rs`) turns whatever is
//! queued into one batch (one write, one `fdatasync`), and every append of
//! the batch resolves with its LSN once that sync has returned. Opening
//! and recovery are in `open.rs`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use ringkit::fs::{File, FixedBufPool};

use crate::ack::{self, Ack, Acks};
use ringkit::JoinHandle;

use crate::batch::BatchBuf;
use crate::record::{self, Found, HEADER};
use crate::Options;

/// A durable append log on the current ringkit runtime. Not `Send`
/// (thread-per-core: one thread owns a log); clones share it.
#[derive(Clone, Debug)]
pub struct Log {
    inner: Rc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) dir: PathBuf,
    /// `LOCK` in the directory, held (`flock`) while the log is open for
    /// writing; `None` when opened read-only.
    pub(crate) _lock: Option<std::fs::File>,
    pub(crate) opts: Options,
    /// The log's id (from its manifest): in every batch header's checksum.
    pub(crate) log_id: u64,
    /// The block the file system asks of `O_DIRECT` (`segment::block_of`),
    /// kept in the header of each segment made from now on.
    pub(crate) block: u32,
    pub(crate) st: RefCell<State>,
    /// The flusher, waiting for appends.
    pub(crate) flusher: RefCell<Option<Waker>>,
    /// Each append's acknowledgement slot (`ack.rs`).
    pub(crate) acks: ack::Table,
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) first: u64,
    /// Offset of each record in the file: a read by LSN is one lookup and
    /// one read, for 4 bytes a record held until the segment is purged
    /// (16 million empty records hold about 64 MB).
    pub(crate) offsets: Vec<u32>,
    /// Where its records end (for the last segment: as of its last batch,
    /// `State::end` is the live value).
    pub(crate) end: u64,
    /// A buffered handle for reads.
    pub(crate) reader: Rc<File>,
    /// LSNs lost to damage that `salvage` left as holes: (first, count).
    pub(crate) holes: Vec<(u64, u64)>,
}

/// An edit queued with the appends.
#[derive(Debug)]
pub(crate) enum Control {
    Truncate(u64),
    Purge(u64),
    State(Vec<u8>),
}

/// The largest state [`crate::Log::save_state`] takes.
pub const MAX_STATE: usize = 64 << 10;

/// What the flusher is asked to do, in queue order.
#[derive(Debug)]
pub(crate) enum Item {
    /// Append this record.
    Record(Vec<u8>),
    /// Mark this many LSNs lost, in a batch of its own with no records
    /// (`salvage`, or a purge past the end).
    Hole(u64),
    /// An edit: truncate, purge, state (`edit.rs`), with nothing in
    /// flight.
    Edit(Control),
}

/// One queued item and its acknowledgement.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) item: Item,
    pub(crate) done: Ack,
}

impl Pending {
    /// The record's payload (empty for a hole or an edit).
    pub(crate) fn payload(&self) -> &[u8] {
        match &self.item {
            Item::Record(p) => p,
            _ => &[],
        }
    }
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) segments: Vec<Segment>,
    /// Whether batches go as `RWF_DSYNC` writes: `Options::dsync_writes`,
    /// until the kernel refuses the flag (then write and `fdatasync`).
    pub(crate) dsync: Rc<std::cell::Cell<bool>>,
    /// The last segment, opened for the log's writes (`O_DIRECT` if asked);
    /// `None` when opened read-only.
    pub(crate) writer: Option<Rc<File>>,
    /// Size of the last segment's file.
    pub(crate) seg_size: u64,
    /// The last segment's window (from its header): no batch written into
    /// it may make more bytes unsynced than this.
    pub(crate) seg_window: u64,
    /// The last segment's depth (from its header): the most batches that
    /// may be in flight in it at once.
    pub(crate) seg_depth: u32,
    /// The last segment's block (from its header): the window keeps room
    /// for a batch's padding to it.
    pub(crate) seg_align: u32,
    /// Where the last segment's records end (where the next batch goes).
    pub(crate) end: u64,
    /// The log's first LSN (the manifest's): records before it were
    /// purged, though the first segment may still hold some.
    pub(crate) start: u64,
    pub(crate) next_lsn: u64,
    /// The state last saved (`Log::save_state`).
    pub(crate) state: Option<Vec<u8>>,
    pub(crate) queue: VecDeque<Pending>,
    /// A write or sync failed: what the log may still hold is unknown, so
    /// every later append fails until the log is opened again.
    pub(crate) failed: Option<(io::ErrorKind, String)>,
    /// Batch buffers not in flight (one per batch that may be).
    pub(crate) bufs: Vec<BatchBuf>,
    pub(crate) _pool: Option<FixedBufPool>,
    /// Getting the next segment ready (`spare::ready`; `true`: recycled).
    pub(crate) spare: Option<JoinHandle<io::Result<bool>>>,
    /// Purged segments kept to be recycled as a later spare, by first LSN,
    /// with this log's descriptor (a read in flight holds a clone). Still
    /// under their names: the next open deletes any left.
    pub(crate) recyclable: Vec<(u64, Rc<File>)>,
    /// Deleting the segments the last purge left behind (`edit::purge`).
    pub(crate) removing: Option<JoinHandle<()>>,
    pub(crate) stats: Stats,
    /// Whether a batch is in flight.
    pub(crate) flushing: bool,
    /// Waiting in `close` for the queue to empty.
    pub(crate) idle_waiters: Vec<Waker>,
}

/// Counters of a log since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records made durable.
    pub records: u64,
    /// Batches written, each with one `fdatasync`.
    pub batches: u64,
    /// Bytes written (framing and `O_DIRECT` padding to a block included).
    pub bytes_written: u64,
    /// Segments made.
    pub segments_made: u64,
    /// Of those, segments a purge left that were reused
    /// ([`Options::recycle_segments`](crate::Options::recycle_segments)).
    pub segments_recycled: u64,
    /// Whether the batch buffer is registered with the ring (`WRITE_FIXED`).
    pub registered_buffer: bool,
}

impl Log {
    pub(crate) fn from_inner(inner: Rc<Inner>) -> Log {
        Log { inner }
    }

    /// Append `payload`; the returned future resolves with the record's LSN
    /// once it is durable (written and `fdatasync`ed). The record is queued
    /// when this is called, not when the future is first polled, so records
    /// appended one after another on a task get increasing LSNs in that
    /// order. Dropping the future does not withdraw the record.
    ///
    /// Errors: a payload larger than the options allow (`InvalidInput`); a
    /// segment that cannot be made (a full disk: the append fails and the
    /// log works again once there is room); a failed write or sync (the log
    /// then refuses every append until it is opened again, since what the
    /// disk holds is no longer known).
    pub fn append(&self, payload: impl Into<Vec<u8>>) -> Commit {
        let payload = payload.into();
        if let Some(c) = self.writable() {
            return c;
        }
        let max = self.max_record();
        if payload.len() > max {
            return Commit::ready(Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "record of {} bytes: at most {max} fit a batch (Options::max_batch)",
                    payload.len()
                ),
            )));
        }
        self.enqueue(Item::Record(payload))
    }

    /// Queue an append, a hole or an edit for the flusher.
    fn enqueue(&self, item: Item) -> Commit {
        let mut st = self.inner.st.borrow_mut();
        if let Some(err) = failed(&st) {
            return Commit::ready(Err(err));
        }
        let (done, seq) = Acks::slot(&self.inner.acks);
        st.queue.push_back(Pending { item, done });
        drop(st);
        if let Some(w) = self.inner.flusher.borrow_mut().take() {
            w.wake();
        }
        Commit(CommitState::Waiting(self.inner.acks.clone(), seq))
    }

    fn writable(&self) -> Option<Commit> {
        self.inner._lock.is_none().then(|| {
            Commit::ready(Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("log {} was opened read-only", self.inner.dir.display()),
            )))
        })
    }

    /// Remove the records from LSN `from` on, durably; the next append
    /// gets `from`. Resolves with `from` once a crash can no longer bring
    /// the removed records back. Queued like an append: appends made
    /// before it are written first (and removed if at or past `from`),
    /// appends made after it follow it. `from` must lie in
    /// `first_lsn()..=next_lsn()` when it runs (`InvalidInput` if not);
    /// `next_lsn()` removes nothing. The log stays usable after an
    /// `InvalidInput`; a failed write fails the log as an append's does.
    ///
    /// For a Raft log, whose entries after a conflict are replaced. See
    /// the crate docs ("Truncate, purge, state") for how it survives a
    /// crash part way.
    pub fn truncate(&self, from: u64) -> Commit {
        if let Some(c) = self.writable() {
            return c;
        }
        self.enqueue(Item::Edit(Control::Truncate(from)))
    }

    /// Remove the records before LSN `below`, durably: `first_lsn()`
    /// becomes `below` (a `below` at or before it does nothing). Past the
    /// end of the log, the LSNs up to `below` are skipped (a hole), so the
    /// next append gets `below`; more than `u32::MAX` past it is
    /// `InvalidInput`. Resolves with the log's first LSN, durably. Whole
    /// segments are deleted just after, in the background (a crash first
    /// leaves them to the next open, which deletes them); the first
    /// segment kept may still hold some purged records on disk, which are
    /// never read again. Queued like an append.
    pub fn purge(&self, below: u64) -> Commit {
        if let Some(c) = self.writable() {
            return c;
        }
        self.enqueue(Item::Edit(Control::Purge(below)))
    }

    /// Replace the log's state (a blob of at most 64 KiB kept beside the
    /// records, e.g. a Raft vote), durably and atomically; resolves with 0
    /// once durable. Queued like an append: it is durable only after every
    /// append made before it. `InvalidInput` if too large.
    pub fn save_state(&self, state: impl Into<Vec<u8>>) -> Commit {
        if let Some(c) = self.writable() {
            return c;
        }
        let state = state.into();
        if state.len() > MAX_STATE {
            return Commit::ready(Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("state of {} bytes: at most {MAX_STATE}", state.len()),
            )));
        }
        self.enqueue(Item::Edit(Control::State(state)))
    }

    /// The state last saved durably ([`Log::save_state`]), if any.
    pub fn state(&self) -> Option<Vec<u8>> {
        self.inner.st.borrow().state.clone()
    }

    /// A probe of [`Log::state`] that holds the log weakly and never
    /// panics (`None` once the log is gone or while it is being changed):
    /// the crash-state explorer asks it at every file operation, since
    /// what the live log shows must already be durable.
    pub(crate) fn state_probe(&self) -> impl Fn() -> Option<Vec<u8>> {
        let inner = Rc::downgrade(&self.inner);
        move || inner.upgrade()?.st.try_borrow().ok()?.state.clone()
    }

    /// Mark the next `count` LSNs as lost (a hole: no records), durably;
    /// resolves with the first. For `salvage`, which keeps every LSN it
    /// copies and must never let a later append reuse one that was lost.
    pub(crate) fn append_hole(&self, count: u64) -> Commit {
        self.enqueue(Item::Hole(count.clamp(1, u64::from(u32::MAX))))
    }

    /// The largest payload one record may have.
    pub fn max_record(&self) -> usize {
        self.inner.opts.max_batch - HEADER
    }

    /// The first LSN of the log (1 unless it was made to start later).
    pub fn first_lsn(&self) -> u64 {
        self.inner.st.borrow().start
    }

    /// The LSN the next append will get.
    pub fn next_lsn(&self) -> u64 {
        self.inner.st.borrow().next_lsn
    }

    /// The highest durable LSN (0: none).
    pub fn durable_lsn(&self) -> u64 {
        self.inner.st.borrow().next_lsn - 1
    }

    /// Counters since the log was opened.
    pub fn stats(&self) -> Stats {
        self.inner.st.borrow().stats
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The payload of durable record `lsn`; `NotFound` past the durable
    /// end. Its checksum is checked again: damage is `InvalidData`, never
    /// wrong bytes.
    pub async fn read(&self, lsn: u64) -> io::Result<Vec<u8>> {
        match self.read_from(lsn, 1).await?.pop() {
            Some((at, payload)) if at == lsn => Ok(payload),
            Some(_) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("record {lsn} was lost to damage (a hole left by salvage)"),
            )),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no durable record {lsn} (durable: {}..={})",
                    self.first_lsn(),
                    self.durable_lsn()
                ),
            )),
        }
    }

    /// Up to `max` durable records from `from` on, in order, as (LSN,
    /// payload); empty at the end of the log. Each checksum is checked.
    /// LSNs lost to damage that `salvage` left as holes are skipped (their
    /// LSNs are missing from the result).
    pub async fn read_from(&self, from: u64, max: usize) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let mut from = from;
        let (reader, offsets) = {
            let st = self.inner.st.borrow();
            // Past any hole `from` falls in.
            for s in &st.segments {
                for &(h, n) in &s.holes {
                    if (h..h + n).contains(&from) {
                        from = h + n;
                    }
                }
            }
            let durable = st.next_lsn - 1;
            if max == 0 || from == st.next_lsn {
                return Ok(Vec::new());
            }
            let i = st.segments.partition_point(|s| s.first <= from);
            if from < st.start || from > durable || i == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "no durable record {from} (durable: {}..={durable})",
                        st.start
                    ),
                ));
            }
            let last = i == st.segments.len();
            let s = &st.segments[i - 1];
            let k = (from - s.first) as usize;
            // Up to the next hole (a later call skips it).
            let next_hole = s.holes.iter().map(|&(h, _)| h).filter(|&h| h > from).min();
            let n = max
                .min(s.offsets.len() - k)
                .min(next_hole.map_or(usize::MAX, |h| (h - from) as usize));
            // The offsets of the records to read, then where the last ends.
            let mut offs: Vec<u64> = s.offsets[k..k + n].iter().map(|&o| u64::from(o)).collect();
            offs.push(match s.offsets.get(k + n) {
                Some(&o) => u64::from(o),
                None if last => st.end,
                None => s.end,
            });
            (s.reader.clone(), offs)
        };
        let (start, stop) = (offsets[0], offsets[offsets.len() - 1]);
        let buf = read_exact_at(&reader, start, (stop - start) as usize).await?;
        let mut out = Vec::with_capacity(offsets.len() - 1);
        for (i, &off) in offsets[..offsets.len() - 1].iter().enumerate() {
            let lsn = from + i as u64;
            match record::decode(&buf[(off - start) as usize..], lsn) {
                Found::Record(p, _) => out.push((lsn, p.to_vec())),
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "record {lsn} does not check: the log was damaged on disk (or, \
                             in a log opened read-only, the writer purged it and reused its \
                             segment since)"
                        ),
                    ))
                }
            }
        }
        Ok(out)
    }

    /// Wait until every append made so far has resolved, and the segments
    /// a purge deletes are gone (those kept to be recycled too).
    pub async fn close(self) {
        poll_fn(|cx| {
            let mut st = self.inner.st.borrow_mut();
            if st.queue.is_empty() && !st.flushing {
                Poll::Ready(())
            } else {
                st.idle_waiters.push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
        let (removing, kept) = {
            let mut st = self.inner.st.borrow_mut();
            let kept: Vec<u64> = st.recyclable.drain(..).map(|(first, _)| first).collect();
            (st.removing.take(), kept)
        };
        crate::spare::remove_segments(self.inner.dir.clone(), kept, removing).await;
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The next segment's maker, the purged segments' removal and the
        // parked flusher end with the log: a dropped log touches no file
        // (the next open deletes what a purge left; removing by name later
        // could hit another log made in the same directory meanwhile).
        if let Some(h) = self.st.get_mut().spare.take() {
            h.abort();
        }
        if let Some(h) = self.st.get_mut().removing.take() {
            h.abort();
        }
        if let Some(w) = self.flusher.get_mut().take() {
            w.wake();
        }
    }
}

pub(crate) fn failed(st: &State) -> Option<io::Error> {
    st.failed.as_ref().map(|(kind, msg)| {
        io::Error::new(
            *kind,
            format!("the log failed earlier ({msg}); open it again to recover"),
        )
    })
}

/// Exactly `len` bytes of `f` from `offset` (short reads continued).
async fn read_exact_at(f: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let want = (len - out.len()).min(1 << 30);
        let (r, chunk) = f
            .read_at(Vec::with_capacity(want), offset + out.len() as u64)
            .await;
        if r? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a segment ends before its records",
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The future of one append: the record's LSN once durable.
///
/// It shares the log's acknowledgement table, so it stays on the log's
/// thread (not `Send`, as the log is not). The table keeps one small slot
/// (about 32 bytes) for every append from the oldest commit still held
/// on: drop or await commits, rather than keep one for the life of the
/// log. Polling it again after it returned panics.
#[derive(Debug)]
#[must_use = "the record is queued either way; await this to know it is durable"]
pub struct Commit(CommitState);

#[derive(Debug)]
enum CommitState {
    Ready(Option<io::Result<u64>>),
    /// Slot `.1` of the log's acknowledgements.
    Waiting(ack::Table, u64),
}

impl Commit {
    fn ready(r: io::Result<u64>) -> Commit {
        Commit(CommitState::Ready(Some(r)))
    }
}

impl Future for Commit {
    type Output = io::Result<u64>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        match &mut self.0 {
            CommitState::Ready(r) => Poll::Ready(r.take().expect("Commit polled after completion")),
            CommitState::Waiting(t, seq) => {
                let r = t.borrow_mut().poll(*seq, cx);
                if r.is_ready() {
                    self.0 = CommitState::Ready(None);
                }
                r
            }
        }
    }
}

impl Drop for Commit {
    fn drop(&mut self) {
        if let CommitState::Waiting(t, seq) = &self.0 {
            t.borrow_mut().forget(*seq);
        }
    }
}
