//! openraft on ringkit.
//!
//! - [`runtime`]: [`RingkitRuntime`], ringkit as openraft's `AsyncRuntime`
//!   (passes `openraft_rt::testing::Suite` on io_uring and on epoll).
//!
//! Built on openraft 0.10.0-alpha.37 with its `single-threaded` feature:
//! a `Raft` and its tasks live on one ringkit thread.

pub mod runtime;

pub use runtime::RingkitRuntime;
