//! The HTTP workload: a verifying load generator, wrk as the reference
//! generator, and the `compare http` study (nginx, ringkit on io_uring and
//! epoll, hyper).
//!
//! - [`response`]: framing of responses (pure).
//! - [`load`]: the built-in generator on ringkit's runtime (`exchange`: one
//!   batch of requests written, its responses read and checked).
//! - [`wrk`]: running wrk pinned and parsing its report.
//! - `results`: samples and summaries; `nginx`: the peer's configuration.
//! - [`study()`]: `ringkit compare http` (`sample` runs one server under one
//!   load); its report section is built in `report`. `compare static`
//!   ([`crate::serve`]) runs on the same machinery (`Spec`, `run`).

mod exchange;
pub mod load;
mod nginx;
mod open;
mod report;
pub mod response;
mod results;
mod sample;
mod study;
pub mod wrk;

pub use nginx::{nginx_conf, Site, CACHE_VALID_SECS, NGINX};
pub(crate) use report::section;
pub use results::{HttpResults, HttpSample, HttpSummary, LoadTool, Workload};
pub(crate) use sample::Run;
pub use study::study;
pub(crate) use study::{nginx_contender, nginx_dir, peer_has, run, Spec, RETURN_200_PAD};
