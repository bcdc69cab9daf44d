//! A scratch directory that a run makes and removes, and nothing else: a
//! directory that exists and is not empty may hold someone's data (a live
//! log, a served tree, results), so it is refused, never cleared.

use std::io;
use std::path::{Path, PathBuf};

/// A directory made (or found empty) by this run; dropping it removes it
/// with everything the run put in it.
#[derive(Debug)]
pub struct MadeDir {
    path: PathBuf,
}

impl MadeDir {
    /// Make `path` (and its parents), or take it if it exists and is
    /// empty. A file, or a directory with anything in it, is refused with
    /// `AlreadyExists`, and nothing is touched.
    pub fn new(path: impl AsRef<Path>) -> io::Result<MadeDir> {
        let path = path.as_ref().to_path_buf();
        if let Some(e) = refuse(&path)? {
            return Err(e);
        }
        std::fs::create_dir_all(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(MadeDir { path })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Fail with `AlreadyExists` if `path` is a file or a directory with
/// anything in it: for scratch directories that a run fills and removes.
pub fn must_be_new_or_empty(path: &Path) -> io::Result<()> {
    match refuse(path)? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Why `path` may not be used as a scratch directory, if it may not.
fn refuse(path: &Path) -> io::Result<Option<io::Error>> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
        Ok(m) => m,
    };
    let why = if !meta.is_dir() {
        "is not a directory"
    } else if std::fs::read_dir(path)?.next().is_some() {
        "exists and is not empty (it may hold a live log or other data)"
    } else {
        return Ok(None);
    };
    Ok(Some(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "refusing {}: it {why}; give a new or empty directory",
            path.display()
        ),
    )))
}

impl Drop for MadeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
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
        let e = MadeDir::new(&full).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read(full.join("data")).unwrap(), b"keep");
        let file = t.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(MadeDir::new(&file).is_err());
        let made = t.path().join("a/b");
        let d = MadeDir::new(&made).unwrap();
        std::fs::write(d.path().join("scratch"), b"x").unwrap();
        drop(d);
        assert!(!made.exists());
        // An empty one is taken.
        std::fs::create_dir(&made).unwrap();
        drop(MadeDir::new(&made).unwrap());
    }
}
