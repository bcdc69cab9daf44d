//! Segment files: `<first LSN, 20 digits>.seg`, each zero-filled to its full
//! size when made, so a later `fdatasync` has no size or extent change to
//! write (only data), and so that recovery can tell where records end.
//!
//! A segment is made under a temporary name, filled, synced, then renamed
//! and the directory synced: a crash never leaves a half-made segment under
//! a segment's name.

use std::io;
use std::path::{Path, PathBuf};

use ringkit::buf::AlignedBuf;
use ringkit::fs::{File, OpenOptions};

use crate::record::{self, Found};

/// Name of the segment whose first record is `first`.
pub fn name(first: u64) -> String {
    format!("{first:020}.seg")
}

/// The first LSN of a segment file name, if it is one.
pub fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The temporary name a new segment is filled under.
pub const SPARE: &str = "spare.seg.tmp";

/// Open flags of a segment: writes may be `O_DIRECT`.
pub async fn open_write(path: &Path, direct: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .direct(direct)
        .open(path)
        .await
}

/// Make a zero-filled segment of `size` bytes at `dir/SPARE`, synced.
/// On failure (a full disk) the partial file is removed.
///
/// The zeros are written with `O_DIRECT` where the filesystem allows it:
/// they then go from one zeroed buffer to the device without being copied
/// into the page cache (which cost as much CPU as the log's own writes).
pub async fn make_spare(dir: &Path, size: u64) -> io::Result<PathBuf> {
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
        // O_DIRECT on this same descriptor (no second open by path: a
        // stale task must never touch another log's file of that name).
        set_direct(&f);
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
        }
        f.sync_all().await?;
        f.close().await
    }
    .await;
    match res {
        Ok(()) => Ok(path),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(e)
        }
    }
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

/// Rename the spare to the segment starting at `first`; sync the directory.
pub async fn install_spare(dir: &Path, first: u64) -> io::Result<PathBuf> {
    let to = dir.join(name(first));
    std::fs::rename(dir.join(SPARE), &to)?;
    sync_dir(dir).await?;
    Ok(to)
}

/// `fsync` the directory (after a rename or a create in it).
pub async fn sync_dir(dir: &Path) -> io::Result<()> {
    let d = OpenOptions::new().read(true).open(dir).await?;
    d.sync_all().await
}

/// What a scan of one segment found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Offset of each record, in LSN order from the segment's first.
    pub offsets: Vec<u32>,
    /// Where the records end (the next record's offset).
    pub end: u64,
}

/// Read the records of the segment at `path` (`size` bytes) starting with
/// LSN `first`, up to the first place that is not a whole record of the
/// next LSN. With `direct`, reads with `O_DIRECT` where the filesystem
/// allows it (else through `fallback`): after a failed writeback the page
/// cache may hold bytes the disk does not, and recovery must see what the
/// disk has. Only the last segment needs it: every earlier one was synced
/// whole before the next was started.
pub async fn scan(
    path: &Path,
    fallback: &File,
    first: u64,
    size: u64,
    direct: bool,
) -> io::Result<Scan> {
    const CHUNK: usize = 1 << 20;
    let direct = if direct {
        OpenOptions::new()
            .read(true)
            .direct(true)
            .open(path)
            .await
            .ok()
    } else {
        None
    };
    let f = direct.as_ref().unwrap_or(fallback);
    let mut scan = Scan::default();
    let mut buf: Vec<u8> = Vec::new();
    // File offset of buf[0]; kept a multiple of 4096 (O_DIRECT reads).
    let mut base = 0u64;
    let mut pos = 0usize;
    let mut want = first;
    let mut eof = false;
    let mut chunk = Some(AlignedBuf::new(CHUNK, 4096));
    loop {
        match record::decode(&buf[pos..], want) {
            Found::Record(_, total) => {
                scan.offsets.push((base + pos as u64) as u32);
                pos += total;
                want += 1;
            }
            Found::End => break,
            Found::NeedMore(need) => {
                if eof || base + (pos + need) as u64 > size {
                    break;
                }
                // Keep the unread part from its block's start; read more
                // behind it, a whole aligned chunk at a time.
                let keep = pos - (pos % 4096);
                buf.drain(..keep);
                base += keep as u64;
                pos -= keep;
                let mut c = chunk.take().expect("one read at a time");
                c.set_len(0);
                let (r, c) = f.read_at(c, base + buf.len() as u64).await;
                let n = r?;
                buf.extend_from_slice(&c.as_slice()[..n]);
                eof = n < CHUNK;
                chunk = Some(c);
            }
        }
    }
    scan.end = base + pos as u64;
    Ok(scan)
}

/// Zero every non-zero byte of `f` from `from` to `size`, then sync if
/// anything was written: nothing past the recovered end may later pass for
/// a record (a torn batch can leave whole records behind a torn one).
pub async fn zero_tail(f: &File, from: u64, size: u64) -> io::Result<bool> {
    const CHUNK: u64 = 1 << 20;
    let mut off = from;
    let mut wrote = false;
    while off < size {
        let n = (size - off).min(CHUNK - off % CHUNK);
        let (r, chunk) = f.read_at(Vec::with_capacity(n as usize), off).await;
        let got = r?;
        if got == 0 {
            break;
        }
        if chunk.iter().any(|&b| b != 0) {
            let (r, _) = f.write_all_at(vec![0u8; got], off).await;
            r?;
            wrote = true;
        }
        off += got as u64;
    }
    if wrote {
        f.sync_data().await?;
    }
    Ok(wrote)
}
