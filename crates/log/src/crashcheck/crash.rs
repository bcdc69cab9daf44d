//! Crash, recover, append, crash again: at some of the workload's reopens
//! the files under the root are replaced by one crash state the model
//! allows at that point (drawn, seeded), as a power cut would leave them;
//! the log then recovers from that state, its recovery's writes recorded
//! and explored like any other, and the workload appends on. So the log is
//! judged on generations built on a crashed one (a torn tail cleared, a
//! truncation finished, a half-made segment removed), not only on clean
//! reopens.

use std::io;
use std::path::Path;

use super::model::{Model, Rng};
use super::trace::Recorder;

/// Replace the files under `root` (the recorder's root) with a crash state
/// of the trace so far, and tell the recorder. The log must be closed.
pub fn crash(rec: &Recorder, root: &Path, rng: &mut Rng) -> io::Result<()> {
    let mut model = Model::new();
    for e in &rec.events() {
        model.apply(e);
    }
    let choices = model.states(8, rng);
    let choice = &choices[rng.below(choices.len() as u64) as usize];
    let files = model.materialize(choice);
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    for (rel, data) in &files {
        match data {
            None => std::fs::create_dir_all(root.join(rel))?,
            Some(d) => std::fs::write(root.join(rel), d)?,
        }
    }
    rec.crashed(files);
    Ok(())
}
