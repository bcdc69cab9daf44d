//! What both chaos clients (echo and HTTP) count alike: sessions,
//! connections, verified bytes, and every way a connection can go wrong.

use std::fmt;

use serde::Serialize;

/// Errors kept verbatim in the report.
const KEEP_ERRORS: usize = 20;

/// The counts every chaos client keeps.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct Tally {
    /// Sessions started.
    pub sessions: u64,
    /// Connections established.
    pub connects: u64,
    /// Connections that could not be established (not counting unserved).
    pub connect_errors: u64,
    /// Bytes that came back and matched.
    pub bytes_verified: u64,
    /// Answers that came back wrong (a byte, a status or a length).
    pub mismatches: u64,
    /// Connections the server closed, reset or failed on before answering
    /// everything it had been sent.
    pub losses: u64,
    /// Connections where nothing came back within the stall limit.
    pub stalls: u64,
    /// Pipelined bursts.
    pub bursts: u64,
    /// After a graceful shutdown began: connections the server never
    /// answered (refused, or reset from the listen backlog).
    pub unserved_at_shutdown: u64,
    /// The first errors, verbatim.
    pub errors: Vec<String>,
}

impl Tally {
    /// Whether anything was lost or wrong.
    pub fn failed(&self) -> bool {
        self.mismatches + self.losses + self.stalls + self.connect_errors > 0
    }

    /// Keep `e` verbatim (the first few).
    pub(crate) fn error(&mut self, e: String) {
        if self.errors.len() < KEEP_ERRORS {
            self.errors.push(e);
        }
    }

    /// The failure line of the report, when [`Tally::failed`].
    pub(crate) fn failure(&self) -> Option<String> {
        self.failed().then(|| {
            format!(
                "clients: {} mismatches, {} losses, {} stalls, {} connect errors",
                self.mismatches, self.losses, self.stalls, self.connect_errors
            )
        })
    }

    /// The report's verified-bytes, failures and unserved lines.
    pub(crate) fn write_verified(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  bytes verified:   {} ({:.1} MiB)",
            self.bytes_verified,
            (self.bytes_verified / 1024) as f64 / 1024.0
        )?;
        writeln!(
            f,
            "  mismatches:       {}   losses: {}   stalls: {}   connect errors: {}",
            self.mismatches, self.losses, self.stalls, self.connect_errors
        )?;
        if self.unserved_at_shutdown > 0 {
            writeln!(
                f,
                "  unserved:         {} connections never answered after SIGTERM (listen backlog at close; not a loss)",
                self.unserved_at_shutdown
            )?;
        }
        Ok(())
    }

    /// The report's client error lines.
    pub(crate) fn write_errors(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.errors {
            writeln!(f, "    client error: {e}")?;
        }
        Ok(())
    }
}
