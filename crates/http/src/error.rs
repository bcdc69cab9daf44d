//! Why a request was refused, and the status that says so.

use crate::StatusCode;

/// A request the parser refuses. Every variant maps to the status the server
/// answers with ([`Error::status`]); the connection is closed afterwards,
/// because after a framing error the next request's start is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Malformed syntax or framing, or a request-smuggling pattern (400).
    /// The text says which rule was broken.
    BadRequest(&'static str),
    /// The request target is longer than [`crate::Limits::max_uri_len`] (414).
    UriTooLong,
    /// The head is larger than [`crate::Limits::max_head_bytes`], or has more
    /// header fields than [`crate::Limits::max_headers`] (431).
    HeadersTooLarge,
    /// The body is larger than [`crate::Limits::max_body_bytes`] (413).
    BodyTooLarge,
    /// The version is not HTTP/1.0 or HTTP/1.1 (505).
    VersionNotSupported,
    /// A transfer coding other than `chunked` was applied (501).
    NotImplemented(&'static str),
    /// An `Expect` other than `100-continue` (417).
    ExpectationFailed,
}

impl Error {
    /// The status the server answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::UriTooLong => StatusCode::URI_TOO_LONG,
            Error::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Error::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Error::VersionNotSupported => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
            Error::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            Error::ExpectationFailed => StatusCode::EXPECTATION_FAILED,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::BadRequest(why) => write!(f, "bad request: {why}"),
            Error::NotImplemented(why) => write!(f, "not implemented: {why}"),
            other => write!(f, "{}", other.status()),
        }
    }
}

impl std::error::Error for Error {}
