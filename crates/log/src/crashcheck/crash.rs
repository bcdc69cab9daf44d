//! Crash, recover, append, crash again: now and then, in the middle of a
//! step with appends still in flight, the workload drops its log and goes
//! on in a new directory holding one crash state the model allows at that
//! point (drawn, seeded), as a power cut would leave it: a batch torn or
//! missing, a segment half made. The log then recovers from that state,
//! its recovery's writes recorded and explored like any other, and the
//! workload appends on, so later generations are built on a crashed one.
//! The old directory is left behind: the dropped log's operations still in
//! the kernel land there, outside the recorder's view. Half of these
//! crashes are process kills instead ([`Kill`]): the process dies between
//! two of the log's file operations (a batch written, its sync never
//! issued, say), the log is reopened in place on the page cache, and what
//! its recovery shows must survive a later power cut: a recovery that
//! does not sync what it found fails there.

use std::cell::Cell;
use std::io;
use std::path::Path;

use super::model::{Model, Rng};
use super::trace::Recorder;

/// Put a crash state of the trace so far in `root` (new, not existing)
/// and move the recorder there. `seed` picks the state. Returns whether
/// the state left out sectors of a pending write (a torn or lost batch).
pub fn crash(rec: &Recorder, root: &Path, seed: u64) -> io::Result<bool> {
    let mut model = Model::new();
    for e in &rec.events() {
        model.apply(e);
    }
    let mut rng = Rng(seed | 1);
    let choices = model.states(8, &mut rng);
    let choice = &choices[rng.below(choices.len() as u64) as usize];
    let files = model.materialize(choice);
    std::fs::create_dir(root)?;
    for (rel, data) in &files {
        match data {
            None => std::fs::create_dir_all(root.join(rel))?,
            Some(d) => std::fs::write(root.join(rel), d)?,
        }
    }
    rec.crashed(root, files, choice.describe());
    Ok(choice.dropped_sectors() > 0)
}

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
