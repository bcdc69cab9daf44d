//! openraft on ringkit.
//!
//! - [`runtime`]: [`RingkitRuntime`], ringkit as openraft's `AsyncRuntime`
//!   (passes `openraft_rt::testing::Suite` on io_uring and on epoll).
//! - [`log_store`]: [`LogStore`], ringkit-log as openraft's
//!   `RaftLogStorage` (passes `openraft::testing::log::Suite` on both).
//! - [`kv`]: the replicated key-value map's types and state machine.
//!
//! Built on openraft 0.10.0-alpha.37 with its `single-threaded` feature:
//! a `Raft` and its tasks live on one ringkit thread.

pub mod kv;
pub mod log_store;
pub mod runtime;

pub use kv::{KvConfig, KvRaft, KvStateMachine};
pub use log_store::LogStore;
pub use runtime::RingkitRuntime;
