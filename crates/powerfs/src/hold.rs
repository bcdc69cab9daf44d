//! Syncs held back, as a slow disk holds them: while held, a `fsync` or
//! `fdatasync` of a file or directory waits unanswered (the caller's
//! system call blocks; other requests are served), and its effect is not
//! made. [`PowerFs::release_syncs`](crate::PowerFs::release_syncs) carries
//! them out and answers them; [`PowerFs::fail_held_syncs`]
//! (crate::PowerFs::fail_held_syncs) answers them `EIO` without making
//! anything durable (the disk died with them).

use std::sync::{Mutex, MutexGuard};

use fuser::ReplyEmpty;

/// A sync waiting for the disk.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) ino: u64,
    pub(crate) dir: bool,
    pub(crate) reply: ReplyEmpty,
}

/// Whether syncs are held, and those waiting.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub(crate) on: bool,
    pub(crate) waiting: Vec<Waiting>,
}

/// The lock of the held syncs (taken before the model's, never inside it).
pub(crate) fn lock_held(h: &Mutex<Held>) -> MutexGuard<'_, Held> {
    h.lock().unwrap_or_else(|e| e.into_inner())
}
