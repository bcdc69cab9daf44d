//! Static files for `ringkit serve DIR`.
//!
//! The pieces, each pure unless it says otherwise:
//! - [`path`]: request target → [`path::SafePath`] (percent-decoding,
//!   traversal refusal).
//! - [`resolve`]: opening a safe path beneath the root with
//!   `openat2(RESOLVE_BENEATH)` (file system).
//! - [`mime`]: content type by extension.
//! - [`conditional`]: `ETag`/`Last-Modified` and the `If-*` preconditions.
//! - [`range`]: `Range: bytes=…`.

pub mod conditional;
pub mod mime;
pub mod path;
pub mod range;
pub mod resolve;
