//! Crash, recover, append, crash again: now and then, in the middle of a
//! step with appends still in flight, the workload drops its log and goes
//! on in a new directory holding one crash state the model allows at that
//! point (drawn, seeded), as a power cut would leave it: a batch torn or
//! missing, a segment half made. The log then recovers from that state,
//! its recovery's writes recorded and explored like any other, and the
//! workload appends on, so later generations are built on a crashed one.
//! The old directory is left behind: the dropped log's operations still in
//! the kernel land there, outside the recorder's view. Half of these
//! crashes are process kills instead ([`Kill`](super::kill::Kill)): the process dies between
//! two of the log's file operations (a batch written, its sync never
//! issued, say), the log is reopened in place on the page cache, and what
//! its recovery shows must survive a later power cut: a recovery that
//! does not sync what it found fails there.

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
