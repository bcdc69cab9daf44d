//! The names: making, linking, renaming and removing entries, listing a
//! directory, and `fsyncdir`, which makes its entries durable.

use std::ffi::{OsStr, OsString};

use super::{Attr, Body, Dir, DirEntry, Fs, Ino, Kind, New, Res, NAME_MAX, ROOT};
use crate::file::FileData;

impl Fs {
    /// Make `parent/name`, a new inode of `kind`; the kernel holds a
    /// reference to it.
    fn make(&mut self, parent: Ino, name: &OsStr, kind: Kind, body: Body, new: New) -> Res<Attr> {
        check_name(name)?;
        if self.node(parent)?.dir()?.cur.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.alloc(kind, body, new);
        self.link_in(parent, name, ino)?;
        self.node_mut(ino)?.lookups += 1;
        self.attr_of(ino)
    }

    /// `mknod`: a regular file, FIFO, socket or device node.
    pub(crate) fn mknod(&mut self, parent: Ino, name: &OsStr, new: New) -> Res<Attr> {
        let kind = Kind::from_mode(new.mode)?;
        let body = match kind {
            Kind::File => Body::File(FileData::default()),
            _ => Body::Special,
        };
        self.make(parent, name, kind, body, new)
    }

    /// `mkdir`.
    pub(crate) fn mkdir(&mut self, parent: Ino, name: &OsStr, new: New) -> Res<Attr> {
        self.node(parent)?.dir()?;
        let dir = Dir {
            parent,
            ..Dir::default()
        };
        self.make(parent, name, Kind::Dir, Body::Dir(dir), new)
    }

    /// `symlink`: `parent/name` pointing at `target`.
    pub(crate) fn symlink(
        &mut self,
        parent: Ino,
        name: &OsStr,
        target: &OsStr,
        new: New,
    ) -> Res<Attr> {
        let new = New { mode: 0o777, ..new };
        self.make(
            parent,
            name,
            Kind::Symlink,
            Body::Symlink(target.to_owned()),
            new,
        )
    }

    /// The target of the symbolic link `ino`.
    pub(crate) fn readlink(&self, ino: Ino) -> Res<&OsStr> {
        match &self.node(ino)?.body {
            Body::Symlink(t) => Ok(t),
            _ => Err(libc::EINVAL),
        }
    }

    /// `unlink`: remove the non-directory `parent/name`.
    pub(crate) fn unlink(&mut self, parent: Ino, name: &OsStr) -> Res<()> {
        let ino = self.entry(parent, name)?;
        if self.node(ino)?.kind == Kind::Dir {
            return Err(libc::EISDIR);
        }
        self.unlink_from(parent, name)?;
        self.settle(ino);
        Ok(())
    }

    /// `rmdir`: remove the empty directory `parent/name`.
    pub(crate) fn rmdir(&mut self, parent: Ino, name: &OsStr) -> Res<()> {
        let ino = self.entry(parent, name)?;
        if !self.node(ino)?.dir()?.cur.is_empty() {
            return Err(libc::ENOTEMPTY);
        }
        self.unlink_from(parent, name)?;
        self.settle(ino);
        Ok(())
    }

    /// `rename` (`noreplace`: `RENAME_NOREPLACE`).
    pub(crate) fn rename(
        &mut self,
        (parent, name): (Ino, &OsStr),
        (to_parent, to_name): (Ino, &OsStr),
        noreplace: bool,
    ) -> Res<()> {
        let ino = self.entry(parent, name)?;
        check_name(to_name)?;
        let is_dir = self.node(ino)?.kind == Kind::Dir;
        let target = self.node(to_parent)?.dir()?.cur.get(to_name).copied();
        if let Some(t) = target {
            if noreplace {
                return Err(libc::EEXIST);
            }
            if t == ino {
                return Ok(());
            }
            let t = self.node(t)?;
            match (is_dir, t.kind == Kind::Dir) {
                (true, false) => return Err(libc::ENOTDIR),
                (false, true) => return Err(libc::EISDIR),
                (true, true) if !t.dir()?.cur.is_empty() => return Err(libc::ENOTEMPTY),
                _ => {}
            }
        }
        if is_dir {
            // Not into itself or a directory below it.
            let mut d = to_parent;
            loop {
                if d == ino {
                    return Err(libc::EINVAL);
                }
                if d == ROOT {
                    break;
                }
                d = self.node(d)?.dir()?.parent;
            }
        }
        self.unlink_from(parent, name)?;
        if target.is_some() {
            self.unlink_from(to_parent, to_name)?;
        }
        self.link_in(to_parent, to_name, ino)?;
        if let Body::Dir(d) = &mut self.node_mut(ino)?.body {
            d.parent = to_parent;
        }
        if let Some(t) = target {
            self.settle(t);
        }
        Ok(())
    }

    /// `link`: a new name `to_parent/to_name` for the non-directory `ino`.
    pub(crate) fn link(&mut self, ino: Ino, to_parent: Ino, to_name: &OsStr) -> Res<Attr> {
        check_name(to_name)?;
        if self.node(ino)?.kind == Kind::Dir {
            return Err(libc::EPERM);
        }
        if self.node(to_parent)?.dir()?.cur.contains_key(to_name) {
            return Err(libc::EEXIST);
        }
        self.link_in(to_parent, to_name, ino)?;
        self.node_mut(ino)?.lookups += 1;
        self.attr_of(ino)
    }

    /// `fsyncdir`: the directory's current entries are its durable ones.
    pub(crate) fn fsyncdir(&mut self, ino: Ino) -> Res<()> {
        let d = self.node_mut(ino)?.dir_mut()?;
        if d.cur == d.dur {
            return Ok(());
        }
        let old = std::mem::replace(&mut d.dur, d.cur.clone());
        let (gone, came): (Vec<Ino>, Vec<Ino>) = {
            let new = &d.dur;
            (
                old.iter()
                    .filter(|(k, v)| new.get(*k) != Some(v))
                    .map(|(_, v)| *v)
                    .collect(),
                new.iter()
                    .filter(|(k, v)| old.get(*k) != Some(v))
                    .map(|(_, v)| *v)
                    .collect(),
            )
        };
        for i in &came {
            if let Some(n) = self.inodes.get_mut(i) {
                n.durable_refs += 1;
            }
        }
        for i in gone {
            if let Some(n) = self.inodes.get_mut(&i) {
                n.durable_refs = n.durable_refs.saturating_sub(1);
                self.settle(i);
            }
        }
        Ok(())
    }

    /// The directory `ino`'s current entries after the first `offset`
    /// (`.` and `..` first).
    pub(crate) fn readdir(&self, ino: Ino, offset: u64) -> Res<Vec<DirEntry>> {
        let d = self.node(ino)?.dir()?;
        let dots = [(".", ino), ("..", d.parent)]
            .into_iter()
            .map(|(n, i)| (OsString::from(n), i, Kind::Dir));
        let rest = d.cur.iter().map(|(name, &i)| {
            let kind = self.inodes.get(&i).map_or(Kind::File, |n| n.kind);
            (name.clone(), i, kind)
        });
        Ok(dots
            .chain(rest)
            .enumerate()
            .skip(offset as usize)
            .map(|(k, (name, ino, kind))| DirEntry {
                next: k as u64 + 1,
                ino,
                kind,
                name,
            })
            .collect())
    }
}

/// A name a directory may hold.
fn check_name(name: &OsStr) -> Res<()> {
    use std::os::unix::ffi::OsStrExt;
    let b = name.as_bytes();
    if b.len() > NAME_MAX {
        return Err(libc::ENAMETOOLONG);
    }
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(libc::EINVAL);
    }
    Ok(())
}
