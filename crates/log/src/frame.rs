//! The log's own framing on disk: the manifest, each segment's header and
//! each batch's header. (A record's framing is in [`crate::record`].)
//!
//! ```text
//! MANIFEST (64 bytes), written once, by rename:
//!   0  u32  CRC32C of bytes 4..64
//!   4  [8]  "RKLOGMAN"
//!   12 u32  format version (2)
//!   16 u64  log id (random, made with the log)
//!   24 u64  the log's first LSN
//!   32 u64  the first LSN of the newest segment made (rewritten, by
//!           rename, after each new segment: a lost last segment shows)
//!   40 ..   zeros
//! segment header (the first 4096 bytes of every segment; 64 used):
//!   0  u32  CRC32C of bytes 4..64
//!   4  [8]  "RKLOGSEG"
//!   12 u32  format version (4; a version-3 segment is read as align
//!           4096, a version-2 one as depth 1 too)
//!   16 u64  log id
//!   24 u64  the segment's first LSN
//!   32 u32  window: the most bytes that may be unsynced at once, from the
//!           start of the oldest unsynced batch
//!   36 u64  the segment file's size (zero-filled to it when made: a
//!           shorter or longer file is damage)
//!   44 u32  depth: the most batches in flight (written, not yet synced)
//!           at once (version 3; a version-2 header has zeros: depth 1)
//!   48 u32  align: the block the file system asked of `O_DIRECT` when the
//!           segment was made (`statx` `STATX_DIOALIGN`, at least 4096;
//!           version 4; older: 4096). Direct batches are padded to 4096: a
//!           direct log refuses a file system that asks more
//!   52 ..   zeros
//! batch header (32 bytes, then the batch's records, then `pad` zeros):
//!   0  u32  CRC32C of the log id (8 bytes LE), then bytes 4..32
//!   4  [4]  "RKB2"
//!   8  u64  the batch's first LSN
//!   16 u32  records in the batch
//!   20 u32  bytes of records
//!   24 u32  zero bytes after them (`O_DIRECT`: to the next block)
//!   28 u32  flags: 1 = a hole (the `count` LSNs from `first` were lost to
//!           damage; `salvage` writes it, so no LSN is ever reused)
//! ```
//!
//! The batch header's checksum covers the log id, so a batch copied from
//! another log never checks here.
//!
//! # Why `O_DIRECT` batches are padded
//!
//! Format 1 started each direct batch at the block holding the end of the
//! records and wrote that block again, acknowledged bytes included: a
//! sector torn during that rewrite loses acknowledged records. Now each
//! batch is padded with zeros to the next 4096-byte block, so no write ever
//! covers a block holding acknowledged records (as SQLite's WAL and
//! TigerBeetle pad to the sector). The cost is bytes: at 64 writers of 4
//! KiB a batch is ~260 KB and pads less than one block; a lone small record
//! costs a whole block. Measured figures are in docs/results/log-
//! padding-2026-11-26.md. A log written buffered and reopened with
//! `O_DIRECT` first writes an empty batch whose padding reaches the next
//! block. Buffered batches are not padded: the page cache writes whole
//! pages anyway, so padding would not keep acknowledged sectors out of a
//! writeback.

use std::io;

/// Format version of the manifest.
pub const VERSION: u32 = 2;
/// Format version written in every new segment header (3: with `depth`;
/// 4: with `align`).
pub const SEGMENT_VERSION: u32 = 4;
/// The oldest segment header version read (2: no `depth`, read as 1).
const SEGMENT_VERSION_MIN: u32 = 2;
/// The most batches in flight a segment may say (a header saying more is
/// not one this log wrote).
pub const MAX_DEPTH: u32 = 2;
/// Bytes of the manifest.
pub const MANIFEST_LEN: usize = 64;
/// Bytes a segment header occupies (records start here).
pub const SEGMENT_HEADER: u64 = 4096;
/// Bytes of a batch header.
pub const BATCH_HEADER: usize = 32;
/// The smallest block a segment pads direct batches to (what a version-3
/// segment used).
pub const MIN_ALIGN: u32 = 4096;
/// The largest `align` a segment header may say.
pub const MAX_ALIGN: u32 = 1 << 20;

/// Where each field of the headers lies: (offset, width), in order. The
/// assertions below check at compile time that each follows the one
/// before it, with no gap and no overlap, inside the header.
mod at {
    pub const CRC: (usize, usize) = (0, 4);
    pub const MAGIC: (usize, usize) = (4, 8);
    pub const VERSION: (usize, usize) = (12, 4);
    pub const LOG_ID: (usize, usize) = (16, 8);
    pub const M_START: (usize, usize) = (24, 8);
    pub const M_NEWEST: (usize, usize) = (32, 8);
    pub const S_FIRST: (usize, usize) = (24, 8);
    pub const S_WINDOW: (usize, usize) = (32, 4);
    pub const S_SIZE: (usize, usize) = (36, 8);
    pub const S_DEPTH: (usize, usize) = (44, 4);
    pub const S_ALIGN: (usize, usize) = (48, 4);
    pub const B_MAGIC: (usize, usize) = (4, 4);
    pub const B_FIRST: (usize, usize) = (8, 8);
    pub const B_COUNT: (usize, usize) = (16, 4);
    pub const B_LEN: (usize, usize) = (20, 4);
    pub const B_PAD: (usize, usize) = (24, 4);
    pub const B_FLAGS: (usize, usize) = (28, 4);
    /// Bytes of a segment header that carry fields (the rest is zeros).
    pub const SEGMENT_USED: usize = 64;

    /// Whether `fields` follow each other from 0 with no gap and end
    /// within `len`.
    pub const fn packed(fields: &[(usize, usize)], len: usize) -> bool {
        let (mut i, mut next) = (0, 0);
        while i < fields.len() {
            if fields[i].0 != next {
                return false;
            }
            next += fields[i].1;
            i += 1;
        }
        next <= len
    }
}

const _: () = assert!(at::packed(
    &[
        at::CRC,
        at::MAGIC,
        at::VERSION,
        at::LOG_ID,
        at::M_START,
        at::M_NEWEST
    ],
    MANIFEST_LEN
));
const _: () = assert!(at::packed(
    &[
        at::CRC,
        at::MAGIC,
        at::VERSION,
        at::LOG_ID,
        at::S_FIRST,
        at::S_WINDOW,
        at::S_SIZE,
        at::S_DEPTH,
        at::S_ALIGN
    ],
    at::SEGMENT_USED
));
const _: () = assert!(at::packed(
    &[
        at::CRC,
        at::B_MAGIC,
        at::B_FIRST,
        at::B_COUNT,
        at::B_LEN,
        at::B_PAD,
        at::B_FLAGS
    ],
    BATCH_HEADER
));
const _: () = assert!(at::SEGMENT_USED as u64 <= SEGMENT_HEADER);

fn put(b: &mut [u8], (at, width): (usize, usize), v: &[u8]) {
    assert_eq!(v.len(), width, "a field's width");
    b[at..at + width].copy_from_slice(v);
}

const MANIFEST_MAGIC: &[u8; 8] = b"RKLOGMAN";
const SEGMENT_MAGIC: &[u8; 8] = b"RKLOGSEG";
/// The batch header's magic (at offset 4).
pub const BATCH_MAGIC: &[u8; 4] = b"RKB2";

fn u32_at(b: &[u8], (at, width): (usize, usize)) -> u32 {
    debug_assert_eq!(width, 4);
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], (at, width): (usize, usize)) -> u64 {
    debug_assert_eq!(width, 8);
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// What the manifest says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Manifest {
    /// The log's id.
    pub log_id: u64,
    /// The log's first LSN.
    pub start: u64,
    /// The first LSN of the newest segment made.
    pub newest: u64,
}

impl Manifest {
    /// The manifest's bytes.
    pub fn encode(&self) -> [u8; MANIFEST_LEN] {
        let mut b = [0u8; MANIFEST_LEN];
        put(&mut b, at::MAGIC, MANIFEST_MAGIC);
        put(&mut b, at::VERSION, &VERSION.to_le_bytes());
        put(&mut b, at::LOG_ID, &self.log_id.to_le_bytes());
        put(&mut b, at::M_START, &self.start.to_le_bytes());
        put(&mut b, at::M_NEWEST, &self.newest.to_le_bytes());
        let crc = crc32c::crc32c(&b[4..]);
        put(&mut b, at::CRC, &crc.to_le_bytes());
        b
    }

    /// Parse a manifest file's bytes.
    pub fn decode(b: &[u8]) -> io::Result<Manifest> {
        if b.len() != MANIFEST_LEN || &b[4..12] != MANIFEST_MAGIC {
            return Err(invalid(format!(
                "MANIFEST is not a ringkit-log manifest ({} bytes)",
                b.len()
            )));
        }
        if crc32c::crc32c(&b[4..]) != u32_at(b, at::CRC) {
            return Err(invalid("MANIFEST does not check (damaged)".into()));
        }
        let version = u32_at(b, at::VERSION);
        if version != VERSION {
            return Err(invalid(format!(
                "MANIFEST: format version {version}, this ringkit-log reads {VERSION}"
            )));
        }
        Ok(Manifest {
            log_id: u64_at(b, at::LOG_ID),
            start: u64_at(b, at::M_START),
            newest: u64_at(b, at::M_NEWEST),
        })
    }
}

/// What a segment header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The log's id.
    pub log_id: u64,
    /// The segment's first LSN.
    pub first: u64,
    /// The most bytes that may be unsynced at once (see the module doc).
    pub window: u32,
    /// The segment file's size.
    pub size: u64,
    /// The most batches in flight at once (1 for a version-2 segment).
    pub depth: u32,
    /// The block the file system asked of `O_DIRECT` when the segment was
    /// made (4096 before version 4).
    pub align: u32,
}

impl SegmentHeader {
    /// Write the header into the first 64 bytes of `out` (the rest of the
    /// segment header's 4096 bytes stays zero).
    pub fn encode_into(&self, out: &mut [u8]) {
        let b = &mut out[..at::SEGMENT_USED];
        b.fill(0);
        put(b, at::MAGIC, SEGMENT_MAGIC);
        put(b, at::VERSION, &SEGMENT_VERSION.to_le_bytes());
        put(b, at::LOG_ID, &self.log_id.to_le_bytes());
        put(b, at::S_FIRST, &self.first.to_le_bytes());
        put(b, at::S_WINDOW, &self.window.to_le_bytes());
        put(b, at::S_SIZE, &self.size.to_le_bytes());
        put(b, at::S_DEPTH, &self.depth.to_le_bytes());
        put(b, at::S_ALIGN, &self.align.to_le_bytes());
        let crc = crc32c::crc32c(&b[4..]);
        put(b, at::CRC, &crc.to_le_bytes());
    }

    /// Parse the first bytes of a segment (its first 4096 if the file has
    /// them: the unused part must be zeros); `None`: not a segment header.
    pub fn decode(b: &[u8]) -> Option<SegmentHeader> {
        let used = at::SEGMENT_USED;
        if b.len() < used || &b[4..12] != SEGMENT_MAGIC || b[used..].iter().any(|&x| x != 0) {
            return None;
        }
        let version = u32_at(b, at::VERSION);
        if crc32c::crc32c(&b[4..used]) != u32_at(b, at::CRC)
            || !(SEGMENT_VERSION_MIN..=SEGMENT_VERSION).contains(&version)
        {
            return None;
        }
        let (depth, align) = (u32_at(b, at::S_DEPTH), u32_at(b, at::S_ALIGN));
        let depth = match version {
            2 if depth == 0 => 1,
            3 | 4 if (1..=MAX_DEPTH).contains(&depth) => depth,
            _ => return None,
        };
        let align = match version {
            2 | 3 if align == 0 => MIN_ALIGN,
            4 if align.is_power_of_two() && (MIN_ALIGN..=MAX_ALIGN).contains(&align) => align,
            _ => return None,
        };
        Some(SegmentHeader {
            log_id: u64_at(b, at::LOG_ID),
            first: u64_at(b, at::S_FIRST),
            window: u32_at(b, at::S_WINDOW),
            size: u64_at(b, at::S_SIZE),
            depth,
            align,
        })
    }
}

/// What a batch header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// LSN of the batch's first record.
    pub first: u64,
    /// Records in the batch.
    pub count: u32,
    /// Bytes of records after the header.
    pub len: u32,
    /// Zero bytes after the records.
    pub pad: u32,
    /// A hole: `count` LSNs lost to damage, no records.
    pub hole: bool,
}

impl BatchHeader {
    /// Bytes from the header's start to the next batch's.
    pub fn extent(&self) -> u64 {
        BATCH_HEADER as u64 + u64::from(self.len) + u64::from(self.pad)
    }

    /// Write the header into the first 32 bytes of `out`.
    pub fn encode_into(&self, log_id: u64, out: &mut [u8]) {
        let b = &mut out[..BATCH_HEADER];
        put(b, at::B_MAGIC, BATCH_MAGIC);
        put(b, at::B_FIRST, &self.first.to_le_bytes());
        put(b, at::B_COUNT, &self.count.to_le_bytes());
        put(b, at::B_LEN, &self.len.to_le_bytes());
        put(b, at::B_PAD, &self.pad.to_le_bytes());
        put(b, at::B_FLAGS, &u32::from(self.hole).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&log_id.to_le_bytes()), &b[4..]);
        put(b, at::CRC, &crc.to_le_bytes());
    }

    /// Parse a batch header of log `log_id` at the start of `b`; `None`:
    /// not one (zeros, damage, another log's).
    pub fn decode(b: &[u8], log_id: u64) -> Option<BatchHeader> {
        if b.len() < BATCH_HEADER || &b[4..8] != BATCH_MAGIC || u32_at(b, at::B_FLAGS) > 1 {
            return None;
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&log_id.to_le_bytes()), &b[4..BATCH_HEADER]);
        (crc == u32_at(b, at::CRC)).then(|| BatchHeader {
            first: u64_at(b, at::B_FIRST),
            count: u32_at(b, at::B_COUNT),
            len: u32_at(b, at::B_LEN),
            pad: u32_at(b, at::B_PAD),
            hole: u32_at(b, at::B_FLAGS) == 1,
        })
    }
}

/// A new log id: random, never 0.
pub fn new_log_id() -> u64 {
    let mut id = 0u64;
    // SAFETY: getrandom fills the 8 bytes of a local.
    let n = unsafe { libc::getrandom((&mut id as *mut u64).cast(), 8, 0) };
    if n != 8 {
        // No entropy source: time and pid are unique enough for an id.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        id = t ^ (u64::from(std::process::id()) << 32);
    }
    id.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_refuse_damage() {
        let m = Manifest {
            log_id: 7,
            start: 300,
            newest: 900,
        };
        let mut b = m.encode();
        assert_eq!(Manifest::decode(&b).unwrap(), m);
        b[30] ^= 1;
        assert_eq!(
            Manifest::decode(&b).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );

        let s = SegmentHeader {
            log_id: 7,
            first: 42,
            window: 1 << 20,
            size: 64 << 20,
            depth: 2,
            align: 8192,
        };
        let mut seg = vec![0u8; 4096];
        s.encode_into(&mut seg);
        assert_eq!(SegmentHeader::decode(&seg), Some(s));
        let good = seg.clone();
        seg[40] = 1;
        assert_eq!(SegmentHeader::decode(&seg), None);

        // A version-2 header (no depth field) reads as depth 1.
        let resealed = |mut h: Vec<u8>| {
            let crc = crc32c::crc32c(&h[4..64]);
            h[..4].copy_from_slice(&crc.to_le_bytes());
            h
        };
        let mut v2 = good.clone();
        v2[12..16].copy_from_slice(&2u32.to_le_bytes());
        v2[44..52].fill(0);
        let old = SegmentHeader::decode(&resealed(v2)).expect("a version-2 header");
        assert_eq!((old.depth, old.window, old.align), (1, 1 << 20, 4096));
        // A version-3 header (no align field) pads to 4096.
        let mut v3 = good.clone();
        v3[12..16].copy_from_slice(&3u32.to_le_bytes());
        v3[48..52].fill(0);
        let old = SegmentHeader::decode(&resealed(v3.clone())).expect("a version-3 header");
        assert_eq!((old.depth, old.align), (2, 4096));
        v3[48] = 1;
        assert_eq!(
            SegmentHeader::decode(&resealed(v3)),
            None,
            "a version-3 header with an align"
        );
        // An align that is not a power of two from 4096 to 1 MiB is not a
        // header this log wrote.
        for align in [0u32, 512, 2048, 6000, 2 << 20] {
            let mut d = good.clone();
            d[48..52].copy_from_slice(&align.to_le_bytes());
            assert_eq!(SegmentHeader::decode(&resealed(d)), None, "align {align}");
        }
        // Depth 0, or more than the log ever writes, in a version-3 header
        // is not a header.
        for depth in [0u32, MAX_DEPTH + 1, u32::MAX] {
            let mut d = good.clone();
            d[44..48].copy_from_slice(&depth.to_le_bytes());
            let crc = crc32c::crc32c(&d[4..64]);
            d[..4].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(SegmentHeader::decode(&d), None, "depth {depth}");
        }

        let h = BatchHeader {
            first: 9,
            count: 3,
            len: 100,
            pad: 12,
            hole: false,
        };
        let mut b = [0u8; 32];
        h.encode_into(7, &mut b);
        assert_eq!(BatchHeader::decode(&b, 7), Some(h));
        assert_eq!(BatchHeader::decode(&b, 8), None, "another log's batch");
        assert_eq!(h.extent(), 144);
        b[9] ^= 4;
        assert_eq!(BatchHeader::decode(&b, 7), None);
        assert_eq!(BatchHeader::decode(&[0u8; 32], 7), None);
    }
}
