//! hyper and axum on ringkit, completion-based.
//!
//! - [`HyperIo`]: a ringkit stream under hyper's `rt::Read`/`rt::Write`.
//!   Reads come from the stream's multishot receive into the runtime's
//!   buffer ring (io_uring) or from readiness reads (epoll); writes collect
//!   in an owned buffer and go out as whole sends. See
//!   [`ringkit::net::PollIo`] for how, and how it differs from bridges that
//!   poll for readiness inside io_uring or zero-fill the caller's buffer.
//! - [`LocalExec`] and [`RingkitTimer`]: hyper's executor (spawns on the
//!   current ringkit thread; `!Send` futures allowed) and timer (on
//!   `ringkit::time`).
//! - [`serve`]: a thread-per-core server: one runtime, one `SO_REUSEPORT`
//!   listener per thread, HTTP/1.1 and HTTP/2 (hyper-util's auto builder,
//!   h2 by prior knowledge), graceful shutdown on SIGINT/SIGTERM.
//! - `tls` (feature `tls`, off by default: it pulls rustls and ring): TLS
//!   with rustls over the same I/O (`ServeConfig::tls`; ALPN `h2` and
//!   `http/1.1`).
//! - [`client::handshake`]: a hyper HTTP/1.1 client connection over a
//!   ringkit stream.
//!
//! Supported: hyper 1.x, hyper-util 0.1, and axum 0.8 (an axum `Router`
//! is a tower service; [`serve`] takes any tower service).
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! let app = Router::new().route("/", get(|| async { "Hello, World!" }));
//! // One thread per core; `make` runs once on each, inside its runtime.
//! let cfg = ringkit_hyper::ServeConfig::new("127.0.0.1:8080".parse().unwrap());
//! ringkit_hyper::serve(cfg, move || app.clone()).unwrap();
//! ```
//!
//! The library prints nothing: each thread logs the address it listens on
//! and its backend through `tracing` at `info`. Install a subscriber to see
//! it, for example `tracing_subscriber::fmt().init()` first in `main`.

pub mod client;
mod conn;
mod frames;
#[cfg(feature = "hello")]
pub mod hello;
mod io;
mod rt;
mod server;
mod service;
#[cfg(feature = "tls")]
pub mod tls;

/// What [`ServeConfig::tls`] holds: a rustls server configuration (with
/// the `tls` feature; see [`tls::server_config`]).
#[cfg(feature = "tls")]
pub type TlsConfig = std::sync::Arc<ringkit_tls::rustls::ServerConfig>;

/// What [`ServeConfig::tls`] holds. Without the `tls` feature there is no
/// TLS, and no value of this type: `None` is the only choice.
#[cfg(not(feature = "tls"))]
#[derive(Debug, Clone)]
pub enum TlsConfig {}

pub use io::HyperIo;
pub use rt::{LocalExec, RingkitSleep, RingkitTimer};
pub use server::{serve, serve_listener, ServeConfig};
pub use service::{ConnLimits, HttpBody, HttpService};
