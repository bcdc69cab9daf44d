//! Files.
//!
//! On io_uring every call is one SQE, except a stat of an open descriptor
//! ([`fd_metadata`], [`File::metadata`]), made in place because the kernel
//! would hand it to an io-wq thread. On epoll, files have no readiness, so
//! each call runs its syscall inline on the runtime thread (like fio's psync
//! engine): simple and honest, but a slow disk stalls the thread's other tasks.
//!
//! `O_DIRECT` ([`OpenOptions::direct`]) needs buffers, offsets and lengths
//! aligned to the device's logical block size: use [`crate::buf::AlignedBuf`],
//! or a [`FixedBuf`] from a [`FixedBufPool`] (registered with the ring: reads
//! and writes from it go as `READ_FIXED`/`WRITE_FIXED`).
//!
//! For storage engines: [`File::write_at_sync`] (a write and its
//! `fdatasync` as one submission, a short write never acknowledged),
//! [`File::write_at_dsync`] (one `RWF_DSYNC` write, durable over its own
//! range as it returns), [`File::allocate`] (`fallocate`), [`File::read_many_at`] (many ranges
//! in one submission).
//!
//! ```
//! use ringkit::fs::OpenOptions;
//! ringkit::run(async {
//!     let dir = std::env::temp_dir().join(format!("ringkit-doc-{}", std::process::id()));
//!     std::fs::create_dir_all(&dir)?;
//!     let path = dir.join("log");
//!     let f = OpenOptions::new()
//!         .read(true)
//!         .write(true)
//!         .create(true)
//!         .open(&path)
//!         .await?;
//!     f.write_all_at(&b"hello, disk"[..], 0).await.0?;
//!     f.sync_data().await?; // durable before we go on
//!     let (n, buf) = f.read_at(Vec::with_capacity(64), 7).await;
//!     assert_eq!(&buf[..n?], b"disk");
//!     std::fs::remove_dir_all(&dir)?;
//!     Ok::<_, std::io::Error>(())
//! })??;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::buf::{IoBuf, IoBufMut};
use crate::driver::op::close::Close;
use crate::driver::op::fsync::Fsync;
use crate::driver::op::open::{Open, Open2};
use crate::driver::op::read_at::ReadAt;
use crate::driver::op::readv::Readv;
use crate::driver::op::statx::Statx;
use crate::driver::op::write_at::WriteAt;
use crate::driver::op::writev::Writev;
use crate::driver::Op;

mod durable;
mod fixed;
pub mod hook;
mod names;
mod short_buf;
pub use fixed::{FixedBuf, FixedBufPool};
pub use names::{create_dir, remove_dir, remove_file, rename, sync_dir, write_replace};

use hook::{Fault, FsOp};

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// How to open a file, like `std::fs::OpenOptions`.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    direct: bool,
    mode: Option<u32>,
}

impl OpenOptions {
    /// Nothing set.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }
    /// Open for reading.
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }
    /// Open for writing.
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }
    /// Append (`O_APPEND`).
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.append = v;
        self
    }
    /// Truncate (`O_TRUNC`).
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }
    /// Create if missing (`O_CREAT`).
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }
    /// Create, failing if it exists (`O_CREAT|O_EXCL`).
    pub fn create_new(&mut self, v: bool) -> &mut Self {
        self.create_new = v;
        self
    }
    /// Bypass the page cache (`O_DIRECT`).
    pub fn direct(&mut self, v: bool) -> &mut Self {
        self.direct = v;
        self
    }
    /// Permission bits for a created file (default 0o644).
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = Some(mode);
        self
    }

    fn flags(&self) -> io::Result<i32> {
        let mut f = match (self.read, self.write || self.append) {
            (true, false) => libc::O_RDONLY,
            (false, true) => libc::O_WRONLY,
            (true, true) => libc::O_RDWR,
            (false, false) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "open needs read, write or append",
                ))
            }
        };
        if self.append {
            f |= libc::O_APPEND;
        }
        if self.truncate {
            f |= libc::O_TRUNC;
        }
        if self.create {
            f |= libc::O_CREAT;
        }
        if self.create_new {
            f |= libc::O_CREAT | libc::O_EXCL;
        }
        if self.direct {
            f |= libc::O_DIRECT;
        }
        Ok(f)
    }

    /// Open `path`.
    pub async fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let path = path.as_ref();
        let op = FsOp::Open {
            path,
            create: self.create || self.create_new,
            truncate: self.truncate,
            write: self.write || self.append,
        };
        let named =
            |e: io::Error| io::Error::new(e.kind(), format!("open {}: {e}", path.display()));
        hook::before(&op).map_err(|f| named(f.into_error()))?;
        let res = Op::new(Open::new(
            cpath(path)?,
            self.flags()?,
            self.mode.unwrap_or(0o644),
        ))
        .await
        .map(|fd| fd.into_raw_fd());
        hook::after(&op, &res, |&fd| fd as u64);
        Ok(File {
            fd: res.map_err(named)?,
        })
    }
}

/// File metadata from `statx`.
#[derive(Debug, Clone, Copy)]
pub struct Metadata {
    stx: libc::statx,
}

impl Metadata {
    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.stx.stx_size
    }
    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// File type and permission bits (`st_mode`).
    pub fn mode(&self) -> u32 {
        u32::from(self.stx.stx_mode)
    }
    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.mode() & libc::S_IFMT == libc::S_IFREG
    }
    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.mode() & libc::S_IFMT == libc::S_IFDIR
    }
    /// Last modification time.
    pub fn modified(&self) -> SystemTime {
        let t = self.stx.stx_mtime;
        let nanos = Duration::from_nanos(u64::from(t.tv_nsec));
        if t.tv_sec >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(t.tv_sec as u64) + nanos
        } else {
            // Before 1970: tv_sec is negative and tv_nsec counts forward from it.
            SystemTime::UNIX_EPOCH - Duration::from_secs(t.tv_sec.unsigned_abs()) + nanos
        }
    }
    /// Names the file has (hard links).
    pub fn nlink(&self) -> u32 {
        self.stx.stx_nlink
    }
    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.stx.stx_ino
    }
    /// Device the file is on (`st_dev`).
    pub fn dev(&self) -> u64 {
        libc::makedev(self.stx.stx_dev_major, self.stx.stx_dev_minor)
    }
    /// Preferred I/O block size.
    pub fn blksize(&self) -> u32 {
        self.stx.stx_blksize
    }
}

/// The alignment `O_DIRECT` I/O on a file needs ([`File::dio_alignment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DioAlignment {
    /// Of a buffer's address, in bytes.
    pub memory: u32,
    /// Of a file offset and a length, in bytes.
    pub offset: u32,
}

/// Metadata of the file at `path`.
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    let stx = Op::new(Statx::path(cpath(path.as_ref())?)).await?;
    Ok(Metadata { stx })
}

/// `RESOLVE_*` flags of [`open_at`] (`linux/openat2.h`).
pub mod resolve {
    /// Stay on the mount of the directory.
    pub const NO_XDEV: u64 = 0x01;
    /// Refuse `/proc/*/fd`-style magic links.
    pub const NO_MAGICLINKS: u64 = 0x02;
    /// Refuse every symlink.
    pub const NO_SYMLINKS: u64 = 0x04;
    /// Refuse any resolution that would leave the directory (`EXDEV`).
    pub const BENEATH: u64 = 0x08;
    /// Resolve as if the directory were `/`.
    pub const IN_ROOT: u64 = 0x10;
}

/// Open `path` relative to the directory `dir` with `openat2(2)`, the
/// lookup restricted by `resolve` ([`resolve`] flags); `flags` are `O_*`
/// (`O_CLOEXEC` is added). io_uring: `IORING_OP_OPENAT2` (a lookup served
/// from the dentry cache completes inline, without a worker thread); epoll:
/// the syscall inline. `dir` must stay open until this completes. `EAGAIN`
/// (a rename raced a `BENEATH` lookup) is returned as is: try again.
pub async fn open_at(
    dir: BorrowedFd<'_>,
    path: impl AsRef<Path>,
    flags: i32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let path = cpath(path.as_ref())?;
    Op::new(Open2::new(dir.as_raw_fd(), path, flags, resolve)).await
}

/// Metadata of an open descriptor of any kind, `O_PATH` included
/// (`statx` with `AT_EMPTY_PATH`), made in place on both backends: the
/// kernel hands every `IORING_OP_STATX` to an io-wq worker thread, two
/// thread switches for a call that only copies the in-memory inode's
/// attributes (a network filesystem may ask its server, as `fstat` would).
/// [`metadata`] of a path (a walk that may read from disk) stays on the
/// ring.
pub async fn fd_metadata(fd: BorrowedFd<'_>) -> io::Result<Metadata> {
    let stx = Op::new(Statx::fd(fd.as_raw_fd())).await?;
    Ok(Metadata { stx })
}

/// Close `fd` (`IORING_OP_CLOSE` on io_uring; epoll: inline) and report the
/// error, if any.
pub async fn close(fd: OwnedFd) -> io::Result<()> {
    Op::new(Close {
        fd: fd.into_raw_fd(),
    })
    .await
}

/// An open file. Reads and writes are positional (`read_at`/`write_at`).
#[derive(Debug)]
pub struct File {
    fd: RawFd,
}

impl File {
    /// Open read-only.
    pub async fn open(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path).await
    }

    /// Create (or truncate) for writing.
    pub async fn create(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .await
    }

    /// Read up to `buf`'s capacity at `offset` (into its start): `Ok(n)`
    /// leaves exactly the `n` bytes read in it (a `Vec`'s length becomes
    /// `n`). `Ok(0)` is end of file; a buffer with no capacity is an
    /// `InvalidInput` error.
    pub async fn read_at<B: IoBufMut>(&self, buf: B, offset: u64) -> (io::Result<usize>, B) {
        let op = FsOp::Read {
            fd: self.fd,
            offset,
            len: buf.bytes_total(),
        };
        if let Err(f) = hook::before(&op) {
            return (Err(f.into_error()), buf);
        }
        let buf_index = buf.fixed_index();
        let (res, mut buf) = Op::new(ReadAt {
            fd: self.fd,
            buf,
            offset,
            buf_index,
        })
        .await;
        self.read_seen(offset, &res, &mut buf);
        (res, buf)
    }

    /// Show the hook, if any, the bytes a read at `offset` returned.
    fn read_seen<B: IoBufMut>(&self, offset: u64, res: &io::Result<usize>, buf: &mut B) {
        if let Ok(n) = *res {
            if n > 0 && hook::installed() {
                // SAFETY: the read left `n` initialised bytes at the
                // buffer's start, ours alone now that the op completed.
                let data = unsafe { std::slice::from_raw_parts_mut(buf.stable_mut_ptr(), n) };
                hook::read_done(self.fd, offset, data);
            }
        }
    }

    /// Fill `buf` from its start to its capacity with the file's bytes from
    /// `offset`, reading as often as it takes: a `Vec` comes back with
    /// length = capacity (which can be more than was asked for: to read
    /// exactly `n` bytes, pass `buf.slice(..n)`, see [`crate::buf::Slice`]).
    /// The end of the file first is `UnexpectedEof`, with the bytes there
    /// were in the buffer.
    pub async fn read_exact_at<B: IoBufMut>(&self, buf: B, offset: u64) -> (io::Result<()>, B) {
        use crate::buf::IoBufExt;
        let total = buf.bytes_total();
        let (mut buf, mut filled) = (buf, 0);
        while filled < total {
            let (r, s) = self
                .read_at(buf.slice(filled..), offset + filled as u64)
                .await;
            buf = s.into_inner();
            match r {
                Ok(0) => {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("end of file after {filled} of {total} bytes from offset {offset}"),
                    );
                    return (Err(e), buf);
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Write `buf` at `offset`; returns how much was written.
    pub async fn write_at<B: IoBuf>(&self, buf: B, offset: u64) -> (io::Result<usize>, B) {
        let fd = self.fd;
        let fault = hook::before(&FsOp::Write {
            fd,
            offset,
            data: buf.init_slice(),
        });
        let (res, buf) = match fault {
            Ok(()) => self.write_op(buf, offset, false).await,
            Err(Fault::Short(n)) => {
                // Write only the first `n` bytes, for real (from aligned
                // memory, which an `O_DIRECT` file takes).
                let part = &buf.init_slice()[..n.min(buf.bytes_init())];
                if part.is_empty() {
                    (Ok(0), buf)
                } else {
                    (
                        self.write_op(aligned_copy(part), offset, false).await.0,
                        buf,
                    )
                }
            }
            Err(Fault::Fail(e) | Fault::FailSync(e)) => return (Err(e), buf),
        };
        let data = match &res {
            Ok(n) => &buf.init_slice()[..*n],
            Err(_) => &[],
        };
        hook::after(&FsOp::Write { fd, offset, data }, &res, |&n| n as u64);
        (res, buf)
    }

    /// One positional write, `RWF_DSYNC` when `dsync`; a registered
    /// [`FixedBuf`] goes as `WRITE_FIXED`.
    pub(crate) async fn write_op<B: IoBuf>(
        &self,
        buf: B,
        offset: u64,
        dsync: bool,
    ) -> (io::Result<usize>, B) {
        let buf_index = buf.fixed_index();
        Op::new(WriteAt {
            fd: self.fd,
            buf,
            offset,
            buf_index,
            dsync,
        })
        .await
    }

    /// Write all of `buf` at `offset`: after a short write the rest is
    /// copied into page-aligned memory and written, as often as it takes.
    pub async fn write_all_at<B: IoBuf>(&self, buf: B, offset: u64) -> (io::Result<()>, B) {
        let (res, buf) = self.write_at(buf, offset).await;
        let mut done = match res {
            Ok(n) => n,
            Err(e) => return (Err(e), buf),
        };
        while done < buf.bytes_init() {
            // SAFETY: `done..bytes_init` is initialised memory of `buf`.
            let rest = aligned_copy(unsafe {
                std::slice::from_raw_parts(buf.stable_ptr().add(done), buf.bytes_init() - done)
            });
            let (res, _) = self.write_at(rest, offset + done as u64).await;
            match res {
                Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
                Ok(n) => done += n,
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Read the whole file from offset 0.
    pub async fn read_to_end(&self) -> io::Result<Vec<u8>> {
        let size = self.metadata().await?.len() as usize;
        let mut out = Vec::with_capacity(size.max(4096));
        let mut chunk = Vec::with_capacity(size.clamp(4096, 1 << 20));
        loop {
            chunk.clear();
            let (res, c) = self.read_at(chunk, out.len() as u64).await;
            chunk = c;
            match res? {
                0 => return Ok(out),
                _ => out.extend_from_slice(&chunk),
            }
        }
    }

    /// Vectored read at `offset` (`preadv`), filling the buffers in order.
    pub async fn readv_at<B: IoBufMut>(
        &self,
        bufs: Vec<B>,
        offset: u64,
    ) -> (io::Result<usize>, Vec<B>) {
        Op::new(Readv::new(self.fd, bufs, offset)).await
    }

    /// Vectored write at `offset` (`pwritev`).
    pub async fn writev_at<B: IoBuf>(
        &self,
        bufs: Vec<B>,
        offset: u64,
    ) -> (io::Result<usize>, Vec<B>) {
        if hook::current().is_none() {
            return Op::new(Writev::new(self.fd, bufs, offset)).await;
        }
        // Hooked: the hook sees (and may fault) one write of the joined bytes.
        let joined: Vec<u8> = bufs.iter().flat_map(|b| b.init_slice()).copied().collect();
        let (res, _) = self.write_at(joined, offset).await;
        (res, bufs)
    }

    /// `fsync`.
    pub async fn sync_all(&self) -> io::Result<()> {
        self.sync(false).await
    }

    /// `fdatasync`.
    pub async fn sync_data(&self) -> io::Result<()> {
        self.sync(true).await
    }

    async fn sync(&self, data_only: bool) -> io::Result<()> {
        let op = FsOp::Sync {
            fd: self.fd,
            data_only,
        };
        hook::before(&op).map_err(Fault::into_error)?;
        let res = Op::new(if data_only {
            Fsync::Data(self.fd)
        } else {
            Fsync::All(self.fd)
        })
        .await;
        hook::after(&op, &res, |_| 0);
        res
    }

    /// `sync_file_range` with `SYNC_FILE_RANGE_*` flags.
    pub async fn sync_range(&self, offset: u64, len: u32, flags: u32) -> io::Result<()> {
        Op::new(Fsync::Range {
            fd: self.fd,
            offset,
            len,
            flags,
        })
        .await
    }

    /// Metadata via `statx` of the descriptor, in place on both backends
    /// (see [`fd_metadata`]).
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let stx = Op::new(Statx::fd(self.fd)).await?;
        Ok(Metadata { stx })
    }

    /// What `O_DIRECT` asks of this file (`statx` `STATX_DIOALIGN`, Linux
    /// 6.1; asked apart from [`metadata`](Self::metadata), which every
    /// static-file request makes, so that one never pays for it): `None`
    /// when the kernel does not say, or the file takes no direct I/O (the
    /// kernel reports 0).
    pub async fn dio_alignment(&self) -> io::Result<Option<DioAlignment>> {
        let stx = Op::new(Statx::fd(self.fd).mask(libc::STATX_DIOALIGN)).await?;
        let told = stx.stx_mask & libc::STATX_DIOALIGN != 0;
        Ok(
            (told && stx.stx_dio_offset_align != 0).then_some(DioAlignment {
                memory: stx.stx_dio_mem_align,
                offset: stx.stx_dio_offset_align,
            }),
        )
    }

    /// Close now and report the error, if any (dropping also closes, silently).
    pub async fn close(self) -> io::Result<()> {
        let fd = self.fd;
        std::mem::forget(self);
        let res = Op::new(Close { fd }).await;
        hook::closed(fd);
        res
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl From<std::os::fd::OwnedFd> for File {
    /// Adopt an open file descriptor (e.g. from `openat2`). It must be
    /// usable for the operations called on it (not `O_PATH` for reads).
    fn from(fd: std::os::fd::OwnedFd) -> File {
        File {
            fd: fd.into_raw_fd(),
        }
    }
}

impl From<File> for std::os::fd::OwnedFd {
    fn from(f: File) -> std::os::fd::OwnedFd {
        let fd = f.fd;
        std::mem::forget(f);
        // SAFETY: `f` owned `fd` and was forgotten, so ownership moves here.
        unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let fd = self.fd;
        hook::closed(fd);
        if crate::driver::current::try_driver(|d, m| d.close_fd(fd, m)).is_none() {
            // SAFETY: we own fd.
            unsafe { libc::close(fd) };
        }
    }
}

/// `bytes` in page-aligned memory: what is left of a short write goes from
/// here, so that an `O_DIRECT` file takes it (it refuses a `Vec`'s
/// unaligned memory with `EINVAL`). A short direct write stops on a block
/// boundary, so the rest starts on one too.
pub(crate) fn aligned_copy(bytes: &[u8]) -> crate::buf::AlignedBuf {
    let mut copy = crate::buf::AlignedBuf::new(bytes.len().max(1), 4096);
    copy.set_len(bytes.len());
    copy.as_mut_slice().copy_from_slice(bytes);
    copy
}
