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
///
/// ```no_run
/// use std::time::Duration;
/// use ringkit_http::{Request, Response, Router, Server, ServerConfig};
/// let config = ServerConfig {
///     idle_timeout: Duration::from_secs(30),
///     send_timeout: Duration::from_secs(20),
///     max_connections: 5_000,
///     ..ServerConfig::default()
/// };
/// ringkit::run(async move {
///     let app = Router::new().get("/", |_req: Request| async { Response::ok().body("hi") });
///     Server::bind("127.0.0.1:8080")?.config(config).serve(app).await
/// })??;
/// # Ok::<(), std::io::Error>(())
/// ```
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
    /// How long a response may wait without a single byte leaving (a
    /// client that stops reading: slow-read defence). Measured between two
    /// writes that make progress, as nginx's `send_timeout`, so a slow but
    /// steady reader of a large file is never cut off. Over it the
    /// connection is closed. Default 60 s.
    pub send_timeout: Duration,
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
    /// How file bodies larger than the inline limit (16 KiB) are sent.
    /// Default [`FileSend::SendFile`].
    pub file_send: FileSend,
    /// Bytes of input held at once across all connections of one server
    /// thread: request heads not yet complete, bodies not yet whole
    /// (decoded so far), and bytes received after them. A connection whose
    /// input would take the total past it is answered 503 and closed, so
    /// clients that each send an almost-maximal body cannot grow the server
    /// without bound; but one asking for no more than its share (this over
    /// the number of connections holding input, and never less than 64 KiB)
    /// is admitted, and the largest holders are answered 503 and closed
    /// instead. A connection holding at most 64 KiB is never evicted, and
    /// while fewer than this / 64 KiB connections hold input, a request
    /// asking for at most 64 KiB is never refused; a client with more
    /// connections than that can fill it. A connection holds nothing once
    /// its request is complete. Default 32 MiB.
    pub max_buffered_bytes: usize,
}

/// How a file body larger than the inline limit (16 KiB) leaves; smaller
/// ones are read into the response buffer and leave with the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileSend {
    /// `sendfile(2)` after a head sent with `MSG_MORE`: no copy through
    /// user memory, one syscall per socket-buffer-full, on both backends.
    #[default]
    SendFile,
    /// `splice(2)` file -> the connection's pipe -> socket, corked
    /// (`TCP_CORK`): no copy either, but two splices a pipe-full and two
    /// `setsockopt`s a response. Kept to measure against `SendFile`.
    Splice,
    /// Read each piece into a buffer and send it (ring reads and sends on
    /// io_uring: no syscall outside the ring, but two copies of each byte).
    Copy,
}

impl FileSend {
    /// Parse `sendfile`, `splice` or `copy` (`on` is `sendfile`, `off` is
    /// `copy`).
    pub fn parse(s: &str) -> Result<FileSend, String> {
        match s {
            "sendfile" | "on" => Ok(FileSend::SendFile),
            "splice" => Ok(FileSend::Splice),
            "copy" | "off" => Ok(FileSend::Copy),
            _ => Err(format!("{s:?}: want sendfile, splice or copy")),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            limits: Limits::default(),
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            send_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            shutdown_grace: Duration::from_secs(30),
            nodelay: true,
            file_send: FileSend::SendFile,
            max_buffered_bytes: 32 << 20,
        }
    }
}
