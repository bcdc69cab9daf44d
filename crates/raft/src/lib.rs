//! openraft on ringkit.
//!
//! - [`runtime`]: [`RingkitRuntime`], ringkit as openraft's `AsyncRuntime`
//!   (passes `openraft_rt::testing::Suite` on io_uring and on epoll).
//! - [`log_store`]: [`LogStore`], ringkit-log as openraft's
//!   `RaftLogStorage` (passes `openraft::testing::log::Suite` on both).
//! - [`kv`]: the replicated key-value map's types and state machine.
//! - [`node`]: a node of the map (log, state machine, openraft, and a
//!   listener for nodes and clients); [`network`]: openraft's network
//!   between nodes; [`client`]: a client; [`wire`]: their protocol.
//!
//! Built on openraft 0.10.0-alpha.37 with its `single-threaded` feature:
//! a `Raft` and its tasks live on one ringkit thread.

pub mod client;
pub mod history;
pub mod kv;
pub mod log_store;
pub mod network;
pub mod node;
pub mod runtime;
pub mod wire;

pub use openraft;

pub use kv::{KvConfig, KvRaft, KvStateMachine};
pub use log_store::LogStore;
pub use runtime::RingkitRuntime;
