//! Synchronisation between the tasks of one runtime thread (all `!Send`).
//!
//! - [`Drain`]: the graceful-shutdown broadcast of a server thread.
//! - [`select`] / [`Either`]: race two futures without dropping either
//!   (e.g. a read against [`DrainGuard::draining`]).

mod drain;
mod select;

pub use drain::{Drain, DrainGuard};
pub use select::{select, Either};
