//! Provided-buffer rings for send bundles: entries that point at the
//! caller's own memory, taken by an `IORING_OP_SEND` with
//! `IORING_RECVSEND_BUNDLE` ([`crate::opcode::SendBundle`]).
//!
//! # Protocol (one send per ring at a time)
//! The caller publishes a batch into an empty ring, then submits one bundle
//! send on its group. The kernel takes every published entry when it issues
//! the send, if the batch fits one round: up to 256 entries (the most it
//! imports in one round, [`SendRing::MAX_BATCH`]), at most `INT_MAX` bytes,
//! and at most `ceil(INT_MAX / first entry's length)` entries (a round is
//! sized by its first entry). It advances its private head
//! past all of them at once, before a byte is sent; a partial send is
//! retried from the same iovecs, and an `EAGAIN` waits with them. Taking
//! every entry marks the group empty, so the send ends with that round and
//! posts one CQE (no `F_MORE`). A CQE with `F_BUFFER` therefore means the
//! ring is empty again and may carry the next batch; one without it means
//! the kernel took nothing (it failed before selecting, e.g. `EBADF`), the
//! entries are still published, and the ring must not be reused: drop it.
//!
//! # Memory ordering
//! The entries are plain writes; the tail (entry 0's `resv`) is published
//! with one store-release, so the kernel, which load-acquires it, sees every
//! entry the tail covers. We never read the kernel's head (it keeps it to
//! itself); the CQE is our only evidence of consumption.

use std::io;
use std::sync::atomic::AtomicU16;

use crate::barrier::store_release_u16;
use crate::buf_ring::Registered;
use crate::ring::IoUring;
use crate::sys;

/// A registered ring of `io_uring_buf` entries for send bundles; drop it
/// only when no send on its group is in flight (dropping unregisters it).
#[derive(Debug)]
pub struct SendRing {
    // INVARIANT: `reg` maps `reg.entries()` entries registered as the group.
    reg: Registered,
    /// Our tail: entries below it are published.
    tail: u16,
}

impl SendRing {
    /// The most buffers one batch may hold: the kernel imports at most 256
    /// entries per send round.
    pub const MAX_BATCH: usize = 256;

    /// Register group `bgid` with room for `entries` (a power of two up to
    /// 32768; one page holds 256) buffers.
    pub fn new(ring: &IoUring, bgid: u16, entries: u16) -> io::Result<SendRing> {
        Ok(SendRing {
            reg: Registered::new(ring, bgid, entries)?,
            tail: 0,
        })
    }

    /// The buffer group id to put in `buf_group`.
    pub fn bgid(&self) -> u16 {
        self.reg.bgid()
    }

    /// The most buffers [`publish`](Self::publish) takes at once.
    pub fn capacity(&self) -> usize {
        usize::from(self.reg.entries()).min(Self::MAX_BATCH)
    }

    /// Write one entry per `(address, length)` and publish them all with
    /// one tail store. Entry `i` gets buffer id `i`.
    ///
    /// # Safety
    /// - Every previously published entry has been taken by the kernel (the
    ///   send that took them posted its CQE with `F_BUFFER`), so the ring is
    ///   empty.
    /// - Each `(address, length)` is readable memory that stays valid and
    ///   unchanged until the send that takes it has posted its CQE.
    pub unsafe fn publish(
        &mut self,
        bufs: impl IntoIterator<Item = (*const u8, u32)>,
    ) -> io::Result<()> {
        // Entries are written as they come and checked on the way; only the
        // tail store at the end makes them visible, so a refused batch
        // leaves the (empty) ring as it was.
        let mask = self.reg.entries() - 1;
        let mut n = 0usize;
        for (addr, len) in bufs {
            if n == self.capacity() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a send bundle takes at most {} buffers", self.capacity()),
                ));
            }
            if len == 0 {
                // The kernel refuses a bundle whose first entry is empty,
                // and an empty entry later on sends nothing anyway.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a send bundle entry may not be empty",
                ));
            }
            let slot = usize::from(self.tail.wrapping_add(n as u16) & mask);
            // SAFETY: `slot < entries` (INVARIANT of `reg`); the ring is
            // empty and the tail not yet moved, so the kernel reads no entry
            // we write. Only addr, len and bid: entry 0's `resv` is the
            // shared tail.
            unsafe {
                let e = self.reg.ring().add(slot);
                (&raw mut (*e).addr).write(addr as u64);
                (&raw mut (*e).len).write(len);
                (&raw mut (*e).bid).write(n as u16);
            }
            n += 1;
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a send bundle takes at least one buffer",
            ));
        }
        self.tail = self.tail.wrapping_add(n as u16);
        // SAFETY: the tail lives at byte 14 of the mapping, 2-byte aligned.
        // Release: the entries above must be visible before the kernel sees
        // the tail that covers them.
        unsafe {
            let tail =
                self.reg.ring().cast::<u8>().add(sys::BUF_RING_TAIL_OFFSET) as *const AtomicU16;
            store_release_u16(tail, self.tail);
        }
        Ok(())
    }
}
