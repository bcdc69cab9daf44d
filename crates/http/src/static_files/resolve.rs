//! Opening a [`SafePath`] beneath the served directory, and nowhere else.
//!
//! # Containment
//! The root directory is held open as an fd. Every lookup is
//! `openat2(rootfd, rel, O_PATH, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`:
//! the kernel refuses (`EXDEV`) any resolution that would leave the root —
//! through `..`, an absolute path, or a symlink pointing outside, at any
//! depth — and refuses `/proc` magic links (`ELOOP`). Symlinks that stay
//! inside the root are followed. This holds even if the tree changes between
//! checks, because the kernel checks during the one lookup that matters.
//!
//! Kernels before 5.6 have no `openat2` (`ENOSYS`, found once at start):
//! then [`Containment::Canonicalize`] resolves the path in user space
//! (`realpath`), checks it lies under the canonical root, and opens that
//! with `O_NOFOLLOW`. This is weaker: a symlink swapped in between the check
//! and the open of an intermediate directory can escape. Prefer a kernel
//! with `openat2`.
//!
//! # Opening for reading
//! The lookup opens `O_PATH`, which never blocks and has no side effects
//! (a FIFO or a device is not really opened), then `statx`es it. Only a
//! regular file is reopened for reading, through `/proc/self/fd/N`.
//! Without `/proc`, it is opened by path and kept only if it is the same
//! device and inode the contained lookup found.
//!
//! Every step goes through the runtime. On io_uring all but one are ring
//! operations: `IORING_OP_OPENAT2` for the lookup (served inline from the
//! dentry cache in the common case), `IORING_OP_OPENAT` for the reopen
//! (through `/proc/self/fd`, which the kernel cannot walk without
//! blocking, so an io-wq thread does it: once per miss, not per hit) and
//! `IORING_OP_CLOSE` for the `O_PATH` descriptor. The `statx` of the
//! `O_PATH` descriptor is a syscall in place (`ringkit::fs::fd_metadata`:
//! the ring would hand it to an io-wq thread). The probe at start and the
//! realpath fallback are plain syscalls.
//!
//! Files are never opened as registered (direct) descriptors: `sendfile`
//! and the `/proc/self/fd` reopen need a real fd.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::path::SafePath;

/// How lookups are kept inside the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Containment {
    /// The kernel enforces it: `openat2` with `RESOLVE_BENEATH`.
    Openat2,
    /// User-space `realpath` and a prefix check (for kernels without `openat2`).
    Canonicalize,
}

/// Why a lookup found nothing to serve.
#[derive(Debug)]
pub enum Refusal {
    /// Nothing there, or nothing servable (answer 404).
    NotFound,
    /// Outside the root, a magic link, or not permitted (answer 403).
    Forbidden,
    /// A directory asked for without its trailing slash (answer 301).
    AddSlash,
    /// An unexpected error (answer 500).
    Io(io::Error),
}

/// What `fstat` says about a file.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time.
    pub mtime: SystemTime,
    /// File type bits (`st_mode & S_IFMT`).
    pub kind: u32,
}

impl Stat {
    /// Through the runtime (in place on both backends).
    async fn of(fd: &OwnedFd) -> io::Result<Stat> {
        let m = ringkit::fs::fd_metadata(fd.as_fd()).await?;
        Ok(Stat {
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime: m.modified(),
            kind: m.mode() & libc::S_IFMT,
        })
    }
}

/// A regular file found beneath the root, open `O_PATH`.
#[derive(Debug)]
pub struct Found {
    fd: OwnedFd,
    /// Its metadata at lookup time.
    pub stat: Stat,
    /// Path relative to the root (the index file's, for a directory).
    pub rel: PathBuf,
}

/// The served directory, held open.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    /// The canonical path of the root (for [`Containment::Canonicalize`]).
    canon: PathBuf,
    containment: Containment,
}

/// How every lookup may resolve: never above the root, no magic links.
const BENEATH: u64 = ringkit::fs::resolve::BENEATH | ringkit::fs::resolve::NO_MAGICLINKS;

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// The flags to add to `flags` for a lookup: `O_CLOEXEC` (added by the
/// runtime) and `O_NOCTTY`, except with `O_PATH`, where `openat2` refuses
/// (`EINVAL`) any flag `O_PATH` ignores.
fn lookup_flags(flags: i32) -> i32 {
    if flags & libc::O_PATH != 0 {
        flags
    } else {
        flags | libc::O_NOCTTY
    }
}

/// `openat2(dir, path, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
/// through the runtime (`IORING_OP_OPENAT2` on io_uring).
async fn openat2_beneath(dir: &OwnedFd, path: &Path, flags: i32) -> io::Result<OwnedFd> {
    loop {
        match ringkit::fs::open_at(dir.as_fd(), path, lookup_flags(flags), BENEATH).await {
            // EAGAIN: a concurrent rename raced the lookup (only possible
            // with RESOLVE_BENEATH); the kernel asks us to retry.
            Err(e)
                if e.raw_os_error() == Some(libc::EAGAIN)
                    || e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// Whether `openat2` with `RESOLVE_BENEATH` works here: one plain syscall
/// at start (`ENOSYS` before Linux 5.6).
fn probe_openat2(dir: &OwnedFd) -> io::Result<bool> {
    /// `struct open_how` (`linux/openat2.h`).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: BENEATH,
    };
    // SAFETY: `dir` is an open fd, the path is NUL-terminated, `how` is a
    // valid `open_how` and its size is passed with it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c".".as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of_val(&how),
        )
    };
    if fd >= 0 {
        // SAFETY: the kernel just gave us this fd; closing it is all we do.
        drop(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        return Ok(true);
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::ENOSYS) => Ok(false),
        e => Err(e),
    }
}

/// Plain `open(path, flags | O_NOFOLLOW)` for the canonicalizing fallback.
fn open_nofollow(path: &Path, flags: i32) -> io::Result<OwnedFd> {
    let path = cstr(path)?;
    // SAFETY: a NUL-terminated path; no mode needed without O_CREAT.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn refusal(e: io::Error) -> Refusal {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => Refusal::NotFound,
        // EXDEV: the lookup would leave the root. ELOOP: a magic link, a
        // symlink loop, or O_NOFOLLOW met a link (fallback).
        Some(libc::EXDEV | libc::ELOOP | libc::EACCES | libc::EPERM) => Refusal::Forbidden,
        _ => Refusal::Io(e),
    }
}

impl Root {
    /// Open `dir` and probe for `openat2`.
    pub fn open(dir: &Path) -> io::Result<Root> {
        let canon = std::fs::canonicalize(dir)?;
        let fd = open_nofollow(&canon, libc::O_PATH | libc::O_DIRECTORY)?;
        let containment = if probe_openat2(&fd)? {
            Containment::Openat2
        } else {
            Containment::Canonicalize
        };
        Ok(Root {
            dir: fd,
            canon,
            containment,
        })
    }

    /// Force a containment method (tests exercise the fallback with this).
    pub fn set_containment(&mut self, c: Containment) {
        self.containment = c;
    }

    /// The containment method in use.
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The canonical path of the root.
    pub fn path(&self) -> &Path {
        &self.canon
    }

    async fn lookup(&self, rel: &Path, flags: i32) -> io::Result<OwnedFd> {
        match self.containment {
            Containment::Openat2 => openat2_beneath(&self.dir, rel, flags).await,
            Containment::Canonicalize => {
                let real = std::fs::canonicalize(self.canon.join(rel))?;
                if !real.starts_with(&self.canon) {
                    return Err(io::Error::from_raw_os_error(libc::EXDEV));
                }
                open_nofollow(&real, flags)
            }
        }
    }

    /// Find what `p` names: a regular file, or a directory's `index` file.
    pub async fn find(&self, p: &SafePath, index: &str) -> Result<Found, Refusal> {
        let rel = p.as_path().to_path_buf();
        let fd = self.lookup(&rel, libc::O_PATH).await.map_err(refusal)?;
        let stat = match Stat::of(&fd).await {
            Ok(s) => s,
            Err(e) => {
                close(fd).await;
                return Err(Refusal::Io(e));
            }
        };
        let found = match stat.kind {
            libc::S_IFREG if !p.trailing_slash() => return Ok(Found { fd, stat, rel }),
            libc::S_IFDIR if p.trailing_slash() => None,
            libc::S_IFDIR => Some(Refusal::AddSlash),
            _ => Some(Refusal::NotFound),
        };
        close(fd).await;
        if let Some(refused) = found {
            return Err(refused);
        }
        let rel = if p.as_bytes().is_empty() {
            PathBuf::from(index)
        } else {
            rel.join(index)
        };
        let fd = self.lookup(&rel, libc::O_PATH).await.map_err(refusal)?;
        match Stat::of(&fd).await {
            Ok(stat) if stat.kind == libc::S_IFREG => Ok(Found { fd, stat, rel }),
            other => {
                close(fd).await;
                Err(other.map_or_else(Refusal::Io, |_| Refusal::NotFound))
            }
        }
    }

    /// Open a found file for reading (see the module docs); its `O_PATH`
    /// descriptor is closed through the runtime.
    pub async fn open_file(&self, f: Found) -> io::Result<ringkit::fs::File> {
        let proc_path = format!("/proc/self/fd/{}", f.fd.as_raw_fd());
        let reopened = ringkit::fs::File::open(&proc_path).await;
        let Found { fd, stat, rel } = f;
        close(fd).await;
        match reopened {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        // No /proc: open by path, then make sure it is the file the
        // contained lookup found (same device and inode).
        let file = ringkit::fs::File::open(self.canon.join(&rel)).await?;
        let now = file.metadata().await?;
        if !now.is_file() || now.dev() != stat.dev || now.ino() != stat.ino {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} changed while being opened", rel.display()),
            ));
        }
        Ok(file)
    }
}

impl Found {
    /// Done with it without opening it: close through the runtime.
    pub async fn close(self) {
        close(self.fd).await;
    }
}

/// Close an `O_PATH` descriptor through the runtime (`IORING_OP_CLOSE`);
/// closing one cannot fail in a way worth reporting.
async fn close(fd: OwnedFd) {
    let _ = ringkit::fs::close(fd).await;
}

/// The content-type key of a found file: its last path component.
pub fn file_name(rel: &Path) -> &[u8] {
    rel.file_name().map_or(b"", |n: &OsStr| n.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::super::path::sanitize;
    use super::*;
    use std::os::unix::fs::symlink;

    /// root/{a.txt, sub/index.html, sub/b.css, empty/, in -> a.txt,
    /// out -> ../secret, outdir -> .., abs -> /etc/passwd}, and ../secret.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::write(root.join("a.txt"), b"hello").unwrap();
        std::fs::write(root.join("sub/index.html"), b"<p>sub</p>").unwrap();
        std::fs::write(root.join("sub/b.css"), b"b{}").unwrap();
        std::fs::write(t.path().join("secret"), b"TOP SECRET").unwrap();
        symlink("a.txt", root.join("in")).unwrap();
        symlink("sub", root.join("subdir-link")).unwrap();
        symlink("../secret", root.join("out")).unwrap();
        symlink("..", root.join("outdir")).unwrap();
        symlink("/etc/passwd", root.join("abs")).unwrap();
        symlink("/proc/self/root/etc/passwd", root.join("magic")).unwrap();
        (t, root)
    }

    async fn find(root: &Root, target: &str) -> Result<Found, Refusal> {
        root.find(&sanitize(target.as_bytes(), false).unwrap(), "index.html")
            .await
    }

    fn roots(dir: &Path) -> Vec<Root> {
        let a = Root::open(dir).unwrap();
        let mut b = Root::open(dir).unwrap();
        b.set_containment(Containment::Canonicalize);
        vec![a, b]
    }

    ringkit::test_all! {
        async fn finds_files_and_index() {
            let (_t, dir) = tree();
            for root in roots(&dir) {
                let c = root.containment();
                let f = find(&root, "/a.txt").await.unwrap();
                assert_eq!(
                    (f.stat.size, f.rel.as_path()),
                    (5, Path::new("a.txt")),
                    "{c:?}"
                );
                let f = find(&root, "/sub/").await.unwrap();
                assert_eq!(f.rel, Path::new("sub/index.html"), "{c:?}");
                let f = find(&root, "/in").await.unwrap();
                assert_eq!(f.stat.size, 5, "{c:?}: inside symlink followed");
                assert!(
                    matches!(find(&root, "/sub").await, Err(Refusal::AddSlash)),
                    "{c:?}"
                );
                assert!(
                    matches!(find(&root, "/empty/").await, Err(Refusal::NotFound)),
                    "{c:?}"
                );
                assert!(matches!(find(&root, "/").await, Err(Refusal::NotFound)), "{c:?}");
                assert!(
                    matches!(find(&root, "/nope").await, Err(Refusal::NotFound)),
                    "{c:?}"
                );
                assert!(
                    matches!(find(&root, "/a.txt/").await, Err(Refusal::NotFound)),
                    "{c:?}"
                );
                assert!(
                    matches!(find(&root, "/a.txt/x").await, Err(Refusal::NotFound)),
                    "{c:?}"
                );
            }
        }

        async fn symlinks_out_are_refused() {
            let (_t, dir) = tree();
            for root in roots(&dir) {
                let c = root.containment();
                for t in ["/out", "/outdir/secret", "/abs", "/magic"] {
                    assert!(
                        matches!(find(&root, t).await, Err(Refusal::Forbidden)),
                        "{c:?} {t}"
                    );
                }
                // Out and back in: the kernel refuses the excursion; realpath
                // sees only where it ends, inside the root. Both are safe.
                let back_in = find(&root, "/outdir/root/a.txt").await;
                match c {
                    Containment::Openat2 => assert!(matches!(back_in, Err(Refusal::Forbidden))),
                    Containment::Canonicalize => assert_eq!(back_in.unwrap().stat.size, 5),
                }
            }
        }

        async fn fifo_is_not_served() {
            let (_t, dir) = tree();
            let p = cstr(&dir.join("fifo")).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o644) }, 0);
            for root in roots(&dir) {
                assert!(matches!(find(&root, "/fifo").await, Err(Refusal::NotFound)));
            }
        }

        async fn opened_file_reads() {
            let (_t, dir) = tree();
            let root = Root::open(&dir).unwrap();
            let f = find(&root, "/sub/b.css").await.unwrap();
            let file = root.open_file(f).await.unwrap();
            let data = file.read_to_end().await.unwrap();
            assert_eq!(data, b"b{}");
        }
    }
}
