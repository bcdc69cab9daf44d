//! The test file: created, filled with pseudo-random bytes, dropped from
//! the page cache, described (filesystem, device), removed on drop.

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use std::os::fd::AsRawFd;

use super::job::{Job, Rw};
use crate::harness::latency::now_ns;
use crate::harness::rng::Rng;

/// The test file, removed on drop.
#[derive(Debug)]
pub struct TestFile {
    path: PathBuf,
}

impl TestFile {
    /// Create `size` bytes of pseudo-random data under `dir`, fsync them and
    /// drop them from the page cache.
    pub fn create(dir: &Path, size: u64) -> io::Result<TestFile> {
        use std::io::Write;
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!(
            "ringkit-file-{}-{}.dat",
            std::process::id(),
            now_ns()
        ));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        let t = TestFile { path };
        let mut rng = Rng::new(now_ns());
        let mut chunk = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            for w in chunk.chunks_exact_mut(8) {
                w.copy_from_slice(&rng.next_u64().to_ne_bytes());
            }
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        f.sync_all()?;
        // SAFETY: a valid fd; advice only.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        Ok(t)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Filesystem type and block device of `path`.
// `f_type` is i64 here but i32 on some architectures: keep the cast.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn describe(path: &Path) -> (String, String) {
    use std::os::unix::fs::MetadataExt;
    let fs = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .ok()
        .and_then(|c| {
            // SAFETY: all-zero is a valid statfs.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            // SAFETY: a NUL-terminated path and a writable statfs.
            (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0).then_some(st.f_type)
        })
        .map_or_else(
            || "unknown".to_string(),
            |t| match t as i64 {
                0xEF53 => "ext4".into(),
                0x5846_5342 => "xfs".into(),
                0x9123_683E => "btrfs".into(),
                0x0102_1994 => "tmpfs".into(),
                0x794c_7630 => "overlayfs".into(),
                other => format!("fs magic {other:#x}"),
            },
        );
    let dev = std::fs::metadata(path).map_or_else(
        |_| "unknown".into(),
        |m| {
            let d = m.dev();
            let (maj, min) = (libc::major(d), libc::minor(d));
            let name = std::fs::read_to_string(format!("/sys/dev/block/{maj}:{min}/uevent"))
                .ok()
                .and_then(|u| {
                    u.lines()
                        .find_map(|l| l.strip_prefix("DEVNAME=").map(|n| format!("/dev/{n}")))
                })
                .unwrap_or_else(|| "no block device".into());
            format!("{name} ({maj}:{min})")
        },
    );
    (fs, dev)
}

pub(crate) fn open_std(path: &Path, job: &Job) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(job.rw.is_write())
        .custom_flags(if job.direct { libc::O_DIRECT } else { 0 })
        .open(path)
        .map_err(|e| {
            if job.direct && e.raw_os_error() == Some(libc::EINVAL) {
                crate::harness::err::unsupported(format!(
                    "O_DIRECT refused on {}: {e}",
                    path.display()
                ))
            } else {
                e
            }
        })
}

/// Can this file be read with IOPOLL? One `O_DIRECT` read of `bs` bytes on
/// an IOPOLL ring.
pub fn probe_iopoll(path: &Path, bs: u32) -> Result<(), String> {
    let job = Job {
        rw: Rw::RandRead,
        bs,
        qd: 1,
        direct: true,
        batch: 1,
    };
    let f = open_std(path, &job).map_err(|e| e.to_string())?;
    crate::raw::file::probe_iopoll(f.as_raw_fd(), bs)
}
