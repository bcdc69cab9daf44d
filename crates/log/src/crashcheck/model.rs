//! The crash-state model: what a Linux file system may hold after a crash,
//! given the trace of what was asked of it.
//!
//! - A file's data is durable up to its last `fsync`/`fdatasync`. Each
//!   write (or size change) since then may or may not have reached the
//!   disk, independently, and a write may be torn at 512-byte sector
//!   boundaries: any subset of its sectors persisted. Later writes land
//!   over earlier ones where both persisted.
//! - A failed `fsync` leaves the writes it covered in limbo, page by page:
//!   the kernel may have dropped them, and no later sync of the file brings
//!   them back, a reopen's included, unless a write dirties their page
//!   again (then the page goes to disk whole with the next writeback, as
//!   Linux writes a dirty page). As the workload runs, the recorder keeps
//!   the page cache apart from the disk (`cache.rs`): its `O_DIRECT` reads
//!   see the disk without the writes a failed sync covered.
//! - A directory's names are durable up to its last `fsync`. The changes
//!   since then (creates, renames, removals) persist as a prefix, in
//!   order: metadata goes through the journal in order (ext4, XFS), but a
//!   change with no directory sync after it may be lost.
//!
//! [`Model::states`] enumerates the states at one point of the trace: all
//! of them when there are at most `budget`, else `budget` drawn at random
//! (seeded), always with the two extremes (nothing pending persisted,
//! everything persisted).

use std::collections::BTreeMap;
use std::ffi::OsString;

use super::cache::PAGE;
use super::trace::{Event, Node};

/// Sector size of the tear model.
pub const SECTOR: u64 = 512;

#[derive(Debug, Clone)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    Alloc { end: u64 },
    Truncate,
}

#[derive(Debug, Clone)]
enum DirOp {
    Add(OsString, Node),
    Rename(OsString, OsString),
    Remove(OsString),
}

/// Where a file change stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Not synced yet: may or may not be on disk.
    Pending,
    /// A sync covering it failed: the kernel may have dropped it, and no
    /// later sync brings it back, so it stays may-or-may-not until a write
    /// dirties its page again (a limbo write is one page or less).
    Limbo,
    /// Synced after a change in limbo (kept in order so it lands over it).
    Durable,
}

#[derive(Debug, Clone, Default)]
struct NodeState {
    is_dir: bool,
    data: Vec<u8>,
    /// Changes since `data`, in order.
    pending: Vec<(Pending, Fate)>,
    /// The trace index of each of `pending` (a sync covers those before
    /// its own start).
    pending_at: Vec<usize>,
    entries: BTreeMap<OsString, Node>,
    dir_pending: Vec<DirOp>,
    /// The trace index of each of `dir_pending`.
    dir_at: Vec<usize>,
}

/// One choice per pending change: for a directory, how many of its
/// changes persisted; for a file write, which of its sectors.
#[derive(Debug, Clone)]
pub struct Choice {
    dirs: Vec<(Node, usize)>,
    writes: Vec<(Node, usize, Vec<bool>)>,
}

impl Choice {
    /// Sectors of pending writes this state leaves out (a batch torn or
    /// missing).
    pub fn dropped_sectors(&self) -> usize {
        self.writes
            .iter()
            .map(|(_, _, s)| s.iter().filter(|&&kept| !kept).count())
            .sum()
    }

    /// A short description (for a violation report).
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        for (d, k) in &self.dirs {
            out.push(format!("dir {d}: {k} names"));
        }
        for (n, i, s) in &self.writes {
            let kept = s.iter().filter(|&&x| x).count();
            out.push(format!("node {n} change {i}: {kept}/{} sectors", s.len()));
        }
        out.join(", ")
    }
}

impl NodeState {
    /// A change to the file, made at trace index `at`.
    fn change(&mut self, p: Pending, at: usize) {
        self.pending.push((p, Fate::Pending));
        self.pending_at.push(at);
    }

    /// A sync of the file failed: every change not yet synced goes to
    /// limbo, its writes cut at page boundaries (a page is what a later
    /// write dirties again).
    fn writeback_failed(&mut self) {
        let mut pending = Vec::with_capacity(self.pending.len());
        let mut pending_at = Vec::with_capacity(self.pending.len());
        for ((p, f), at) in self.pending.drain(..).zip(self.pending_at.drain(..)) {
            match (p, f) {
                (Pending::Write { offset, data }, Fate::Pending) => {
                    let mut lo = offset;
                    let hi = offset + data.len() as u64;
                    while lo < hi {
                        let to = ((lo / PAGE + 1) * PAGE).min(hi);
                        let bytes = data[(lo - offset) as usize..(to - offset) as usize].to_vec();
                        pending.push((
                            Pending::Write {
                                offset: lo,
                                data: bytes,
                            },
                            Fate::Limbo,
                        ));
                        pending_at.push(at);
                        lo = to;
                    }
                }
                (p, Fate::Pending) => {
                    pending.push((p, Fate::Limbo));
                    pending_at.push(at);
                }
                (p, f) => {
                    pending.push((p, f));
                    pending_at.push(at);
                }
            }
        }
        self.pending = pending;
        self.pending_at = pending_at;
    }

    /// A write to `offset..offset + len`: the writes in limbo on its pages
    /// are in a dirty page again, so they reach the disk as unsynced
    /// writes do.
    fn redirty(&mut self, offset: u64, len: u64) {
        let (p0, p1) = (offset / PAGE * PAGE, (offset + len).div_ceil(PAGE) * PAGE);
        for (p, f) in &mut self.pending {
            if let (Pending::Write { offset: o, .. }, Fate::Limbo) = (&*p, *f) {
                if *o >= p0 && *o < p1 {
                    *f = Fate::Pending;
                }
            }
        }
    }

    /// A change to the directory's names, made at trace index `at`.
    fn dir_op(&mut self, op: DirOp, at: usize) {
        self.dir_pending.push(op);
        self.dir_at.push(at);
    }
}

/// The durable state and what is pending, as the trace is replayed.
#[derive(Debug, Clone, Default)]
pub struct Model {
    nodes: Vec<NodeState>,
    /// Events applied so far (the trace index of the next one).
    applied: usize,
}

/// A small seeded generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

fn sectors(offset: u64, len: usize) -> usize {
    if len == 0 {
        return 1;
    }
    let end = offset + len as u64;
    (end.div_ceil(SECTOR) - offset / SECTOR) as usize
}

impl Model {
    /// An empty root directory.
    pub fn new() -> Model {
        Model {
            nodes: vec![NodeState {
                is_dir: true,
                ..NodeState::default()
            }],
            applied: 0,
        }
    }

    fn node(&mut self, n: Node) -> &mut NodeState {
        if self.nodes.len() <= n {
            self.nodes.resize_with(n + 1, NodeState::default);
        }
        &mut self.nodes[n]
    }

    /// Apply one event of the trace (events are applied in trace order,
    /// from the first).
    pub fn apply(&mut self, e: &Event) {
        let at = self.applied;
        self.applied += 1;
        match e {
            Event::Create {
                dir,
                name,
                node,
                is_dir,
            } => {
                self.node(*node).is_dir = *is_dir;
                self.node(*dir).dir_op(DirOp::Add(name.clone(), *node), at);
            }
            Event::Truncate { node } => self.node(*node).change(Pending::Truncate, at),
            Event::Write { node, offset, data } => {
                let n = self.node(*node);
                n.redirty(*offset, data.len() as u64);
                n.change(
                    Pending::Write {
                        offset: *offset,
                        data: data.clone(),
                    },
                    at,
                )
            }
            Event::Alloc { node, end } => self.node(*node).change(Pending::Alloc { end: *end }, at),
            Event::SyncFile { node, upto } => {
                let n = self.node(*node);
                // The changes made before the sync was issued, a prefix.
                let k = n.pending_at.iter().take_while(|&&i| i < *upto).count();
                if n.pending[..k].iter().any(|(_, f)| *f == Fate::Limbo) {
                    for (_, f) in &mut n.pending[..k] {
                        if *f == Fate::Pending {
                            *f = Fate::Durable;
                        }
                    }
                } else {
                    n.pending_at.drain(..k);
                    for (p, _) in n.pending.drain(..k).collect::<Vec<_>>() {
                        apply_change(&mut n.data, &p, None);
                    }
                }
            }
            // Its own range only: durable wherever it lies among the
            // pending changes (later ones may still land over it). Not a
            // write a failed sync put in limbo: a sync that returns after
            // a writeback error of the file was reported elsewhere may
            // succeed over pages the kernel dropped.
            Event::SyncWrite { node, write } => {
                let n = self.node(*node);
                for ((_, f), &i) in n.pending.iter_mut().zip(&n.pending_at) {
                    if i == *write && *f == Fate::Pending {
                        *f = Fate::Durable;
                    }
                }
            }
            Event::Faulted {
                what,
                node: Some(node),
                ..
            } if what.starts_with("fsync") || what.starts_with("fdatasync") => {
                self.node(*node).writeback_failed()
            }
            Event::SyncDir { node, upto } => {
                let n = self.node(*node);
                let k = n.dir_at.iter().take_while(|&&i| i < *upto).count();
                n.dir_at.drain(..k);
                for op in n.dir_pending.drain(..k).collect::<Vec<_>>() {
                    apply_dir(&mut n.entries, &op);
                }
            }
            Event::Rename { dir, from, to } => self
                .node(*dir)
                .dir_op(DirOp::Rename(from.clone(), to.clone()), at),
            Event::Remove { dir, name } => self.node(*dir).dir_op(DirOp::Remove(name.clone()), at),
            // A crash state put in place: exactly these files, durable.
            Event::Crash { files, .. } => {
                for n in &mut self.nodes {
                    *n = NodeState {
                        is_dir: n.is_dir,
                        ..NodeState::default()
                    };
                }
                let mut at: BTreeMap<std::path::PathBuf, Node> = BTreeMap::new();
                at.insert(std::path::PathBuf::new(), 0);
                for (path, node, data) in files {
                    let n = self.node(*node);
                    n.is_dir = data.is_none();
                    n.data = data.clone().unwrap_or_default();
                    at.insert(path.clone(), *node);
                    let parent = path.parent().and_then(|p| at.get(p)).copied();
                    if let (Some(dir), Some(name)) = (parent, path.file_name()) {
                        self.node(dir).entries.insert(name.to_os_string(), *node);
                    }
                }
            }
            // A reopen syncs through a new descriptor: what is in limbo
            // stays there (Linux marked those pages clean).
            Event::Reopen
            | Event::Ack { .. }
            | Event::Appended { .. }
            | Event::Edit(_)
            | Event::Faulted { .. } => {}
        }
    }

    /// Up to `budget` crash states of the model as it stands.
    pub fn states(&self, budget: usize, rng: &mut Rng) -> Vec<Choice> {
        let dirs: Vec<(Node, usize)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.dir_pending.is_empty())
            .map(|(i, n)| (i, n.dir_pending.len()))
            .collect();
        let writes: Vec<(Node, usize, usize)> = self
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| {
                n.pending
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, f))| *f != Fate::Durable)
                    .map(move |(j, (p, _))| {
                        let s = match p {
                            Pending::Write { offset, data } => sectors(*offset, data.len()),
                            _ => 1,
                        };
                        (i, j, s)
                    })
            })
            .collect();
        // How many states in all (saturating).
        let mut total: u128 = 1;
        for (_, k) in &dirs {
            total = total.saturating_mul(*k as u128 + 1);
        }
        for (_, _, s) in &writes {
            total = total.saturating_mul(1u128.checked_shl(*s as u32).unwrap_or(u128::MAX));
        }
        let mut out = Vec::new();
        if total <= budget as u128 {
            for mut idx in 0..total {
                let mut c = Choice {
                    dirs: Vec::new(),
                    writes: Vec::new(),
                };
                for (d, k) in &dirs {
                    let r = *k as u128 + 1;
                    c.dirs.push((*d, (idx % r) as usize));
                    idx /= r;
                }
                for (n, j, s) in &writes {
                    let mask: Vec<bool> = (0..*s).map(|b| idx >> b & 1 == 1).collect();
                    idx >>= *s;
                    c.writes.push((*n, *j, mask));
                }
                out.push(c);
            }
            return out;
        }
        // Too many: the extremes, then draws.
        for all in [false, true] {
            out.push(Choice {
                dirs: dirs
                    .iter()
                    .map(|&(d, k)| (d, if all { k } else { 0 }))
                    .collect(),
                writes: writes
                    .iter()
                    .map(|&(n, j, s)| (n, j, vec![all; s]))
                    .collect(),
            });
        }
        while out.len() < budget {
            let c = Choice {
                dirs: dirs
                    .iter()
                    .map(|&(d, k)| (d, rng.below(k as u64 + 1) as usize))
                    .collect(),
                writes: writes
                    .iter()
                    .map(|&(n, j, s)| {
                        let mask = match rng.below(4) {
                            0 => vec![false; s],
                            1 => vec![true; s],
                            2 => {
                                // A prefix (a write cut short by the crash).
                                let k = rng.below(s as u64 + 1) as usize;
                                (0..s).map(|b| b < k).collect()
                            }
                            _ => (0..s).map(|_| rng.below(2) == 1).collect(),
                        };
                        (n, j, mask)
                    })
                    .collect(),
            };
            out.push(c);
        }
        out
    }

    /// The files of state `c`: each reachable file's path under the root
    /// (directories included, with `None`) and content.
    pub fn materialize(&self, c: &Choice) -> Vec<(std::path::PathBuf, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        self.walk(0, std::path::PathBuf::new(), c, &mut out, 0);
        out
    }

    fn walk(
        &self,
        dir: Node,
        at: std::path::PathBuf,
        c: &Choice,
        out: &mut Vec<(std::path::PathBuf, Option<Vec<u8>>)>,
        depth: usize,
    ) {
        if depth > 8 {
            return;
        }
        let n = &self.nodes[dir];
        let mut entries = n.entries.clone();
        let k = c
            .dirs
            .iter()
            .find(|(d, _)| *d == dir)
            .map_or(0, |&(_, k)| k);
        for op in &n.dir_pending[..k] {
            apply_dir(&mut entries, op);
        }
        for (name, &node) in &entries {
            let path = at.join(name);
            if self.nodes[node].is_dir {
                out.push((path.clone(), None));
                self.walk(node, path, c, out, depth + 1);
            } else {
                let f = &self.nodes[node];
                let mut data = f.data.clone();
                for (j, (p, fate)) in f.pending.iter().enumerate() {
                    if *fate == Fate::Durable {
                        apply_change(&mut data, p, None);
                        continue;
                    }
                    let mask = c
                        .writes
                        .iter()
                        .find(|(wn, wj, _)| *wn == node && *wj == j)
                        .map(|(_, _, m)| m.as_slice());
                    apply_change(&mut data, p, Some(mask.unwrap_or(&[])));
                }
                out.push((path, Some(data)));
            }
        }
    }
}

fn apply_dir(entries: &mut BTreeMap<OsString, Node>, op: &DirOp) {
    match op {
        DirOp::Add(name, node) => {
            entries.insert(name.clone(), *node);
        }
        DirOp::Rename(from, to) => {
            if let Some(node) = entries.remove(from) {
                entries.insert(to.clone(), node);
            }
        }
        DirOp::Remove(name) => {
            entries.remove(name);
        }
    }
}

/// Apply a change to `data`: whole (`mask` `None`), or only the sectors
/// the mask keeps (an empty mask keeps none).
fn apply_change(data: &mut Vec<u8>, p: &Pending, mask: Option<&[bool]>) {
    let keep = |i: usize| mask.is_none_or(|m| m.get(i).copied().unwrap_or(false));
    match p {
        Pending::Truncate => {
            if keep(0) {
                data.clear();
            }
        }
        Pending::Alloc { end } => {
            if keep(0) && (data.len() as u64) < *end {
                data.resize(*end as usize, 0);
            }
        }
        Pending::Write {
            offset,
            data: bytes,
        } => {
            let first = offset / SECTOR;
            for (i, chunk_start) in
                (0..sectors(*offset, bytes.len())).map(|i| (i, (first + i as u64) * SECTOR))
            {
                if !keep(i) {
                    continue;
                }
                let from = chunk_start.max(*offset);
                let to = (chunk_start + SECTOR).min(offset + bytes.len() as u64);
                if from >= to {
                    continue;
                }
                if (data.len() as u64) < to {
                    data.resize(to as usize, 0);
                }
                let src = &bytes[(from - offset) as usize..(to - offset) as usize];
                data[from as usize..to as usize].copy_from_slice(src);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Write `len` bytes of `byte` to node 1 at `offset`.
    fn write(m: &mut Model, offset: u64, byte: u8, len: usize) {
        m.apply(&Event::Write {
            node: 1,
            offset,
            data: vec![byte; len],
        });
    }

    /// A model whose root holds one new file, node 1 (event 0).
    fn one_file() -> Model {
        let mut m = Model::new();
        m.apply(&Event::Create {
            dir: 0,
            name: "f".into(),
            node: 1,
            is_dir: false,
        });
        m
    }

    #[test]
    fn unsynced_writes_tear_and_unsynced_names_vanish() {
        let mut m = one_file();
        write(&mut m, 0, 1, 1024);
        // Nothing synced: 2 name states x 4 sector subsets.
        let states = m.states(1000, &mut Rng(1));
        assert_eq!(states.len(), 8);
        let files: Vec<_> = states.iter().map(|c| m.materialize(c)).collect();
        assert!(files.iter().any(|f| f.is_empty()), "the create may be lost");
        assert!(files
            .iter()
            .any(|f| f.len() == 1 && f[0].1.as_ref().unwrap().len() == 1024));
        // Only the second sector persisted: the first reads as zeros.
        assert!(files.iter().any(|f| f.len() == 1 && {
            let d = f[0].1.as_ref().unwrap();
            d.len() == 1024 && d[0] == 0 && d[600] == 1
        }));
        m.apply(&Event::SyncDir { node: 0, upto: 3 });
        m.apply(&Event::SyncFile { node: 1, upto: 3 });
        let states = m.states(1000, &mut Rng(1));
        assert_eq!(states.len(), 1);
        assert_eq!(
            m.materialize(&states[0])[0].1.as_ref().unwrap(),
            &vec![1u8; 1024]
        );
    }

    #[test]
    fn a_sync_covers_only_writes_completed_before_it_was_issued() {
        let mut m = one_file();
        m.apply(&Event::SyncDir { node: 0, upto: 1 });
        // Batch A written (event 2), its sync issued (at 3), batch B's
        // write completes (event 3) before A's sync returns (event 4).
        write(&mut m, 0, 1, 512);
        write(&mut m, 512, 2, 512);
        m.apply(&Event::SyncFile { node: 1, upto: 3 });
        let states = m.states(1000, &mut Rng(1));
        assert_eq!(states.len(), 2, "B's one sector may or may not be there");
        let files: Vec<Vec<u8>> = states
            .iter()
            .map(|c| m.materialize(c)[0].1.clone().unwrap())
            .collect();
        assert!(files.iter().all(|f| f[..512] == [1; 512]), "A is durable");
        assert!(files.iter().any(|f| f.len() == 512 || f[512..] == [0; 512]));
        assert!(files
            .iter()
            .any(|f| f.len() == 1024 && f[512..] == [2; 512]));
        // B's own sync (issued after its write) makes it durable.
        m.apply(&Event::SyncFile { node: 1, upto: 4 });
        assert_eq!(m.states(1000, &mut Rng(1)).len(), 1);
    }

    #[test]
    fn a_failed_sync_leaves_its_pages_in_limbo_until_written_again() {
        let mut m = one_file();
        m.apply(&Event::SyncDir { node: 0, upto: 1 });
        // One write over two pages (events 2); its sync fails.
        write(&mut m, 4096 - 512, 1, 1024);
        m.apply(&Event::Faulted {
            what: "fdatasync".into(),
            node: Some(1),
            data: Vec::new(),
        });
        // A reopen and a sync that returned: the write is still may-or-may-not.
        m.apply(&Event::Reopen);
        m.apply(&Event::SyncFile { node: 1, upto: 5 });
        assert_eq!(
            m.states(1000, &mut Rng(1)).len(),
            4,
            "both sectors in limbo"
        );
        // A write on the first page dirties it again: with the next sync
        // that page's limbo sector is durable, the second page's is not.
        write(&mut m, 0, 2, 512);
        m.apply(&Event::SyncFile { node: 1, upto: 7 });
        let states = m.states(1000, &mut Rng(1));
        assert_eq!(states.len(), 2, "only the second page's sector in limbo");
        for c in &states {
            let f = m.materialize(c)[0].1.clone().unwrap();
            assert_eq!(f[..512], [2; 512]);
            assert_eq!(f[3584..4096], [1; 512]);
        }
    }
}
