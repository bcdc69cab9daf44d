//! The scheduler's data: task slots, waker numbers, and the process-wide
//! registry of runtimes that cross-thread wakes go through.
//!
//! A waker is not a pointer but a number: runtime id (16 bits), generation
//! (16 bits) and slot key (32 bits) ([`encode`] / [`decode`]). Waking from
//! another thread goes through the runtime's [`Remote`] (a locked queue plus
//! an eventfd that interrupts the driver's wait), found by id in the
//! registry. Nothing here touches a runtime; [`crate::context`] does.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The main future of `block_on` uses this slot key.
pub(crate) const MAIN_KEY: u32 = u32::MAX;

pub(crate) type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Reports a task's end by abort to its `JoinHandle`: `None` when it was
/// cancelled, the message of the panic when its drop panicked.
pub(crate) type OnAbort = Box<dyn FnOnce(Option<String>)>;

pub(crate) struct TaskSlot {
    pub(crate) gen: u16,
    pub(crate) future: Option<BoxFuture>,
    pub(crate) scheduled: bool,
    pub(crate) aborted: bool,
    /// Called when the task is aborted before completing.
    pub(crate) on_abort: Option<OnAbort>,
}

/// Cross-thread side of a runtime: remote wakes and the fd that interrupts its wait.
///
/// # Lifetime
/// Another thread may hold an `Arc<Remote>` (taken from the registry just
/// before the runtime unregistered) and write to the eventfd after the
/// runtime is gone. So the eventfd belongs to the `Remote` and is closed
/// only when the last `Arc` goes: its number can never be reused by another
/// file while a wake may still write to it. A wake after [`Remote::close`]
/// is a no-op.
#[derive(Debug)]
pub(crate) struct Remote {
    pub(crate) queue: Mutex<Vec<u64>>,
    /// eventfd the driver watches; written after a remote wake. Owned.
    pub(crate) eventfd: i32,
    closed: AtomicBool,
}

impl Remote {
    /// Takes ownership of `eventfd`.
    pub(crate) fn new(eventfd: i32) -> Remote {
        Remote {
            queue: Mutex::new(Vec::new()),
            eventfd,
            closed: AtomicBool::new(false),
        }
    }

    pub(crate) fn wake(&self, data: u64) {
        let first = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            // Checked under the lock that `close` takes: no wake is queued
            // (nor written) after the runtime closed.
            if self.closed.load(Ordering::Relaxed) {
                return;
            }
            q.push(data);
            q.len() == 1
        };
        if first {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes from a valid u64 to our eventfd, which
            // stays open while `self` exists (see Lifetime).
            unsafe { libc::write(self.eventfd, (&one as *const u64).cast(), 8) };
        }
    }

    /// The runtime is gone: later wakes do nothing.
    pub(crate) fn close(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.closed.store(true, Ordering::Relaxed);
        q.clear();
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // SAFETY: we own the eventfd and this is its last user.
        unsafe { libc::close(self.eventfd) };
    }
}

/// The runtimes alive in this process, indexed by the id in their wakers.
struct Registry {
    slots: Vec<Option<Arc<Remote>>>,
    /// Where the search for a free id starts: ids are handed out in turn,
    /// so a dropped runtime's id is reused only after every other one (a
    /// stale waker of a dead runtime then at worst wakes a task spuriously).
    cursor: usize,
}

fn registry() -> &'static Mutex<Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    REG.get_or_init(|| {
        Mutex::new(Registry {
            slots: Vec::new(),
            cursor: 0,
        })
    })
}

/// Register a runtime's remote side; returns its id.
pub(crate) fn register_remote(r: Arc<Remote>) -> u16 {
    const MAX: usize = u16::MAX as usize;
    let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    let len = reg.slots.len();
    let free = if len < MAX {
        reg.slots.push(None);
        Some(len)
    } else {
        (0..len)
            .map(|i| (reg.cursor + i) % len)
            .find(|&i| reg.slots[i].is_none())
    };
    let i = free.expect("too many ringkit runtimes alive at once (65535)");
    reg.slots[i] = Some(r);
    reg.cursor = i + 1;
    i as u16
}

pub(crate) fn unregister_remote(id: u16) {
    let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = reg.slots[id as usize].take() {
        r.close();
    }
}

/// A number no other runtime of this process has or will have: what
/// handles and timers check before acting on "their" runtime.
pub(crate) fn next_serial() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub(crate) fn encode(rt: u16, gen: u16, key: u32) -> u64 {
    (u64::from(rt) << 48) | (u64::from(gen) << 32) | u64::from(key)
}

pub(crate) fn decode(data: u64) -> (u16, u16, u32) {
    ((data >> 48) as u16, (data >> 32) as u16, data as u32)
}

/// The remote side of runtime `id`, while that runtime is alive.
pub(crate) fn remote(id: u16) -> Option<Arc<Remote>> {
    let reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    reg.slots.get(id as usize).cloned().flatten()
}
