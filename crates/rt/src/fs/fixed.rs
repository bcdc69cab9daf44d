//! Registered buffers for file I/O: one page-aligned region cut into equal
//! buffers and registered with the runtime's ring (`IORING_REGISTER_BUFFERS`),
//! so reads and writes from them go as `READ_FIXED`/`WRITE_FIXED` and the
//! kernel does not pin and unpin their pages on every operation. Aligned
//! to 4096 bytes, they also serve `O_DIRECT`. On epoll the same pool hands
//! out the same aligned buffers, used with plain `pread`/`pwrite`.
//!
//! A ring has one buffer table: a runtime holds at most one pool at a time
//! (a second `FixedBufPool::new` is an `AlreadyExists` error); clone the
//! pool to share it. The table is unregistered when the pool and every
//! buffer taken from it are gone.
//!
//! ```
//! use ringkit::fs::{FixedBufPool, OpenOptions};
//! ringkit::run(async {
//!     let dir = tempfile_dir()?;
//!     let f = OpenOptions::new().read(true).write(true).create(true)
//!         .open(dir.join("data")).await?;
//!     let pool = FixedBufPool::new(4, 4096)?;
//!     let mut buf = pool.get().await;
//!     buf.as_mut_capacity()[..5].copy_from_slice(b"fixed");
//!     buf.set_len(5);
//!     f.write_at(buf, 0).await.0?;
//!     let (n, buf) = f.read_at(pool.get().await, 0).await;
//!     assert_eq!(&buf.as_slice()[..n?], b"fixed");
//!     std::fs::remove_dir_all(&dir)?;
//!     Ok::<_, std::io::Error>(())
//! })??;
//! # fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
//! #     let d = std::env::temp_dir().join(format!("ringkit-fixed-doc-{}", std::process::id()));
//! #     std::fs::create_dir_all(&d)?;
//! #     Ok(d)
//! # }
//! # Ok::<(), std::io::Error>(())
//! ```

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::rc::Rc;
use std::task::{Poll, Waker};

use crate::buf::{IoBuf, IoBufMut};
use crate::context::try_with_ctx;

/// Alignment of every buffer (and of the region): a page, which covers
/// every device's logical block size for `O_DIRECT`.
const ALIGN: usize = 4096;

/// A pool of registered, page-aligned buffers of one size. Not `Send`;
/// clones share the pool.
#[derive(Clone, Debug)]
pub struct FixedBufPool {
    inner: Rc<Inner>,
}

#[derive(Debug)]
struct Inner {
    // INVARIANT: `base` comes from `alloc_zeroed(layout)`, owned here, freed
    // in `Drop` only (after the table is unregistered).
    base: *mut u8,
    layout: std::alloc::Layout,
    size: usize,
    free: RefCell<Vec<u16>>,
    waiters: RefCell<VecDeque<Waker>>,
    /// The serial of the runtime whose ring holds the table (`None` on
    /// epoll: nothing registered).
    registered_on: Option<u64>,
}

impl FixedBufPool {
    /// `count` buffers of `size` bytes (a multiple of 4096), registered
    /// with the current runtime's ring. Errors: outside a runtime, a bad
    /// size or count (`InvalidInput`), a runtime that already has a pool
    /// (`AlreadyExists`), or the kernel's refusal (for instance `ENOMEM`
    /// past `RLIMIT_MEMLOCK` for an unprivileged process).
    pub fn new(count: u16, size: usize) -> io::Result<FixedBufPool> {
        release_pending();
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        if count == 0 || size == 0 || size % ALIGN != 0 || size > 1 << 30 {
            return Err(invalid(format!(
                "FixedBufPool: {count} buffers of {size} bytes: want at least one buffer, \
                 of a multiple of {ALIGN} bytes up to 1 GiB"
            )));
        }
        let total = size
            .checked_mul(usize::from(count))
            .ok_or_else(|| invalid("FixedBufPool: size too large".into()))?;
        let layout = std::alloc::Layout::from_size_align(total, ALIGN)
            .map_err(|e| invalid(format!("FixedBufPool: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let mut inner = Inner {
            base,
            layout,
            size,
            free: RefCell::new((0..count).rev().collect()),
            waiters: RefCell::default(),
            registered_on: None,
        };
        let iovecs: Vec<libc::iovec> = (0..usize::from(count))
            .map(|i| libc::iovec {
                // SAFETY: `i * size` is inside the region of `count * size` bytes.
                iov_base: unsafe { base.add(i * size) }.cast(),
                iov_len: size,
            })
            .collect();
        let serial = try_with_ctx(|rt| rt.serial);
        let registered = crate::driver::current::try_driver(|d, _| {
            // SAFETY: the region lives until `Inner::drop`, which
            // unregisters the table first while this runtime lives (and
            // the ring is closed with the runtime otherwise).
            unsafe { d.register_buffers(&iovecs) }
        })
        .zip(serial)
        .map(|(r, serial)| r.map(|r| (r, serial)))
        .ok_or_else(|| io::Error::other("FixedBufPool::new outside a ringkit runtime"))?;
        match registered {
            Ok((true, serial)) => inner.registered_on = Some(serial),
            Ok((false, _)) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "this runtime's ring already has registered buffers \
                     (one FixedBufPool per runtime: clone it to share it)",
                ))
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("registering {count} buffers of {size} bytes with the ring: {e}"),
                ))
            }
        }
        Ok(FixedBufPool {
            inner: Rc::new(inner),
        })
    }

    /// A free buffer (length 0), if one is free now.
    pub fn try_get(&self) -> Option<FixedBuf> {
        let index = self.inner.free.borrow_mut().pop()?;
        Some(FixedBuf {
            pool: self.inner.clone(),
            index,
            len: 0,
        })
    }

    /// A free buffer (length 0), waiting for one to come back if all are
    /// taken.
    pub async fn get(&self) -> FixedBuf {
        poll_fn(|cx| match self.try_get() {
            Some(b) => Poll::Ready(b),
            None => {
                self.inner
                    .waiters
                    .borrow_mut()
                    .push_back(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    /// Bytes per buffer.
    pub fn buf_size(&self) -> usize {
        self.inner.size
    }

    /// Whether the buffers are registered with a ring (io_uring), so file
    /// I/O from them goes as `READ_FIXED`/`WRITE_FIXED`.
    pub fn is_registered(&self) -> bool {
        self.inner.registered_on.is_some()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let region = Region {
            base: self.base,
            layout: self.layout,
            registered_on: self.registered_on,
        };
        // The last buffer often goes while the driver is busy (a late
        // completion of a dropped read, the runtime's shutdown): then the
        // region waits for the next chance (see `Region::release`).
        if let Err(r) = region.release() {
            PENDING.with(|p| p.borrow_mut().push(r));
        }
    }
}

/// A pool's memory, to be freed once no ring's table names it.
#[derive(Debug)]
struct Region {
    base: *mut u8,
    layout: std::alloc::Layout,
    registered_on: Option<u64>,
}

thread_local! {
    /// Regions whose ring was busy when their pool went.
    static PENDING: RefCell<Vec<Region>> = const { RefCell::new(Vec::new()) };
}

impl Region {
    /// Free the region if no ring can still use it: it was never
    /// registered, its runtime is gone (the ring, and its table, with it),
    /// or its ring is free to unregister now. `Err(self)` otherwise.
    fn release(self) -> Result<(), Region> {
        if let Some(serial) = self.registered_on {
            let current = match try_with_ctx(|rt| rt.serial) {
                None => None,
                Some(s) if s != serial => Some(Some(true)),
                Some(_) => Some(
                    crate::driver::current::hand_off(|d, _| d.unregister_buffers().is_ok()).ok(),
                ),
            };
            match current {
                // No runtime on this thread: the one that held the table
                // may be shutting down with its ring still open.
                None | Some(None) | Some(Some(false)) => return Err(self),
                Some(Some(true)) => {}
            }
        }
        // SAFETY: allocated with this layout by `FixedBufPool::new`, freed
        // once: no buffer is left and no ring's table names it.
        unsafe { std::alloc::dealloc(self.base, self.layout) };
        Ok(())
    }
}

/// Free the regions left pending, where that is now safe.
fn release_pending() {
    let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    let left: Vec<Region> = pending
        .into_iter()
        .filter_map(|r| r.release().err())
        .collect();
    PENDING.with(|p| p.borrow_mut().extend(left));
}

/// A buffer of a [`FixedBufPool`]: page-aligned, registered with the ring,
/// back in its pool when dropped. Its bytes past [`len`](Self::len) keep
/// whatever an earlier user left there.
#[derive(Debug)]
pub struct FixedBuf {
    pool: Rc<Inner>,
    index: u16,
    len: usize,
}

impl FixedBuf {
    fn ptr(&self) -> *mut u8 {
        // SAFETY: `index < count`, so the offset is inside the region.
        unsafe { self.pool.base.add(usize::from(self.index) * self.pool.size) }
    }

    /// The data bytes (the first [`len`](Self::len)).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the buffer is ours alone (its index left the free list)
        // and all of it is initialised (zeroed at allocation).
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }
    }

    /// The whole buffer, to fill; then [`set_len`](Self::set_len).
    pub fn as_mut_capacity(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.pool.size) }
    }

    /// How many bytes hold data (what a write sends).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte holds data.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.pool.size
    }

    /// Set how many bytes hold data (at most the capacity).
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.pool.size);
    }
}

impl Drop for FixedBuf {
    fn drop(&mut self) {
        self.pool.free.borrow_mut().push(self.index);
        // Wake every waiter: one that gave up (its future dropped) must not
        // swallow the wake of one still waiting; the losers wait again.
        let waiters = std::mem::take(&mut *self.pool.waiters.borrow_mut());
        for w in waiters {
            w.wake();
        }
    }
}

// SAFETY: the memory is the pool's, kept alive by the `Rc` this value
// holds; it does not move when the value does.
unsafe impl IoBuf for FixedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn bytes_total(&self) -> usize {
        self.pool.size
    }
    fn fixed_index(&self) -> Option<u16> {
        // Only on the ring that holds the table.
        let serial = self.pool.registered_on?;
        try_with_ctx(|rt| rt.serial == serial)
            .unwrap_or(false)
            .then_some(self.index)
    }
}

// SAFETY: the whole buffer is writable and initialised.
unsafe impl IoBufMut for FixedBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr()
    }
    unsafe fn set_init(&mut self, n: usize) {
        self.len = n.min(self.pool.size);
    }
}
