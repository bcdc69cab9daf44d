//! The studies' code that drives a bare `ringkit-uring` ring itself, pushing
//! SQEs whose memory it must keep valid until their CQEs: every such
//! `unsafe` push of the bench crate is here, each with its reason.
//!
//! - [`file`](mod@file): the file study's raw engine and the IOPOLL probe.
//! - [`nop`]: NOP batches (no memory at all).
//! - [`stamp`]: the wake-up study's 8-byte READ or multishot POLL.

pub mod file;
pub mod nop;
pub mod stamp;
