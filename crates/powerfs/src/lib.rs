//! An in-memory FUSE file system that models power loss, like Jepsen's
//! LazyFS: what was written but never synced is lost when the power goes.
//!
//! [`PowerFs::mount`] serves a new, empty file system at a directory, on a
//! background thread, until the [`PowerFs`] is dropped. Processes use it
//! with ordinary system calls (io_uring included); the test that owns it
//! then kills them and calls [`PowerFs::power_loss`]; what is left is what
//! a machine would find after a power cut, and the processes are started
//! again on it.
//!
//! # The model
//! Everything is in memory. Each inode has a *current* state (what
//! processes see) and a *durable* state (what survives a power loss).
//!
//! - **Regular file**: current bytes and size, durable bytes and size.
//!   `fsync` or `fdatasync` of the file (through any descriptor) makes the
//!   current bytes and size durable. A write through a descriptor with
//!   `O_DIRECT` (at open or set later with `fcntl`), `O_DSYNC` or
//!   `O_SYNC`, or with `RWF_DSYNC`, is durable at once: its bytes, and
//!   the size up to its end (bytes between the old durable size and the
//!   write that were never synced are then zeros after a loss, a hole).
//!   But the kernel follows a buffered `RWF_DSYNC` (or `O_DSYNC`) write to
//!   a FUSE file with an `FSYNC` request, which carries no range, so here
//!   such a write makes the whole file durable: more than Linux promises
//!   on a local file system, where it covers its own range only. A test
//!   of what such a write leaves out is the crash-state explorer's
//!   (`ringkit-log`'s `crashcheck`), not this file system's.
//!   Only the pages changed since the last sync are kept twice, so a sync
//!   costs what was written since the one before, not the file's size.
//! - **Directory**: current entries and durable entries. A change of
//!   entries (create, `mknod`, `mkdir`, `symlink`, `link`, `unlink`,
//!   `rmdir`, a rename in or out) is durable only once that directory is
//!   synced (`fsync` of the directory), which makes all its current
//!   entries durable. Each directory is on its own: a rename between two
//!   directories needs both synced (synced at the source only, the file
//!   is gone after a loss; at the target only, it has both names).
//! - **Metadata** (mode, owner, times) is not modelled: it is kept as it
//!   is across a loss.
//! - **Power loss** ([`PowerFs::power_loss`]): every directory's entries
//!   go back to its durable entries; every file's bytes and size go back
//!   to its durable ones; inodes no longer reached from the root through
//!   durable entries are dropped (a directory reached through two names
//!   keeps the first, in name order from the root). What is left is all
//!   durable.
//! - **Torn power loss** ([`PowerFs::power_loss_torn`]): the same, but
//!   each 512-byte sector of a file whose current bytes differ from its
//!   durable ones (every sector past the durable size included) keeps the
//!   new bytes with probability 1/2, drawn from a generator seeded with
//!   the given seed (the same seed after the same operations: the same
//!   result). The size becomes the durable size, or the end of the
//!   furthest kept sector past it, with zeros in the sectors not kept
//!   there. Sectors cut by an unsynced truncation always go back;
//!   directories are never torn.
//! - **Capacity** ([`PowerFs::set_capacity`]): an optional limit on the
//!   sum of current file sizes ([`PowerFs::used`]). A write, `fallocate`
//!   or size-growing truncate past it fails with `ENOSPC` and changes
//!   nothing (no short writes). `statfs` reports it (1 TiB when
//!   unlimited). An unlinked file counts until it is closed.
//! - Inode numbers are never reused; generations are 0. An inode that a
//!   loss dropped answers `ENOENT`.
//!
//! # Caller's duties
//! [`PowerFs::power_loss`] must be called only when no process has a file
//! of the mount open and no system call on it is in progress: kill the
//! processes and wait for them, then for [`PowerFs::open_handles`] to
//! reach 0 (the kernel reports a close to the file system after `close`
//! has returned). A descriptor kept open across a loss may see the old
//! inode's state or `ENOENT`. A [`PowerFs`] dropped while its mount is in
//! use aborts the connection (system calls on it then fail with
//! `ENOTCONN`) and detaches the mount.
//!
//! # Kernel caching
//! Entries and attributes are answered with a lifetime of zero, so the
//! kernel asks again for every path lookup and `stat`. Files are opened
//! without `FOPEN_KEEP_CACHE` (the kernel drops a file's page cache at
//! each open) and the mount has no writeback cache (every `write` reaches
//! the file system before it returns); a power loss also tells the kernel
//! to drop the cached pages and attributes of every file it changed. So
//! no page cache hides a loss. Files are not opened `FOPEN_DIRECT_IO`:
//! on Linux 6.18 an io_uring read of such a file that reaches its end
//! returns the full length asked for, the rest of the buffer filled from
//! the file's start (the kernel retries the short read at its first
//! offset). io_uring reads and writes work as on any file system (the
//! kernel runs them on its io-wq workers), and so do `O_DIRECT` opens
//! (no alignment needed) and shared `mmap`: pages dirtied through it
//! reach the file system when the kernel writes them back (on `msync`,
//! at `close`, or in the background), unsynced until a sync
//! (`msync(MS_SYNC)` is one: it fsyncs the file). `sync(2)`/`syncfs(2)` make nothing durable (FUSE does not
//! pass them on); `sync_file_range(2)` neither. Permissions are not
//! checked (all users of it run as root); only the mounting user may use
//! the mount.
//!
//! # Mounting
//! As root, `fuser` mounts with `mount(2)` directly: no `fusermount` and no
//! libfuse are needed, only `/dev/fuse`. [`PowerFs::usable`] tells why a
//! mount cannot be made here, for tests to skip with a reason. Processes
//! in other network namespaces (`ip netns exec`, a new mount namespace that
//! is a slave of the root one) see the mount if it was made before they
//! started.

mod file;
mod fuse;
mod hold;
mod model;
mod mount;
#[cfg(test)]
mod tests;

pub use mount::PowerFs;

/// What a power loss took away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossStats {
    /// Files still there whose bytes or size went back (in part, for a
    /// torn loss).
    pub files_reverted: u64,
    /// Bytes of file content lost: in files still there, the bytes whose
    /// content changed or that went (past the new size); in dropped
    /// files, their whole current size.
    pub bytes_dropped: u64,
    /// Directories whose entries went back to their durable ones.
    pub dirs_reverted: u64,
    /// Inodes dropped: no durable name reaches them any more.
    pub inodes_dropped: u64,
}
