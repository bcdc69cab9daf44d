//! The log design of `ringkit-log` (group commit, the same framing, one
//! `RWF_DSYNC` write per batch, or a write and an `fdatasync` as
//! ringkit-log's `--linked-sync`, `O_DIRECT` rewriting the partial block)
//! on tokio and on std threads: the peers of the log study (glommio is in
//! `glommio_peer.rs`).
//!
//! Both write files zero-filled as ringkit-log's segments are: the first
//! before the window opens, the next one in the background once the
//! current is half full (so the peers pay for making files as the log
//! does); a record is never read back.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ringkit_log::record::{self, HEADER};

use super::{finish, histogram, payload, LogBenchConfig, LogBenchResult};
use crate::harness::sysinfo::CpuTimes;

const ALIGN: usize = 4096;

/// A page-aligned window into a `Vec` (which, unlike ringkit's
/// `AlignedBuf`, is `Send`: the tokio peer moves it to a blocking thread).
pub(super) struct Aligned {
    v: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let v = vec![0u8; len + ALIGN];
        let off = (ALIGN - v.as_ptr() as usize % ALIGN) % ALIGN;
        Aligned { v, off, len }
    }
    fn bytes(&self) -> &[u8] {
        &self.v[self.off..self.off + self.len]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.off..self.off + self.len]
    }
}

/// Frames batches as ringkit-log does, at the end of the file's records.
pub(super) struct Framer {
    direct: bool,
    size: u64,
    end: u64,
    tail: Vec<u8>,
    next_lsn: u64,
}

impl Framer {
    pub(super) fn new(direct: bool, size: u64) -> Framer {
        Framer {
            direct,
            size,
            end: 0,
            tail: Vec::new(),
            next_lsn: 1,
        }
    }

    /// Whether `bytes` more do not fit the current file: start the next.
    pub(super) fn needs_roll(&self, bytes: usize) -> bool {
        self.end + (bytes + ALIGN) as u64 > self.size
    }

    /// Past half of the current file: time to make the next one.
    pub(super) fn past_half(&self) -> bool {
        self.end > self.size / 2
    }

    /// The next file starts empty.
    pub(super) fn rolled(&mut self) {
        self.end = 0;
        self.tail.clear();
    }

    /// The bytes framing `bytes` of records (headers included) writes:
    /// the partial block kept from the last batch, then them, padded.
    pub(super) fn framed_len(&self, bytes: usize) -> usize {
        let align = if self.direct { ALIGN } else { 1 };
        (self.tail.len() + bytes).div_ceil(align) * align
    }

    /// Frame `batch` into `buf`; returns the file offset and byte count to write.
    fn frame(&mut self, batch: &[Vec<u8>], buf: &mut Aligned) -> (u64, usize) {
        self.frame_into(batch, buf.bytes_mut())
    }

    /// Frame `batch` into `space`; returns the file offset and byte count
    /// to write from its start.
    pub(super) fn frame_into(&mut self, batch: &[Vec<u8>], space: &mut [u8]) -> (u64, usize) {
        let align = if self.direct { ALIGN } else { 1 };
        let start = self.end - self.end % align as u64;
        let mut at = self.tail.len();
        space[..at].copy_from_slice(&self.tail);
        for p in batch {
            record::encode_into(self.next_lsn, p, &mut space[at..at + HEADER + p.len()]);
            at += HEADER + p.len();
            self.next_lsn += 1;
        }
        let len = at.div_ceil(align) * align;
        space[at..len].fill(0);
        self.end = start + at as u64;
        if self.direct {
            let keep = (self.end % ALIGN as u64) as usize;
            self.tail = space[at - keep..at].to_vec();
        }
        (start, len)
    }
}

/// Make file number `n` of the log in `dir`: `size` zero bytes, synced
/// (as ringkit-log makes a segment, zeros written with `O_DIRECT`), then
/// open it for writing.
fn make_file(dir: &Path, n: u32, size: u64, direct: bool) -> io::Result<File> {
    let path = zero_filled(dir, n, size)?;
    let mut o = std::fs::OpenOptions::new();
    o.write(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(&path)
}

/// Make file number `n` of the log in `dir`: `size` zero bytes, synced.
pub(super) fn zero_filled(dir: &Path, n: u32, size: u64) -> io::Result<std::path::PathBuf> {
    let path = dir.join(format!("log-{n}.dat"));
    {
        // As ringkit-log: zeros written with O_DIRECT where allowed.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .or_else(|_| File::create(&path))?;
        let zeros = Aligned::new(1 << 20);
        let mut off = 0;
        while off < size {
            let k = (size - off).min(zeros.len as u64) as usize;
            f.write_all_at(&zeros.bytes()[..k], off)?;
            off += k as u64;
        }
        f.sync_all()?;
    }
    Ok(path)
}

/// Write a batch and make it durable: `pwritev2(2)` with `RWF_DSYNC`
/// (`dsync`), else `pwrite` then `fdatasync`.
fn write_and_sync(f: &File, buf: &Aligned, off: u64, len: usize, dsync: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    if !dsync {
        f.write_all_at(&buf.bytes()[..len], off)?;
        return f.sync_data();
    }
    let mut done = 0;
    while done < len {
        let rest = &buf.bytes()[done..len];
        let iov = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: one iovec over `rest`, which outlives the call and which
        // the kernel only reads.
        let n = unsafe {
            libc::pwritev2(
                f.as_raw_fd(),
                &iov,
                1,
                (off + done as u64) as libc::off_t,
                libc::RWF_DSYNC,
            )
        };
        match n {
            n if n < 0 => return Err(io::Error::last_os_error()),
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => done += n as usize,
        }
    }
    Ok(())
}

/// The tokio peer.
pub(super) fn run_tokio(cfg: &LogBenchConfig) -> io::Result<LogBenchResult> {
    use tokio::sync::{mpsc, oneshot};
    let file = Arc::new(make_file(&cfg.dir, 0, cfg.file_size, cfg.direct)?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Vec<u8>, oneshot::Sender<()>)>();
        let (direct, size, max) = (cfg.direct, cfg.file_size, cfg.max_batch);
        let dsync = cfg.dsync_writes;
        let dir = cfg.dir.clone();
        let mut f = file.clone();
        let committer = tokio::spawn(async move {
            let mut framer = Framer::new(direct, size);
            let mut files = 0u32;
            let mut spare: Option<tokio::task::JoinHandle<io::Result<File>>> = None;
            let mut buf = Some(Aligned::new(max + 2 * ALIGN));
            let (mut batches, mut bytes_written) = (0u64, 0u64);
            while let Some(first) = rx.recv().await {
                let mut bytes = HEADER + first.0.len();
                let mut batch = vec![first];
                // Everything queued, while a record of this size still fits.
                while bytes + HEADER + batch[0].0.len() <= max {
                    let Ok(next) = rx.try_recv() else { break };
                    bytes += HEADER + next.0.len();
                    batch.push(next);
                }
                let payloads: Vec<Vec<u8>> =
                    batch.iter_mut().map(|(p, _)| std::mem::take(p)).collect();
                if framer.needs_roll(bytes) {
                    let next = match spare.take() {
                        Some(h) => h.await.map_err(io::Error::other)??,
                        None => {
                            let d = dir.clone();
                            let n = files + 1;
                            tokio::task::spawn_blocking(move || make_file(&d, n, size, direct))
                                .await
                                .map_err(io::Error::other)??
                        }
                    };
                    files += 1;
                    f = Arc::new(next);
                    framer.rolled();
                }
                let mut b = buf.take().expect("one batch at a time");
                let (off, len) = framer.frame(&payloads, &mut b);
                let fc = f.clone();
                let (res, b) = tokio::task::spawn_blocking(move || {
                    (write_and_sync(&fc, &b, off, len, dsync), b)
                })
                .await
                .map_err(io::Error::other)?;
                buf = Some(b);
                res?;
                if spare.is_none() && framer.past_half() {
                    let d = dir.clone();
                    let n = files + 1;
                    spare = Some(tokio::task::spawn_blocking(move || {
                        make_file(&d, n, size, direct)
                    }));
                }
                batches += 1;
                bytes_written += len as u64;
                for (_, done) in batch {
                    let _ = done.send(());
                }
            }
            Ok::<_, io::Error>((batches, bytes_written))
        });
        let cpu0 = CpuTimes::own();
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(cfg.secs);
        let writers: Vec<_> = (0..cfg.writers)
            .map(|_| {
                let tx = tx.clone();
                let data = payload(cfg.record);
                tokio::spawn(async move {
                    let mut h = histogram();
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        let (done, wait) = oneshot::channel();
                        tx.send((data.clone(), done))
                            .map_err(|_| io::Error::other("committer gone"))?;
                        wait.await.map_err(|_| io::Error::other("commit failed"))?;
                        let _ = h.record(t.elapsed().as_micros() as u64);
                    }
                    Ok::<_, io::Error>(h)
                })
            })
            .collect();
        drop(tx);
        let mut h = histogram();
        for w in writers {
            h.add(w.await.map_err(io::Error::other)??)
                .map_err(io::Error::other)?;
        }
        let window = start.elapsed();
        let cpu = CpuTimes::own().since(&cpu0);
        let (batches, bytes) = committer.await.map_err(io::Error::other)??;
        Ok(finish(cfg, &h, window, cpu, batches, bytes))
    })
}

struct StdState {
    queue: std::collections::VecDeque<Vec<u8>>,
    next_lsn: u64,
    durable: u64,
    flushing: bool,
    framer: Framer,
    buf: Option<Aligned>,
    file: Arc<File>,
    files: u32,
    spare: Option<std::thread::JoinHandle<io::Result<File>>>,
    batches: u64,
    bytes: u64,
    failed: Option<String>,
}

/// The std-threads peer.
pub(super) fn run_std(cfg: &LogBenchConfig) -> io::Result<LogBenchResult> {
    let file = make_file(&cfg.dir, 0, cfg.file_size, cfg.direct)?;
    let shared = Arc::new((
        Mutex::new(StdState {
            queue: Default::default(),
            next_lsn: 1,
            durable: 0,
            flushing: false,
            framer: Framer::new(cfg.direct, cfg.file_size),
            buf: Some(Aligned::new(cfg.max_batch + 2 * ALIGN)),
            file: Arc::new(file),
            files: 0,
            spare: None,
            batches: 0,
            bytes: 0,
            failed: None,
        }),
        Condvar::new(),
    ));
    let cpu0 = CpuTimes::own();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(cfg.secs);
    let threads: Vec<_> = (0..cfg.writers)
        .map(|_| {
            let shared = shared.clone();
            let (data, max) = (payload(cfg.record), cfg.max_batch);
            let (dir, size, direct) = (cfg.dir.clone(), cfg.file_size, cfg.direct);
            let dsync = cfg.dsync_writes;
            std::thread::spawn(move || -> io::Result<hdrhistogram::Histogram<u64>> {
                let (lock, cv) = &*shared;
                let mut h = histogram();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let mut st = lock.lock().expect("no panics under the lock");
                    let lsn = st.next_lsn;
                    st.next_lsn += 1;
                    st.queue.push_back(data.clone());
                    while st.durable < lsn {
                        if let Some(e) = &st.failed {
                            return Err(io::Error::other(e.clone()));
                        }
                        if st.flushing {
                            st = cv.wait(st).expect("no panics under the lock");
                            continue;
                        }
                        // Lead: write and sync everything queued (up to a batch).
                        st.flushing = true;
                        let mut batch = Vec::new();
                        let mut bytes = 0;
                        while let Some(p) = st.queue.front() {
                            if !batch.is_empty() && bytes + HEADER + p.len() > max {
                                break;
                            }
                            bytes += HEADER + p.len();
                            batch.push(st.queue.pop_front().expect("front"));
                        }
                        if st.framer.needs_roll(bytes) {
                            // Take the next file (made in the background
                            // once this one was half full), outside the lock.
                            let (spare, n) = (st.spare.take(), st.files + 1);
                            drop(st);
                            let next = match spare {
                                Some(h) => h
                                    .join()
                                    .map_err(|_| io::Error::other("spare maker panicked"))?,
                                None => make_file(&dir, n, size, direct),
                            }?;
                            st = lock.lock().expect("no panics under the lock");
                            st.file = Arc::new(next);
                            st.files = n;
                            st.framer.rolled();
                        }
                        let mut buf = st.buf.take().expect("one leader at a time");
                        let (off, len) = st.framer.frame(&batch, &mut buf);
                        let file = st.file.clone();
                        drop(st);
                        let res = write_and_sync(&file, &buf, off, len, dsync);
                        st = lock.lock().expect("no panics under the lock");
                        if st.spare.is_none() && st.framer.past_half() {
                            let (d, n) = (dir.clone(), st.files + 1);
                            st.spare =
                                Some(std::thread::spawn(move || make_file(&d, n, size, direct)));
                        }
                        st.buf = Some(buf);
                        st.flushing = false;
                        match res {
                            Ok(()) => {
                                st.durable += batch.len() as u64;
                                st.batches += 1;
                                st.bytes += len as u64;
                            }
                            Err(e) => st.failed = Some(e.to_string()),
                        }
                        cv.notify_all();
                    }
                    drop(st);
                    let _ = h.record(t.elapsed().as_micros() as u64);
                }
                Ok(h)
            })
        })
        .collect();
    let mut h = histogram();
    for t in threads {
        let th = t
            .join()
            .map_err(|_| io::Error::other("a writer panicked"))??;
        h.add(th).map_err(io::Error::other)?;
    }
    let window = start.elapsed();
    let cpu = CpuTimes::own().since(&cpu0);
    let mut st = shared.0.lock().expect("no panics under the lock");
    // The next file may still be in the making: wait for it, or it would
    // be made after the run's directory is removed (and keep it).
    if let Some(spare) = st.spare.take() {
        let _ = spare.join();
    }
    Ok(finish(cfg, &h, window, cpu, st.batches, st.bytes))
}
