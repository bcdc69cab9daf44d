//! Power loss: directories back to their durable entries, what no durable
//! name reaches dropped, files back to their durable bytes (or torn).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ffi::OsString;

use super::{Body, Fs, Ino, Inode, ROOT};
use crate::file::Rng;
use crate::LossStats;

impl Fs {
    /// Power loss (`seed`: torn, see the crate docs). Returns the files
    /// whose bytes or size changed, or that went: the kernel's caches of
    /// them are stale.
    pub(crate) fn power_loss(&mut self, seed: Option<u64>) -> (LossStats, Vec<Ino>) {
        let mut st = LossStats::default();
        let mut changed = Vec::new();
        for n in self.inodes.values_mut() {
            if let Body::Dir(d) = &mut n.body {
                if d.cur != d.dur {
                    d.cur = d.dur.clone();
                    st.dirs_reverted += 1;
                }
            }
        }
        self.prune_unreachable(&mut st, &mut changed);
        let mut rng = seed.map(Rng::new);
        for (ino, n) in &mut self.inodes {
            if let Body::File(f) = &mut n.body {
                if !f.is_synced() {
                    let dropped = f.lose(rng.as_mut());
                    st.bytes_dropped += dropped;
                    st.files_reverted += u64::from(dropped > 0);
                    changed.push(*ino);
                }
            }
        }
        self.recount();
        (st, changed)
    }

    /// Keep what the root reaches through its (durable) entries; a
    /// directory named twice (a rename synced in one directory only) keeps
    /// the name it is first reached by.
    fn prune_unreachable(&mut self, st: &mut LossStats, changed: &mut Vec<Ino>) {
        let mut seen = BTreeSet::from([ROOT]);
        let mut queue = VecDeque::from([ROOT]);
        while let Some(d) = queue.pop_front() {
            let Ok(dir) = self.node(d).and_then(Inode::dir) else {
                continue;
            };
            let entries: Vec<(OsString, Ino)> =
                dir.cur.iter().map(|(k, v)| (k.clone(), *v)).collect();
            for (name, child) in entries {
                let keep = match self.inodes.get_mut(&child) {
                    Some(c) => match &mut c.body {
                        Body::Dir(cd) if seen.insert(child) => {
                            cd.parent = d;
                            queue.push_back(child);
                            true
                        }
                        Body::Dir(_) => false,
                        _ => {
                            seen.insert(child);
                            true
                        }
                    },
                    None => false,
                };
                if !keep {
                    if let Ok(dir) = self.node_mut(d).and_then(Inode::dir_mut) {
                        dir.cur.remove(&name);
                        dir.dur.remove(&name);
                    }
                }
            }
        }
        let gone: Vec<Ino> = self
            .inodes
            .keys()
            .filter(|i| !seen.contains(i))
            .copied()
            .collect();
        for ino in gone {
            if let Some(n) = self.inodes.remove(&ino) {
                st.inodes_dropped += 1;
                if let Body::File(f) = &n.body {
                    st.bytes_dropped += f.len();
                    changed.push(ino);
                }
            }
        }
    }

    /// Recount names, handles and `used` from scratch (after a power loss).
    fn recount(&mut self) {
        self.handles.retain(|_, ino| self.inodes.contains_key(ino));
        let mut names: HashMap<Ino, u32> = HashMap::new();
        for n in self.inodes.values() {
            if let Body::Dir(d) = &n.body {
                for c in d.cur.values() {
                    *names.entry(*c).or_default() += 1;
                }
            }
        }
        let mut open: HashMap<Ino, u32> = HashMap::new();
        for ino in self.handles.values() {
            *open.entry(*ino).or_default() += 1;
        }
        self.used = 0;
        for (ino, n) in &mut self.inodes {
            let named = if *ino == ROOT {
                1
            } else {
                names.get(ino).copied().unwrap_or(0)
            };
            n.links = named;
            n.durable_refs = named;
            n.open = open.get(ino).copied().unwrap_or(0);
            n.live = n.links > 0 || n.lookups > 0 || n.open > 0;
            if n.live {
                self.used += n.counted();
            }
        }
    }
}
