//! [`Slice`]: part of an owned buffer, as an owned buffer.
//!
//! A read fills its buffer from the start. To read into the rest of a
//! buffer that already holds data (the next part of a frame, the tail of a
//! block), read into `buf.slice(n..)`: the kernel writes at byte `n`, and
//! [`Slice::into_inner`] gives the whole buffer back with the bytes before
//! `n` kept. To write part of a buffer, write `buf.slice(a..b)`. No copy
//! either way.
//!
//! ```
//! use ringkit::buf::IoBufExt;
//! use ringkit::net::{TcpListener, TcpStream};
//! ringkit::run(async {
//!     let l = TcpListener::bind("127.0.0.1:0")?;
//!     let c = TcpStream::connect(l.local_addr()?).await?;
//!     let (s, _) = l.accept().await?;
//!     c.write_all(&b"one\ntwo\n"[..]).await.0?;
//!     // A line-framing loop: read into the free tail, frame from the
//!     // front; the bytes read are never copied to be kept.
//!     let mut buf = Vec::with_capacity(64);
//!     let mut lines = Vec::new();
//!     while lines.len() < 2 {
//!         if let Some(end) = buf.iter().position(|&b| b == b'\n') {
//!             lines.push(String::from_utf8(buf[..end].to_vec()).unwrap());
//!             buf.drain(..=end);
//!             continue;
//!         }
//!         let filled = buf.len();
//!         let (n, slice) = s.read(buf.slice(filled..)).await;
//!         buf = slice.into_inner();
//!         assert!(n? > 0, "the peer closed mid-line");
//!     }
//!     assert_eq!(lines, ["one", "two"]);
//!     Ok::<_, std::io::Error>(())
//! })??;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::ops::{Bound, RangeBounds};

use super::{IoBuf, IoBufMut};

/// Bytes `begin..end` of the owned buffer `T`, itself an owned buffer: for
/// the kernel it starts at `begin` and holds `end - begin` bytes. Made by
/// [`IoBufExt::slice`].
#[derive(Debug)]
pub struct Slice<T> {
    buf: T,
    begin: usize,
    end: usize,
}

impl<T> Slice<T> {
    /// Where the slice starts in the buffer.
    pub fn begin(&self) -> usize {
        self.begin
    }

    /// Where it ends (exclusive).
    pub fn end(&self) -> usize {
        self.end
    }

    /// The whole buffer.
    pub fn get_ref(&self) -> &T {
        &self.buf
    }

    /// The whole buffer, back from the slice. After a read of `n` bytes
    /// into a slice starting at `b`, a `Vec` holds its first `b` bytes and
    /// the `n` read: its length is `b + n`, and whatever it held after byte
    /// `b + n` is gone (reads leave exactly what was read, as a plain read
    /// leaves a `Vec` of length `n`). Slice from the end of the data to
    /// append.
    pub fn into_inner(self) -> T {
        self.buf
    }
}

/// `slice` on every owned buffer.
pub trait IoBufExt: IoBuf + Sized {
    /// Bytes `range` of this buffer, as an owned buffer. The range must lie
    /// within the buffer's capacity, and start within its data (at or
    /// before `bytes_init`): a read into the slice then leaves no gap of
    /// uninitialised bytes. A read into a slice that starts inside the data
    /// cuts a `Vec` at the end of what was read (see
    /// [`Slice::into_inner`]).
    ///
    /// # Panics
    /// If `range` ends past `bytes_total`, or starts past its end or past
    /// `bytes_init`.
    fn slice(self, range: impl RangeBounds<usize>) -> Slice<Self> {
        let total = self.bytes_total();
        // `usize::MAX + 1` is past any buffer: saturating keeps it past
        // (wrapping to 0 made `..=usize::MAX` an empty slice in release).
        let begin = match range.start_bound() {
            Bound::Included(&n) => n,
            Bound::Excluded(&n) => n.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&n) => n.saturating_add(1),
            Bound::Excluded(&n) => n,
            Bound::Unbounded => total,
        };
        assert!(
            begin <= end && end <= total,
            "slice {begin}..{end} of a buffer of {total} bytes"
        );
        let init = self.bytes_init();
        assert!(
            begin <= init,
            "slice starting at {begin}, past the {init} bytes of data: a read into it would leave a gap"
        );
        Slice {
            buf: self,
            begin,
            end,
        }
    }
}

impl<T: IoBuf> IoBufExt for T {}

// SAFETY: `begin <= end <= bytes_total` (checked when made), so the pointer
// stays inside the buffer's stable memory; the data it reports lies within
// the buffer's own initialised bytes.
unsafe impl<T: IoBuf> IoBuf for Slice<T> {
    fn stable_ptr(&self) -> *const u8 {
        // SAFETY: `begin <= bytes_total`: in bounds of (or one past) the
        // buffer's memory.
        unsafe { self.buf.stable_ptr().add(self.begin) }
    }

    fn bytes_init(&self) -> usize {
        self.buf
            .bytes_init()
            .min(self.end)
            .saturating_sub(self.begin)
    }

    fn bytes_total(&self) -> usize {
        self.end - self.begin
    }

    fn fixed_index(&self) -> Option<u16> {
        self.buf.fixed_index()
    }
}

// SAFETY: as above; writes stay within `begin..end` of the buffer's
// writable memory, and `set_init` marks the buffer initialised up to
// `begin + n`, all of it data: `begin <= bytes_init` (checked when made)
// and the caller vouches for the `n` bytes after it.
unsafe impl<T: IoBufMut> IoBufMut for Slice<T> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        // SAFETY: as for `stable_ptr`.
        unsafe { self.buf.stable_mut_ptr().add(self.begin) }
    }

    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: bytes `0..begin` were data when the slice was made (and a
        // slice is the only way to the buffer meanwhile), `begin..begin+n`
        // the caller's.
        unsafe { self.buf.set_init(self.begin + n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_points_into_its_buffer() {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(b"0123456789");
        let base = v.as_ptr();
        let s = v.slice(2..6);
        assert_eq!(s.stable_ptr(), base.wrapping_add(2));
        assert_eq!((s.bytes_init(), s.bytes_total()), (4, 4));
        assert_eq!(s.init_slice(), b"2345");
        let v = s.into_inner();
        let s = v.slice(10..);
        assert_eq!((s.bytes_init(), s.bytes_total()), (0, 6));
    }

    #[test]
    fn set_init_keeps_the_bytes_before_the_slice() {
        let mut v = Vec::with_capacity(8);
        v.extend_from_slice(b"ab");
        let mut s = v.slice(2..);
        // SAFETY: writing 3 bytes inside the slice, then marking them.
        unsafe {
            std::ptr::copy_nonoverlapping(b"cde".as_ptr(), s.stable_mut_ptr(), 3);
            s.set_init(3);
        }
        assert_eq!(s.into_inner(), b"abcde");
    }

    #[test]
    #[should_panic(expected = "would leave a gap")]
    fn a_slice_past_the_data_is_refused() {
        let v: Vec<u8> = Vec::with_capacity(8);
        let _ = v.slice(3..);
    }

    #[test]
    #[should_panic(expected = "of a buffer of")]
    fn a_slice_past_the_capacity_is_refused() {
        let v = vec![0u8; 4];
        let _ = v.slice(..5);
    }

    #[test]
    #[should_panic(expected = "of a buffer of")]
    fn an_inclusive_end_of_usize_max_is_refused() {
        let v = vec![0u8; 4];
        let _ = v.slice(..=usize::MAX);
    }

    #[test]
    #[should_panic(expected = "of a buffer of")]
    fn an_excluded_start_of_usize_max_is_refused() {
        let v = vec![0u8; 4];
        let _ = v.slice((Bound::Excluded(usize::MAX), Bound::Unbounded));
    }
}
