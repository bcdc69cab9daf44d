//! Errors of the kinds studies return, in one call.

use std::io;

/// This machine cannot do it (a missing tool, kernel feature or peer): the
/// study or row is skipped with `msg` as the reason.
pub fn unsupported(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, msg.into())
}

/// The caller asked for something that cannot be run.
pub fn invalid_input(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// A tool or server answered something that does not parse or check.
pub fn invalid_data(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}
