//! `check` and `salvage`: what an operator runs on a log that will not
//! open. Both only read the log; `salvage` writes the records it can read
//! into a new log elsewhere, never in place.

use std::io;
use std::path::{Path, PathBuf};

use ringkit::fs::File;

use crate::frame::{Manifest, SegmentHeader, BATCH_HEADER, BATCH_MAGIC, SEGMENT_HEADER};
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
    let (firsts, has_manifest) = recover::list(dir)?;
    let manifest = if has_manifest {
        recover::read_manifest(dir).await.ok()
    } else {
        None
    };
    let log_id = manifest.map(|m| m.log_id);
    let mut segments = Vec::new();
    for (i, &first) in firsts.iter().enumerate() {
        let name = segment::name(first);
        let f = File::open(dir.join(&name)).await?;
        let size = f.metadata().await?.len();
        let mut r = Reader::new(&f, size);
        let header = SegmentHeader::decode(r.get(0, SEGMENT_HEADER as usize).await?);
        let (records, end, tail) = match header {
            Some(h) => {
                let id = log_id.unwrap_or(h.log_id);
                let last = i + 1 == firsts.len();
                let s = segment::scan(&mut r, id, h.first, u64::from(h.window), last).await?;
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
            records,
            end,
            tail,
        });
    }
    let (records, error) = match recover::recover(dir, false).await {
        Ok(recover::Layout::Log { segments, .. }) => {
            (segments.iter().map(|s| s.offsets.len() as u64).sum(), None)
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
) -> io::Result<SalvageReport> {
    let (dir, into) = (dir.as_ref(), into.as_ref());
    if into.exists() && std::fs::read_dir(into)?.next().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not empty: salvage writes only into a new log",
                into.display()
            ),
        ));
    }
    let (firsts, has_manifest) = recover::list(dir)?;
    let manifest = if has_manifest {
        recover::read_manifest(dir).await.ok()
    } else {
        None
    };
    let mut records: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut log_id = manifest.map(|m: Manifest| m.log_id);
    for &first in &firsts {
        let f = File::open(dir.join(segment::name(first))).await?;
        let size = f.metadata().await?.len();
        let mut r = Reader::new(&f, size);
        if let Some(h) = SegmentHeader::decode(r.get(0, SEGMENT_HEADER as usize).await?) {
            log_id.get_or_insert(h.log_id);
        }
        let Some(id) = log_id else { continue };
        read_all(&mut r, id, &mut records).await?;
    }
    let mut report = SalvageReport {
        into: into.to_path_buf(),
        ..Default::default()
    };
    let Some(&(start, _)) = records.first() else {
        return Ok(report);
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
    for (lsn, p) in &records {
        if *lsn > next {
            report.holes.push((next, lsn - next));
            commits.push(log.append_hole(lsn - next));
        }
        commits.push(log.append(p.clone()));
        next = lsn + 1;
    }
    for c in commits {
        c.await?;
    }
    report.copied = records.len() as u64;
    report.first = start;
    report.next = log.next_lsn();
    log.close().await;
    Ok(report)
}

/// Every record of whole batches in the segment read by `r`, skipping
/// damage, appended to `out` when its LSN is past the last one there.
async fn read_all(
    r: &mut Reader<'_>,
    log_id: u64,
    out: &mut Vec<(u64, Vec<u8>)>,
) -> io::Result<()> {
    let mut pos = SEGMENT_HEADER;
    let max = r.size;
    while pos + BATCH_HEADER as u64 <= r.size {
        if let Some((h, offs)) = segment::batch_at(r, pos, log_id, None, max).await? {
            for (i, off) in offs.iter().enumerate() {
                let lsn = h.first + i as u64;
                let end = offs
                    .get(i + 1)
                    .map_or(pos + BATCH_HEADER as u64 + u64::from(h.len), |&o| {
                        u64::from(o)
                    });
                let b = r
                    .get(u64::from(*off), (end - u64::from(*off)) as usize)
                    .await?;
                if let Found::Record(p, _) = record::decode(b, lsn) {
                    if out.last().is_none_or(|(l, _)| *l < lsn) {
                        out.push((lsn, p.to_vec()));
                    }
                }
            }
            pos += h.extent();
            continue;
        }
        // Not a whole batch here: look for the next one.
        let mut next = None;
        let mut from = pos + 1;
        'search: while from + BATCH_HEADER as u64 <= r.size {
            let hay = r.get(from, 1 << 20).await?.to_vec();
            for i in memchr::memmem::find_iter(&hay, BATCH_MAGIC) {
                let p = from + i as u64;
                if p >= pos + 5
                    && segment::batch_at(r, p - 4, log_id, None, max)
                        .await?
                        .is_some()
                {
                    next = Some(p - 4);
                    break 'search;
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
