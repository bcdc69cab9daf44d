//! A seam under `ringkit::fs`, for tests of what a crash or a failing disk
//! can do to a storage engine: a [`FsHook`] installed on a thread sees every
//! change this module makes to files and names on that thread (opens,
//! writes with their bytes, syncs, `fallocate`, renames, removals,
//! directories made, closes), before each is issued and after it
//! completes, and may fail one instead of issuing it.
//!
//! A recorder of every write and sync can replay the run as the disk could
//! have seen it at any crash; a hook that fails the k-th sync with `EIO`
//! tests the engine's error paths deterministically.
//!
//! With no hook installed (the default) each operation pays one
//! thread-local read. With one installed, every operation still goes as in
//! production: [`File::write_at_sync`] is the same linked write and sync
//! (`WRITE` or `WRITE_FIXED`, then `FSYNC`, one submission on io_uring),
//! seen as one [`FsOp::WriteSync`]; a short write planted there is made by
//! the kernel (the buffer's tail is unmapped), so the kernel cancels the
//! sync as it would.
//!
//! Reads ([`File::read_at`], what is built on it, and each range of
//! [`File::read_many_at`]) are seen before they are issued (a hook may
//! fail one) and their bytes after ([`FsHook::read_done`], which may change
//! them). What it does not see: descriptors adopted with
//! `File::from(OwnedFd)` until they are written, and anything done through
//! `std::fs`.
//!
//! [`File::read_at`]: super::File::read_at
//! [`File::read_many_at`]: super::File::read_many_at
//! [`File::write_at_sync`]: super::File::write_at_sync

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::rc::Rc;

/// One operation of `ringkit::fs`, as a [`FsHook`] sees it.
#[derive(Debug)]
pub enum FsOp<'a> {
    /// An open by path (files and directories alike).
    Open {
        /// The path as given.
        path: &'a Path,
        /// `O_CREAT` (or `O_EXCL`) was set.
        create: bool,
        /// `O_TRUNC` was set.
        truncate: bool,
        /// Opened for writing.
        write: bool,
    },
    /// A positional read of up to `len` bytes (before only: faults).
    Read {
        /// The descriptor.
        fd: RawFd,
        /// File offset.
        offset: u64,
        /// Bytes asked for.
        len: usize,
    },
    /// A positional write: before, the bytes asked to be written; after,
    /// the bytes that were.
    Write {
        /// The descriptor.
        fd: RawFd,
        /// File offset.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// A write linked to an `fdatasync` ([`super::File::write_at_sync`]):
    /// the sync runs only after every byte was written. Before: the bytes
    /// asked to be written. After: `Ok(n)`, the first `n` bytes were
    /// written, and synced if they are all of them (a short write cancels
    /// the sync); an error: the bytes may have been written (`data` is
    /// all of them) and were not synced.
    WriteSync {
        /// The descriptor.
        fd: RawFd,
        /// File offset.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// A write with `RWF_DSYNC` ([`super::File::write_at_dsync`]): durable
    /// as it returns, over its own range only. Before: the bytes asked to
    /// be written. After: `Ok(n)`, the first `n` bytes were written and
    /// are durable; an error: the bytes may have been written (`data` is
    /// all of them) and are not known durable.
    WriteDsync {
        /// The descriptor.
        fd: RawFd,
        /// File offset.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// `fsync` (`data_only`: `fdatasync`) of a file or a directory.
    Sync {
        /// The descriptor.
        fd: RawFd,
        /// `fdatasync` rather than `fsync`.
        data_only: bool,
    },
    /// `fallocate(2)`.
    Allocate {
        /// The descriptor.
        fd: RawFd,
        /// `FALLOC_FL_*` bits.
        mode: i32,
        /// Start.
        offset: u64,
        /// Length.
        len: u64,
    },
    /// `ftruncate(2)` ([`super::File::set_len`]).
    SetLen {
        /// The descriptor.
        fd: RawFd,
        /// The new size.
        len: u64,
    },
    /// `rename(2)`.
    Rename {
        /// Old name.
        from: &'a Path,
        /// New name.
        to: &'a Path,
    },
    /// `unlink(2)` or `rmdir(2)`.
    Remove {
        /// The name.
        path: &'a Path,
    },
    /// `mkdir(2)`.
    CreateDir {
        /// The name.
        path: &'a Path,
    },
    /// A descriptor closed (explicitly or by drop).
    Close {
        /// The descriptor.
        fd: RawFd,
    },
}

/// What a hook does instead of an operation.
#[derive(Debug)]
pub enum Fault {
    /// Fail with this error; nothing is issued.
    Fail(io::Error),
    /// For a write: write only this many bytes (a short write); for any
    /// other operation the same as failing with `EIO`.
    Short(usize),
    /// For a linked write and sync, or an `RWF_DSYNC` write: the write is
    /// issued for real, then the sync fails with this error (its pages
    /// were not written back).
    /// For any other operation the same as [`Fault::Fail`].
    FailSync(io::Error),
}

/// Sees every operation of `ringkit::fs` on the thread it is installed on.
pub trait FsHook {
    /// Called before `op` is issued; `Some` replaces it with a fault.
    fn before(&self, op: &FsOp<'_>) -> Option<Fault> {
        let _ = op;
        None
    }
    /// Called after `op` completed: `Ok(n)` is the bytes read or written,
    /// the descriptor an open returned, or 0.
    fn after(&self, op: &FsOp<'_>, res: &io::Result<u64>) {
        let _ = (op, res);
    }
    /// Called after a read of `fd` at `offset` returned `data` (the bytes
    /// read), which the hook may change: a test's stand-in for a disk that
    /// holds other bytes than the page cache (after a failed writeback an
    /// `O_DIRECT` read sees the disk, a buffered one the cache).
    fn read_done(&self, fd: RawFd, offset: u64, data: &mut [u8]) {
        let _ = (fd, offset, data);
    }
}

thread_local! {
    static HOOK: RefCell<Option<Rc<dyn FsHook>>> = const { RefCell::new(None) };
}

/// Install `hook` for every `ringkit::fs` operation on this thread (`None`
/// removes it); returns the one it replaces.
pub fn set_hook(hook: Option<Rc<dyn FsHook>>) -> Option<Rc<dyn FsHook>> {
    HOOK.with(|h| std::mem::replace(&mut *h.borrow_mut(), hook))
}

/// The hook of this thread, if any (none while the thread is exiting).
pub(crate) fn current() -> Option<Rc<dyn FsHook>> {
    HOOK.try_with(|h| h.borrow().clone()).ok().flatten()
}

/// Whether a hook is installed on this thread (no reference taken).
pub(crate) fn installed() -> bool {
    HOOK.try_with(|h| h.borrow().is_some()).unwrap_or(false)
}

/// Ask this thread's hook, if any, about `op`: `Err` is the fault to
/// return instead.
pub(crate) fn before(op: &FsOp<'_>) -> Result<(), Fault> {
    match current().and_then(|h| h.before(op)) {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// Tell this thread's hook, if any, how `op` ended (`n`: the count it
/// saw). Nothing is built when no hook is installed.
pub(crate) fn after<T>(op: &FsOp<'_>, res: &io::Result<T>, n: impl FnOnce(&T) -> u64) {
    if let Some(h) = current() {
        let seen = match res {
            Ok(v) => Ok(n(v)),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        };
        h.after(op, &seen);
    }
}

/// Let this thread's hook, if any, change the bytes a read returned.
pub(crate) fn read_done(fd: RawFd, offset: u64, data: &mut [u8]) {
    if let Some(h) = current() {
        h.read_done(fd, offset, data);
    }
}

/// Tell this thread's hook, if any, that `fd` was closed.
pub(crate) fn closed(fd: RawFd) {
    after(&FsOp::Close { fd }, &Ok(()), |_| 0);
}

impl Fault {
    /// The error of a fault on an operation that is not a write.
    pub(crate) fn into_error(self) -> io::Error {
        match self {
            Fault::Fail(e) | Fault::FailSync(e) => e,
            Fault::Short(_) => io::Error::from_raw_os_error(libc::EIO),
        }
    }
}

impl fmt::Display for FsOp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsOp::Open { path, .. } => write!(f, "open {}", path.display()),
            FsOp::Read { fd, offset, len } => write!(f, "read fd {fd} {len}@{offset}"),
            FsOp::Write { fd, offset, data } => write!(f, "write fd {fd} {}@{offset}", data.len()),
            FsOp::WriteSync { fd, offset, data } => {
                write!(f, "write+fdatasync fd {fd} {}@{offset}", data.len())
            }
            FsOp::WriteDsync { fd, offset, data } => {
                write!(f, "write RWF_DSYNC fd {fd} {}@{offset}", data.len())
            }
            FsOp::Sync { fd, data_only } => {
                write!(
                    f,
                    "{} fd {fd}",
                    if *data_only { "fdatasync" } else { "fsync" }
                )
            }
            FsOp::Allocate {
                fd, offset, len, ..
            } => write!(f, "fallocate fd {fd} {len}@{offset}"),
            FsOp::SetLen { fd, len } => write!(f, "ftruncate fd {fd} {len}"),
            FsOp::Rename { from, to } => write!(f, "rename {} {}", from.display(), to.display()),
            FsOp::Remove { path } => write!(f, "remove {}", path.display()),
            FsOp::CreateDir { path } => write!(f, "mkdir {}", path.display()),
            FsOp::Close { fd } => write!(f, "close fd {fd}"),
        }
    }
}
