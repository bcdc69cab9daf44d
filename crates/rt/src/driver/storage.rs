//! What files ask of the driver: a table of registered buffers
//! (`READ_FIXED`/`WRITE_FIXED`), and whether a write may be linked to the
//! sync after it. On epoll neither exists and both calls say so.

use std::io;

use super::Driver;

impl Driver {
    /// io_uring: register `iovecs` as the ring's buffer table (`Ok(true)`);
    /// epoll: nothing to do (`Ok(false)`).
    ///
    /// # Safety
    /// The memory must stay valid until [`Driver::unregister_buffers`] or
    /// the runtime is dropped.
    pub(crate) unsafe fn register_buffers(&mut self, iovecs: &[libc::iovec]) -> io::Result<bool> {
        match self {
            // SAFETY: the caller's contract.
            Driver::Uring(d) => unsafe { d.register_buffers(iovecs) }.map(|()| true),
            Driver::Epoll(_) => Ok(false),
        }
    }

    /// io_uring: drop the buffer table.
    pub(crate) fn unregister_buffers(&mut self) -> io::Result<()> {
        match self {
            Driver::Uring(d) => d.unregister_buffers(),
            Driver::Epoll(_) => Ok(()),
        }
    }

    /// Whether a write and its sync can go as one op (`write_sync::write_sync`, a `Link`): always
    /// on epoll (one inline attempt does both); on io_uring where a chain
    /// of skipped links posts exactly one CQE.
    pub(crate) fn links_hold(&self) -> bool {
        match self {
            Driver::Uring(d) => d.links_hold(),
            Driver::Epoll(_) => true,
        }
    }
}
