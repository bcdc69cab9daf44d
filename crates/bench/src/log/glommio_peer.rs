//! The log design of `ringkit-log` on glommio (Datadog's thread-per-core
//! io_uring runtime): the same framing and group commit as the tokio peer,
//! one committer task taking everything queued as one batch, written with
//! `DmaFile::write_at` from a buffer of glommio's registered I/O memory
//! (`alloc_dma_buffer`) and made durable with `DmaFile::fdatasync`.
//!
//! `O_DIRECT` only, as glommio intends its `DmaFile` (its `BufferedFile`
//! is a different design: the study runs glommio in the `O_DIRECT` rows).
//! Not `DmaStreamWriter`: it writes only from offset 0 of a file it
//! truncates to its length on close, while the log writes into zero-filled
//! files it made before. Files are made as the other peers make them (the
//! next in the background once the current one is half full). The
//! executor is unpinned (`Placement::Unbound`), so it runs where the
//! process is pinned (`ringkit log bench --cpu`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_channel::oneshot;
use glommio::io::{DmaFile, OpenOptions};
use glommio::{LocalExecutorBuilder, Placement};
use ringkit_log::record::HEADER;

use super::peers::{zero_filled, Framer};
use super::{finish, histogram, payload, LogBenchConfig, LogBenchResult};
use crate::harness::sysinfo::CpuTimes;

/// What the writers queue for the committer.
#[derive(Default)]
struct Queue {
    items: VecDeque<(Vec<u8>, oneshot::Sender<io::Result<()>>)>,
    /// The committer, parked on an empty queue.
    waker: Option<std::task::Waker>,
    closed: bool,
}

fn gio<T>(e: glommio::GlommioError<T>) -> io::Error {
    io::Error::other(e.to_string())
}

/// Open a log file; with `dsync` every write is durable as it completes
/// (`O_DSYNC`: `DmaFile` takes no per-write flags).
async fn open(path: &std::path::Path, dsync: bool) -> io::Result<DmaFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(if dsync { libc::O_DSYNC } else { 0 })
        .dma_open(path)
        .await
        .map_err(gio)
}

/// The glommio peer (`O_DIRECT`).
pub(super) fn run_glommio(cfg: &LogBenchConfig) -> io::Result<LogBenchResult> {
    if !cfg.direct {
        return Err(crate::harness::err::invalid_input(
            "the glommio peer writes with O_DIRECT (DmaFile) only: add --direct",
        ));
    }
    let first = zero_filled(&cfg.dir, 0, cfg.file_size)?;
    let cfg = cfg.clone();
    let io_memory = (2 * (cfg.max_batch + 2 * 4096)).max(10 << 20);
    let handle = LocalExecutorBuilder::new(Placement::Unbound)
        .name("glommio-log")
        .io_memory(io_memory)
        .spawn(move || async move { run(&cfg, &first).await })
        .map_err(gio)?;
    handle
        .join()
        .map_err(|e| io::Error::other(format!("glommio executor: {e}")))?
}

async fn run(cfg: &LogBenchConfig, first: &std::path::Path) -> io::Result<LogBenchResult> {
    let queue = Rc::new(RefCell::new(Queue::default()));
    let file = open(first, cfg.dsync_writes).await?;
    let committer = glommio::spawn_local(commit(cfg.clone(), queue.clone(), file));
    let cpu0 = CpuTimes::own();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(cfg.secs);
    let writers: Vec<_> = (0..cfg.writers)
        .map(|_| {
            let queue = queue.clone();
            let data = payload(cfg.record);
            glommio::spawn_local(async move {
                let mut h = histogram();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let (done, wait) = oneshot::channel();
                    {
                        let mut q = queue.borrow_mut();
                        q.items.push_back((data.clone(), done));
                        if let Some(w) = q.waker.take() {
                            w.wake();
                        }
                    }
                    wait.await
                        .map_err(|_| io::Error::other("committer gone"))??;
                    let _ = h.record(t.elapsed().as_micros() as u64);
                }
                Ok::<_, io::Error>(h)
            })
        })
        .collect();
    let mut h = histogram();
    for w in writers {
        h.add(w.await?).map_err(io::Error::other)?;
    }
    let window = start.elapsed();
    let cpu = CpuTimes::own().since(&cpu0);
    {
        let mut q = queue.borrow_mut();
        q.closed = true;
        if let Some(w) = q.waker.take() {
            w.wake();
        }
    }
    let (batches, bytes) = committer.await?;
    Ok(finish(cfg, &h, window, cpu, batches, bytes))
}

/// The committer: everything queued (up to a batch) as one write (on an
/// `O_DSYNC` file), or one write and one `fdatasync`, then every append
/// of it resolved.
async fn commit(
    cfg: LogBenchConfig,
    queue: Rc<RefCell<Queue>>,
    mut file: DmaFile,
) -> io::Result<(u64, u64)> {
    let mut framer = Framer::new(true, cfg.file_size);
    let mut files = 0u32;
    let mut spare: Option<std::thread::JoinHandle<io::Result<std::path::PathBuf>>> = None;
    let (mut batches, mut written) = (0u64, 0u64);
    loop {
        let batch = std::future::poll_fn(|cx| {
            let mut q = queue.borrow_mut();
            if q.items.is_empty() {
                if q.closed {
                    return std::task::Poll::Ready(None);
                }
                q.waker = Some(cx.waker().clone());
                return std::task::Poll::Pending;
            }
            let mut bytes = 0;
            let mut batch = Vec::new();
            while let Some((p, _)) = q.items.front() {
                if !batch.is_empty() && bytes + HEADER + p.len() > cfg.max_batch {
                    break;
                }
                bytes += HEADER + p.len();
                batch.push(q.items.pop_front().expect("front"));
            }
            std::task::Poll::Ready(Some((batch, bytes)))
        })
        .await;
        let Some((batch, bytes)) = batch else { break };
        if framer.needs_roll(bytes) {
            let next = match spare.take() {
                Some(h) => h
                    .join()
                    .map_err(|_| io::Error::other("file maker panicked"))??,
                None => zero_filled(&cfg.dir, files + 1, cfg.file_size)?,
            };
            files += 1;
            file.close().await.map_err(gio)?;
            file = open(&next, cfg.dsync_writes).await?;
            framer.rolled();
        }
        let (payloads, dones): (Vec<Vec<u8>>, Vec<_>) = batch.into_iter().unzip();
        let mut buf = file.alloc_dma_buffer(framer.framed_len(bytes));
        let (off, len) = framer.frame_into(&payloads, buf.as_bytes_mut());
        debug_assert_eq!(len, buf.len());
        let res = match file.write_at(buf, off).await {
            Ok(n) if n == len && cfg.dsync_writes => Ok(()),
            Ok(n) if n == len => file.fdatasync().await.map_err(gio),
            Ok(n) => Err(io::Error::other(format!("short write: {n} of {len}"))),
            Err(e) => Err(gio(e)),
        };
        if spare.is_none() && framer.past_half() {
            let (dir, n, size) = (cfg.dir.clone(), files + 1, cfg.file_size);
            spare = Some(std::thread::spawn(move || zero_filled(&dir, n, size)));
        }
        for done in dones {
            let _ = done.send(match &res {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            });
        }
        res?;
        batches += 1;
        written += len as u64;
    }
    // The next file may still be in the making: wait for it, or it would
    // be made after the run's directory is removed.
    if let Some(h) = spare.take() {
        let _ = h.join();
    }
    file.close().await.map_err(gio)?;
    Ok((batches, written))
}
