//! The buffers batches are framed into before their writes (one per batch
//! that may be in flight): registered with the ring when the runtime has
//! no other registered buffers (then the write goes as `WRITE_FIXED`),
//! page-aligned memory otherwise. Both are aligned for `O_DIRECT`.

use ringkit::buf::{AlignedBuf, IoBuf};
use ringkit::fs::{FixedBuf, FixedBufPool};

/// Page alignment of the batch buffer (and of `O_DIRECT` writes).
pub const ALIGN: usize = 4096;

#[derive(Debug)]
pub enum BatchBuf {
    Fixed(FixedBuf),
    Aligned(AlignedBuf),
}

impl BatchBuf {
    /// `count` buffers of at least `size` bytes (rounded up to `block`, at
    /// least a page), aligned to `block` (a registered buffer to a page,
    /// which `O_DIRECT` takes: no file system asks more of memory):
    /// registered when `registered` and the ring takes them, else plain
    /// aligned memory. Also returns the pool, which must live as long as
    /// the buffers' use.
    pub fn new(
        size: usize,
        count: usize,
        registered: bool,
        block: usize,
    ) -> (Vec<BatchBuf>, Option<FixedBufPool>) {
        let block = block.max(ALIGN);
        let size = size.div_ceil(block) * block;
        if registered {
            match FixedBufPool::new(count as u16, size) {
                Ok(pool) => {
                    let bufs = (0..count)
                        .map(|_| BatchBuf::Fixed(pool.try_get().expect("a new pool's buffer")))
                        .collect();
                    return (bufs, Some(pool));
                }
                Err(e) => tracing::debug!("ringkit-log: batch buffers not registered: {e}"),
            }
        }
        let bufs = (0..count)
            .map(|_| BatchBuf::Aligned(AlignedBuf::new(size, block)))
            .collect();
        (bufs, None)
    }

    /// The whole buffer, to fill.
    pub fn space(&mut self) -> &mut [u8] {
        match self {
            BatchBuf::Fixed(b) => b.as_mut_capacity(),
            BatchBuf::Aligned(b) => {
                let cap = b.bytes_total();
                b.set_len(cap);
                b.as_mut_slice()
            }
        }
    }

    /// How many bytes the write sends.
    pub fn set_len(&mut self, n: usize) {
        match self {
            BatchBuf::Fixed(b) => b.set_len(n),
            BatchBuf::Aligned(b) => b.set_len(n),
        }
    }

    /// Whether writes from it go as `WRITE_FIXED` on this runtime.
    pub fn is_registered(&self) -> bool {
        matches!(self, BatchBuf::Fixed(b) if b.fixed_index().is_some())
    }
}

// SAFETY: each variant is an `IoBuf` whose memory is heap memory it owns
// (or its pool's, kept alive by it); every call delegates.
unsafe impl IoBuf for BatchBuf {
    fn stable_ptr(&self) -> *const u8 {
        match self {
            BatchBuf::Fixed(b) => b.stable_ptr(),
            BatchBuf::Aligned(b) => b.stable_ptr(),
        }
    }
    fn bytes_init(&self) -> usize {
        match self {
            BatchBuf::Fixed(b) => b.bytes_init(),
            BatchBuf::Aligned(b) => b.bytes_init(),
        }
    }
    fn bytes_total(&self) -> usize {
        match self {
            BatchBuf::Fixed(b) => b.bytes_total(),
            BatchBuf::Aligned(b) => b.bytes_total(),
        }
    }
    fn fixed_index(&self) -> Option<u16> {
        match self {
            BatchBuf::Fixed(b) => b.fixed_index(),
            BatchBuf::Aligned(_) => None,
        }
    }
}
