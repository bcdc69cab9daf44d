//! What a storage engine needs beyond read and write: a write made durable
//! in one submission, preallocation, and many reads in one submission.

use std::future::{poll_fn, Future};
use std::io;
use std::task::Poll;

use super::aligned_copy;
use super::hook::{self, Fault, FsOp};
use super::short_buf::ShortBuf;
use super::File;
use crate::buf::{IoBuf, IoBufMut};
use crate::driver::op::fallocate::Fallocate;
use crate::driver::op::ftruncate::Ftruncate;
use crate::driver::op::read_at::ReadAt;
use crate::driver::op::write_sync;
use crate::driver::Op;

impl File {
    /// Write `buf` at `offset` and make it durable with `fdatasync`, as one
    /// submission: on io_uring a write linked to an `FSYNC`
    /// (`IORING_FSYNC_DATASYNC`) that posts one completion; on epoll
    /// `pwrite` then `fdatasync`.
    ///
    /// `Ok(n)` with `n` equal to the buffer's length: every byte is written
    /// and durable. `Ok(n)` with `n` smaller: a short write (a full disk, a
    /// file size limit) and **nothing was synced**: the sync is skipped, so
    /// it never vouches for bytes that were not written; write the rest
    /// and sync again (or use [`write_all_at_sync`](Self::write_all_at_sync)).
    /// A registered [`super::FixedBuf`] goes as `WRITE_FIXED`.
    pub async fn write_at_sync<B: IoBuf>(&self, buf: B, offset: u64) -> (io::Result<usize>, B) {
        let linked = crate::driver::current::try_driver(|d, _| d.links_hold()).unwrap_or(true);
        if !linked {
            // A kernel whose skipped links post more than one CQE: the
            // write, then (only after all of it) the sync.
            let len = buf.bytes_init();
            let (res, buf) = self.write_at(buf, offset).await;
            return match res {
                Ok(n) if n == len => (self.sync_data().await.map(|()| n), buf),
                other => (other, buf),
            };
        }
        if !hook::installed() {
            return self.linked_write_sync(buf, offset).await;
        }
        // Hooked (see `hook`): the same linked operation, seen as one
        // `FsOp::WriteSync`, a planted fault made as the kernel would.
        let fd = self.fd;
        let fault = hook::before(&FsOp::WriteSync {
            fd,
            offset,
            data: buf.init_slice(),
        });
        let len = buf.bytes_init();
        let (res, buf) = match fault {
            Ok(()) => self.linked_write_sync(buf, offset).await,
            Err(Fault::Short(n)) if n < len && is_direct(fd) => {
                // The kernel writes `n` bytes and cancels the sync. An
                // `O_DIRECT` write pins every page before it writes, so a
                // `ShortBuf` would fail whole (`EFAULT`): the first `n`
                // bytes go alone, unsynced, as the cancelled link leaves
                // them.
                let part = &buf.init_slice()[..n.min(len)];
                let res = if part.is_empty() {
                    Err(io::Error::from_raw_os_error(libc::EFAULT))
                } else {
                    self.write_op(aligned_copy(part), offset, false).await.0
                };
                (res, buf)
            }
            Err(Fault::Short(n)) => {
                // The kernel writes `n` bytes, faults on the unmapped rest
                // and cancels the sync.
                let res = match ShortBuf::new(buf.init_slice(), n) {
                    Ok(short) => self.linked_write_sync(short, offset).await.0,
                    Err(e) => Err(e),
                };
                (res, buf)
            }
            Err(Fault::FailSync(e)) => match self.linked_write_sync(buf, offset).await {
                (Ok(n), buf) if n == len => (Err(e), buf),
                other => other,
            },
            Err(Fault::Fail(e)) => return (Err(e), buf),
        };
        let data = match &res {
            Ok(n) => &buf.init_slice()[..*n],
            Err(_) => buf.init_slice(),
        };
        hook::after(&FsOp::WriteSync { fd, offset, data }, &res, |&n| n as u64);
        (res, buf)
    }

    /// The write linked to its sync, one submission on io_uring.
    async fn linked_write_sync<B: IoBuf>(&self, buf: B, offset: u64) -> (io::Result<usize>, B) {
        let buf_index = buf.fixed_index();
        write_sync::synced(Op::new(write_sync::write_sync(self.fd, buf, offset, buf_index)).await)
    }

    /// Write all of `buf` at `offset` and make it durable: `Ok(())` only
    /// once every byte is written and an `fdatasync` issued after the last
    /// of them succeeded. The common case is one submission
    /// ([`write_at_sync`](Self::write_at_sync)); after a short write the
    /// rest is written and synced again.
    pub async fn write_all_at_sync<B: IoBuf>(&self, buf: B, offset: u64) -> (io::Result<()>, B) {
        let len = buf.bytes_init();
        let (res, buf) = self.write_at_sync(buf, offset).await;
        let n = match res {
            Ok(n) if n == len => return (Ok(()), buf),
            Ok(n) => n,
            Err(e) => return (Err(e), buf),
        };
        let rest = aligned_copy(&buf.init_slice()[n..]);
        if let (Err(e), _) = self.write_all_at(rest, offset + n as u64).await {
            return (Err(e), buf);
        }
        (self.sync_data().await, buf)
    }

    /// Write `buf` at `offset` with `RWF_DSYNC`, one operation: when it
    /// returns `Ok(n)` the first `n` bytes are written **and durable**, as
    /// if `fdatasync` had run over that range (on an `O_DIRECT` file the
    /// kernel sends a FUA write where the device has one, else a cache
    /// flush after the write). A short write makes durable what it wrote.
    /// An error: the bytes may have been written and are not known
    /// durable. Unlike [`write_at_sync`](Self::write_at_sync) this vouches
    /// for this write's range only, not for earlier writes to the file.
    /// io_uring: a `WRITE` (`WRITE_FIXED`) with `RWF_DSYNC`; epoll:
    /// `pwritev2(2)`.
    pub async fn write_at_dsync<B: IoBuf>(&self, buf: B, offset: u64) -> (io::Result<usize>, B) {
        let fd = self.fd;
        let fault = hook::before(&FsOp::WriteDsync {
            fd,
            offset,
            data: buf.init_slice(),
        });
        let (res, buf) = match fault {
            Ok(()) => self.write_op(buf, offset, true).await,
            Err(Fault::Short(n)) => {
                // The kernel writes (and syncs) only the first `n` bytes:
                // copied into page-aligned memory, so an `O_DIRECT` file
                // takes them (a `Vec` was refused with `EINVAL`).
                let part = &buf.init_slice()[..n.min(buf.bytes_init())];
                if part.is_empty() {
                    (Ok(0), buf)
                } else {
                    (self.write_op(aligned_copy(part), offset, true).await.0, buf)
                }
            }
            Err(Fault::FailSync(e)) => {
                // The write reaches the file; its sync fails. The caller's
                // own buffer goes, so an `O_DIRECT` write keeps its
                // alignment (a copy into a `Vec` was refused, unseen).
                let (_, buf) = self.write_op(buf, offset, false).await;
                (Err(e), buf)
            }
            Err(Fault::Fail(e)) => return (Err(e), buf),
        };
        let data = match &res {
            Ok(n) => &buf.init_slice()[..*n],
            Err(_) => buf.init_slice(),
        };
        hook::after(&FsOp::WriteDsync { fd, offset, data }, &res, |&n| n as u64);
        (res, buf)
    }

    /// Write all of `buf` at `offset` with `RWF_DSYNC`
    /// ([`write_at_dsync`](Self::write_at_dsync)): `Ok(())` once every
    /// byte is written and durable. After a short write the rest goes the
    /// same way.
    pub async fn write_all_at_dsync<B: IoBuf>(&self, buf: B, offset: u64) -> (io::Result<()>, B) {
        let len = buf.bytes_init();
        let (res, buf) = self.write_at_dsync(buf, offset).await;
        let mut done = match res {
            Ok(n) if n == len => return (Ok(()), buf),
            Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
            Ok(n) => n,
            Err(e) => return (Err(e), buf),
        };
        while done < len {
            let rest = aligned_copy(&buf.init_slice()[done..]);
            match self.write_at_dsync(rest, offset + done as u64).await.0 {
                Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
                Ok(n) => done += n,
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Reserve `len` bytes from `offset` (`fallocate(2)`, mode 0): the
    /// blocks are allocated and the size grows to cover them, so later
    /// writes there cannot fail for want of space (on filesystems that do
    /// not copy on write). Reads of the range return zeros.
    pub async fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.fallocate(0, offset, len).await
    }

    /// Set the file's size to `len`, as `std::fs::File::set_len`: bytes
    /// past it are dropped, and an extension reads as zeros. One
    /// `IORING_OP_FTRUNCATE` on io_uring (Linux 6.9; in place on older
    /// kernels), the syscall inline on epoll. Not durable until synced.
    pub async fn set_len(&self, len: u64) -> io::Result<()> {
        let op = FsOp::SetLen { fd: self.fd, len };
        hook::before(&op).map_err(Fault::into_error)?;
        let res = Op::new(Ftruncate { fd: self.fd, len }).await;
        hook::after(&op, &res, |_| 0);
        res
    }

    /// `fallocate(2)` with `FALLOC_FL_*` `mode` bits (keep size, punch a
    /// hole, zero a range).
    pub async fn fallocate(&self, mode: i32, offset: u64, len: u64) -> io::Result<()> {
        let op = FsOp::Allocate {
            fd: self.fd,
            mode,
            offset,
            len,
        };
        hook::before(&op).map_err(Fault::into_error)?;
        let res = Op::new(Fallocate {
            fd: self.fd,
            mode,
            offset,
            len,
        })
        .await;
        hook::after(&op, &res, |_| 0);
        res
    }

    /// Read many ranges at once: each `(offset, buf)` is read as
    /// [`read_at`](Self::read_at) would, all submitted together (on
    /// io_uring one `io_uring_enter` takes every read), the results in the
    /// order given. Each result stands alone: one failing read does not
    /// stop the others. A [`hook`] sees each read as
    /// `read_at`'s.
    pub async fn read_many_at<B: IoBufMut>(
        &self,
        reads: Vec<(u64, B)>,
    ) -> Vec<(io::Result<usize>, B)> {
        // Each read's offset, and its result once it has one.
        type Done<B> = (u64, Option<(io::Result<usize>, B)>);
        let mut done: Vec<Done<B>> = Vec::with_capacity(reads.len());
        let mut ops: Vec<Option<Op<ReadAt<B>>>> = Vec::with_capacity(reads.len());
        for (offset, buf) in reads {
            let op = FsOp::Read {
                fd: self.fd,
                offset,
                len: buf.bytes_total(),
            };
            if let Err(f) = hook::before(&op) {
                done.push((offset, Some((Err(f.into_error()), buf))));
                ops.push(None);
                continue;
            }
            let buf_index = buf.fixed_index();
            done.push((offset, None));
            ops.push(Some(Op::new(ReadAt {
                fd: self.fd,
                buf,
                offset,
                buf_index,
            })));
        }
        poll_fn(|cx| {
            let mut pending = false;
            for (op, (_, out)) in ops.iter_mut().zip(done.iter_mut()) {
                if let Some(f) = op {
                    match std::pin::Pin::new(f).poll(cx) {
                        Poll::Ready(r) => {
                            *out = Some(r);
                            *op = None;
                        }
                        Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        done.into_iter()
            .map(|(offset, r)| {
                let (res, mut buf) = r.expect("every read completed");
                self.read_seen(offset, &res, &mut buf);
                (res, buf)
            })
            .collect()
    }
}

/// Whether `fd` was opened `O_DIRECT` (asked only where a fault is
/// planted).
fn is_direct(fd: std::os::fd::RawFd) -> bool {
    // SAFETY: F_GETFL reads the open file's status flags; no memory passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}
