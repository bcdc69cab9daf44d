//! Owned buffers for completion-based I/O.
//!
//! The kernel writes into a read buffer after the call that started the read
//! has returned, so an I/O call takes the buffer by value and gives it back
//! with the result: `let (res, buf) = stream.read(buf).await;`. While the
//! operation is in flight (even after its future was dropped) the runtime
//! owns the buffer; see [`crate::driver`] for the cancellation rules.
//!
//! - [`IoBuf`]: memory the kernel may read (writes, sends).
//! - [`IoBufMut`]: memory the kernel may write (reads, receives).
//! - [`AlignedBuf`]: page-aligned memory for `O_DIRECT`.
//! - [`crate::fs::FixedBuf`]: page-aligned and registered with the ring, for
//!   `O_DIRECT` without per-operation page pinning.
//! - [`BufPool`] / [`PooledBuf`]: reusable buffers that return to their pool on drop.
//! - [`RecvBuf`]: what a pooled read returns (a provided-buffer ring slot on
//!   io_uring, recycled on drop).
//! - [`Slice`] ([`IoBufExt::slice`]): part of a buffer as a buffer, to read
//!   into its free tail or write a part of it without a copy.
//!
//! After a read of `n` bytes a `Vec` holds exactly those `n` bytes (reads
//! fill from the start; its length becomes `n`), so it can be written back
//! or reused as is; a buffer with no capacity is an error, not an empty read.
//!
//! ```
//! use ringkit::buf::BufPool;
//! use ringkit::net::{TcpListener, TcpStream};
//! ringkit::run(async {
//!     let l = TcpListener::bind("127.0.0.1:0")?;
//!     let c = TcpStream::connect(l.local_addr()?).await?;
//!     let (s, _) = l.accept().await?;
//!     c.write_all(&b"0123456789"[..]).await.0?;
//!     // A buffer that held older, longer data holds only what was read.
//!     let old = b"older and longer".to_vec();
//!     let (n, buf) = s.read(old).await;
//!     assert_eq!((n?, &buf[..]), (10, &b"0123456789"[..]));
//!     // Pooled buffers go back to their pool when dropped.
//!     let pool = BufPool::new(4096, 8);
//!     c.write_all(&b"again"[..]).await.0?;
//!     let (n, b) = s.read(pool.get()).await;
//!     assert_eq!(&b[..n?], b"again");
//!     drop(b);
//!     assert_eq!(pool.idle(), 1);
//!     Ok::<_, std::io::Error>(())
//! })??;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::cell::RefCell;
use std::rc::Rc;

mod recv_buf;
mod slice;
pub use recv_buf::RecvBuf;
pub use slice::{IoBufExt, Slice};

/// A buffer the kernel may read from while an operation is in flight.
///
/// # Safety
/// `stable_ptr` must point to `bytes_init` initialised bytes that stay at the
/// same address, even when the value is moved, until it is dropped.
pub unsafe trait IoBuf: 'static {
    /// Pointer to the first byte.
    fn stable_ptr(&self) -> *const u8;
    /// Bytes holding data (what a write sends).
    fn bytes_init(&self) -> usize;
    /// Total capacity.
    fn bytes_total(&self) -> usize;

    /// io_uring: the index of the registered buffer (see
    /// [`crate::fs::FixedBufPool`]) this memory lies in, so that file reads
    /// and writes go as `READ_FIXED`/`WRITE_FIXED` (no page pinning per
    /// operation). `None`, the default, for ordinary memory. An index that
    /// is not the current ring's buffer holding this memory makes the
    /// kernel fail the operation (`EFAULT`); it never reaches other memory.
    fn fixed_index(&self) -> Option<u16> {
        None
    }

    /// The bytes holding data, as a slice.
    fn init_slice(&self) -> &[u8] {
        // SAFETY: the trait's contract: `stable_ptr` points to `bytes_init`
        // initialised bytes, alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.stable_ptr(), self.bytes_init()) }
    }
}

/// A buffer the kernel may write into while an operation is in flight.
///
/// # Safety
/// As for [`IoBuf`], and `stable_mut_ptr` must be valid for writes of
/// `bytes_total` bytes.
pub unsafe trait IoBufMut: IoBuf {
    /// Pointer to the first byte, for writing.
    fn stable_mut_ptr(&mut self) -> *mut u8;
    /// Record that the first `n` bytes now hold data, and only those: after
    /// a read of `n` bytes a `Vec` has length `n` exactly, whatever it held
    /// before (reads always fill from the start), so `read(buf)` followed
    /// by `write_all(buf)` sends what was read and nothing older. A type
    /// whose length is fixed (`Box<[u8]>`) keeps it: use `&buf[..n]`.
    ///
    /// # Safety
    /// The first `n` bytes must have been initialised.
    unsafe fn set_init(&mut self, n: usize);
}

// SAFETY: a Vec's heap block does not move when the Vec is moved.
unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
}

// SAFETY: as above; the capacity is writable memory owned by the Vec.
unsafe impl IoBufMut for Vec<u8> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: the caller guarantees the first `n` bytes are initialised
        // and `n <= capacity` (the kernel never writes past `bytes_total`).
        unsafe { self.set_len(n) };
    }
}

// SAFETY: a boxed slice's heap block does not move with the Box.
unsafe impl IoBuf for Box<[u8]> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.len()
    }
}

// SAFETY: the whole boxed slice is initialised, writable memory.
unsafe impl IoBufMut for Box<[u8]> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    unsafe fn set_init(&mut self, _n: usize) {}
}

// SAFETY: static memory never moves or goes away.
unsafe impl IoBuf for &'static [u8] {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.len()
    }
}

// SAFETY: static memory never moves or goes away.
unsafe impl IoBuf for &'static str {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
    fn bytes_total(&self) -> usize {
        self.len()
    }
}

/// Page-aligned, zeroed memory for `O_DIRECT` I/O (whose buffers, offsets and
/// lengths must be multiples of the device's logical block size).
#[derive(Debug)]
pub struct AlignedBuf {
    // INVARIANT: `ptr` comes from `alloc_zeroed(layout)` and is owned by us.
    ptr: *mut u8,
    layout: std::alloc::Layout,
    len: usize,
}

impl AlignedBuf {
    /// `cap` bytes aligned to `align` (a power of two, e.g. 4096). Panics on a
    /// bad layout or a zero size.
    pub fn new(cap: usize, align: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(cap, align).expect("bad layout");
        assert!(cap > 0, "AlignedBuf of zero bytes");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf {
            ptr,
            layout,
            len: cap,
        }
    }

    /// The data bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: INVARIANT; `len <= cap` bytes, all initialised (zeroed at allocation).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The data bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Set how many bytes count as data (at most the capacity).
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.layout.size());
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: INVARIANT: allocated with this layout and not freed before.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

// SAFETY: heap memory owned by the value; the pointer is stable across moves.
unsafe impl IoBuf for AlignedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn bytes_total(&self) -> usize {
        self.layout.size()
    }
}

// SAFETY: the whole allocation is writable and was zero-initialised.
unsafe impl IoBufMut for AlignedBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    unsafe fn set_init(&mut self, n: usize) {
        self.len = n.min(self.layout.size());
    }
}

/// A per-thread pool of equal-sized buffers. Not `Send`.
#[derive(Debug, Clone)]
pub struct BufPool {
    inner: Rc<RefCell<PoolInner>>,
}

#[derive(Debug)]
struct PoolInner {
    free: Vec<Vec<u8>>,
    buf_size: usize,
    max_free: usize,
}

impl BufPool {
    /// A pool of `buf_size`-byte buffers keeping at most `max_free` idle ones.
    pub fn new(buf_size: usize, max_free: usize) -> BufPool {
        BufPool {
            inner: Rc::new(RefCell::new(PoolInner {
                free: Vec::new(),
                buf_size,
                max_free,
            })),
        }
    }

    /// An empty buffer (len 0, capacity `buf_size`), reused when one is idle.
    pub fn get(&self) -> PooledBuf {
        let mut inner = self.inner.borrow_mut();
        let buf = inner
            .free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(inner.buf_size));
        PooledBuf {
            buf: Some(buf),
            pool: self.inner.clone(),
        }
    }

    /// Idle buffers in the pool.
    pub fn idle(&self) -> usize {
        self.inner.borrow().free.len()
    }
}

/// A buffer from a [`BufPool`]; it goes back to the pool when dropped.
#[derive(Debug)]
pub struct PooledBuf {
    // INVARIANT: `Some` until drop.
    buf: Option<Vec<u8>>,
    pool: Rc<RefCell<PoolInner>>,
}

impl PooledBuf {
    fn vec(&self) -> &Vec<u8> {
        self.buf.as_ref().expect("PooledBuf used after drop")
    }
    fn vec_mut(&mut self) -> &mut Vec<u8> {
        self.buf.as_mut().expect("PooledBuf used after drop")
    }
    /// Clear the data (keeps the capacity).
    pub fn clear(&mut self) {
        self.vec_mut().clear();
    }
}

impl std::ops::Deref for PooledBuf {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        self.vec()
    }
}

impl std::ops::DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        self.vec_mut()
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(mut b) = self.buf.take() {
            let mut pool = self.pool.borrow_mut();
            if pool.free.len() < pool.max_free && b.capacity() >= pool.buf_size {
                b.clear();
                pool.free.push(b);
            }
        }
    }
}

// SAFETY: delegates to the inner Vec, whose heap block is stable.
unsafe impl IoBuf for PooledBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.vec().as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.vec().len()
    }
    fn bytes_total(&self) -> usize {
        self.vec().capacity()
    }
}

// SAFETY: delegates to the inner Vec.
unsafe impl IoBufMut for PooledBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.vec_mut().as_mut_ptr()
    }
    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: forwarded to the caller.
        unsafe { self.vec_mut().set_init(n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reuses_buffers() {
        let pool = BufPool::new(64, 4);
        let mut a = pool.get();
        a.extend_from_slice(b"hello");
        let ptr = a.as_ptr();
        drop(a);
        assert_eq!(pool.idle(), 1);
        let b = pool.get();
        assert_eq!(b.as_ptr(), ptr);
        assert!(b.is_empty());
    }

    #[test]
    fn aligned_buf_is_aligned() {
        let b = AlignedBuf::new(8192, 4096);
        assert_eq!(b.stable_ptr() as usize % 4096, 0);
        assert_eq!(b.bytes_total(), 8192);
    }
}
