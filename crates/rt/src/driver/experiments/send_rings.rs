//! The thread's send rings for `SendBatch::Bundle`: each in-flight send
//! bundle borrows one ring (its own buffer group, so its entries are only
//! its batch) and gives it back when its CQE shows the kernel took every
//! entry (`F_BUFFER`; see `ringkit_uring::SendRing`). A ring whose send
//! ended without taking its entries is unregistered instead of reused.
//! Rings are registered on demand, at most [`MAX_RINGS`] per thread (one
//! page each); past that, a batch is sent vectored.

use std::cell::RefCell;
use std::rc::Rc;

use ringkit_uring::{IoUring, SendRing};

use crate::metrics::Metrics;

/// The most send rings a thread registers (4 KiB of pinned memory each).
pub(crate) const MAX_RINGS: u16 = 1024;

/// Buffer group ids of send rings start here (0 is the receive ring).
const FIRST_BGID: u16 = 1;

/// Entries per ring: one page, the most one send round takes.
const ENTRIES: u16 = 256;

#[derive(Debug, Default)]
pub(crate) struct SendRings {
    free: Rc<RefCell<Vec<SendRing>>>,
    /// Group ids handed out so far (free or borrowed or dropped).
    next: u16,
    /// Groups of dropped rings, free to register again.
    spare_bgids: Rc<RefCell<Vec<u16>>>,
}

impl SendRings {
    /// An empty ring for one send bundle, or `None` (the caller sends
    /// vectored) when the thread has [`MAX_RINGS`] out or registering fails.
    pub(crate) fn take(&mut self, ring: &IoUring, m: &Metrics) -> Option<PooledSendRing> {
        let popped = self.free.borrow_mut().pop();
        let sr = match popped {
            Some(sr) => sr,
            None => {
                let spare = self.spare_bgids.borrow_mut().pop();
                let bgid = match spare {
                    Some(b) => b,
                    None if self.next < MAX_RINGS => {
                        self.next += 1;
                        FIRST_BGID + self.next - 1
                    }
                    None => return None,
                };
                Metrics::add(&m.syscalls, 1);
                match SendRing::new(ring, bgid, ENTRIES) {
                    Ok(sr) => {
                        Metrics::add(&m.send_rings, 1);
                        sr
                    }
                    Err(e) => {
                        tracing::debug!("ringkit: could not register a send ring: {e}");
                        self.spare_bgids.borrow_mut().push(bgid);
                        return None;
                    }
                }
            }
        };
        Some(PooledSendRing {
            ring: Some(sr),
            free: self.free.clone(),
            spare_bgids: self.spare_bgids.clone(),
            emptied: true,
        })
    }
}

/// A send ring borrowed for one send bundle.
pub(crate) struct PooledSendRing {
    ring: Option<SendRing>,
    free: Rc<RefCell<Vec<SendRing>>>,
    spare_bgids: Rc<RefCell<Vec<u16>>>,
    /// Whether every published entry has been taken by the kernel (true
    /// until a batch is published; set again by an `F_BUFFER` CQE).
    emptied: bool,
}

impl PooledSendRing {
    pub(crate) fn get(&mut self) -> &mut SendRing {
        self.ring.as_mut().expect("ring present until drop")
    }

    /// A batch was published: the ring is not empty until a CQE says so.
    pub(crate) fn published(&mut self) {
        self.emptied = false;
    }

    /// The send's CQE: with `F_BUFFER` (and not `F_MORE`, which would mean
    /// a second round still to come) the kernel took every entry.
    pub(crate) fn completed(&mut self, cqe_flags: u32) {
        use ringkit_uring::sys::{IORING_CQE_F_BUFFER, IORING_CQE_F_MORE};
        if cqe_flags & IORING_CQE_F_BUFFER != 0 && cqe_flags & IORING_CQE_F_MORE == 0 {
            self.emptied = true;
        }
    }
}

impl Drop for PooledSendRing {
    fn drop(&mut self) {
        let Some(sr) = self.ring.take() else { return };
        if self.emptied {
            self.free.borrow_mut().push(sr);
        } else {
            // Entries may still be published: never reuse; unregister it.
            let bgid = sr.bgid();
            drop(sr);
            self.spare_bgids.borrow_mut().push(bgid);
        }
    }
}
