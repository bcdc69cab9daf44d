//! The HTTP workload: a verifying load generator, wrk as the reference
//! generator, and the `compare http` study (nginx, ringkit on io_uring and
//! epoll, hyper).
//!
//! - [`response`]: framing of responses (pure).
//! - [`load`]: the built-in generator on ringkit's runtime.
//! - [`wrk`]: running wrk pinned and parsing its report.
//! - [`study()`]: `ringkit compare http`; its report section is built in
//!   `report`.

pub mod load;
mod report;
pub mod response;
mod sample;
mod study;
pub mod wrk;

pub use study::{
    nginx_conf, study, HttpResults, HttpSample, HttpSummary, LoadTool, Workload, NGINX,
};
