//! The next segment, got ready ahead under a temporary name (the spare),
//! then installed: given its header (synced), renamed, and the directory
//! synced, so a crash never leaves a half-made segment under a segment's
//! name.
//!
//! A spare reads as zeros from end to end, so that recovery can tell where
//! records end (`segment::scan`). There are two ways to get one:
//!
//! - **Made** ([`make`]): a new file, allocated, then zero-filled, so a
//!   later `fdatasync` has only data to write, no extent change. The cost
//!   is writing the whole segment once before the log writes it.
//! - **Recycled** ([`recycle`]): a segment a purge left behind, renamed to
//!   the spare's name and zeroed in place with `FALLOC_FL_ZERO_RANGE`.
//!   On ext4 that marks its extents unwritten (they read as zeros)
//!   without writing data or freeing blocks (XFS instead frees and
//!   allocates them again); where the file system has no such mode
//!   (tmpfs), zeros are written over it. Unlinking a
//!   purged 64 MiB segment instead frees its extents in a journal commit
//!   that every sync on the file system waits behind: in a three-node
//!   raft cluster on one disk that was the worst commit latency
//!   (`docs/results/log-recycle-2026-11-30/`). The price: a log write into
//!   an unwritten extent makes its sync commit the extent's conversion too.
//!
//! A segment is recycled only when nothing else is seen to hold it: the
//! log holds its one name, no read of the log holds it
//! (`flush::take_recyclable`), and no other descriptor is open on it in
//! any process when it is checked, under its spare's name (a read-only
//! log opened before the purge; see [`alone`] for the one window left).
//! Else it is unlinked, and its holders keep every byte.

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use ringkit::buf::AlignedBuf;
use ringkit::fs::{File, OpenOptions};

use crate::frame::{SegmentHeader, SEGMENT_HEADER};
use crate::segment;

/// The temporary name a spare is got ready under.
pub const SPARE: &str = "spare.seg.tmp";

/// Get the next spare ready at `dir/SPARE`: recycle the purged segment
/// `dead` (its path, and this log's descriptor of it) if there is one and
/// it can be, else make a new one. `Ok(true)`: it was recycled.
pub async fn ready(dir: PathBuf, size: u64, dead: Option<(PathBuf, Rc<File>)>) -> io::Result<bool> {
    if let Some((dead, ours)) = dead {
        // This log's descriptor closed first, so only others' show.
        if let Ok(f) = Rc::try_unwrap(ours) {
            let _ = f.close().await;
        }
        match recycle(&dir, &dead, size).await {
            Ok(()) => return Ok(true),
            Err(e) => tracing::debug!(
                "ringkit-log: {} not recycled ({e}): making a new segment",
                dead.display()
            ),
        }
    }
    make(&dir, size).await.map(|()| false)
}

/// Make a zero-filled segment of `size` bytes at `dir/SPARE`, synced.
/// On failure (a full disk) the partial file is removed.
///
/// The zeros are written with `O_DIRECT` where the filesystem allows it:
/// they then go from one zeroed buffer to the device without being copied
/// into the page cache (which cost as much CPU as the log's own writes).
pub async fn make(dir: &Path, size: u64) -> io::Result<()> {
    let path = dir.join(SPARE);
    let res = async {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await?;
        // Reserve first: a full disk fails here, before any writing.
        f.allocate(0, size).await?;
        // Then write the zeros, so the extents are written (not merely
        // allocated) and the log's fdatasync never converts them.
        write_zeros(&f, size).await?;
        f.sync_all().await?;
        f.close().await
    }
    .await;
    removed_on_error(&path, res).await
}

/// Make the purged segment `dead` the spare: renamed to `dir/SPARE`,
/// checked to be this log's alone and `size` bytes long, zeroed in place
/// and synced. On failure the file is removed (its other names, if any,
/// keep it whole), as a purge would have removed it.
///
/// The rename needs no directory sync before the zeroing: a crash that
/// loses it leaves the zeroed file under its old name, which lies wholly
/// before the log's first LSN (the purge's manifest was durable before
/// the segment was handed here), and recovery deletes such segments
/// unread.
pub async fn recycle(dir: &Path, dead: &Path, size: u64) -> io::Result<()> {
    let path = dir.join(SPARE);
    ringkit::fs::rename(dead, &path).await?;
    let res = async {
        let f = OpenOptions::new().write(true).open(&path).await?;
        let m = f.metadata().await?;
        if m.nlink() != 1 || m.len() != size {
            return Err(io::Error::other(format!(
                "{} names, {} bytes (want one name and {size} bytes)",
                m.nlink(),
                m.len()
            )));
        }
        alone(&f)?;
        let zero = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;
        match f.fallocate(zero, 0, size).await {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => write_zeros(&f, size).await?,
            other => other?,
        }
        f.sync_all().await?;
        f.close().await
    }
    .await;
    removed_on_error(&path, res).await
}

/// Whether `f` is the only open descriptor of its file, in any process:
/// a write lease is granted only then (`fcntl(2)`, `F_SETLEASE`), and
/// still held a moment later only if nobody opened the file meanwhile. It
/// is let go at once.
///
/// Another process opening the file while the lease is held breaks it,
/// and the kernel signals this process: `SIGIO` by default, whose default
/// action ends the process. So the signal is set to `SIGURG` first
/// (`F_SETSIG`), which is ignored by default; a program that handles
/// `SIGURG` may see a spurious one.
///
/// An opener whose path lookup ran before the rename to the spare's name
/// can still get the file after the lease is let go; it then reads a
/// segment being zeroed or reused, whose records fail their checks (each
/// check covers the log id and the LSN), never records of another LSN.
fn alone(f: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    /// `F_SETSIG` of Linux's `fcntl.h` (not in the `libc` crate).
    const F_SETSIG: libc::c_int = 10;
    let fd = f.as_raw_fd();
    let os = |what: &str| {
        let e = io::Error::last_os_error();
        io::Error::new(e.kind(), format!("{what}: {e}"))
    };
    // SAFETY: fcntl on a descriptor `f` owns; each command takes an int.
    if unsafe { libc::fcntl(fd, F_SETSIG, libc::SIGURG) } != 0 {
        return Err(os("F_SETSIG"));
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) } != 0 {
        return Err(os("open elsewhere, or no lease to tell (F_SETLEASE)"));
    }
    // SAFETY: as above; F_GETLEASE takes no argument.
    let held = unsafe { libc::fcntl(fd, libc::F_GETLEASE) };
    // SAFETY: as above; F_UNLCK lets go of the lease (or what a break
    // left of it).
    unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
    if held != libc::F_WRLCK {
        return Err(io::Error::other(
            "opened elsewhere while the lease was held",
        ));
    }
    Ok(())
}

/// `res`, with the spare at `path` removed if it is an error (a file cut
/// short, or a purged segment that could not be reused: its other names,
/// if any, keep it).
async fn removed_on_error(path: &Path, res: io::Result<()>) -> io::Result<()> {
    if res.is_err() {
        let _ = ringkit::fs::remove_file(path).await;
    }
    res
}

/// Write zeros over `0..size` of `f`, a chunk at a time, with `O_DIRECT`
/// turned on for `f` where the file system allows it. (On the same
/// descriptor, never by a second open by path: a stale task must never
/// touch another log's file of that name.)
async fn write_zeros(f: &File, size: u64) -> io::Result<()> {
    set_direct(f);
    const CHUNK: usize = 1 << 20;
    let mut zeros = AlignedBuf::new(CHUNK, 4096);
    zeros.set_len(CHUNK);
    let mut zeros = Some(zeros);
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(CHUNK as u64) as usize;
        let mut z = zeros.take().expect("one write at a time");
        z.set_len(n);
        let (r, z) = f.write_all_at(z, off).await;
        zeros = Some(z);
        r?;
        off += n as u64;
        // On epoll a file write runs inline and completes at once, so
        // without a yield the whole segment (256 MiB in the log study:
        // 130 ms) would be written in one poll, with every append of the
        // loop waiting behind it. One chunk at a time instead.
        ringkit::yield_now().await;
    }
    Ok(())
}

/// Turn on `O_DIRECT` for `f` where the filesystem allows it (else the
/// writes stay buffered).
fn set_direct(f: &File) {
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor `f` owns; F_GETFL/F_SETFL touch only
    // its status flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_DIRECT);
        }
    }
}

/// Give the spare (open as `spare`) its header and make it the segment
/// starting at `header.first`: header written and synced, renamed, the
/// directory synced.
pub async fn install(dir: &Path, spare: &File, header: &SegmentHeader) -> io::Result<PathBuf> {
    let mut b = AlignedBuf::new(SEGMENT_HEADER as usize, 4096);
    b.set_len(SEGMENT_HEADER as usize);
    b.as_mut_slice().fill(0);
    header.encode_into(b.as_mut_slice());
    spare.write_all_at_sync(b, 0).await.0?;
    let to = dir.join(segment::name(header.first));
    ringkit::fs::rename(dir.join(SPARE), &to).await?;
    ringkit::fs::sync_dir(dir).await?;
    Ok(to)
}

/// The most purged segments kept to be recycled; a purge unlinks the
/// rest. Two: a log rolls one segment at a time, and a purge may free one
/// while the spare for the next roll is being made.
pub(crate) const MAX_RECYCLABLE: usize = 2;

/// Unlink purged segments `gone` of the log in `dir` (after the removals
/// `before`), then sync `dir`. A failure is logged: the next read-write
/// open deletes what is left. Aborted when the log is dropped.
pub(crate) async fn remove_segments(
    dir: std::path::PathBuf,
    gone: Vec<u64>,
    before: Option<ringkit::JoinHandle<()>>,
) {
    /// The removals before these end with them (a dropped handle would
    /// let them run on).
    struct Before(Option<ringkit::JoinHandle<()>>);
    impl Drop for Before {
        fn drop(&mut self) {
            if let Some(h) = &self.0 {
                h.abort();
            }
        }
    }
    let mut before = Before(before);
    if let Some(h) = before.0.as_mut() {
        let _ = h.await;
    }
    for first in gone {
        if let Err(e) = remove_if_there(&dir.join(segment::name(first))).await {
            tracing::warn!("purged segment left in place (the next open removes it): {e}");
        }
    }
    if let Err(e) = ringkit::fs::sync_dir(&dir).await {
        tracing::warn!("syncing {} after a purge: {e}", dir.display());
    }
}

/// Remove `path`; gone already is fine.
pub(crate) async fn remove_if_there(path: &Path) -> io::Result<()> {
    match ringkit::fs::remove_file(path).await {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
