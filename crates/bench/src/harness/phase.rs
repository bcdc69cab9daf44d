//! Moments of a load run, for callers that sample a server around the
//! measured window.

/// Moments of a load run, for callers that sample the server around the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// All connections are up; the window starts now.
    WindowStart,
    /// The window ended now.
    WindowEnd,
}
