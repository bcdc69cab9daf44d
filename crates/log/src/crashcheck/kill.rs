//! A process kill as the recorder plays it (see [`Kill`]).

use std::cell::Cell;

/// A process kill as the recorder plays it: armed to strike once a
/// number of the log's file operations have completed (right after a
/// batch's write and before its sync, say), or inside the next linked
/// write+sync (the write reaches the page cache, the sync never runs: on
/// epoll the process dies between `pwrite` and `fdatasync`, on io_uring
/// the ring's teardown cancels a linked request not yet started). From
/// then on every new operation is refused with `EIO` and left out of the
/// trace, as if never issued: the process is gone. Operations already in the kernel complete
/// and are recorded (a dead process's ring drains before it exits). The
/// workload then drops the log, waits for the trace to go quiet and
/// revives the recorder before it reopens in place.
#[derive(Debug, Default)]
pub struct Kill {
    dead: Cell<bool>,
    countdown: Cell<Option<u64>>,
    /// Strike inside the next linked write+sync.
    at_linked: Cell<bool>,
    refused: Cell<u64>,
    splits: Cell<u64>,
}

impl Kill {
    /// Strike once `ops` more operations have completed.
    pub fn arm(&self, ops: u64) {
        self.countdown.set(Some(ops.max(1)));
    }

    /// Strike inside the next linked write+sync (between its write and
    /// its sync).
    pub fn arm_linked(&self) {
        self.at_linked.set(true);
    }

    /// Strike now (if not already).
    pub fn now(&self) {
        self.countdown.set(None);
        self.at_linked.set(false);
        self.dead.set(true);
    }

    /// The next process: operations are issued again.
    pub fn revive(&self) {
        self.countdown.set(None);
        self.at_linked.set(false);
        self.dead.set(false);
    }

    /// Operations refused since the kill (the dead log's tasks winding
    /// down: the workload waits until they stop).
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }

    /// Whether an operation about to be issued is refused (counted).
    pub(super) fn refuses(&self) -> bool {
        if self.dead.get() {
            self.refused.set(self.refused.get() + 1);
        }
        self.dead.get()
    }

    /// Whether a linked write+sync about to be issued is where the kill
    /// strikes, between the two: the write reaches the page cache, the
    /// sync never runs (io_uring cancels a dead task's linked requests not
    /// yet started; on epoll the process dies between `pwrite` and
    /// `fdatasync`). Strikes now if so.
    pub(super) fn splits_linked(&self) -> bool {
        let split = self.countdown.get() == Some(1) || self.at_linked.get();
        if split {
            self.splits.set(self.splits.get() + 1);
            self.now();
        }
        split
    }

    /// Kills that struck inside a linked write+sync.
    pub fn splits(&self) -> u64 {
        self.splits.get()
    }

    /// An operation of the log's completed.
    pub(super) fn completed(&self) {
        match self.countdown.get() {
            Some(1) => self.now(),
            Some(n) => self.countdown.set(Some(n - 1)),
            None => {}
        }
    }
}
