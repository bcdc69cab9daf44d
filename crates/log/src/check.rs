//! `check` and `salvage`: what an operator runs on a log that will not
//! open. Both only read the log; `salvage` writes the records it can read
//! into a new log elsewhere, never in place.

use std::io;
use std::path::{Path, PathBuf};

use ringkit::fs::File;

use crate::frame::{
    BatchHeader, Manifest, SegmentHeader, BATCH_HEADER, BATCH_MAGIC, SEGMENT_HEADER,
};
use crate::manifest;
use crate::record::{self, Found};
use crate::recover;
use crate::segment::{self, Reader, Tail};
use crate::{Log, Options};

/// What [`check`] found in one segment.
#[derive(Debug, Clone)]
pub struct SegmentReport {
    /// File name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// The header, if it checks.
    pub header: Option<(u64, u64)>,
    /// The block the file system asked of `O_DIRECT` when it was made (from
    /// its header).
    pub block: Option<u32>,
    /// Whole records from the segment's first LSN on.
    pub records: u64,
    /// Where they end.
    pub end: u64,
    /// What lies after them: `None` zeros; else a description.
    pub tail: Option<String>,
}

/// What [`check`] found in a log directory.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The manifest's log id and first LSN, if it checks.
    pub manifest: Option<(u64, u64)>,
    /// Each segment, by first LSN.
    pub segments: Vec<SegmentReport>,
    /// Durable records recovery would keep (0 if it would refuse).
    pub records: u64,
    /// Why recovery would refuse the log, if it would.
    pub error: Option<String>,
}

/// Read the log in `dir` without writing anything and report each
/// segment and what recovery would do. Must run inside a ringkit runtime.
pub async fn check(dir: impl AsRef<Path>) -> io::Result<CheckReport> {
    let dir = dir.as_ref();
    let (firsts, has_manifest) = manifest::list(dir)?;
    let manifest = if has_manifest {
        recover::read_manifest(dir).await.ok()
    } else {
        None
    };
    let log_id = manifest.map(|m| m.log_id);
    // A truncation in progress: its segment read as it will leave it, the
    // later ones reported as going.
    let truncation = crate::edit::read_truncation(dir).await.ok().flatten();
    let mut segments = Vec::new();
    for (i, &first) in firsts.iter().enumerate() {
        let name = segment::name(first);
        let f = File::open(dir.join(&name)).await?;
        let size = f.metadata().await?.len();
        if truncation.is_some_and(|t| first > t.segment) {
            segments.push(SegmentReport {
                name,
                size,
                header: None,
                block: None,
                records: 0,
                end: 0,
                tail: Some("removed by the truncation in progress (TRUNCATE)".into()),
            });
            continue;
        }
        let overlay = truncation
            .filter(|t| t.segment == first)
            .map(|t| t.overlay());
        let mut r = Reader::new(&f, size).with_overlay(overlay);
        let header = SegmentHeader::decode(r.get(0, SEGMENT_HEADER as usize).await?);
        let (records, end, tail) = match header {
            Some(h) => {
                let id = log_id.unwrap_or(h.log_id);
                let last = i + 1 == firsts.len() || truncation.is_some_and(|t| t.segment == first);
                let s = segment::scan(&mut r, id, h.first, segment::Flight::of(&h), last).await?;
                let tail = match s.tail {
                    Tail::Clean => None,
                    Tail::Torn { last } => Some(format!(
                        "torn tail: {} bytes that are not a whole batch at offset {} (never \
                         acknowledged; cleared by the next open)",
                        last + 1 - s.end,
                        s.end
                    )),
                    Tail::Corrupt { why } => Some(format!("CORRUPT: {why}")),
                };
                (s.offsets.len() as u64, s.end, tail)
            }
            None => (0, 0, Some("CORRUPT: no valid segment header".to_string())),
        };
        segments.push(SegmentReport {
            name,
            size,
            header: header.map(|h| (h.log_id, h.first)),
            block: header.map(|h| h.align),
            records,
            end,
            tail,
        });
    }
    let (records, error) = match recover::recover(dir, false).await {
        // Holes salvage left are LSNs, not records.
        // Records a purge left in the first segment are not the log's.
        Ok(recover::Layout::Log {
            segments, manifest, ..
        }) => {
            let start = manifest.start;
            let next = segments
                .last()
                .map_or(start, |s| s.first + s.offsets.len() as u64);
            let holes: u64 = segments
                .iter()
                .flat_map(|s| &s.holes)
                .map(|&(h, n)| (h + n).min(next).saturating_sub(h.max(start)))
                .sum();
            (next.saturating_sub(start) - holes, None)
        }
        Ok(_) => (0, None),
        Err(e) => (0, Some(e.to_string())),
    };
    Ok(CheckReport {
        manifest: manifest.map(|m| (m.log_id, m.start)),
        segments,
        records,
        error,
    })
}

/// What [`salvage`] copied.
#[derive(Debug, Clone, Default)]
pub struct SalvageReport {
    /// Records copied, each at its old LSN.
    pub copied: u64,
    /// LSNs lost to damage, written as holes: (first, count). A read of
    /// one is `NotFound`; `read_from` skips them; no append reuses them.
    pub holes: Vec<(u64, u64)>,
    /// The new log's first and next LSN.
    pub first: u64,
    /// The LSN the new log's next append gets (past every LSN the old log
    /// held that could be read).
    pub next: u64,
    /// Where the new log is.
    pub into: PathBuf,
}

/// Copy every record of the log in `dir` that still checks into a new log
/// at `into` (which must not exist, or be empty), made with `opts`, each at
/// its old LSN: the new log starts at the first LSN read, and LSNs lost to
/// damage between readable records are written as holes, so no later
/// append is given an LSN the old log used. Reads past damage: after a
/// place that is not a whole batch it looks for the next whole batch of
/// the log. Writes nothing in `dir`. Must run inside a ringkit runtime.
pub async fn salvage(
    dir: impl AsRef<Path>,
    into: impl AsRef<Path>,
    opts: Options,
    next_lsn: Option<u64>,
) -> io::Result<SalvageReport> {
    let (dir, into) = (dir.as_ref(), into.as_ref());
    let refuse = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
    if let (Ok(d), Ok(i)) = (dir.canonicalize(), absolute_parent(into)) {
        if i.starts_with(&d) {
            return refuse(format!(
                "{} is inside the damaged log's directory: salvage writes nothing there",
                into.display()
            ));
        }
    }
    if into.exists() && std::fs::read_dir(into)?.next().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not empty: salvage writes only into a new log",
                into.display()
            ),
        ));
    }
    let (firsts, has_manifest) = manifest::list(dir)?;
    let manifest = if has_manifest {
        recover::read_manifest(dir).await.ok()
    } else {
        None
    };
    let mut records: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut high = 0u64;
    let mut log_id = manifest.map(|m: Manifest| m.log_id);
    // A truncation in progress is finished in what is read (the records
    // it removes must not come back), and records a purge removed are not
    // copied.
    let truncation = crate::edit::read_truncation(dir).await.ok().flatten();
    for &first in &firsts {
        if truncation.is_some_and(|t| first > t.segment) {
            continue;
        }
        let f = File::open(dir.join(segment::name(first))).await?;
        let size = f.metadata().await?.len();
        let overlay = truncation
            .filter(|t| t.segment == first)
            .map(|t| t.overlay());
        let mut r = Reader::new(&f, size).with_overlay(overlay);
        if let Some(h) = SegmentHeader::decode(r.get(0, SEGMENT_HEADER as usize).await?) {
            log_id.get_or_insert(h.log_id);
        }
        let Some(id) = log_id else { continue };
        // A segment's first LSN says every LSN before it was used.
        high = high.max(first.saturating_sub(1));
        read_all(&mut r, id, &mut records, &mut high).await?;
    }
    // The newest segment the manifest names is gone: how far its LSNs ran
    // is unknown, and only the operator can say where the new log may go on.
    if let Some(m) = manifest {
        if !firsts.contains(&m.newest) && next_lsn.is_none_or(|n| n <= m.newest) {
            return refuse(format!(
                "the log's newest segment ({}) is missing: the LSNs it held are unknown; give \
                 the next LSN the new log may hand out (past every LSN ever acknowledged), at \
                 least {}",
                segment::name(m.newest),
                m.newest
            ));
        }
    }
    if let Some(m) = manifest {
        records.retain(|(lsn, _)| *lsn >= m.start);
    }
    let mut report = SalvageReport {
        into: into.to_path_buf(),
        ..Default::default()
    };
    let Some(&(start, _)) = records.first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("nothing readable in {}: no log made", dir.display()),
        ));
    };
    let log = Log::open(
        into,
        Options {
            first_lsn: start,
            ..opts
        },
    )
    .await?;
    let mut commits = Vec::with_capacity(records.len());
    let mut next = start;
    let mut hole = |from: u64, to: u64, commits: &mut Vec<_>| {
        // Holes of at most u32::MAX LSNs each (a batch header's count).
        let mut at = from;
        while at < to {
            let n = (to - at).min(u64::from(u32::MAX));
            commits.push(log.append_hole(n));
            at += n;
        }
        if to > from {
            report.holes.push((from, to - from));
        }
    };
    for (lsn, p) in &records {
        hole(next, *lsn, &mut commits);
        commits.push(log.append(p.clone()));
        next = lsn + 1;
    }
    // Past every LSN the old log is known to have used (batch headers of
    // lost records, segments' first LSNs), or the operator's floor.
    let floor = (high + 1).max(next_lsn.unwrap_or(0));
    hole(next, floor.max(next), &mut commits);
    for c in commits {
        c.await?;
    }
    report.copied = records.len() as u64;
    report.first = start;
    report.next = log.next_lsn();
    log.close().await;
    Ok(report)
}

/// Every record that checks in the segment read by `r`, appended to `out`
/// when its LSN is past the last one there; `high` rises to the highest
/// LSN a batch header there names (records lost or not). Reads past
/// damage: inside a batch whose header checks, a record that does not is
/// skipped and the next one that checks is looked for; after a place that
/// is not a batch header, the next header that checks.
async fn read_all(
    r: &mut Reader<'_>,
    log_id: u64,
    out: &mut Vec<(u64, Vec<u8>)>,
    high: &mut u64,
) -> io::Result<()> {
    let mut pos = SEGMENT_HEADER;
    while pos + BATCH_HEADER as u64 <= r.size {
        let head = BatchHeader::decode(r.get(pos, BATCH_HEADER).await?, log_id)
            .filter(|h| pos + h.extent() <= r.size);
        if let Some(h) = head {
            if h.count > 0 {
                *high = (*high).max(h.first + u64::from(h.count) - 1);
            }
            if !h.hole {
                let body_at = pos + BATCH_HEADER as u64;
                let body = r.get(body_at, h.len as usize).await?.to_vec();
                records_of_batch(&body, h.first, u64::from(h.count), out);
            }
            pos += h.extent();
            continue;
        }
        // Not a batch header here: look for the next one that checks.
        let mut next = None;
        let mut from = pos + 1;
        'search: while from + BATCH_HEADER as u64 <= r.size {
            let hay = r.get(from, 1 << 20).await?.to_vec();
            for i in memchr::memmem::find_iter(&hay, BATCH_MAGIC) {
                let p = from + i as u64;
                if p >= pos + 5 {
                    let cand = r.get(p - 4, BATCH_HEADER).await?;
                    if BatchHeader::decode(cand, log_id).is_some() {
                        next = Some(p - 4);
                        break 'search;
                    }
                }
            }
            if hay.len() < 4 {
                break;
            }
            from += (hay.len() - 3) as u64;
        }
        match next {
            Some(p) => pos = p,
            None => break,
        }
    }
    Ok(())
}

/// The records of one batch's body (LSNs `first..first + count`) that
/// check, each pushed when past the last in `out`. After one that does
/// not, the next that checks (its LSN, in the header CRC'd with it, is
/// one of the batch's later ones) is looked for byte by byte.
fn records_of_batch(body: &[u8], first: u64, count: u64, out: &mut Vec<(u64, Vec<u8>)>) {
    let end = first + count;
    let mut push = |lsn: u64, p: &[u8]| {
        if out.last().is_none_or(|(l, _)| *l < lsn) {
            out.push((lsn, p.to_vec()));
        }
    };
    let (mut at, mut lsn) = (0usize, first);
    while lsn < end && at < body.len() {
        if let Found::Record(p, total) = record::decode(&body[at..], lsn) {
            push(lsn, p);
            at += total;
            lsn += 1;
            continue;
        }
        // Damaged: find the next record of this batch that checks.
        let mut found = None;
        for off in at + 1..body.len().saturating_sub(record::HEADER - 1) {
            let l = u64::from_le_bytes(body[off + 8..off + 16].try_into().expect("8 bytes"));
            if l > lsn && l < end {
                if let Found::Record(_, _) = record::decode(&body[off..], l) {
                    found = Some((off, l));
                    break;
                }
            }
        }
        match found {
            Some((off, l)) => {
                at = off;
                lsn = l;
            }
            None => break,
        }
    }
}

/// `p` made absolute with its parent resolved (`p` itself may not exist).
fn absolute_parent(p: &Path) -> io::Result<PathBuf> {
    let abs = std::path::absolute(p)?;
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) if parent.exists() => Ok(parent.canonicalize()?.join(name)),
        _ => Ok(abs),
    }
}
