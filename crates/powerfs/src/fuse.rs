//! The FUSE side: each request mapped onto the model (`model.rs`) under
//! its lock, and answered with entry and attribute lifetimes of zero (the
//! kernel asks again every time, so it never serves a name, size or
//! attribute that a power loss took away).
//!
//! Files are opened without `FOPEN_KEEP_CACHE`, so the kernel drops a
//! file's page cache at each open, and the mount has no writeback cache,
//! so every write reaches the model before it returns. Not
//! `FOPEN_DIRECT_IO`: on Linux 6.18 an io_uring read of such a file that
//! reaches the end of the file returns the whole length asked for, the
//! rest of the buffer filled from the start of the file (the kernel
//! retries the short read at its first offset); `tests/uring.rs` checks
//! reads across the end.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};

use crate::hold::{lock_held, Held, Waiting};
use crate::model::{Attr, Fs, Kind, New, Res, SetAttr, NAME_MAX};

/// Nothing is cached by the kernel for longer than this.
const TTL: Duration = Duration::ZERO;
/// Block size reported by `stat` and `statfs`.
const BLOCK: u32 = 4096;

/// The `fuser` file system: the model, shared with [`crate::PowerFs`].
#[derive(Debug)]
pub(crate) struct Fuse {
    pub(crate) fs: Arc<Mutex<Fs>>,
    /// Syncs held back (see `hold.rs`).
    pub(crate) held: Arc<Mutex<Held>>,
}

impl Fuse {
    fn fs(&self) -> MutexGuard<'_, Fs> {
        lock(&self.fs)
    }

    /// While syncs are held, keep a sync's reply (its caller waits) and
    /// give `None`; else give the reply back to be answered now.
    fn unless_held(&self, ino: u64, dir: bool, reply: ReplyEmpty) -> Option<ReplyEmpty> {
        let mut h = lock_held(&self.held);
        if !h.on {
            return Some(reply);
        }
        h.waiting.push(Waiting { ino, dir, reply });
        None
    }
}

/// The model's lock (a panic elsewhere while it was held leaves it usable:
/// every operation leaves the model consistent before it can panic).
pub(crate) fn lock(fs: &Mutex<Fs>) -> MutexGuard<'_, Fs> {
    fs.lock().unwrap_or_else(|e| e.into_inner())
}

fn kind(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDev => FileType::CharDevice,
        Kind::BlockDev => FileType::BlockDevice,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.ctime,
        kind: kind(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: BLOCK,
        flags: 0,
    }
}

fn errno(e: i32) -> Errno {
    Errno::from_i32(e)
}

fn entry(reply: ReplyEntry, r: Res<Attr>) {
    match r {
        Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
        Err(e) => reply.error(errno(e)),
    }
}

fn attr(reply: ReplyAttr, r: Res<Attr>) {
    match r {
        Ok(a) => reply.attr(&TTL, &file_attr(&a)),
        Err(e) => reply.error(errno(e)),
    }
}

/// Answer `reply` with `r`.
pub(crate) fn empty(reply: ReplyEmpty, r: Res<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

fn new(req: &Request, mode: u32, umask: u32, rdev: u32) -> New {
    New {
        mode: mode & !umask,
        uid: req.uid(),
        gid: req.gid(),
        rdev,
    }
}

/// A write that is durable at once: `O_DIRECT` (the kernel passes the
/// descriptor's current flags, so `fcntl(F_SETFL, O_DIRECT)` counts),
/// `O_DSYNC`/`O_SYNC`, or `RWF_DSYNC`/`RWF_SYNC` (sent as `O_DSYNC`).
fn durable_write(flags: OpenFlags) -> bool {
    flags.0 & (libc::O_DIRECT | libc::O_DSYNC) != 0
}

impl Filesystem for Fuse {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if name.as_bytes().len() > NAME_MAX {
            return reply.error(Errno::ENAMETOOLONG);
        }
        entry(reply, self.fs().lookup(parent.0, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.fs().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        attr(reply, self.fs().getattr(ino.0));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
        };
        attr(reply, self.fs().setattr(ino.0, &set));
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs().readlink(ino.0) {
            Ok(t) => reply.data(t.as_bytes()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let new = New {
            mode: (mode & libc::S_IFMT) | (mode & 0o7777 & !umask),
            ..new(req, mode, umask, rdev)
        };
        entry(reply, self.fs().mknod(parent.0, name, new));
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        entry(
            reply,
            self.fs().mkdir(parent.0, name, new(req, mode, umask, 0)),
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.fs().unlink(parent.0, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.fs().rmdir(parent.0, name));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let new = new(req, 0o777, 0, 0);
        entry(
            reply,
            self.fs()
                .symlink(parent.0, link_name, target.as_os_str(), new),
        );
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let noreplace = flags == RenameFlags::RENAME_NOREPLACE;
        if !flags.is_empty() && !noreplace {
            return reply.error(Errno::EINVAL);
        }
        let r = self
            .fs()
            .rename((parent.0, name), (newparent.0, newname), noreplace);
        empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        entry(reply, self.fs().link(ino.0, newparent.0, newname));
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs().open(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let fs = self.fs();
        match fs.read(ino.0, offset, size) {
            Ok(bytes) => reply.data(bytes),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.fs().write(ino.0, offset, data, durable_write(flags)) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.fs().release(fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(reply) = self.unless_held(ino.0, false, reply) {
            empty(reply, self.fs().fsync(ino.0));
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs().opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.fs().readdir(ino.0, offset) {
            Ok(entries) => {
                for e in entries {
                    if reply.add(INodeNo(e.ino), e.next, kind(e.kind), &e.name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.fs().release(fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(reply) = self.unless_held(ino.0, true, reply) {
            empty(reply, self.fs().fsyncdir(ino.0));
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let (total, free, files, ffree) = self.fs().statfs();
        let b = u64::from(BLOCK);
        reply.statfs(
            total / b,
            free / b,
            free / b,
            files,
            ffree,
            BLOCK,
            NAME_MAX as u32,
            BLOCK,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.fs().create(parent.0, name, new(req, mode, umask, 0)) {
            Ok((a, fh)) => reply.created(
                &TTL,
                &file_attr(&a),
                Generation(0),
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        empty(reply, self.fs().fallocate(ino.0, offset, length, mode));
    }
}
