//! Limits on what a client may send, and the server's settings.
//!
//! The defaults are meant for production: they match or undercut what
//! nginx accepts by default, and every one of them bounds memory or time a
//! single connection can hold.

use std::time::Duration;

/// Most header fields a request may carry, whatever [`Limits::max_headers`]
/// says (the parser keeps their positions in a fixed array on the stack).
pub const MAX_HEADERS_CAP: usize = 256;

/// Parser limits. Exceeding one gives the status named on each field, with
/// `Connection: close`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the request head (request line and header fields, up to and
    /// including the blank line). Over it: 431 (414 if the request line alone
    /// is over [`Limits::max_uri_len`]). Default 16 KiB.
    pub max_head_bytes: usize,
    /// Header fields. Over it: 431. Default 100, at most [`MAX_HEADERS_CAP`].
    pub max_headers: usize,
    /// Bytes of the request target. Over it: 414. Default 8 KiB.
    pub max_uri_len: usize,
    /// Bytes of a request body (decoded, for chunked). Over it: 413.
    /// Default 1 MiB.
    pub max_body_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 16 * 1024,
            max_headers: 100,
            max_uri_len: 8 * 1024,
            max_body_bytes: 1024 * 1024,
        }
    }
}

impl Limits {
    /// The header-count limit actually applied (`max_headers` capped).
    pub fn header_slots(&self) -> usize {
        self.max_headers.clamp(1, MAX_HEADERS_CAP)
    }
}

/// Server settings: parser [`Limits`], timeouts and connection caps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// What a request may hold.
    pub limits: Limits,
    /// How long a kept-alive connection may sit idle between requests before
    /// the server closes it (silently: no request is in progress). Default 60 s.
    pub idle_timeout: Duration,
    /// How long a client may take to send a whole request head once its first
    /// byte has arrived (slowloris defence) and, likewise, a whole body. Over
    /// it the server answers 408 and closes. Default 10 s.
    pub header_timeout: Duration,
    /// Connections served at once per server thread. Beyond it, a new
    /// connection is accepted and closed at once (the client sees a reset or
    /// EOF), which keeps the listen backlog from filling with connections that
    /// would time out anyway. Default 10 000.
    pub max_connections: usize,
    /// On shutdown, how long to wait for active connections to finish their
    /// current response before dropping them. Default 30 s.
    pub shutdown_grace: Duration,
    /// Set `TCP_NODELAY` on accepted connections (default true: responses go
    /// out in one write, so Nagle only adds latency).
    pub nodelay: bool,
    /// Send file bodies larger than the inline limit (16 KiB) without
    /// copying them through user memory: `splice(2)` file -> pipe ->
    /// socket (`IORING_OP_SPLICE` on io_uring). Default true; false reads
    /// each piece into a buffer and sends it (two copies of every byte).
    pub zero_copy: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            limits: Limits::default(),
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            max_connections: 10_000,
            shutdown_grace: Duration::from_secs(30),
            nodelay: true,
            zero_copy: true,
        }
    }
}
