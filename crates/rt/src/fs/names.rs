//! Names in directories: rename, remove, make, and the directory sync that
//! makes such a change durable. io_uring: `IORING_OP_RENAMEAT`, `UNLINKAT`,
//! `MKDIRAT`; epoll: the syscalls inline. Each error names its path(s).
//!
//! A change to a name is durable only once its directory is synced
//! ([`sync_dir`]): after a crash, a rename or a new file whose directory
//! was not synced may be gone.

use std::io;
use std::path::Path;

use super::hook::{self, Fault, FsOp};
use super::{cpath, OpenOptions};
use crate::driver::op::path::PathOp;
use crate::driver::Op;

async fn run(op: &FsOp<'_>, path_op: io::Result<PathOp>) -> io::Result<()> {
    hook::before(op).map_err(Fault::into_error)?;
    let res = Op::new(path_op?).await;
    hook::after(op, &res, |_| 0);
    res
}

/// Rename `from` to `to`, replacing `to` if it exists (`rename(2)`).
pub async fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let (from, to) = (from.as_ref(), to.as_ref());
    let op = PathOp::Rename {
        from: cpath(from)?,
        to: cpath(to)?,
    };
    run(&FsOp::Rename { from, to }, Ok(op)).await.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("rename {} to {}: {e}", from.display(), to.display()),
        )
    })
}

/// Remove the file (or other non-directory) `path` (`unlink(2)`).
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    remove(path.as_ref(), false).await
}

/// Remove the empty directory `path` (`rmdir(2)`).
pub async fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    remove(path.as_ref(), true).await
}

async fn remove(path: &Path, dir: bool) -> io::Result<()> {
    let op = cpath(path).map(|path| PathOp::Unlink { path, dir });
    run(&FsOp::Remove { path }, op)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("remove {}: {e}", path.display())))
}

/// Make the directory `path` (`mkdir(2)`, mode 0o777 less the umask); its
/// parent must exist. Sync the parent ([`sync_dir`]) to make it durable.
pub async fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    let op = cpath(path).map(|path| PathOp::Mkdir { path, mode: 0o777 });
    run(&FsOp::CreateDir { path }, op)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("mkdir {}: {e}", path.display())))
}

/// `fsync` the directory `dir`: the names made, renamed or removed in it
/// so far are durable once this returns.
pub async fn sync_dir(dir: impl AsRef<Path>) -> io::Result<()> {
    let dir = dir.as_ref();
    let d = OpenOptions::new().read(true).open(dir).await?;
    d.sync_all()
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("fsync directory {}: {e}", dir.display())))
}

/// Replace the file `path` with `bytes`, durably and atomically: written
/// to `path` with `.tmp` appended, synced, renamed over `path`, and the
/// directory synced. After a crash `path` holds the old bytes or the new
/// ones, never a mix; the `.tmp` file may be left (remove it at start-up).
pub async fn write_replace(path: impl AsRef<Path>, bytes: Vec<u8>) -> io::Result<()> {
    let path = path.as_ref();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .await?;
    f.write_all_at(bytes, 0).await.0?;
    f.sync_all().await?;
    f.close().await?;
    rename(&tmp, path).await?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    sync_dir(dir).await
}
