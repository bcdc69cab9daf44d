//! A mount in a temporary directory for each test, or a printed reason to
//! skip.

#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use ringkit_powerfs::PowerFs;

/// A powerfs mounted on a fresh temporary directory; unmounted (then the
/// directory removed) when dropped.
pub struct Mounted {
    pub fs: PowerFs,
    _dir: tempfile::TempDir,
}

impl Mounted {
    /// `None` (with the reason printed) where powerfs cannot be mounted.
    pub fn new() -> Option<Mounted> {
        if let Err(why) = PowerFs::usable() {
            eprintln!("skipped: {why}");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let fs = PowerFs::mount(dir.path()).unwrap();
        Some(Mounted { fs, _dir: dir })
    }

    pub fn path(&self) -> &Path {
        self.fs.mountpoint()
    }

    /// Wait until the kernel has told the file system of every close
    /// (releases come after `close(2)` returns), then cut the power.
    pub fn quiesce(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while self.fs.open_handles() > 0 {
            if Instant::now() >= until {
                let mine: Vec<String> = std::fs::read_dir("/proc/self/fd")
                    .unwrap()
                    .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                    .filter(|l| l.starts_with(self.path()))
                    .map(|l| l.display().to_string())
                    .collect();
                panic!(
                    "{} handles still open; this process holds {mine:?}",
                    self.fs.open_handles()
                );
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// `fsync` the directory `dir`.
pub fn sync_dir(dir: &Path) {
    std::fs::File::open(dir).unwrap().sync_all().unwrap();
}
