//! The HTTP workload: a verifying load generator, wrk as the reference
//! generator, and the `compare http` study (nginx, ringkit on io_uring and
//! epoll, hyper).
//!
//! - [`response`]: framing of responses (pure).
//! - [`load`]: the built-in generator on ringkit's runtime.

pub mod load;
pub mod response;

use std::io;

use crate::study::{Section, StudyOpts};

/// Run the http study for `ringkit compare`.
pub fn study(_opts: &StudyOpts, _progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "the http study is not built yet",
    ))
}
