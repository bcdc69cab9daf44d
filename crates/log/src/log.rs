//! The log: appends queue, one flusher task turns whatever is queued into
//! one batch (one write, one `fdatasync`), and every append of the batch
//! resolves with its LSN once that sync has returned.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

use futures_channel::oneshot;
use ringkit::buf::IoBuf;
use ringkit::fs::{File, FixedBufPool, OpenOptions};
use ringkit::JoinHandle;

use crate::batch::{BatchBuf, ALIGN};
use crate::record::{self, Found, HEADER};
use crate::segment;
use crate::Options;

/// A durable append log on the current ringkit runtime. Not `Send`
/// (thread-per-core: one thread owns a log); clones share it.
#[derive(Clone, Debug)]
pub struct Log {
    inner: Rc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    /// `LOCK` in the directory, held (`flock`) while the log is open.
    _lock: std::fs::File,
    opts: Options,
    st: RefCell<State>,
    /// The flusher, waiting for appends.
    flusher: RefCell<Option<Waker>>,
}

#[derive(Debug)]
struct Segment {
    first: u64,
    /// Offset of each record in the file.
    offsets: Vec<u32>,
    /// Where its records end (for the last segment: as of its last batch,
    /// `State::end` is the live value).
    end: u64,
    /// A buffered handle for reads.
    reader: Rc<File>,
}

#[derive(Debug)]
struct Pending {
    payload: Vec<u8>,
    done: oneshot::Sender<io::Result<u64>>,
}

#[derive(Debug)]
struct State {
    segments: Vec<Segment>,
    /// The last segment, opened for the log's writes (`O_DIRECT` if asked).
    writer: Rc<File>,
    /// Size of the last segment's file.
    seg_size: u64,
    /// Where the last segment's records end.
    end: u64,
    /// Direct mode: the bytes of the last partial block before `end`,
    /// written again at the head of the next batch.
    tail: Vec<u8>,
    next_lsn: u64,
    queue: VecDeque<Pending>,
    /// A write or sync failed: what the log may still hold is unknown, so
    /// every later append fails until the log is opened again.
    failed: Option<(io::ErrorKind, String)>,
    buf: Option<BatchBuf>,
    _pool: Option<FixedBufPool>,
    spare: Option<JoinHandle<io::Result<PathBuf>>>,
    stats: Stats,
    /// Batches in flight (0 or 1).
    flushing: bool,
    /// Waiting in `close` for the queue to empty.
    idle_waiters: Vec<Waker>,
}

/// Counters of a log since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records made durable.
    pub records: u64,
    /// Batches written, each with one `fdatasync`.
    pub batches: u64,
    /// Bytes written (framing and `O_DIRECT` block rewrites included).
    pub bytes_written: u64,
    /// Segments made.
    pub segments_made: u64,
    /// Whether the batch buffer is registered with the ring (`WRITE_FIXED`).
    pub registered_buffer: bool,
}

impl Log {
    /// Open the log in `dir` (made if missing) and recover it: every
    /// segment is read and checked; the last one's records end at the
    /// first place that is not a whole, checksummed record of the next LSN
    /// (a torn tail), and what lies past that is zeroed. An earlier
    /// segment that is damaged, or LSNs missing between segments, are an
    /// `InvalidData` error: records acknowledged as durable would be lost.
    /// Must be called inside a ringkit runtime; the log then lives on it.
    pub async fn open(dir: impl AsRef<Path>, opts: Options) -> io::Result<Log> {
        opts.check()?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("log dir {}: {e}", dir.display())))?;
        let lock = lock_dir(&dir)?;
        let _ = std::fs::remove_file(dir.join(segment::SPARE));
        let mut firsts: Vec<u64> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok()?.file_name().to_str().and_then(segment::parse_name))
            .collect();
        firsts.sort_unstable();
        if firsts.is_empty() {
            segment::make_spare(&dir, opts.segment_size).await?;
            segment::install_spare(&dir, 1).await?;
            firsts.push(1);
        }
        let mut segments = Vec::with_capacity(firsts.len());
        let (mut end, mut seg_size) = (0, 0);
        for (i, &first) in firsts.iter().enumerate() {
            let path = dir.join(segment::name(first));
            let reader = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .await?;
            seg_size = reader.metadata().await?.len();
            let last = i + 1 == firsts.len();
            let scan = segment::scan(&path, &reader, first, seg_size, last).await?;
            let next = first + scan.offsets.len() as u64;
            if let Some(&following) = firsts.get(i + 1) {
                if following != next {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "log {}: segment {} holds LSNs {first}..{next} and the next \
                             segment starts at {following}: records are damaged or missing",
                            dir.display(),
                            segment::name(first)
                        ),
                    ));
                }
            } else {
                end = scan.end;
                // What recovery found may have reached only the page cache
                // (a crash between a batch's write and its sync): make it
                // durable before anything is built on it.
                reader.sync_data().await?;
                if segment::zero_tail(&reader, end, seg_size).await? {
                    tracing::info!(
                        "ringkit-log: {}: torn tail after LSN {} cleared",
                        path.display(),
                        next - 1
                    );
                }
            }
            segments.push(Segment {
                first,
                offsets: scan.offsets,
                end: scan.end,
                reader: Rc::new(reader),
            });
        }
        let last = segments.last().expect("at least one segment");
        let next_lsn = last.first + last.offsets.len() as u64;
        let last_path = dir.join(segment::name(last.first));
        let writer = Rc::new(segment::open_write(&last_path, opts.direct).await?);
        let tail = if opts.direct {
            read_tail(&last.reader, end).await?
        } else {
            Vec::new()
        };
        let (buf, pool) = BatchBuf::new(opts.max_batch + 2 * ALIGN, opts.registered_buffers);
        let stats = Stats {
            registered_buffer: buf.is_registered(),
            ..Stats::default()
        };
        let inner = Rc::new(Inner {
            dir,
            _lock: lock,
            opts,
            st: RefCell::new(State {
                segments,
                writer,
                seg_size,
                end,
                tail,
                next_lsn,
                queue: VecDeque::new(),
                failed: None,
                buf: Some(buf),
                _pool: pool,
                spare: None,
                stats,
                flushing: false,
                idle_waiters: Vec::new(),
            }),
            flusher: RefCell::new(None),
        });
        ringkit::spawn(flusher(Rc::downgrade(&inner)));
        Ok(Log { inner })
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
        let mut st = self.inner.st.borrow_mut();
        if let Some(err) = failed(&st) {
            return Commit::ready(Err(err));
        }
        let (tx, rx) = oneshot::channel();
        st.queue.push_back(Pending { payload, done: tx });
        drop(st);
        if let Some(w) = self.inner.flusher.borrow_mut().take() {
            w.wake();
        }
        Commit(CommitState::Waiting(rx))
    }

    /// The largest payload one record may have.
    pub fn max_record(&self) -> usize {
        let o = &self.inner.opts;
        (o.max_batch - HEADER).min(o.segment_size as usize - HEADER - ALIGN)
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
            Some((_, payload)) => Ok(payload),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no durable record {lsn} (durable: 1..={})",
                    self.durable_lsn()
                ),
            )),
        }
    }

    /// Up to `max` durable records from `from` on, in order, as (LSN,
    /// payload); empty at the end of the log. Each checksum is checked.
    pub async fn read_from(&self, from: u64, max: usize) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let (reader, offsets) = {
            let st = self.inner.st.borrow();
            let durable = st.next_lsn - 1;
            if max == 0 || from == st.next_lsn {
                return Ok(Vec::new());
            }
            let i = st.segments.partition_point(|s| s.first <= from);
            if from == 0 || from > durable || i == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "no durable record {from} (durable: {}..={durable})",
                        st.segments.first().map_or(1, |s| s.first)
                    ),
                ));
            }
            let last = i == st.segments.len();
            let s = &st.segments[i - 1];
            let k = (from - s.first) as usize;
            let n = max.min(s.offsets.len() - k);
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
                        format!("record {lsn} does not check: the log was damaged on disk"),
                    ))
                }
            }
        }
        Ok(out)
    }

    /// Wait until every append made so far has resolved.
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
        .await
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The next segment's maker and the parked flusher end with the log.
        if let Some(h) = self.st.get_mut().spare.take() {
            h.abort();
        }
        if let Some(w) = self.flusher.get_mut().take() {
            w.wake();
        }
    }
}

/// Hold `dir/LOCK` (`flock`, exclusive): one open log per directory, in
/// this process or another; released when the log is dropped or the
/// process dies.
fn lock_dir(dir: &Path) -> io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("LOCK"))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "log {} is already open (its LOCK is held): {e}",
                dir.display()
            ),
        ));
    }
    Ok(f)
}

fn failed(st: &State) -> Option<io::Error> {
    st.failed.as_ref().map(|(kind, msg)| {
        io::Error::new(
            *kind,
            format!("the log failed earlier ({msg}); open it again to recover"),
        )
    })
}

/// Direct mode: the bytes of the partial block before `end`.
async fn read_tail(f: &File, end: u64) -> io::Result<Vec<u8>> {
    let start = end - end % ALIGN as u64;
    let n = (end - start) as usize;
    if n == 0 {
        return Ok(Vec::new());
    }
    let (r, buf) = f.read_at(Vec::with_capacity(n), start).await;
    if r? != n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "segment shorter than its records",
        ));
    }
    Ok(buf)
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
#[derive(Debug)]
#[must_use = "the record is queued either way; await this to know it is durable"]
pub struct Commit(CommitState);

#[derive(Debug)]
enum CommitState {
    Ready(Option<io::Result<u64>>),
    Waiting(oneshot::Receiver<io::Result<u64>>),
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
            CommitState::Waiting(rx) => Pin::new(rx).poll(cx).map(|r| {
                r.unwrap_or_else(|_| {
                    Err(io::Error::other(
                        "the log was closed before the record was durable",
                    ))
                })
            }),
        }
    }
}

/// The flusher task: while the log lives, take what is queued as one batch.
async fn flusher(log: Weak<Inner>) {
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
        let first = st.queue.front().expect("queue not empty").payload.len();
        fit(&st, 0, first).is_none()
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
    let (batch, buf, start, len, writer) = {
        let mut st = inner.st.borrow_mut();
        let max = inner.opts.max_batch;
        let mut bytes = 0usize;
        let mut batch = Vec::new();
        while let Some(p) = st.queue.front() {
            let need = HEADER + p.payload.len();
            if !batch.is_empty()
                && (bytes + need > max || fit(&st, bytes, p.payload.len()).is_none())
            {
                break;
            }
            bytes += need;
            batch.push(st.queue.pop_front().expect("front exists"));
        }
        let mut buf = st.buf.take().expect("one batch at a time");
        let align = if inner.opts.direct { ALIGN } else { 1 };
        let start = st.end - st.end % align as u64;
        let space = buf.space();
        let mut at = st.tail.len();
        space[..at].copy_from_slice(&st.tail);
        for (lsn, p) in (st.next_lsn..).zip(&batch) {
            let n = HEADER + p.payload.len();
            record::encode_into(lsn, &p.payload, &mut space[at..at + n]);
            at += n;
        }
        let len = at.div_ceil(align) * align;
        space[at..len].fill(0);
        buf.set_len(len);
        (batch, buf, start, at, st.writer.clone())
    };
    let (res, buf) = writer.write_all_at_sync(buf, start).await;
    let mut st = inner.st.borrow_mut();
    match res {
        Ok(()) => {
            st.stats.batches += 1;
            st.stats.bytes_written += buf.bytes_init() as u64;
            let mut off = st.end;
            let first = st.next_lsn;
            let seg = st.segments.last_mut().expect("a segment");
            for p in &batch {
                seg.offsets.push(off as u32);
                off += (HEADER + p.payload.len()) as u64;
            }
            st.end = start + len as u64;
            debug_assert_eq!(off, st.end);
            if inner.opts.direct {
                let keep = (st.end % ALIGN as u64) as usize;
                let from = len - keep;
                st.tail = buf.init_slice()[from..len].to_vec();
            }
            st.next_lsn += batch.len() as u64;
            st.stats.records += batch.len() as u64;
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

/// Whether a record of `payload` bytes fits the last segment after `bytes`
/// more of this batch (with the alignment padding of direct mode).
fn fit(st: &State, bytes: usize, payload: usize) -> Option<()> {
    let end = st.end + (bytes + HEADER + payload) as u64;
    let padded = end.div_ceil(ALIGN as u64) * ALIGN as u64;
    (padded <= st.seg_size).then_some(())
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
    let first = inner.st.borrow().next_lsn;
    if let Err(e) = segment::install_spare(&inner.dir, first).await {
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
        end: 0,
        reader: Rc::new(reader),
    });
    st.writer = Rc::new(writer);
    st.seg_size = inner.opts.segment_size;
    st.end = 0;
    st.tail.clear();
    st.stats.segments_made += 1;
    Ok(())
}
