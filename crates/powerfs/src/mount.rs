//! [`PowerFs`]: the mounted file system and the test's controls over it.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fuser::{BackgroundSession, Config, INodeNo, MountOption, Notifier};

use crate::fuse::{lock, Fuse};
use crate::hold::{lock_held, Held};
use crate::model::{Fs, Ino};
use crate::LossStats;

/// A mounted in-memory file system that models power loss (see the crate
/// docs for the model). Unmounted when dropped.
pub struct PowerFs {
    fs: Arc<Mutex<Fs>>,
    held: Arc<Mutex<Held>>,
    session: Option<BackgroundSession>,
    notifier: Notifier,
    mountpoint: PathBuf,
}

impl fmt::Debug for PowerFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PowerFs")
            .field("mountpoint", &self.mountpoint)
            .finish_non_exhaustive()
    }
}

impl PowerFs {
    /// Mount a new, empty file system at `mountpoint` (an existing empty
    /// directory). It is served on a background thread until this is
    /// dropped (which unmounts it) and is ready when this returns.
    pub fn mount(mountpoint: &Path) -> io::Result<PowerFs> {
        let mountpoint = mountpoint.canonicalize()?;
        let fs = Arc::new(Mutex::new(Fs::new()));
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("powerfs".into()),
            MountOption::Subtype("powerfs".into()),
            MountOption::RW,
            MountOption::NoAtime,
        ];
        let held = Arc::new(Mutex::new(Held::default()));
        let fuse = Fuse {
            fs: fs.clone(),
            held: held.clone(),
        };
        let session = fuser::spawn_mount(fuse, &mountpoint, &config).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("mount powerfs at {}: {e}", mountpoint.display()),
            )
        })?;
        Ok(PowerFs {
            fs,
            held,
            notifier: session.notifier(),
            session: Some(session),
            mountpoint,
        })
    }

    /// Where it is mounted (canonical).
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Cut the power: every directory's entries and every file's bytes and
    /// size go back to their durable state, and what no durable name
    /// reaches is dropped. Call only when no process has a file of the
    /// mount open (kill them first).
    pub fn power_loss(&self) -> LossStats {
        let (st, changed) = lock(&self.fs).power_loss(None);
        self.invalidate(&changed);
        st
    }

    /// As [`power_loss`](Self::power_loss), but torn: each 512-byte sector
    /// of a file that differs from its durable state keeps its new bytes
    /// with probability 1/2, drawn from `seed` (see the crate docs).
    pub fn power_loss_torn(&self, seed: u64) -> LossStats {
        let (st, changed) = lock(&self.fs).power_loss(Some(seed));
        self.invalidate(&changed);
        st
    }

    /// Tell the kernel to drop what it caches of `files` (pages and
    /// attributes), outside the model's lock: the kernel may have to wait
    /// for reads of those pages, which need the lock.
    fn invalidate(&self, files: &[Ino]) {
        for &ino in files {
            // ENOENT: the kernel holds nothing of it.
            let _ = self.notifier.inval_inode(INodeNo(ino), 0, 0);
        }
    }

    /// Limit the sum of current file sizes to `bytes` (`None`: no limit).
    /// Past it, writes, `fallocate` and size-growing truncates fail with
    /// `ENOSPC`. Lowering it below [`used`](Self::used) removes nothing.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        lock(&self.fs).set_capacity(bytes);
    }

    /// The sum of the current sizes of the files (unlinked ones too while
    /// open).
    pub fn used(&self) -> u64 {
        lock(&self.fs).used()
    }

    /// Bytes written and not yet durable: the bytes of file content that a
    /// power loss now would change or take away (as
    /// [`LossStats::bytes_dropped`] counts them in files that stay).
    pub fn unsynced(&self) -> u64 {
        lock(&self.fs).unsynced()
    }

    /// Hold every sync from now on, as a slow disk does: a `fsync` or
    /// `fdatasync` (of a file or a directory) blocks its caller, unanswered
    /// and without effect, until [`release_syncs`](Self::release_syncs)
    /// or [`fail_held_syncs`](Self::fail_held_syncs). Writes go on.
    pub fn hold_syncs(&self) {
        lock_held(&self.held).on = true;
    }

    /// Stop holding syncs, and carry out and answer those held.
    pub fn release_syncs(&self) {
        let waiting = {
            let mut h = lock_held(&self.held);
            h.on = false;
            std::mem::take(&mut h.waiting)
        };
        for w in waiting {
            let res = if w.dir {
                lock(&self.fs).fsyncdir(w.ino)
            } else {
                lock(&self.fs).fsync(w.ino)
            };
            crate::fuse::empty(w.reply, res);
        }
    }

    /// Answer the syncs held so far with `EIO`, making nothing durable
    /// (syncs stay held if they were). For a power loss while a disk holds
    /// syncs: fail them once their callers are being killed, then wait
    /// for the callers to end.
    pub fn fail_held_syncs(&self) -> usize {
        let waiting = std::mem::take(&mut lock_held(&self.held).waiting);
        let n = waiting.len();
        for w in waiting {
            w.reply.error(fuser::Errno::from_i32(libc::EIO));
        }
        n
    }

    /// Files and directories open now. The kernel tells the file system
    /// of a close after `close(2)` has returned (asynchronously), so after
    /// killing the processes of a test, wait for this to reach 0 before a
    /// [`power_loss`](Self::power_loss).
    pub fn open_handles(&self) -> usize {
        lock(&self.fs).open_handles()
    }

    /// Unmount now, reporting a failure. A mount still in use (a file open
    /// on it, a process's working directory) cannot be unmounted: its
    /// connection is then aborted (the users' system calls on it fail with
    /// `ENOTCONN`) and the mount detached. Serving on would leave this
    /// process's own exit waiting forever on a `close` of such a file
    /// answered by none (its FUSE thread would be the one closing it).
    pub fn unmount(mut self) -> io::Result<()> {
        self.unmount_inner()
    }

    fn unmount_inner(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        match session.umount_and_join() {
            Ok(()) => Ok(()),
            Err(e) => {
                abort_and_detach(&self.mountpoint);
                Err(io::Error::new(
                    e.kind(),
                    format!("unmount {}: {e}", self.mountpoint.display()),
                ))
            }
        }
    }

    /// `Ok` if a [`PowerFs`] can be mounted here, else why not (not root,
    /// no `/dev/fuse`, `mount(2)` refused), for tests to skip with a
    /// printed reason. Mounts and unmounts a probe in the temporary
    /// directory to be sure.
    pub fn usable() -> Result<(), String> {
        let status = std::fs::read_to_string("/proc/self/status")
            .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
        let euid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("?");
        if euid != "0" {
            return Err(format!(
                "powerfs mounts with mount(2), which needs root (effective uid {euid})"
            ));
        }
        if let Err(e) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
        {
            return Err(format!("cannot open /dev/fuse: {e} (modprobe fuse?)"));
        }
        let probe = std::env::temp_dir().join(format!(
            "powerfs-probe-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&probe)
            .map_err(|e| format!("cannot make {}: {e}", probe.display()))?;
        let res = PowerFs::mount(&probe)
            .and_then(|fs| {
                std::fs::write(probe.join("probe"), b"x")?;
                fs.unmount()
            })
            .map_err(|e| format!("cannot mount a FUSE file system here: {e}"));
        let _ = std::fs::remove_dir(&probe);
        res
    }
}

impl Drop for PowerFs {
    fn drop(&mut self) {
        let _ = self.unmount_inner();
    }
}

/// A busy mount: abort its connection (a forced unmount does that on
/// FUSE; the FUSE thread then ends) and unmount it lazily.
fn abort_and_detach(path: &Path) {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return;
    };
    for flags in [libc::MNT_FORCE, libc::MNT_DETACH] {
        // SAFETY: `c` is a NUL-terminated path that outlives the call;
        // umount2 reads it and touches no other memory of ours.
        unsafe {
            libc::umount2(c.as_ptr(), flags);
        }
    }
}
