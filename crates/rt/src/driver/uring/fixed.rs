//! The registered (fixed) file table that busy sockets are promoted into.

use std::os::fd::RawFd;

use ringkit_uring::opcode::Target;

use super::UringDriver;
use crate::metrics::Metrics;

/// Slots of the registered file table that sockets are promoted into.
///
/// A released slot is closed by an `IORING_OP_CLOSE` SQE; it is reused only
/// once that SQE has been submitted (`pending` -> `free` after a submit that
/// left the SQ empty), so a new registration can never be closed by an old
/// stream's late close.
#[derive(Debug, Default)]
pub(super) struct FixedFiles {
    /// Table size to register (0 = off).
    want: u32,
    /// Whether the sparse table is registered.
    registered: bool,
    /// Registration failed once; do not retry.
    failed: bool,
    free: Vec<u32>,
    pending: Vec<u32>,
}

impl FixedFiles {
    /// A table of `want` slots, registered on first use (0 = off).
    pub(super) fn new(want: u32) -> FixedFiles {
        FixedFiles {
            want,
            ..FixedFiles::default()
        }
    }

    /// A submit left the SQ empty: every queued slot close has been
    /// submitted (and ran inline), so those slots are empty now.
    pub(super) fn sq_submitted(&mut self) {
        if !self.pending.is_empty() {
            let done = std::mem::take(&mut self.pending);
            self.free.extend(done);
        }
    }
}

impl UringDriver {
    /// Put `fd` in a free slot of the registered file table (registering a
    /// sparse table on first use, no larger than `RLIMIT_NOFILE` allows).
    pub(crate) fn register_fixed(&mut self, fd: RawFd, m: &Metrics) -> Option<u32> {
        let f = &mut self.fixed;
        if f.want == 0 || f.failed {
            return None;
        }
        if !f.registered {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes into the struct we pass.
            let cur = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
                lim.rlim_cur
            } else {
                1024
            };
            // The kernel's cap is IORING_MAX_FIXED_FILES (1 << 20).
            let n = (f.want as u64).min(cur).min(1 << 20) as u32;
            Metrics::add(&m.syscalls, 1);
            if let Err(e) = self.ring.register_files_sparse(n) {
                tracing::debug!("ringkit: no registered file table ({e}); sockets use plain fds");
                f.failed = true;
                return None;
            }
            f.registered = true;
            f.free = (0..n).rev().collect();
        }
        let slot = f.free.pop()?;
        Metrics::add(&m.syscalls, 1);
        match self.ring.register_files_update(slot, &[fd]) {
            Ok(1) => Some(slot),
            _ => {
                self.fixed.free.push(slot);
                None
            }
        }
    }

    /// Close a slot from [`UringDriver::register_fixed`] through the ring.
    pub(crate) fn release_fixed(&mut self, slot: u32, m: &Metrics) {
        if self.push_close(Target::Fixed(slot), m).is_err() {
            // Could not queue the close: empty the slot now.
            Metrics::add(&m.syscalls, 1);
            if let Err(err) = self.ring.register_files_update(slot, &[-1]) {
                // The slot keeps the socket open until it is reused (a
                // registration replaces, and so releases, what it held).
                tracing::error!("ringkit: could not empty registered file slot {slot}: {err}");
            }
        }
        // Either way the slot waits in `pending`: SQEs queued before this
        // point may still address it, and must be submitted first.
        self.fixed.pending.push(slot);
    }
}

impl UringDriver {
    /// Register `iovecs` as the ring's buffer table (`IORING_REGISTER_BUFFERS`;
    /// a ring has one table at a time: `EBUSY` while one is registered).
    ///
    /// # Safety
    /// The memory must stay valid until [`unregister_buffers`](Self::unregister_buffers)
    /// or the ring is closed.
    pub(crate) unsafe fn register_buffers(
        &mut self,
        iovecs: &[libc::iovec],
    ) -> std::io::Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.ring.register_buffers(iovecs) }
    }

    /// Drop the buffer table. Operations in flight keep their pages
    /// pinned until they complete (the kernel holds a reference).
    pub(crate) fn unregister_buffers(&mut self) -> std::io::Result<()> {
        self.ring.unregister_buffers()
    }

    /// Whether an op may post a chain of skipped links (one CQE per chain).
    pub(crate) fn links_hold(&self) -> bool {
        super::skipped_chains_hold()
    }
}
