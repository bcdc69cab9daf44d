//! The bytes of one regular file: what processes see now and what would
//! survive a power loss.
//!
//! The current bytes are one `Vec`. The durable bytes are kept as an undo
//! map rather than a second copy: for every 4 KiB page changed since the
//! last sync that lies (at least partly) within the durable size, the
//! page's durable bytes, zero past the durable size. A page without an
//! entry is durable as it is now. So a sync clears the map (work in
//! proportion to the pages changed since the last one, not to the file),
//! and the memory is the file plus the pages changed since its last sync.
//!
//! Invariant: every page that starts below the durable size and is not
//! wholly present in the current bytes up to the durable size has an
//! entry (a truncation saves the pages it cuts before cutting them).

use std::collections::BTreeMap;

/// Bytes per page of the undo map.
const PAGE: u64 = 4096;
/// Bytes per sector: the unit a torn power loss keeps or drops.
pub(crate) const SECTOR: u64 = 512;

/// A regular file's current and durable bytes.
#[derive(Debug, Default)]
pub(crate) struct FileData {
    data: Vec<u8>,
    durable_len: u64,
    undo: BTreeMap<u64, Box<[u8]>>,
}

impl FileData {
    /// The current size.
    pub(crate) fn len(&self) -> u64 {
        self.data.len() as u64
    }

    /// The size a power loss would leave (without tearing).
    #[cfg(test)]
    pub(crate) fn durable_len(&self) -> u64 {
        self.durable_len
    }

    /// Up to `size` current bytes from `off` (fewer at the end of the file).
    pub(crate) fn read(&self, off: u64, size: u32) -> &[u8] {
        let len = self.len();
        if off >= len {
            return &[];
        }
        let end = off.saturating_add(u64::from(size)).min(len);
        &self.data[off as usize..end as usize]
    }

    /// Write `bytes` at `off`, extending the file (with zeros up to `off`)
    /// if it ends before. `durable`: the bytes and the size up to their end
    /// are durable at once (an `O_DIRECT` or `O_DSYNC` write); bytes between
    /// the old durable size and `off` that were never synced read as zeros
    /// after a power loss (a hole).
    pub(crate) fn write(&mut self, off: u64, bytes: &[u8], durable: bool) {
        let end = off + bytes.len() as u64;
        let cur = self.len();
        if durable {
            if off > self.durable_len {
                self.grow_durable_as_zeros(off.min(cur.max(self.durable_len)));
                // Past the current end the gap is zeros either way.
                self.durable_len = self.durable_len.max(off);
            }
            self.write_through(off, end, bytes);
        } else {
            self.save(off.min(cur), end);
        }
        if end > cur {
            self.data.resize(end as usize, 0);
        }
        self.data[off as usize..end as usize].copy_from_slice(bytes);
        if durable {
            self.durable_len = self.durable_len.max(end);
        }
    }

    /// Set the current size: cut, or extend with zeros.
    pub(crate) fn set_len(&mut self, len: u64) {
        let cur = self.len();
        self.save(len.min(cur), len.max(cur));
        self.data.resize(len as usize, 0);
    }

    /// Zero the current bytes of `a..b` (clipped to the current size).
    pub(crate) fn zero(&mut self, a: u64, b: u64) {
        let b = b.min(self.len());
        if a >= b {
            return;
        }
        self.save(a, b);
        self.data[a as usize..b as usize].fill(0);
    }

    /// `fsync`: the current bytes and size become durable.
    pub(crate) fn sync(&mut self) {
        self.durable_len = self.len();
        self.undo.clear();
    }

    /// Whether a power loss would leave the file as it is.
    pub(crate) fn is_synced(&self) -> bool {
        self.undo.is_empty() && self.durable_len == self.len()
    }

    /// Before the current bytes of `a..b` change: keep the durable bytes
    /// of every page of that range that has none kept yet.
    fn save(&mut self, a: u64, b: u64) {
        let end = b.min(self.durable_len);
        if a >= end {
            return;
        }
        for p in a / PAGE..end.div_ceil(PAGE) {
            if self.undo.contains_key(&p) {
                continue;
            }
            let start = p * PAGE;
            let stop = ((p + 1) * PAGE).min(self.durable_len);
            let mut page = vec![0u8; PAGE as usize].into_boxed_slice();
            // No entry: the page's durable bytes are its current ones.
            page[..(stop - start) as usize]
                .copy_from_slice(&self.data[start as usize..stop as usize]);
            self.undo.insert(p, page);
        }
    }

    /// A durable write of `bytes` to `a..b` is about to land: pages with
    /// an entry get the new bytes in it too (dropped when the write covers
    /// all of the page's durable part); pages without one are durable as
    /// they are, which they will be after the write.
    fn write_through(&mut self, a: u64, b: u64, bytes: &[u8]) {
        let durable_end = self.durable_len.max(b);
        let mut covered = Vec::new();
        for (&p, page) in self.undo.range_mut(a / PAGE..b.div_ceil(PAGE)) {
            let start = p * PAGE;
            let (s, e) = (start.max(a), (start + PAGE).min(b));
            if s == start && e >= (start + PAGE).min(durable_end) {
                covered.push(p);
            } else {
                page[(s - start) as usize..(e - start) as usize]
                    .copy_from_slice(&bytes[(s - a) as usize..(e - a) as usize]);
            }
        }
        for p in covered {
            self.undo.remove(&p);
        }
    }

    /// Raise the durable size to `new` (at most the current size), the
    /// bytes from the old durable size durable as zeros: pages whose
    /// current bytes there are not zero get an entry saying so.
    fn grow_durable_as_zeros(&mut self, new: u64) {
        let old = self.durable_len;
        if new <= old {
            return;
        }
        for p in old / PAGE..new.div_ceil(PAGE) {
            if self.undo.contains_key(&p) {
                continue; // zero past the old durable size already
            }
            let start = p * PAGE;
            let (s, e) = (start.max(old), (start + PAGE).min(new));
            if self.data[s as usize..e as usize].iter().all(|&x| x == 0) {
                continue;
            }
            let mut page = vec![0u8; PAGE as usize].into_boxed_slice();
            if old > start {
                page[..(old - start) as usize]
                    .copy_from_slice(&self.data[start as usize..old as usize]);
            }
            self.undo.insert(p, page);
        }
        self.durable_len = new;
    }

    /// The sectors whose current and durable bytes may differ, ascending:
    /// those of pages with an entry (below the durable size) and every
    /// sector from the durable size to the current size.
    fn candidates(&self) -> Vec<u64> {
        let per_page = PAGE / SECTOR;
        let mut out: Vec<u64> = self
            .undo
            .keys()
            .flat_map(|&p| p * per_page..(p + 1) * per_page)
            .filter(|&s| s * SECTOR < self.durable_len)
            .collect();
        let cur = self.len();
        if cur > self.durable_len {
            out.extend(self.durable_len / SECTOR..cur.div_ceil(SECTOR));
            out.sort_unstable();
            out.dedup();
        }
        out
    }

    /// The current bytes of sector `s`.
    fn current(&self, s: u64) -> &[u8] {
        let len = self.len();
        let s0 = s * SECTOR;
        &self.data[s0.min(len) as usize..(s0 + SECTOR).min(len) as usize]
    }

    /// The durable bytes of sector `s`.
    fn durable(&self, s: u64) -> &[u8] {
        let s0 = s * SECTOR;
        let end = (s0 + SECTOR).min(self.durable_len);
        if end <= s0 {
            return &[];
        }
        match self.undo.get(&(s0 / PAGE)) {
            Some(page) => {
                let off = s0 % PAGE;
                &page[off as usize..(off + end - s0) as usize]
            }
            None => &self.data[s0 as usize..end as usize],
        }
    }

    /// Bytes that a power loss now would change or take away (see
    /// [`crate::LossStats::bytes_dropped`]).
    pub(crate) fn unsynced(&self) -> u64 {
        self.candidates()
            .into_iter()
            .map(|s| diff(self.current(s), self.durable(s)))
            .sum()
    }

    /// Power loss: every sector whose current bytes differ from its
    /// durable ones goes back to them, unless `rng` (a torn loss) keeps
    /// the new ones (probability 1/2; a sector cut by an unsynced
    /// truncation always goes back). The size becomes the durable size, or
    /// the end of the furthest kept sector past it, with zeros in the
    /// sectors not kept there. The result is durable. Returns the bytes
    /// that changed or went.
    pub(crate) fn lose(&mut self, mut rng: Option<&mut Rng>) -> u64 {
        let cands = self.candidates();
        let mut kept = Vec::with_capacity(cands.len());
        let mut new_len = self.durable_len;
        for &s in &cands {
            let (c, d) = (self.current(s), self.durable(s));
            let keep = c != d && c.len() >= d.len() && rng.as_mut().is_some_and(|r| r.coin());
            if keep {
                new_len = new_len.max(s * SECTOR + c.len() as u64);
            }
            kept.push(keep);
        }
        let cur_len = self.len();
        // Room for the durable bytes past a cut (their pages have entries,
        // so nothing below reads the zeros as durable).
        let full = cur_len.max(self.durable_len);
        self.data.resize(full as usize, 0);
        let mut dropped = 0;
        let mut fin = [0u8; SECTOR as usize];
        for (&s, keep) in cands.iter().zip(kept) {
            if keep {
                continue;
            }
            let s0 = s * SECTOR;
            let d = self.durable(s);
            let flen = ((s0 + SECTOR).min(new_len).saturating_sub(s0)) as usize;
            fin[..d.len()].copy_from_slice(d);
            fin[d.len()..flen].fill(0);
            let c = &self.data[s0.min(cur_len) as usize..(s0 + SECTOR).min(cur_len) as usize];
            dropped += diff(c, &fin[..flen]);
            self.data[s0 as usize..s0 as usize + flen].copy_from_slice(&fin[..flen]);
        }
        self.data.resize(new_len as usize, 0);
        self.durable_len = new_len;
        self.undo.clear();
        dropped
    }
}

/// Positions where `a` and `b` differ, a byte present in only one counting.
fn diff(a: &[u8], b: &[u8]) -> u64 {
    let common = a.len().min(b.len());
    let unequal = a[..common]
        .iter()
        .zip(&b[..common])
        .filter(|(x, y)| x != y)
        .count();
    (unequal + a.len().max(b.len()) - common) as u64
}

/// A small seeded generator (SplitMix64): torn power losses are
/// reproducible from their seed.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator whose draws are fixed by `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability 1/2.
    pub(crate) fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }
}
