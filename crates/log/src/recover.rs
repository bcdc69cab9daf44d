//! Reading a log directory back: the manifest, every segment's header, and
//! every batch, with the rules of [`segment::scan`] for where the records
//! end. Writes nothing: [`crate::Log::open`] acts on what this finds,
//! [`crate::Log::open_read_only`] and `check` only report it.

use std::io;
use std::path::{Path, PathBuf};

use ringkit::fs::{File, OpenOptions};

use crate::edit::{self, Truncation};
use crate::frame::{Manifest, SegmentHeader, MANIFEST_LEN, SEGMENT_HEADER};
use crate::manifest::{list, MANIFEST};
use crate::segment::{self, Flight, Reader, Tail};

/// One segment as found.
#[derive(Debug)]
pub struct Found {
    pub first: u64,
    pub path: PathBuf,
    pub size: u64,
    pub window: u64,
    /// The most batches in flight at once (from the header).
    pub depth: u32,
    /// The block the file system asked of `O_DIRECT` when it was made (from
    /// its header).
    pub align: u32,
    pub offsets: Vec<u32>,
    pub holes: Vec<(u64, u64)>,
    pub end: u64,
    /// An open descriptor (read-only) for reads.
    pub file: File,
}

/// What a log directory holds.
#[derive(Debug)]
pub enum Layout {
    /// No manifest and no segment: no log yet.
    Empty,
    /// One segment with a valid header and no records, and no manifest: a
    /// log whose making was cut short (nothing was ever acknowledged).
    HalfMade(SegmentHeader),
    /// A log: its segments, and how the last one's records end.
    Log {
        manifest: Manifest,
        segments: Vec<Found>,
        /// Non-zero bytes after the last record, all within the window a
        /// crash can leave unsynced (`Some(last non-zero offset)`).
        torn: Option<u64>,
        /// A truncation cut short: `segments` are read as it leaves them
        /// (later segments left out, the last through its overlay);
        /// a read-write open finishes it.
        truncation: Option<Truncation>,
        /// Segments wholly before the log's first LSN, which a purge cut
        /// short left (by first LSN): left out; a read-write open deletes
        /// them.
        purged: Vec<u64>,
    },
}

fn invalid(dir: &Path, msg: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "log {}: {msg}. Nothing was changed; `ringkit log check` reports what is there and \
             `ringkit log salvage` copies the readable records out",
            dir.display()
        ),
    )
}

/// Read the manifest of `dir`.
pub async fn read_manifest(dir: &Path) -> io::Result<Manifest> {
    let f = File::open(dir.join(MANIFEST)).await?;
    let (r, b) = f.read_at(Vec::with_capacity(MANIFEST_LEN + 1), 0).await;
    r?;
    Manifest::decode(&b).map_err(|e| invalid(dir, e.to_string()))
}

/// Open segment `first` of `dir` for reading and read its header. With
/// `direct`, also a second descriptor with `O_DIRECT` (where the filesystem
/// allows) to scan it with: what the disk holds rather than the page cache
/// (after a failed writeback the two can differ).
async fn open_segment(
    dir: &Path,
    first: u64,
    direct: bool,
) -> io::Result<(File, Option<File>, u64, Option<SegmentHeader>)> {
    let path = dir.join(segment::name(first));
    let f = File::open(&path).await?;
    let scan = if direct {
        OpenOptions::new()
            .read(true)
            .direct(true)
            .open(&path)
            .await
            .ok()
    } else {
        None
    };
    let size = f.metadata().await?.len();
    let mut r = Reader::new(scan.as_ref().unwrap_or(&f), size);
    let header = SegmentHeader::decode(r.get(0, SEGMENT_HEADER as usize).await?);
    Ok((f, scan, size, header))
}

/// Read `dir` as a log. `direct`: scan the last segment with `O_DIRECT`.
pub async fn recover(dir: &Path, direct: bool) -> io::Result<Layout> {
    let (firsts, has_manifest) = list(dir)?;
    if !has_manifest {
        return match firsts.as_slice() {
            [] => Ok(Layout::Empty),
            [first] => {
                let (f, _, size, header) = open_segment(dir, *first, false).await?;
                let mut r = Reader::new(&f, size);
                match header {
                    Some(h)
                        if h.first == *first
                            && h.size == size
                            && r.last_nonzero(SEGMENT_HEADER, size).await?.is_none() =>
                    {
                        Ok(Layout::HalfMade(h))
                    }
                    _ => Err(invalid(
                        dir,
                        format!(
                            "segment {} but no MANIFEST (not a log of this format, or damaged)",
                            segment::name(*first)
                        ),
                    )),
                }
            }
            _ => Err(invalid(
                dir,
                format!("{} segments but no MANIFEST", firsts.len()),
            )),
        };
    }
    let manifest = read_manifest(dir).await?;
    let truncation = edit::read_truncation(dir).await?;
    let mut firsts = firsts;
    let mut newest_made = manifest.newest;
    if let Some(t) = &truncation {
        if t.log_id != manifest.log_id {
            return Err(invalid(
                dir,
                format!("{} belongs to another log", edit::TRUNCATE),
            ));
        }
        // The segments after the one the cut falls in are gone once the
        // truncation is finished.
        firsts.retain(|&f| f <= t.segment);
        newest_made = newest_made.min(t.segment);
    }
    // A purge raised the log's first LSN and was cut short before it
    // deleted every segment wholly before it.
    let mut purged = Vec::new();
    while firsts.len() > 1 && firsts[1] <= manifest.start {
        purged.push(firsts.remove(0));
    }
    let Some(&first) = firsts.first() else {
        return Err(invalid(
            dir,
            "a MANIFEST but no segment: the segments were removed".into(),
        ));
    };
    if first > manifest.start {
        return Err(invalid(
            dir,
            format!(
                "the log starts at LSN {} but its first segment is {}: records {}..{first} are missing",
                manifest.start,
                segment::name(first),
                manifest.start
            ),
        ));
    }
    let newest = *firsts.last().expect("a segment");
    if newest < newest_made {
        return Err(invalid(
            dir,
            format!(
                "the newest segment made starts at LSN {} but the last one here is {}: \
                 segments at the end are missing",
                newest_made,
                segment::name(newest)
            ),
        ));
    }
    let mut segments = Vec::with_capacity(firsts.len());
    let mut torn = None;
    for (i, &first) in firsts.iter().enumerate() {
        let last = i + 1 == firsts.len();
        let name = segment::name(first);
        let (file, scan_fd, size, header) = open_segment(dir, first, last && direct).await?;
        let Some(h) = header else {
            return Err(invalid(
                dir,
                format!("segment {name} has no valid header (damaged, or not a segment)"),
            ));
        };
        if h.log_id != manifest.log_id {
            return Err(invalid(
                dir,
                format!(
                    "segment {name} belongs to another log (id {:016x}, this log is {:016x})",
                    h.log_id, manifest.log_id
                ),
            ));
        }
        if h.first != first {
            return Err(invalid(
                dir,
                format!("segment {name} says it starts at LSN {}", h.first),
            ));
        }
        if h.size != size {
            return Err(invalid(
                dir,
                format!(
                    "segment {name} is {size} bytes but was made {} bytes long: cut short or \
                     extended",
                    h.size
                ),
            ));
        }
        let overlay = truncation
            .filter(|t| t.segment == first)
            .map(|t| t.overlay());
        let mut r = Reader::new(scan_fd.as_ref().unwrap_or(&file), size).with_overlay(overlay);
        let scan = segment::scan(&mut r, manifest.log_id, first, Flight::of(&h), last).await?;
        match scan.tail {
            Tail::Clean => {}
            Tail::Torn { last } => torn = Some(last),
            Tail::Corrupt { why } => return Err(invalid(dir, format!("segment {name}: {why}"))),
        }
        let next = first + scan.offsets.len() as u64;
        if let Some(&following) = firsts.get(i + 1) {
            if following != next {
                return Err(invalid(
                    dir,
                    format!(
                        "segment {name} holds LSNs {first}..{next} and the next segment starts \
                         at {following}: records are missing, or a segment is not this log's"
                    ),
                ));
            }
        }
        let path = dir.join(&name);
        segments.push(Found {
            first,
            path,
            size,
            window: u64::from(h.window),
            depth: h.depth,
            align: h.align,
            offsets: scan.offsets,
            holes: scan.holes,
            end: scan.end,
            file,
        });
    }
    let last = segments.last().expect("a segment");
    let next = last.first + last.offsets.len() as u64;
    if next < manifest.start {
        return Err(invalid(
            dir,
            format!(
                "the log starts at LSN {} but its records end before LSN {next}",
                manifest.start
            ),
        ));
    }
    Ok(Layout::Log {
        manifest,
        segments,
        torn,
        truncation,
        purged,
    })
}
