//! A table of eventfds that a signal handler writes to: how a handler
//! (which may only use async-signal-safe calls) wakes tasks on any number of
//! runtime threads. Used by [`crate::signal`] (shutdown) and, with the
//! `publish` feature, by `publish` (flush on request).
//!
//! # Protocol
//! A waiter creates an eventfd, puts it in a free slot ([`EventfdTable::register`])
//! and reads it through its runtime (io_uring `READ`, or epoll readiness then
//! `read(2)`), so a waiting thread costs no polling. The handler calls
//! [`EventfdTable::notify`]: it increments `in_handler`, runs the caller's
//! step (setting a flag), writes 1 to every registered eventfd (`write(2)`
//! is async-signal-safe; nothing else allocates or locks), and decrements
//! `in_handler`. On drop a [`Slot`] empties its slot and waits until no
//! handler is running before it closes its fd, so a handler that loaded the
//! fd number just before can never write to a closed (and maybe reused) fd.
//! The wait cannot deadlock: a handler never waits, and one that interrupts
//! the dropping thread runs to completion before the thread resumes. All
//! atomics are `SeqCst`: the argument needs one total order between "slot
//! emptied" and "handler entered".

use std::io;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering::SeqCst};

use crate::driver::op::recv::Recv;
use crate::driver::Op;

/// Waiters that can be registered at once in one table.
const SLOTS: usize = 256;

/// See the module docs.
pub(crate) struct EventfdTable {
    slots: [AtomicI32; SLOTS],
    in_handler: AtomicUsize,
}

impl EventfdTable {
    pub(crate) const fn new() -> EventfdTable {
        EventfdTable {
            slots: [const { AtomicI32::new(-1) }; SLOTS],
            in_handler: AtomicUsize::new(0),
        }
    }

    /// Run `step` (atomics only), then wake every registered waiter.
    /// Async-signal-safe as long as `step` is.
    pub(crate) fn notify(&self, step: impl FnOnce()) {
        self.in_handler.fetch_add(1, SeqCst);
        step();
        let one: u64 = 1;
        for slot in &self.slots {
            let fd = slot.load(SeqCst);
            if fd >= 0 {
                // SAFETY: `fd` is a registered eventfd that is not closed
                // while `in_handler` is non-zero (Slot's drop); we write 8
                // bytes from a valid u64.
                unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
            }
        }
        self.in_handler.fetch_sub(1, SeqCst);
    }

    /// A new eventfd in a free slot; `None` if the table is full or no
    /// eventfd can be made (the caller falls back to something slower).
    pub(crate) fn register(&'static self) -> Option<Slot> {
        // SAFETY: plain eventfd creation.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        for (slot, s) in self.slots.iter().enumerate() {
            if s.compare_exchange(-1, fd, SeqCst, SeqCst).is_ok() {
                return Some(Slot {
                    table: self,
                    fd,
                    slot,
                });
            }
        }
        // SAFETY: we own fd; it was never registered.
        unsafe { libc::close(fd) };
        None
    }
}

/// An eventfd registered in a table; unregisters and closes on drop.
pub(crate) struct Slot {
    table: &'static EventfdTable,
    fd: i32,
    slot: usize,
}

impl Slot {
    /// Wait for a notification (one read of the eventfd, through the
    /// runtime). An error means the eventfd cannot be read.
    pub(crate) async fn wait(&self) -> io::Result<()> {
        loop {
            let (res, _) = Op::new(Recv::new(self.fd, false, Vec::with_capacity(8), None)).await;
            match res {
                Ok(_) => return Ok(()),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.slots[self.slot].store(-1, SeqCst);
        while self.table.in_handler.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
        let fd = self.fd;
        let closed = crate::driver::current::try_driver(|d, m| d.close_fd(fd, m));
        if closed.is_none() {
            // SAFETY: we own fd; no runtime is left to close it for us, and
            // no handler can still be writing to it (above).
            unsafe { libc::close(fd) };
        }
    }
}
