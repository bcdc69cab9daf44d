//! ringkit-uring: io_uring on raw syscalls.
//!
//! ringkit's own user-space io_uring interface, like liburing but in Rust:
//! `io_uring_setup`, `io_uring_enter` and `io_uring_register` through
//! `libc::syscall`, the SQ/CQ rings and SQE array through `mmap`.
//!
//! - [`sys`]: the kernel ABI, pinned by layout tests.
//! - [`Builder`] / [`IoUring`]: setup with flags (stripping refused ones),
//!   submit, wait with timeout, SQPOLL wake-up, overflow flush, registered fd.
//! - [`opcode`]: one declarative entry per operation.
//! - [`BufRing`]: provided-buffer rings.
//! - [`Probe`] / [`KernelReport`]: what the kernel supports and why not.
//!
//! This crate has no async code and does not allocate on the hot path.
//! Pushing an SQE that points at memory is `unsafe`: the caller promises the
//! memory outlives the operation.
//!
//! ```no_run
//! use ringkit_uring::{opcode, IoUring};
//! let mut ring = IoUring::new(8)?;
//! let nop = opcode::Nop::new().build().user_data(42);
//! // SAFETY: a NOP references no memory.
//! unsafe { ring.push(nop.sqe()).expect("sq has room") };
//! ring.submit_and_wait(1)?;
//! let cqe = ring.completions().next().unwrap();
//! assert_eq!((cqe.user_data, cqe.res), (42, 0));
//! # Ok::<(), std::io::Error>(())
//! ```

#![warn(missing_docs)]

mod barrier;
mod buf_ring;
mod cqueue;
pub mod opcode;
mod probe;
mod register;
mod ring;
mod send_ring;
mod squeue;
pub mod sys;

pub use buf_ring::BufRing;
pub use cqueue::{CompletionQueue, Completions, Cqe};
pub use probe::{
    explain_setup_error, kernel_version, skipped_chain_posts_one_cqe, KernelReport, Probe,
};
pub use ring::{flag_names, Builder, IoUring};
pub use send_ring::SendRing;
pub use squeue::{SqFull, SubmissionQueue};
