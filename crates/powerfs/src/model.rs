//! The in-memory file system: inodes with their current and durable state,
//! every operation a plain method (errors are errno values), so it is
//! tested without FUSE. The FUSE side (`fuse.rs`) only maps requests here.
//!
//! Besides what the crate docs describe, each inode counts its current
//! names (`links`), its durable names (`durable_refs`: entries in durable
//! maps of directories still held), the kernel's references (`lookups`,
//! given back by FORGET) and open handles. An inode nobody can reach now
//! (no name, no reference, no handle) stops counting towards [`Fs::used`];
//! once no durable name is left either, it is freed.
//!
//! The names (`names.rs`) and the power loss (`loss.rs`) are in files of
//! their own.

mod loss;
mod names;

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::time::SystemTime;

use crate::file::FileData;

/// An inode number; never reused.
pub(crate) type Ino = u64;
/// The root directory's inode number.
pub(crate) const ROOT: Ino = 1;
/// A result whose error is an errno value.
pub(crate) type Res<T> = Result<T, i32>;

/// What `statfs` reports as the size when no capacity is set: 1 TiB.
const UNLIMITED: u64 = 1 << 40;
/// Longest name.
pub(crate) const NAME_MAX: usize = 255;

/// The kind of an inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDev,
    BlockDev,
}

impl Kind {
    /// The kind a `mknod` mode asks for (`S_IFMT` bits; none: a file).
    fn from_mode(mode: u32) -> Res<Kind> {
        Ok(match mode & libc::S_IFMT {
            0 | libc::S_IFREG => Kind::File,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::CharDev,
            libc::S_IFBLK => Kind::BlockDev,
            _ => return Err(libc::EINVAL),
        })
    }
}

/// An inode's attributes, as `getattr` reports them.
#[derive(Debug, Clone)]
pub(crate) struct Attr {
    pub ino: Ino,
    pub kind: Kind,
    pub size: u64,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

/// What a `setattr` changes.
#[derive(Debug, Default)]
pub(crate) struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SystemTime>,
    pub mtime: Option<SystemTime>,
}

/// Who makes a new inode, and its mode (permission bits; for `mknod` the
/// type bits too) and device number.
#[derive(Debug, Clone, Copy)]
pub(crate) struct New {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
}

/// One entry of a directory listing.
#[derive(Debug)]
pub(crate) struct DirEntry {
    /// The offset to resume after this entry.
    pub next: u64,
    pub ino: Ino,
    pub kind: Kind,
    pub name: OsString,
}

#[derive(Debug)]
enum Body {
    File(FileData),
    Dir(Dir),
    Symlink(OsString),
    Special,
}

#[derive(Debug, Default)]
struct Dir {
    /// The entries processes see.
    cur: BTreeMap<OsString, Ino>,
    /// The entries as of the last `fsyncdir`.
    dur: BTreeMap<OsString, Ino>,
    /// The directory naming this one now (the root: itself).
    parent: Ino,
}

#[derive(Debug)]
struct Inode {
    kind: Kind,
    body: Body,
    perm: u16,
    uid: u32,
    gid: u32,
    rdev: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
    links: u32,
    durable_refs: u32,
    lookups: u64,
    open: u32,
    /// Counted in [`Fs::used`]: named, referenced or open.
    live: bool,
}

impl Inode {
    fn size(&self) -> u64 {
        match &self.body {
            Body::File(f) => f.len(),
            Body::Symlink(t) => t.len() as u64,
            Body::Dir(_) | Body::Special => 0,
        }
    }

    /// What the inode adds to [`Fs::used`]: a file's size.
    fn counted(&self) -> u64 {
        match &self.body {
            Body::File(f) => f.len(),
            _ => 0,
        }
    }

    fn file_mut(&mut self) -> Res<&mut FileData> {
        match &mut self.body {
            Body::File(f) => Ok(f),
            Body::Dir(_) => Err(libc::EISDIR),
            _ => Err(libc::EINVAL),
        }
    }

    fn dir(&self) -> Res<&Dir> {
        match &self.body {
            Body::Dir(d) => Ok(d),
            _ => Err(libc::ENOTDIR),
        }
    }

    fn dir_mut(&mut self) -> Res<&mut Dir> {
        match &mut self.body {
            Body::Dir(d) => Ok(d),
            _ => Err(libc::ENOTDIR),
        }
    }

    fn touch(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }
}

/// The whole file system.
#[derive(Debug)]
pub(crate) struct Fs {
    inodes: BTreeMap<Ino, Inode>,
    next_ino: Ino,
    /// Open handles: file handle number to inode.
    handles: HashMap<u64, Ino>,
    next_fh: u64,
    capacity: Option<u64>,
    used: u64,
}

impl Default for Fs {
    fn default() -> Fs {
        Fs::new()
    }
}

impl Fs {
    /// An empty file system: a root directory (mode 0755, owned by root).
    pub(crate) fn new() -> Fs {
        let mut fs = Fs {
            inodes: BTreeMap::new(),
            next_ino: ROOT,
            handles: HashMap::new(),
            next_fh: 1,
            capacity: None,
            used: 0,
        };
        let new = New {
            mode: 0o755,
            uid: 0,
            gid: 0,
            rdev: 0,
        };
        let root = fs.alloc(Kind::Dir, Body::Dir(Dir::default()), new);
        let n = fs.inodes.get_mut(&root).expect("just made");
        n.dir_mut().expect("a directory").parent = ROOT;
        // Named and durably named by nothing, yet never freed.
        n.links = 1;
        n.durable_refs = 1;
        fs
    }

    fn alloc(&mut self, kind: Kind, body: Body, new: New) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        let now = SystemTime::now();
        self.inodes.insert(
            ino,
            Inode {
                kind,
                body,
                perm: (new.mode & 0o7777) as u16,
                uid: new.uid,
                gid: new.gid,
                rdev: new.rdev,
                atime: now,
                mtime: now,
                ctime: now,
                links: 0,
                durable_refs: 0,
                lookups: 0,
                open: 0,
                live: true,
            },
        );
        ino
    }

    fn node(&self, ino: Ino) -> Res<&Inode> {
        self.inodes.get(&ino).ok_or(libc::ENOENT)
    }

    fn node_mut(&mut self, ino: Ino) -> Res<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(libc::ENOENT)
    }

    fn entry(&self, parent: Ino, name: &OsStr) -> Res<Ino> {
        self.node(parent)?
            .dir()?
            .cur
            .get(name)
            .copied()
            .ok_or(libc::ENOENT)
    }

    fn attr_of(&self, ino: Ino) -> Res<Attr> {
        let n = self.node(ino)?;
        let nlink = match &n.body {
            Body::Dir(d) => {
                let subdirs = d
                    .cur
                    .values()
                    .filter(|c| self.inodes.get(c).is_some_and(|c| c.kind == Kind::Dir))
                    .count();
                2 + subdirs as u32
            }
            _ => n.links,
        };
        Ok(Attr {
            ino,
            kind: n.kind,
            size: match &n.body {
                Body::Dir(_) => 4096,
                _ => n.size(),
            },
            perm: n.perm,
            nlink,
            uid: n.uid,
            gid: n.gid,
            rdev: n.rdev,
            atime: n.atime,
            mtime: n.mtime,
            ctime: n.ctime,
        })
    }

    /// Add the current entry `parent/name` for `ino`.
    fn link_in(&mut self, parent: Ino, name: &OsStr, ino: Ino) -> Res<()> {
        let p = self.node_mut(parent)?;
        p.dir_mut()?.cur.insert(name.to_owned(), ino);
        p.touch();
        let n = self.node_mut(ino)?;
        n.links += 1;
        n.ctime = SystemTime::now();
        Ok(())
    }

    /// Remove the current entry `parent/name`; returns what it named.
    /// [`Fs::settle`] that inode afterwards.
    fn unlink_from(&mut self, parent: Ino, name: &OsStr) -> Res<Ino> {
        let p = self.node_mut(parent)?;
        let ino = p.dir_mut()?.cur.remove(name).ok_or(libc::ENOENT)?;
        p.touch();
        if let Some(n) = self.inodes.get_mut(&ino) {
            n.links = n.links.saturating_sub(1);
            n.ctime = SystemTime::now();
        }
        Ok(ino)
    }

    /// After a count of `ino` fell: stop counting it in `used` if nothing
    /// reaches it now, and free it (and what only its durable entries
    /// held) if no durable name is left either.
    fn settle(&mut self, ino: Ino) {
        let mut work = vec![ino];
        while let Some(ino) = work.pop() {
            if ino == ROOT {
                continue;
            }
            let Some(n) = self.inodes.get_mut(&ino) else {
                continue;
            };
            let live = n.links > 0 || n.lookups > 0 || n.open > 0;
            if live != n.live {
                n.live = live;
                if live {
                    self.used += n.counted();
                } else {
                    self.used -= n.counted();
                }
            }
            if live || n.durable_refs > 0 {
                continue;
            }
            let Some(Inode {
                body: Body::Dir(d), ..
            }) = self.inodes.remove(&ino)
            else {
                continue;
            };
            for child in d.dur.values() {
                if let Some(c) = self.inodes.get_mut(child) {
                    c.durable_refs = c.durable_refs.saturating_sub(1);
                    work.push(*child);
                }
            }
            for child in d.cur.values() {
                if let Some(c) = self.inodes.get_mut(child) {
                    c.links = c.links.saturating_sub(1);
                    work.push(*child);
                }
            }
        }
    }

    /// Whether a file of `ino` may grow from `old` to `new` bytes.
    fn room(&self, ino: Ino, old: u64, new: u64) -> Res<()> {
        let live = self.node(ino)?.live;
        match self.capacity {
            Some(cap) if live && new > old && self.used - old + new > cap => Err(libc::ENOSPC),
            _ => Ok(()),
        }
    }

    /// Apply `f` to the file `ino`, keeping [`Fs::used`] right.
    fn with_file<T>(&mut self, ino: Ino, f: impl FnOnce(&mut FileData) -> T) -> Res<T> {
        let n = self.node_mut(ino)?;
        let file = n.file_mut()?;
        let old = file.len();
        let out = f(file);
        let new = file.len();
        if n.live {
            self.used = self.used - old + new;
        }
        Ok(out)
    }

    /// The inode named `parent/name`; the kernel holds one more reference.
    pub(crate) fn lookup(&mut self, parent: Ino, name: &OsStr) -> Res<Attr> {
        let ino = self.entry(parent, name)?;
        self.node_mut(ino)?.lookups += 1;
        self.attr_of(ino)
    }

    /// The kernel gave back `n` references to `ino`.
    pub(crate) fn forget(&mut self, ino: Ino, n: u64) {
        if let Some(node) = self.inodes.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(n);
            self.settle(ino);
        }
    }

    /// The attributes of `ino`.
    pub(crate) fn getattr(&self, ino: Ino) -> Res<Attr> {
        self.attr_of(ino)
    }

    /// Change the attributes of `ino`; a size past the capacity fails
    /// with `ENOSPC` and changes nothing.
    pub(crate) fn setattr(&mut self, ino: Ino, set: &SetAttr) -> Res<Attr> {
        if let Some(size) = set.size {
            let old = self.node_mut(ino)?.file_mut()?.len();
            self.room(ino, old, size)?;
            self.with_file(ino, |f| f.set_len(size))?;
        }
        let n = self.node_mut(ino)?;
        let now = SystemTime::now();
        if let Some(mode) = set.mode {
            n.perm = (mode & 0o7777) as u16;
        }
        if let Some(uid) = set.uid {
            n.uid = uid;
        }
        if let Some(gid) = set.gid {
            n.gid = gid;
        }
        if let Some(t) = set.atime {
            n.atime = t;
        }
        match set.mtime {
            Some(t) => n.mtime = t,
            None if set.size.is_some() => n.mtime = now,
            None => {}
        }
        n.ctime = now;
        self.attr_of(ino)
    }

    /// Open `ino` (a file or, for `opendir`, a directory): a new handle.
    pub(crate) fn open(&mut self, ino: Ino) -> Res<u64> {
        self.node_mut(ino)?.open += 1;
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, ino);
        Ok(fh)
    }

    /// `opendir`: like [`Fs::open`], for directories only.
    pub(crate) fn opendir(&mut self, ino: Ino) -> Res<u64> {
        self.node(ino)?.dir()?;
        self.open(ino)
    }

    /// `create`: make the regular file `parent/name` and open it.
    pub(crate) fn create(&mut self, parent: Ino, name: &OsStr, new: New) -> Res<(Attr, u64)> {
        let new = New {
            mode: new.mode & 0o7777,
            ..new
        };
        let attr = self.mknod(parent, name, new)?;
        let fh = self.open(attr.ino)?;
        Ok((attr, fh))
    }

    /// `release`/`releasedir`: the handle `fh` is closed.
    pub(crate) fn release(&mut self, fh: u64) {
        if let Some(ino) = self.handles.remove(&fh) {
            if let Some(n) = self.inodes.get_mut(&ino) {
                n.open = n.open.saturating_sub(1);
                self.settle(ino);
            }
        }
    }

    /// Up to `size` bytes of the file `ino` from `off`.
    pub(crate) fn read(&self, ino: Ino, off: u64, size: u32) -> Res<&[u8]> {
        match &self.node(ino)?.body {
            Body::File(f) => Ok(f.read(off, size)),
            Body::Dir(_) => Err(libc::EISDIR),
            _ => Err(libc::EINVAL),
        }
    }

    /// Write `data` at `off` into the file `ino` (`durable`: an
    /// `O_DIRECT`/`O_DSYNC` write, durable at once). Past the capacity:
    /// `ENOSPC`, nothing written.
    pub(crate) fn write(&mut self, ino: Ino, off: u64, data: &[u8], durable: bool) -> Res<u32> {
        let end = off.checked_add(data.len() as u64).ok_or(libc::EFBIG)?;
        let len = self.node_mut(ino)?.file_mut()?.len();
        self.room(ino, len, len.max(end))?;
        self.with_file(ino, |f| f.write(off, data, durable))?;
        self.node_mut(ino)?.touch();
        Ok(data.len() as u32)
    }

    /// `fallocate` with `FALLOC_FL_*` `mode` bits: 0 (extend with zeros),
    /// `KEEP_SIZE` (nothing to model), `PUNCH_HOLE | KEEP_SIZE` and
    /// `ZERO_RANGE` (zeros; the latter extends the size unless
    /// `KEEP_SIZE`); other modes `EOPNOTSUPP`.
    pub(crate) fn fallocate(&mut self, ino: Ino, off: u64, len: u64, mode: i32) -> Res<()> {
        const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
        const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
        const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
        let end = off.checked_add(len).ok_or(libc::EFBIG)?;
        let size = self.node_mut(ino)?.file_mut()?.len();
        let (zero, extend) = match mode {
            0 => (false, true),
            KEEP => (false, false),
            m if m == PUNCH | KEEP || m == ZERO | KEEP => (true, false),
            ZERO => (true, true),
            _ => return Err(libc::EOPNOTSUPP),
        };
        if extend {
            self.room(ino, size, size.max(end))?;
        }
        self.with_file(ino, |f| {
            if zero {
                f.zero(off, end);
            }
            if extend && end > size {
                f.set_len(end);
            }
        })?;
        if zero || (extend && end > size) {
            self.node_mut(ino)?.touch();
        }
        Ok(())
    }

    /// `fsync`/`fdatasync` of `ino`: a file's current bytes and size are
    /// durable from now on; a directory's entries (as [`Fs::fsyncdir`]).
    pub(crate) fn fsync(&mut self, ino: Ino) -> Res<()> {
        match self.node(ino)?.kind {
            Kind::Dir => self.fsyncdir(ino),
            Kind::File => self.with_file(ino, FileData::sync),
            _ => Ok(()),
        }
    }

    /// `statfs`: total and free bytes and inodes.
    pub(crate) fn statfs(&self) -> (u64, u64, u64, u64) {
        let total = self.capacity.unwrap_or(UNLIMITED);
        let files = 1 << 32;
        (
            total,
            total.saturating_sub(self.used),
            files,
            files - self.inodes.len() as u64,
        )
    }

    /// Limit the sum of current file sizes (`None`: no limit).
    pub(crate) fn set_capacity(&mut self, bytes: Option<u64>) {
        self.capacity = bytes;
    }

    /// The sum of the current sizes of the files processes can reach.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// Handles open now (files and directories).
    pub(crate) fn open_handles(&self) -> usize {
        self.handles.len()
    }

    /// Bytes a power loss now would change or take away.
    pub(crate) fn unsynced(&self) -> u64 {
        self.inodes
            .values()
            .map(|n| match &n.body {
                Body::File(f) => f.unsynced(),
                _ => 0,
            })
            .sum()
    }
}
