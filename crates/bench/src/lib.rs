//! ringkit-bench: the studies `ringkit compare` runs, their load generators
//! and the harness they share. docs/ARCHITECTURE.md says how they measure.
//!
//! - [`harness`]: what every study shares (nothing in it imports a study).
//! - [`raw`]: the studies' code that pushes SQEs on a bare ring itself.
//! - one module per study: [`echo`], [`generator`], [`http`] (with
//!   [`axum`], [`tls`], [`pipeline`]), [`serve`] (static files), [`app`]
//!   (a real service in hosted mode) and [`grpc`] (its gRPC through ghz),
//!   [`wakeup`], [`nop`],
//!   [`file`](mod@file), [`log`] (durable appends); and [`torture`], the
//!   chaos load.

#![warn(missing_docs)]

pub mod app;
pub mod axum;
pub mod echo;
pub mod file;
pub mod generator;
pub mod grpc;
pub mod harness;
pub mod http;
pub mod latency;
pub mod log;
pub mod nop;
pub mod pipeline;
pub mod raft;
pub mod raw;
pub mod serve;
pub mod tls;
pub mod torture;
pub mod wakeup;

#[cfg(test)]
mod golden_tests;
