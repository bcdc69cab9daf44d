//! Publishing a server thread's counters to a file, for a process outside
//! (a benchmark) to read at the start and end of its measured window.
//!
//! [`spawn_writer`] writes [`Published`] as JSON to `PATH.<thread>` every
//! 50 ms, atomically (write `PATH.<thread>.tmp`, then rename), so a reader
//! never sees half a file; [`Published::read_all`] sums every thread's file.
//! Enabled by the `publish` feature.
//!
//! # Reading at an exact moment
//! A file read between two writes is up to 50 ms old, which at a window's
//! edges skews per-request figures by a few percent. [`flush`] asks the
//! server to write now: it sends `SIGUSR1`, whose handler (installed by the
//! first [`spawn_writer`]) writes 1 to every writer's eventfd (the same
//! eventfd table as `ringkit::signal`, `eventfd_table.rs`), and each writer
//! publishes at once with its `seq` one higher; `flush` returns when every
//! thread's file shows a newer `seq`.

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::eventfd_table::EventfdTable;
use crate::MetricsSnapshot;

/// What one server thread publishes: its runtime's counters and the
/// server's own count of accepted connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The runtime's counters ([`crate::metrics()`]).
    pub metrics: MetricsSnapshot,
    /// Connections accepted.
    pub accepted: u64,
    /// How many times this file was written (per file; a sum means nothing).
    #[serde(default)]
    pub seq: u64,
    /// Heap bytes the process's allocator has handed out and not taken
    /// back (glibc's `mallinfo2`: `uordblks + hblkhd`), as of this write;
    /// 0 where the allocator does not say. A level, process-wide: summing
    /// threads keeps the largest.
    #[serde(default)]
    pub heap_bytes: u64,
}

/// The allocator's bytes in use by this process (see
/// [`Published::heap_bytes`]).
pub fn heap_in_use() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's statistics.
        let m = unsafe { libc::mallinfo2() };
        (m.uordblks + m.hblkhd) as u64
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    0
}

impl Published {
    /// Counter-wise sum (gauges summed too).
    pub fn add(&self, o: &Published) -> Published {
        Published {
            metrics: self.metrics.add(&o.metrics),
            accepted: self.accepted + o.accepted,
            seq: 0,
            heap_bytes: self.heap_bytes.max(o.heap_bytes),
        }
    }

    /// Counter-wise difference `self - earlier` (0 where `earlier` is larger).
    pub fn since(&self, earlier: &Published) -> Published {
        Published {
            metrics: self.metrics.since(&earlier.metrics),
            accepted: self.accepted.saturating_sub(earlier.accepted),
            seq: 0,
            heap_bytes: self.heap_bytes,
        }
    }

    /// Every `PATH.<n>` file, by thread `n`. An error if none can be read
    /// or one does not parse (a writer renames into place: a reader never
    /// sees half a file).
    pub fn read_each(path: &Path) -> io::Result<Vec<(String, Published)>> {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bad stats path",
            ));
        };
        let prefix = format!("{}.", name.to_string_lossy());
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let n = e.file_name().to_string_lossy().into_owned();
            let Some(thread) = n.strip_prefix(&prefix) else {
                continue;
            };
            if thread.ends_with(".tmp") || thread.parse::<usize>().is_err() {
                continue;
            }
            let text = std::fs::read_to_string(e.path())?;
            let p = serde_json::from_str::<Published>(&text).map_err(|err| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {err}", e.path().display()),
                )
            })?;
            out.push((thread.to_string(), p));
        }
        if out.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no counters published at {}.N", path.display()),
            ));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Read and sum every `PATH.<n>` file (missing or unreadable files
    /// count as zero).
    pub fn read_all(path: &Path) -> Published {
        let mut total = Published::default();
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return total;
        };
        let prefix = format!("{}.", name.to_string_lossy());
        let Ok(rd) = std::fs::read_dir(dir) else {
            return total;
        };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if !n.starts_with(&prefix) || n.ends_with(".tmp") {
                continue;
            }
            if let Ok(s) = std::fs::read_to_string(e.path()) {
                if let Ok(p) = serde_json::from_str::<Published>(&s) {
                    total = total.add(&p);
                }
            }
        }
        total
    }
}

/// Spawn a task on the current runtime that publishes this thread's
/// counters to `PATH.<thread>` every 50 ms, and at once on `SIGUSR1` (see
/// the module docs); `accepted` is the server's own count of accepted
/// connections.
pub fn spawn_writer(path: PathBuf, thread: usize, accepted: Rc<Cell<u64>>) {
    spawn_writer_every(path, thread, accepted, Duration::from_millis(50));
}

/// [`spawn_writer`] with another period between the unasked writes.
pub fn spawn_writer_every(path: PathBuf, thread: usize, accepted: Rc<Cell<u64>>, period: Duration) {
    if let Err(e) = install() {
        tracing::warn!("ringkit: publish: no SIGUSR1 flush: {e}");
    }
    crate::spawn(async move {
        let file = PathBuf::from(format!("{}.{thread}", path.display()));
        let tmp = PathBuf::from(format!("{}.{thread}.tmp", path.display()));
        let reg = FLUSH.register();
        let mut seq = 0u64;
        let mut asked: Option<Pin<Box<dyn std::future::Future<Output = ()>>>> = None;
        loop {
            seq += 1;
            let p = Published {
                metrics: crate::metrics(),
                accepted: accepted.get(),
                seq,
                heap_bytes: heap_in_use(),
            };
            if let Ok(j) = serde_json::to_string(&p) {
                if std::fs::write(&tmp, j).is_ok() {
                    let _ = std::fs::rename(&tmp, &file);
                }
            }
            let mut tick = std::pin::pin!(crate::time::sleep(period));
            match &reg {
                Some(r) => {
                    let flush = asked.get_or_insert_with(|| {
                        Box::pin(async {
                            // On an error, stop listening for flushes; the
                            // periodic writes go on.
                            if r.wait().await.is_err() {
                                std::future::pending::<()>().await;
                            }
                        })
                    });
                    if let crate::sync::Either::Right(()) =
                        crate::sync::select(tick.as_mut(), flush.as_mut()).await
                    {
                        asked = None;
                    }
                }
                None => tick.await,
            }
        }
    });
}

/// Ask the process `pid` (a ringkit server publishing to `path`) to write
/// its counters now, and return their sum once every thread has: the
/// figures as of this call, not up to 50 ms before. The server must have
/// published at least once (so its `SIGUSR1` handler is in place: the
/// signal's default action would end it); an error after `limit`.
pub fn flush(pid: u32, path: &Path, limit: Duration) -> io::Result<Published> {
    let before = Published::read_each(path)?;
    // SAFETY: kill(2) with a valid signal; the caller names its own server.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGUSR1) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let deadline = Instant::now() + limit;
    loop {
        let now = Published::read_each(path)?;
        let fresh = before
            .iter()
            .all(|(t, b)| now.iter().any(|(t2, n)| t2 == t && n.seq > b.seq));
        if fresh {
            return Ok(now
                .iter()
                .fold(Published::default(), |acc, (_, p)| acc.add(p)));
        }
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "counters at {} not flushed within {limit:?}",
                    path.display()
                ),
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The writers' eventfds, woken by `SIGUSR1`.
static FLUSH: EventfdTable = EventfdTable::new();
static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();

fn install() -> io::Result<()> {
    let r = INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction is valid; we set an extern "C" handler
        // of the right signature, an empty mask and SA_RESTART.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            Err(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL))
        } else {
            Ok(())
        }
    });
    r.map_err(io::Error::from_raw_os_error)
}

extern "C" fn on_usr1(_sig: libc::c_int) {
    // SAFETY: this thread's errno slot, saved and restored around the writes.
    let saved = unsafe { *libc::__errno_location() };
    FLUSH.notify(|| {});
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}
