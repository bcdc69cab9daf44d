//! [`RecvBuf`]: received bytes in a pooled buffer, either a slot of the
//! runtime's provided-buffer ring (filled by a multishot receive on
//! io_uring) or a heap buffer (a plain receive: epoll, or a ring run dry).

use std::cell::RefCell;
use std::rc::Rc;

use ringkit_uring::BufRing;

use super::IoBuf;

/// Received bytes in a pooled buffer: a slot of the runtime's provided-buffer
/// ring (io_uring multishot) or a heap buffer. Dropping it gives a ring slot
/// back to the kernel. It can be written back out as it is (it is an [`IoBuf`]).
pub struct RecvBuf {
    // INVARIANT: for `Ring`, `ptr..ptr+len` is buffer `bid` of `ring`, which
    // the kernel does not touch until we recycle it on drop.
    inner: RecvInner,
}

enum RecvInner {
    Ring {
        ring: Rc<RefCell<BufRing>>,
        bid: u16,
        ptr: *const u8,
        len: usize,
    },
    Heap(Vec<u8>),
}

impl std::fmt::Debug for RecvBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBuf").field("len", &self.len()).finish()
    }
}

impl RecvBuf {
    pub(crate) fn ring(
        ring: Rc<RefCell<BufRing>>,
        bid: u16,
        ptr: *const u8,
        len: usize,
    ) -> RecvBuf {
        RecvBuf {
            inner: RecvInner::Ring {
                ring,
                bid,
                ptr,
                len,
            },
        }
    }

    /// Bytes from elsewhere (e.g. plaintext a TLS layer decrypted), as a
    /// chunk a pooled read returns.
    pub fn heap(v: Vec<u8>) -> RecvBuf {
        RecvBuf {
            inner: RecvInner::Heap(v),
        }
    }

    /// Drop the first `off` bytes (at most `len`).
    pub(crate) fn advance(mut self, off: usize) -> RecvBuf {
        match &mut self.inner {
            RecvInner::Ring { ptr, len, .. } => {
                let off = off.min(*len);
                // SAFETY: `off <= len`: the result stays inside slot `bid`,
                // so the INVARIANT holds; `bid` is still what gets recycled.
                *ptr = unsafe { ptr.add(off) };
                *len -= off;
            }
            RecvInner::Heap(v) => {
                v.drain(..off.min(v.len()));
            }
        }
        self
    }

    /// Whether the data sits in a provided-buffer ring slot.
    pub fn is_ring_buffer(&self) -> bool {
        matches!(self.inner, RecvInner::Ring { .. })
    }
}

impl std::ops::Deref for RecvBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.inner {
            // SAFETY: INVARIANT: the kernel is done with this slot until recycled.
            RecvInner::Ring { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            RecvInner::Heap(v) => v,
        }
    }
}

impl Drop for RecvBuf {
    fn drop(&mut self) {
        if let RecvInner::Ring { ring, bid, .. } = &self.inner {
            if let Ok(mut r) = ring.try_borrow_mut() {
                r.recycle(*bid);
            }
        }
    }
}

// SAFETY: ring slots and Vec heap blocks do not move with the RecvBuf, and
// a ring slot is not recycled before the RecvBuf (and any op owning it) drops.
unsafe impl IoBuf for RecvBuf {
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
