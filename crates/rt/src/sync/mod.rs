//! Synchronisation between the tasks of one runtime thread (all `!Send`).
//!
//! - [`Drain`]: the graceful-shutdown broadcast of a server thread.

mod drain;

pub use drain::{Drain, DrainGuard};
