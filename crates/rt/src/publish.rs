//! Publishing a server thread's counters to a file, for a process outside
//! (a benchmark) to read at the start and end of its measured window.
//!
//! [`spawn_writer`] writes [`Published`] as JSON to `PATH.<thread>` when the
//! server starts and then only when asked, atomically (write
//! `PATH.<thread>.tmp`, then rename), so a reader never sees half a file;
//! [`Published::read_all`] sums every thread's file. Enabled by the
//! `publish` feature.
//!
//! # Asking, and what it costs the server
//! [`flush`] asks the server to publish now: it sends `SIGUSR1`, whose
//! handler (installed by the first [`spawn_writer`]) writes 1 to every
//! writer's eventfd (the same eventfd table as `ringkit::signal`,
//! `eventfd_table.rs`); each thread copies its counters with its `seq` one
//! higher and hands them to a writer thread, and `flush` returns when every
//! thread's file holds figures copied after it asked. The serving thread does no file I/O
//! and nothing on a timer: between two requests, a publishing server runs
//! exactly the code an unpublishing one does. (Until 2026-11-26 each thread
//! wrote and renamed its file itself every 50 ms, with blocking calls on its
//! loop: on ext4 a rename can take 5-20 ms, which is where a p99 lives.)

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
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
    /// When the serving thread copied these counters: `CLOCK_MONOTONIC`
    /// in nanoseconds, the same clock in every process, so [`flush`] can
    /// tell figures taken after it asked from older ones. In a sum, the
    /// latest.
    #[serde(default)]
    pub copied_at_ns: u64,
}

/// `CLOCK_MONOTONIC` in nanoseconds (vDSO: no syscall).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
            copied_at_ns: self.copied_at_ns.max(o.copied_at_ns),
        }
    }

    /// Counter-wise difference `self - earlier` (0 where `earlier` is larger).
    pub fn since(&self, earlier: &Published) -> Published {
        Published {
            metrics: self.metrics.since(&earlier.metrics),
            accepted: self.accepted.saturating_sub(earlier.accepted),
            seq: 0,
            heap_bytes: self.heap_bytes,
            copied_at_ns: self.copied_at_ns,
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

/// Publish this thread's counters to `PATH.<thread>`: once now, then
/// each time [`flush`] asks (`SIGUSR1`). `accepted` is the server's own
/// count of accepted connections.
///
/// Nothing is written unasked, and the serving thread never writes a file:
/// a task on the current runtime waits for the request (one eventfd read
/// through the runtime, like a shutdown signal), copies the counters (a
/// few dozen integers) and hands them to one writer thread per process,
/// which serialises, writes and renames. So a server publishing its
/// counters does on its loop what any server would, except for that copy
/// at each request (a study asks at its window's two edges).
pub fn spawn_writer(path: PathBuf, thread: usize, accepted: Rc<Cell<u64>>) {
    if let Err(e) = install() {
        tracing::warn!("ringkit: publish: no SIGUSR1 flush: {e}");
    }
    let file = PathBuf::from(format!("{}.{thread}", path.display()));
    let tmp = PathBuf::from(format!("{}.{thread}.tmp", path.display()));
    let reg = FLUSH.register();
    if reg.is_none() {
        tracing::warn!("ringkit: publish: no eventfd for thread {thread}: published once only");
    }
    crate::spawn(async move {
        let mut seq = 0u64;
        loop {
            seq += 1;
            let job = Job {
                file: file.clone(),
                tmp: tmp.clone(),
                published: Published {
                    metrics: crate::metrics(),
                    accepted: accepted.get(),
                    seq,
                    heap_bytes: 0,
                    copied_at_ns: monotonic_ns(),
                },
            };
            if writer().send(job).is_err() {
                tracing::warn!("ringkit: publish: the writer thread is gone");
                return;
            }
            // On an error (the eventfd cannot be read), stop publishing.
            match &reg {
                Some(r) if r.wait().await.is_ok() => {}
                _ => return,
            }
        }
    });
}

/// One write for the writer thread.
struct Job {
    file: PathBuf,
    tmp: PathBuf,
    published: Published,
}

/// The process's writer thread, started on first use. It fills in
/// [`Published::heap_bytes`] (process-wide, and `mallinfo2` walks the
/// allocator's arenas: not a serving thread's work), then writes the JSON
/// to `tmp` and renames it over `file`, so a reader never sees half a file.
fn writer() -> &'static std::sync::mpsc::Sender<Job> {
    static WRITER: OnceLock<std::sync::mpsc::Sender<Job>> = OnceLock::new();
    WRITER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("ringkit-publish".into())
            .spawn(move || {
                for mut job in rx {
                    job.published.heap_bytes = heap_in_use();
                    let Ok(j) = serde_json::to_string(&job.published) else {
                        continue;
                    };
                    if let Err(e) = std::fs::write(&job.tmp, j)
                        .and_then(|()| std::fs::rename(&job.tmp, &job.file))
                    {
                        tracing::warn!("ringkit: publish: {}: {e}", job.file.display());
                    }
                }
            });
        if let Err(e) = spawned {
            // Sends fail from now on (the receiver is dropped with the
            // closure), and each writer task stops with a warning.
            tracing::warn!("ringkit: publish: no writer thread: {e}");
        }
        tx
    })
}

/// Ask the process `pid` (a ringkit server publishing to `path`) to write
/// its counters now, and return their sum once every thread has: the
/// figures as of this call. The server must have
/// published at least once (so its `SIGUSR1` handler is in place: the
/// signal's default action would end it); an error after `limit`.
pub fn flush(pid: u32, path: &Path, limit: Duration) -> io::Result<Published> {
    let before = Published::read_each(path)?;
    // Figures copied after this moment are the ones asked for. Not `seq`:
    // a wake left over from an earlier request (another flusher's) can
    // publish figures copied before this call with a newer `seq`.
    let asked = monotonic_ns();
    // SAFETY: kill(2) with a valid signal; the caller names its own server.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGUSR1) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let deadline = Instant::now() + limit;
    loop {
        let now = Published::read_each(path)?;
        let fresh = before
            .iter()
            .all(|(t, _)| now.iter().any(|(t2, n)| t2 == t && n.copied_at_ns >= asked));
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
