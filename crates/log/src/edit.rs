//! Edits beside the appends: truncating the log's suffix
//! ([`crate::Log::truncate`]), purging its prefix ([`crate::Log::purge`])
//! and saving its state ([`crate::Log::save_state`]). Each is queued with
//! the appends and run by the flusher in queue order, once no batch is in
//! flight, so every write of the log is serialised (what a Raft log store
//! must promise: a vote is never durable before the entries appended
//! before it).
//!
//! **Truncate** removes the records from an LSN on; the next append gets
//! that LSN. It rewrites the end of one segment in place, so it is made
//! crash-safe by an intent, written durably first (`TRUNCATE`, by rename):
//! which segments go, which bytes become zero, and the batch header that
//! replaces the one the cut falls in (same extent, fewer records: the
//! records kept are not rewritten). Recovery that finds the intent reads
//! the log as the truncation leaves it (a read-only open through an
//! overlay, a read-write open by finishing it: every step is idempotent),
//! so a crash at any point leaves the log before or after the truncation,
//! never between.
//!
//! **Purge** removes the records before an LSN: the manifest's first LSN
//! is raised (by rename: durable and atomic), and the purge resolves; the
//! segments wholly before it are deleted after that, in a task of their
//! own, so the appends behind the purge do not wait for the file system
//! to free them. Recovery skips (read-write: deletes) segments a purge
//! cut short left behind. Purging past the end first appends a hole
//! up to it, so the next append gets the purge's LSN.
//!
//! **State** is a small blob (at most [`crate::log::MAX_STATE`] bytes) beside the log,
//! replaced atomically by rename: a Raft store keeps its vote and
//! committed index there.

use std::io;
use std::path::Path;
use std::rc::Rc;

use crate::frame::{BatchHeader, Manifest, BATCH_HEADER, SEGMENT_HEADER};
use crate::log::Inner;
use crate::manifest;
use crate::segment::{self, Overlay, Reader};
use crate::spare::{remove_if_there, MAX_RECYCLABLE};

/// The truncation intent's name, and its name before the rename
/// (`ringkit::fs::write_replace` writes `NAME.tmp`).
pub const TRUNCATE: &str = "TRUNCATE";
pub const TRUNCATE_TMP: &str = "TRUNCATE.tmp";
/// The state's name, and its name before the rename.
pub const STATE: &str = "STATE";
pub const STATE_TMP: &str = "STATE.tmp";

const TRUNCATE_MAGIC: &[u8; 8] = b"RKLOGTRC";
const STATE_MAGIC: &[u8; 8] = b"RKLOGSTA";
const TRUNCATE_LEN: usize = 96;
const NO_PATCH: u64 = u64::MAX;

/// A truncation, as its intent says.
///
/// ```text
/// TRUNCATE (96 bytes):
///   0  u32  CRC32C of bytes 4..96
///   4  [8]  "RKLOGTRC"
///   12 u32  version (1)
///   16 u64  log id
///   24 u64  the first LSN removed
///   32 u64  the first LSN of the segment the cut falls in (later ones go)
///   40 u64  zeros from this offset of that segment ...
///   48 u64  ... to this one (exclusive)
///   56 u64  offset of the batch header rewritten (all ones: none)
///   64 [32] the new batch header
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    pub log_id: u64,
    pub from: u64,
    pub segment: u64,
    pub zero: (u64, u64),
    pub patch: Option<(u64, [u8; BATCH_HEADER])>,
}

impl Truncation {
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; TRUNCATE_LEN];
        b[4..12].copy_from_slice(TRUNCATE_MAGIC);
        b[12..16].copy_from_slice(&1u32.to_le_bytes());
        for (at, v) in [
            (16, self.log_id),
            (24, self.from),
            (32, self.segment),
            (40, self.zero.0),
            (48, self.zero.1),
            (56, self.patch.map_or(NO_PATCH, |p| p.0)),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        if let Some((_, h)) = &self.patch {
            b[64..96].copy_from_slice(h);
        }
        let crc = crc32c::crc32c(&b[4..]);
        b[..4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Truncation> {
        if b.len() != TRUNCATE_LEN || &b[4..12] != TRUNCATE_MAGIC {
            return None;
        }
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
        if crc != crc32c::crc32c(&b[4..]) || b[12..16] != 1u32.to_le_bytes() {
            return None;
        }
        let patch = (u64_at(56) != NO_PATCH).then(|| {
            let mut h = [0u8; BATCH_HEADER];
            h.copy_from_slice(&b[64..96]);
            (u64_at(56), h)
        });
        Some(Truncation {
            log_id: u64_at(16),
            from: u64_at(24),
            segment: u64_at(32),
            zero: (u64_at(40), u64_at(48)),
            patch,
        })
    }

    /// The bytes of its segment as they are once it is finished.
    pub fn overlay(&self) -> Overlay {
        Overlay {
            zero: self.zero,
            patch: self.patch,
        }
    }
}

/// The pending truncation of `dir`, if any. A damaged intent (it is
/// written by rename, so a crash leaves it whole or absent) is
/// `InvalidData`.
pub async fn read_truncation(dir: &Path) -> io::Result<Option<Truncation>> {
    let Some(b) = read_small(dir, TRUNCATE).await? else {
        return Ok(None);
    };
    Truncation::decode(&b).map(Some).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "log {}: {TRUNCATE} (a truncation in progress) does not check: damaged",
                dir.display()
            ),
        )
    })
}

/// The saved state of log `log_id` in `dir`, if any.
pub async fn read_state(dir: &Path, log_id: u64) -> io::Result<Option<Vec<u8>>> {
    let Some(b) = read_small(dir, STATE).await? else {
        return Ok(None);
    };
    let bad = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("log {}: {STATE} {why}", dir.display()),
        )
    };
    if b.len() < 28 || &b[4..12] != STATE_MAGIC {
        return Err(bad("is not a ringkit-log state file"));
    }
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    if u32_at(0) != crc32c::crc32c(&b[4..]) {
        return Err(bad("does not check (damaged)"));
    }
    if b[16..24] != log_id.to_le_bytes() {
        return Err(bad("belongs to another log"));
    }
    let len = u32_at(24) as usize;
    if b.len() != 28 + len {
        return Err(bad("has the wrong length (damaged)"));
    }
    Ok(Some(b[28..].to_vec()))
}

fn encode_state(log_id: u64, state: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 28];
    b[4..12].copy_from_slice(STATE_MAGIC);
    b[12..16].copy_from_slice(&1u32.to_le_bytes());
    b[16..24].copy_from_slice(&log_id.to_le_bytes());
    b[24..28].copy_from_slice(&(state.len() as u32).to_le_bytes());
    b.extend_from_slice(state);
    let crc = crc32c::crc32c(&b[4..]);
    b[..4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The whole of `dir/name`, or `None` if it does not exist.
async fn read_small(dir: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    match ringkit::fs::File::open(dir.join(name)).await {
        Ok(f) => f.read_to_end().await.map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Finish truncation `t` of the log in `dir` whose manifest is `m`; each
/// step is idempotent, so this is also how recovery redoes one cut short.
/// Returns the manifest as it then is.
pub async fn finish_truncation(dir: &Path, t: &Truncation, m: Manifest) -> io::Result<Manifest> {
    let m = if m.newest > t.segment {
        let m = Manifest {
            newest: t.segment,
            ..m
        };
        manifest::write_manifest(dir, &m).await?;
        m
    } else {
        m
    };
    let (firsts, _) = manifest::list(dir)?;
    let later: Vec<u64> = firsts.into_iter().filter(|&f| f > t.segment).collect();
    for &first in &later {
        remove_if_there(&dir.join(segment::name(first))).await?;
    }
    if !later.is_empty() {
        ringkit::fs::sync_dir(dir).await?;
    }
    let f = ringkit::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(segment::name(t.segment)))
        .await?;
    let (mut off, to) = t.zero;
    while off < to {
        let n = (to - off).min(1 << 20) as usize;
        f.write_all_at(vec![0u8; n], off).await.0?;
        off += n as u64;
    }
    if let Some((at, h)) = t.patch {
        f.write_all_at(h.to_vec(), at).await.0?;
    }
    f.sync_data().await?;
    remove_if_there(&dir.join(TRUNCATE)).await?;
    ringkit::fs::sync_dir(dir).await?;
    Ok(m)
}

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Truncate from `from` (the flusher, nothing in flight). Returns the
/// next LSN (`from`).
pub(crate) async fn truncate(inner: &Rc<Inner>, from: u64) -> io::Result<u64> {
    let (i, seg_first, seg_end, reader, path, last) = {
        let st = inner.st.borrow();
        if from < st.start || from > st.next_lsn {
            return Err(invalid_input(format!(
                "truncate from LSN {from}: the log holds {}..{}",
                st.start, st.next_lsn
            )));
        }
        if from == st.next_lsn {
            return Ok(from);
        }
        let i = st.segments.partition_point(|s| s.first <= from) - 1;
        let s = &st.segments[i];
        let last = i + 1 == st.segments.len();
        let end = if last { st.end } else { s.end };
        let path = inner.dir.join(segment::name(s.first));
        (i, s.first, end, s.reader.clone(), path, last)
    };
    // The batch the cut falls in.
    let size = reader.metadata().await?.len();
    let mut r = Reader::new(&reader, size);
    let mut pos = SEGMENT_HEADER;
    let (h, offsets) = loop {
        let found = segment::batch_at(&mut r, pos, inner.log_id, None, seg_end).await?;
        let Some((h, offsets)) = found else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "truncate: no whole batch at offset {pos} of {} (damaged since it was opened?)",
                    path.display()
                ),
            ));
        };
        if from < h.first + u64::from(h.count) {
            break (h, offsets);
        }
        pos += h.extent();
    };
    let keep = (from - h.first) as u32;
    let (t, new_end) = if keep == 0 {
        let t = Truncation {
            log_id: inner.log_id,
            from,
            segment: seg_first,
            zero: (pos, seg_end),
            patch: None,
        };
        (t, pos)
    } else {
        // Same extent, fewer records: the kept ones stay where they are,
        // the rest of the batch becomes padding (zeros).
        let cut = if h.hole {
            pos + BATCH_HEADER as u64
        } else {
            u64::from(offsets[keep as usize])
        };
        let len = (cut - pos - BATCH_HEADER as u64) as u32;
        let nh = BatchHeader {
            count: keep,
            len,
            pad: (h.extent() - BATCH_HEADER as u64) as u32 - len,
            ..h
        };
        let mut bytes = [0u8; BATCH_HEADER];
        nh.encode_into(inner.log_id, &mut bytes);
        let t = Truncation {
            log_id: inner.log_id,
            from,
            segment: seg_first,
            zero: (cut, seg_end),
            patch: Some((pos, bytes)),
        };
        (t, pos + h.extent())
    };
    ringkit::fs::write_replace(inner.dir.join(TRUNCATE), t.encode()).await?;
    let m = Manifest {
        log_id: inner.log_id,
        start: inner.st.borrow().start,
        newest: inner.st.borrow().segments.last().expect("a segment").first,
    };
    finish_truncation(&inner.dir, &t, m).await?;
    // The segment the cut fell in is now the last: write there.
    let reopened = if last {
        None
    } else {
        let w = segment::open_write(&path, inner.opts.direct).await?;
        let header = crate::frame::SegmentHeader::decode(r.get(0, SEGMENT_HEADER as usize).await?)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("truncate: {} has no valid header", path.display()),
                )
            })?;
        Some((w, header))
    };
    let mut st = inner.st.borrow_mut();
    st.segments.truncate(i + 1);
    let s = &mut st.segments[i];
    s.offsets.truncate((from - s.first) as usize);
    s.holes.retain(|&(h, _)| h < from);
    for hole in &mut s.holes {
        hole.1 = hole.1.min(from - hole.0);
    }
    if let Some((w, header)) = reopened {
        st.writer = Some(Rc::new(w));
        st.seg_size = header.size;
        st.seg_window = u64::from(header.window);
        st.seg_depth = header.depth;
        st.seg_align = header.align;
    }
    st.end = new_end;
    st.next_lsn = from;
    Ok(from)
}

/// Purge below `below` (the flusher, nothing in flight, `below` at most
/// the next LSN). Returns the log's first LSN.
pub(crate) async fn purge(inner: &Rc<Inner>, below: u64) -> io::Result<u64> {
    let (start, newest) = {
        let st = inner.st.borrow();
        (st.start, st.segments.last().map_or(below, |s| s.first))
    };
    if below <= start {
        return Ok(start);
    }
    let m = Manifest {
        log_id: inner.log_id,
        start: below,
        newest,
    };
    manifest::write_manifest(&inner.dir, &m).await?;
    let gone: Vec<u64> = {
        let mut st = inner.st.borrow_mut();
        st.start = below;
        let n = st
            .segments
            .iter()
            .skip(1)
            .take_while(|s| s.first <= below)
            .count();
        let mut gone: Vec<_> = st
            .segments
            .drain(..n)
            .map(|s| (s.first, s.reader))
            .collect();
        // The newest are kept to be recycled as the next spares (only now
        // that the manifest that purges them is durable): no extents freed.
        if inner.opts.recycle_segments {
            while st.recyclable.len() < MAX_RECYCLABLE {
                let Some(seg) = gone.pop() else { break };
                st.recyclable.push(seg);
            }
        }
        gone.into_iter().map(|(first, _)| first).collect()
    };
    // The purge is durable with the manifest; the unlinks are cleanup (a
    // crash before them leaves segments wholly below the first LSN, which
    // the next read-write open deletes). Unlinking a whole segment frees
    // its extents (46 ms for 64 MiB on ext4 here): inside this edit no
    // append behind it was written meanwhile. So they run in a task of
    // their own after the purge resolves: on io_uring `UNLINKAT` goes to
    // a kernel worker while the appends go on; on epoll it is an inline
    // syscall on the loop all the same. (Freeing the extents a step at a
    // time, by punching holes in the unlinked file, zeroed what readers
    // still holding it, and hard links to it, saw.)
    if !gone.is_empty() {
        // One after the other: a purge's removals wait for the last one's.
        let before = inner.st.borrow_mut().removing.take();
        let task = ringkit::spawn(crate::spare::remove_segments(
            inner.dir.clone(),
            gone,
            before,
        ));
        inner.st.borrow_mut().removing = Some(task);
    }
    Ok(below)
}

/// Save `state` (the flusher, nothing in flight).
pub(crate) async fn save_state(inner: &Rc<Inner>, state: Vec<u8>) -> io::Result<u64> {
    let bytes = encode_state(inner.log_id, &state);
    ringkit::fs::write_replace(inner.dir.join(STATE), bytes).await?;
    inner.st.borrow_mut().state = Some(state);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intent_round_trip_and_damage() {
        let t = Truncation {
            log_id: 7,
            from: 42,
            segment: 1,
            zero: (5000, 9000),
            patch: Some((4096, [3u8; BATCH_HEADER])),
        };
        let b = t.encode();
        assert_eq!(Truncation::decode(&b), Some(t));
        let none = Truncation { patch: None, ..t };
        assert_eq!(Truncation::decode(&none.encode()), Some(none));
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x10;
            assert_eq!(Truncation::decode(&bad), None, "flipped byte {i}");
        }
    }
}
