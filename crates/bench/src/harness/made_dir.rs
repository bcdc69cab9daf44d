//! A scratch directory that a run makes and removes, and nothing else: a
//! path that exists may hold someone's data (a live log, a served tree,
//! results), so it is refused, never cleared.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// A directory made by this run; dropping it removes it with everything
/// the run put in it (for [`new_locked`](Self::new_locked): only the names
/// made through [`subdir`](Self::subdir), `LOCK`, then the directory if
/// that left it empty).
#[derive(Debug)]
pub struct MadeDir {
    path: PathBuf,
    /// `new_locked`: the names this run made in it, removed on drop.
    made: Option<Vec<PathBuf>>,
    /// `LOCK` inside it, held (`flock`) from before the directory had its
    /// name: a ringkit-log opened there by anyone else fails, so nothing
    /// but this run can have put anything in it.
    _lock: Option<std::fs::File>,
}

impl MadeDir {
    /// Make `path` (its parents if missing); a path that exists, even an
    /// empty directory, is refused with `AlreadyExists` and not touched.
    pub fn new(path: impl AsRef<Path>) -> io::Result<MadeDir> {
        let path = path.as_ref().to_path_buf();
        make_parent(&path)?;
        std::fs::create_dir(&path).map_err(|e| refused(&path, e))?;
        Ok(MadeDir {
            path,
            made: None,
            _lock: None,
        })
    }

    /// Like [`new`](Self::new), and the directory appears under its name
    /// with `LOCK` in it already held, as a ringkit-log holds it: made
    /// under a temporary name, locked, then renamed without replacing
    /// anything (`RENAME_NOREPLACE`). For a run that puts a log beside it
    /// (in a subdirectory): a `ringkit log serve` started on the same path
    /// meanwhile cannot open a log there for this run to delete.
    pub fn new_locked(path: impl AsRef<Path>) -> io::Result<MadeDir> {
        let path = path.as_ref().to_path_buf();
        make_parent(&path)?;
        if path.symlink_metadata().is_ok() {
            return Err(refused(&path, io::ErrorKind::AlreadyExists.into()));
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let tmp = path.with_file_name(format!(".{name}.making-{}", std::process::id()));
        std::fs::create_dir(&tmp).map_err(|e| refused(&tmp, e))?;
        let lock = std::fs::File::create(tmp.join("LOCK"))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        if let Err(e) = rename_noreplace(&tmp, &path) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(refused(&path, e));
        }
        Ok(MadeDir {
            path,
            made: Some(vec![PathBuf::from("LOCK")]),
            _lock: Some(lock),
        })
    }

    /// Make the directory `name` inside (refused if it exists: someone
    /// else put it there); it is removed on drop.
    pub fn subdir(&mut self, name: &str) -> io::Result<PathBuf> {
        let p = self.path.join(name);
        std::fs::create_dir(&p).map_err(|e| refused(&p, e))?;
        if let Some(made) = &mut self.made {
            made.push(PathBuf::from(name));
        }
        Ok(p)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn make_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => std::fs::create_dir_all(p),
        _ => Ok(()),
    }
}

fn refused(path: &Path, e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::AlreadyExists {
        io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "refusing {}: it exists (it may hold a live log or other data); give a path \
                 that does not exist yet",
                path.display()
            ),
        )
    } else {
        io::Error::new(e.kind(), format!("{}: {e}", path.display()))
    }
}

fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| crate::harness::err::invalid_input("NUL in path"))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths that outlive the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Fail with `AlreadyExists` if `path` is a file or a directory with
/// anything in it: for scratch directories that a run fills and removes.
pub fn must_be_new_or_empty(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) => m,
    };
    if meta.is_dir() && std::fs::read_dir(path)?.next().is_none() {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "refusing {}: it exists and is not an empty directory (it may hold a live log or \
             other data); give a new or empty directory",
            path.display()
        ),
    ))
}

impl Drop for MadeDir {
    fn drop(&mut self) {
        match self.made.take() {
            None => {
                let _ = std::fs::remove_dir_all(&self.path);
            }
            Some(made) => {
                // Only what this run made; the directory only if that
                // leaves it empty (a log someone started beside ours stays).
                for name in made.iter().rev() {
                    let p = self.path.join(name);
                    let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
                }
                let _ = std::fs::remove_dir(&self.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_it_did_not_make_and_removes_what_it_did() {
        let t = tempfile::tempdir().unwrap();
        let full = t.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("data"), b"keep").unwrap();
        for locked in [false, true] {
            let e = if locked {
                MadeDir::new_locked(&full).unwrap_err()
            } else {
                MadeDir::new(&full).unwrap_err()
            };
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
            assert_eq!(std::fs::read(full.join("data")).unwrap(), b"keep");
        }
        // An empty directory that was there is not this run's either.
        let empty = t.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(MadeDir::new(&empty).is_err());
        drop(MadeDir::new_locked(&empty).unwrap_err());
        assert!(empty.is_dir());
        let made = t.path().join("a/b");
        let d = MadeDir::new(&made).unwrap();
        std::fs::write(d.path().join("scratch"), b"x").unwrap();
        drop(d);
        assert!(!made.exists());
        // Locked: LOCK is held, as a log's is; what others put beside
        // what it made stays.
        let mut d = MadeDir::new_locked(&made).unwrap();
        let ours = d.subdir("log").unwrap();
        std::fs::write(ours.join("seg"), b"x").unwrap();
        std::fs::create_dir(made.join("theirs")).unwrap();
        std::fs::write(made.join("theirs/data"), b"keep").unwrap();
        assert!(d.subdir("theirs").is_err());
        let f = std::fs::File::open(made.join("LOCK")).unwrap();
        // SAFETY: flock on a descriptor we own.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_ne!(r, 0, "LOCK must be held");
        drop(d);
        assert!(!ours.exists() && !made.join("LOCK").exists());
        assert_eq!(std::fs::read(made.join("theirs/data")).unwrap(), b"keep");
        std::fs::remove_dir_all(made.join("theirs")).unwrap();
        let d = MadeDir::new_locked(&made);
        drop(d);
    }
}
