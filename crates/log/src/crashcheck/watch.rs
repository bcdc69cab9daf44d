//! What the live log shows must already be durable: [`Log::state`] is
//! "the state last saved durably", so a Raft node that reads its vote
//! there may act on it. The workload gives the recorder a probe of the
//! open log's state; at every file operation the recorder asks it, and a
//! state shown for the first time goes in the trace as acknowledged
//! (`Edit::StateSaved`), judged like any other: a log that showed a state
//! before its file was durable loses it in the crash states there.
//!
//! [`Log::state`]: crate::Log::state

use std::cell::{Cell, RefCell};

/// A probe of the state the open log shows: its number in the workload's
/// sequence of saved states (see `judge::state_bytes`), if any.
pub type Probe = Box<dyn Fn() -> Option<u64>>;

/// The recorder's watch on the live log's state.
#[derive(Default)]
pub struct Watch {
    probe: RefCell<Option<Probe>>,
    shown: Cell<Option<u64>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("shown", &self.shown.get())
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// Watch a newly opened log (`None`: none open). What it shows at
    /// once is what its recovery found, judged as such, not news.
    pub fn set(&self, probe: Option<Probe>) {
        self.shown.set(probe.as_ref().and_then(|p| p()));
        *self.probe.borrow_mut() = probe;
    }

    /// The state the log shows now, if it was not shown before.
    pub(super) fn news(&self) -> Option<u64> {
        let now = self.probe.borrow().as_ref().and_then(|p| p())?;
        (self.shown.replace(Some(now)) != Some(now)).then_some(now)
    }
}

/// The number of a state the workload saved (`state <seed> <n>`).
pub(super) fn state_number(bytes: &[u8]) -> Option<u64> {
    std::str::from_utf8(bytes)
        .ok()?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}
