//! Judging one crash state: write it out, recover it three ways, and
//! check what recovery made of it against what the workload had seen by
//! then (acknowledged appends, truncations, purges and saved states).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use super::trace::Edit;
use super::{options, payload, payload_id, Config};
use crate::Log;

/// What the workload had done at one point of the trace.
#[derive(Default, Clone)]
pub(super) struct Seen {
    /// Records acknowledged and not since removed by an acknowledged
    /// truncation or purge: LSN to payload number.
    acked: BTreeMap<u64, u64>,
    appended: HashSet<u64>,
    /// Acknowledged truncations: (from, the first payload appended after
    /// it). From then on an LSN at or past `from` holds only later ones.
    truncated: Vec<(u64, u64)>,
    /// Truncations issued and not acknowledged (still running, or failed
    /// and not yet settled by a recovery: the workload reports what the
    /// next one made of it).
    truncating: Vec<(u64, u64)>,
    /// The highest acknowledged purge: nothing before it may come back.
    purged: u64,
    /// Purges issued and not acknowledged.
    purging: Vec<u64>,
    /// Purges past the end that failed after writing their hole: the LSNs
    /// before each are skipped for good.
    holes: Vec<u64>,
    /// The last state acknowledged, and those saved since (not yet
    /// acknowledged: any may be what a crash leaves).
    state: Option<u64>,
    states: Vec<u64>,
}

impl Seen {
    pub(super) fn appended(&mut self, id: u64) {
        self.appended.insert(id);
    }

    pub(super) fn ack(&mut self, lsn: u64, id: u64) {
        self.acked.insert(lsn, id);
    }

    /// Purge `below` is no longer under way.
    fn unpurge(&mut self, below: u64) {
        if let Some(i) = self.purging.iter().position(|&b| b == below) {
            self.purging.remove(i);
        }
    }

    pub(super) fn edit(&mut self, e: &Edit) {
        match *e {
            Edit::Truncate { from, next_id } => self.truncating.push((from, next_id)),
            Edit::Truncated { from, next_id } => {
                self.truncating.retain(|&t| t != (from, next_id));
                self.acked.retain(|&lsn, _| lsn < from);
                self.truncated.push((from, next_id));
            }
            Edit::Purge { below } => self.purging.push(below),
            Edit::Purged { below } => {
                self.unpurge(below);
                self.purged = self.purged.max(below);
                self.acked.retain(|&lsn, _| lsn >= below);
            }
            Edit::SaveState { n } => self.states.push(n),
            Edit::StateSaved { n } => {
                self.state = Some(n);
                self.states.retain(|&m| m > n);
            }
            Edit::NotTruncated { from, next_id } => {
                self.truncating.retain(|&t| t != (from, next_id));
            }
            Edit::NotPurged { below } => self.unpurge(below),
            Edit::PurgeHole { below } => {
                self.unpurge(below);
                self.holes.push(below);
            }
            Edit::NotSaved { n } => self.states.retain(|&m| m != n),
        }
    }
}

/// The state a workload saves as its `n`th.
pub(super) fn state_bytes(seed: u64, n: u64) -> Vec<u8> {
    format!("state {seed} {n}").into_bytes()
}

/// What recovery made of one state (the same files always give the same
/// outcome, so outcomes are kept by a hash of the files).
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    /// No log directory in the state.
    NoDir,
    /// Recovery refused, or its three runs disagreed: why.
    Bad(String),
    /// The log's first LSN, the records recovered (LSN and payload
    /// number; `None`: a payload this workload never made), and its state.
    Records {
        first: u64,
        recs: Vec<(u64, Option<u64>)>,
        state: Option<Vec<u8>>,
    },
}

/// Write the state, recover it three ways, check it. `Ok(Err(v))` is a
/// violation; `Err` a failure of the explorer itself.
pub(super) async fn check_state(
    cfg: &Config,
    files: &[(PathBuf, Option<Vec<u8>>)],
    seen: &Seen,
    dir: &Path,
    cache: &mut HashMap<u128, Outcome>,
) -> io::Result<Result<(), String>> {
    // SipHash (64 bits) and CRC32C of every name and content: a 96-bit
    // key. (Two CRC32Cs with different seeds are not independent: CRC is
    // affine, so their XOR depends only on the lengths.)
    use std::hash::Hasher;
    let mut sip = std::hash::DefaultHasher::new();
    let mut crc = 0u32;
    for (path, data) in files {
        let name = path.as_os_str().as_encoded_bytes();
        let body = data.as_deref().unwrap_or(b"/");
        for part in [
            name,
            &[0u8][..],
            body,
            &(body.len() as u64).to_le_bytes()[..],
        ] {
            sip.write(part);
            crc = crc32c::crc32c_append(crc, part);
        }
    }
    let key = u128::from(sip.finish()) << 32 | u128::from(crc);
    let outcome = match cache.get(&key) {
        Some(o) => o.clone(),
        None => {
            let o = recover_state(cfg, files, dir).await?;
            cache.insert(key, o.clone());
            o
        }
    };
    Ok(judge(cfg, &outcome, seen))
}

type Recovered = (u64, Vec<(u64, Vec<u8>)>, Option<Vec<u8>>);

async fn recover_state(
    cfg: &Config,
    files: &[(PathBuf, Option<Vec<u8>>)],
    dir: &Path,
) -> io::Result<Outcome> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    for (path, data) in files {
        match data {
            None => std::fs::create_dir_all(dir.join(path))?,
            Some(d) => std::fs::write(dir.join(path), d)?,
        }
    }
    let log_dir = dir.join("log");
    if !log_dir.is_dir() {
        return Ok(Outcome::NoDir);
    }
    let opts = options(cfg.direct);
    let first = records_of(Log::open_read_only(&log_dir, opts.clone()).await).await;
    let rw = records_of(Log::open(&log_dir, opts.clone()).await).await;
    let again = records_of(Log::open_read_only(&log_dir, opts).await).await;
    let bad = |m: String| Ok(Outcome::Bad(m));
    let differ = |a: &Recovered, b: &Recovered| {
        (a.0 != b.0 || a.1 != b.1 || a.2 != b.2).then(|| {
            format!(
                "first LSN {} and {}, {} records and {}, state {:?} and {:?}",
                a.0,
                b.0,
                a.1.len(),
                b.1.len(),
                a.2.as_deref().map(String::from_utf8_lossy),
                b.2.as_deref().map(String::from_utf8_lossy)
            )
        })
    };
    let got = match (&first, &rw) {
        (_, Err(e)) => return bad(format!("recovery refused a state a crash can leave: {e}")),
        (Err(e), Ok(_)) if e.kind() != io::ErrorKind::NotFound => {
            return bad(format!(
                "read-only recovery refused what read-write accepted: {e}"
            ))
        }
        (Ok(a), Ok(b)) => match differ(a, b) {
            Some(d) => return bad(format!("read-only and read-write recovery differ: {d}")),
            None => b,
        },
        (_, Ok(b)) => b,
    };
    match &again {
        Ok(c) => {
            if let Some(d) = differ(got, c) {
                return bad(format!("a reopen after recovery differs: {d}"));
            }
        }
        Err(e) => return bad(format!("after recovery the log no longer opens: {e}")),
    }
    let (first, recs, state) = got;
    let ids = recs
        .iter()
        .map(|(lsn, p)| {
            let id =
                payload_id(cfg.seed, p).filter(|&id| *p == payload(cfg.seed, id, p.len() - 16));
            (*lsn, id)
        })
        .collect();
    Ok(Outcome::Records {
        first: *first,
        recs: ids,
        state: state.clone(),
    })
}

/// The first LSN, records (in order) and state of an opened log.
async fn records_of(log: io::Result<Log>) -> io::Result<Recovered> {
    let log = log?;
    let mut out = Vec::new();
    let mut next = log.first_lsn();
    loop {
        let got = log.read_from(next, 1024).await?;
        let Some(&(last, _)) = got.last() else { break };
        next = last + 1;
        out.extend(got);
    }
    Ok((log.first_lsn(), out, log.state()))
}

/// Judge a recovery's outcome against what the workload had seen.
fn judge(cfg: &Config, outcome: &Outcome, seen: &Seen) -> Result<(), String> {
    let (first, recs, state) = match outcome {
        Outcome::NoDir => {
            return match seen.acked.keys().next() {
                Some(lsn) => Err(format!(
                    "the log directory is gone; record {lsn} was acknowledged"
                )),
                None => Ok(()),
            }
        }
        Outcome::Bad(why) => return Err(why.clone()),
        Outcome::Records { first, recs, state } => (*first, recs, state),
    };
    // Purged records never come back.
    if first < seen.purged {
        return Err(format!(
            "the log starts at LSN {first}; a purge below {} was acknowledged",
            seen.purged
        ));
    }
    let mut ids = HashSet::new();
    let mut by_lsn = BTreeMap::new();
    let mut expect = first;
    for &(lsn, id) in recs {
        // A purge past the end skips LSNs with a hole before it is done.
        if lsn != expect && !seen.purging.contains(&lsn) && !seen.holes.contains(&lsn) {
            return Err(format!("LSN {lsn} where {expect} belongs: a gap"));
        }
        expect = lsn + 1;
        let Some(id) = id.filter(|id| seen.appended.contains(id)) else {
            return Err(format!("record {lsn} was never appended"));
        };
        if !ids.insert(id) {
            return Err(format!(
                "record {lsn} repeats payload {id}: two LSNs name one record"
            ));
        }
        // Truncated records never come back.
        for &(from, next_id) in &seen.truncated {
            if lsn >= from && id < next_id {
                return Err(format!(
                    "record {lsn} holds payload {id}, removed by the truncation from {from}"
                ));
            }
        }
        by_lsn.insert(lsn, id);
    }
    // Acknowledged records are there, but where an edit not yet
    // acknowledged may have removed them.
    let purge_hi = seen.purging.iter().copied().max().unwrap_or(0);
    let trunc_lo = seen
        .truncating
        .iter()
        .map(|t| t.0)
        .min()
        .unwrap_or(u64::MAX);
    for (&lsn, &id) in &seen.acked {
        let must = lsn >= purge_hi && lsn < trunc_lo;
        match by_lsn.get(&lsn) {
            None if must => {
                return Err(format!(
                    "acknowledged record {lsn} is lost ({} records recovered)",
                    recs.len()
                ))
            }
            Some(&got) if got != id && lsn < trunc_lo => {
                return Err(format!("acknowledged record {lsn} now holds other data"))
            }
            _ => {}
        }
    }
    // A truncation running at the crash happened whole or not at all:
    // if a record it removes is there, so is every acknowledged one.
    if let [(from, next_id)] = seen.truncating[..] {
        let before = by_lsn.range(from..).any(|(_, &id)| id < next_id);
        if before {
            for (&lsn, &id) in seen.acked.range(from..) {
                if by_lsn.get(&lsn) != Some(&id) {
                    return Err(format!(
                        "a truncation from {from} happened in part: record {lsn} is gone or \
                         changed while earlier ones it removes are there"
                    ));
                }
            }
        }
    }
    // The state is the last one acknowledged or one saved since.
    let allowed = |s: Option<u64>| s == seen.state || s.is_some_and(|n| seen.states.contains(&n));
    let got = match state {
        None => None,
        Some(b) => match (1..=seen
            .states
            .iter()
            .chain(&seen.state)
            .copied()
            .max()
            .unwrap_or(0))
            .find(|&n| state_bytes(cfg.seed, n) == *b)
        {
            Some(n) => Some(n),
            None => return Err("the state holds bytes never saved".into()),
        },
    };
    if !allowed(got) {
        return Err(format!(
            "state {got:?} where {:?} was acknowledged (saved since: {:?})",
            seen.state, seen.states
        ));
    }
    Ok(())
}
