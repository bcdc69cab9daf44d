//! Large buffers lent between a thread's connections.
//!
//! A connection that writes a large batch (a 16 KiB file body, 64
//! pipelined responses) needs a large output buffer only while it writes.
//! Kept by the connection afterwards, it is held for as long as the
//! connection sits idle (~1 MiB each after one pipelined burst); freed to
//! the allocator, it is allocated, grown and faulted in again by the next
//! batch (that cost a third of the 16 KiB static-file rate). So it goes
//! back here, to be lent to whichever connection of the thread next needs
//! one: idle connections hold small buffers only, and a busy one reuses
//! memory that is already mapped.
//!
//! What goes back to the allocator is reported to [`ringkit::alloc::freed`],
//! which gives the allocator's free pages back to the kernel after a burst.

use std::cell::RefCell;

/// Most buffers kept per thread.
const MAX_SPARE: usize = 8;
/// Most bytes of buffer kept per thread, in all; a buffer that would take
/// the total over goes back to the allocator.
const MAX_SPARE_BYTES: usize = 4 << 20;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for at least `want` bytes: a spare one if
/// there is one that large, else a new one.
pub(crate) fn take(want: usize) -> Vec<u8> {
    let spare = SPARE
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().position(|b| b.capacity() >= want)?;
            Some(s.swap_remove(i))
        })
        .ok()
        .flatten();
    spare.unwrap_or_else(|| Vec::with_capacity(want))
}

/// Give `buf` back (emptied); kept if there is room, else freed.
pub(crate) fn give(mut buf: Vec<u8>) {
    buf.clear();
    let _ = SPARE.try_with(|s| {
        let mut s = s.borrow_mut();
        let held: usize = s.iter().map(Vec::capacity).sum();
        if s.len() < MAX_SPARE && held + buf.capacity() <= MAX_SPARE_BYTES {
            s.push(buf);
        } else {
            ringkit::alloc::freed(buf.capacity());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_is_lent_again_and_small_wants_get_new_ones() {
        let b = Vec::<u8>::with_capacity(64 * 1024);
        let ptr = b.as_ptr();
        give(b);
        let again = take(20 * 1024);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        give(again);
        let big = take(1 << 20);
        assert!(big.capacity() >= 1 << 20);
        assert_ne!(big.as_ptr(), ptr);
        // Past the per-thread total, a buffer is freed, not kept.
        give(Vec::with_capacity(MAX_SPARE_BYTES));
        assert!(take(MAX_SPARE_BYTES).capacity() >= MAX_SPARE_BYTES);
    }
}
