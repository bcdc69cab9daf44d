//! [`serve`]: a hyper service on every thread of a thread-per-core server.
//!
//! Each thread runs its own ringkit runtime (io_uring, or epoll with the
//! reason printed; with the `tokio` feature, hosting a tokio runtime so
//! handlers may call tokio and tokio-based crates), binds the address with `SO_REUSEPORT`, accepts, and
//! serves each connection with hyper-util's auto builder (HTTP/1.1, or
//! HTTP/2 when the client starts with the h2 preface). The service is made
//! once per thread and cloned per connection, so it need not be `Send`.
//!
//! Every connection runs under deadlines (see [`ConnLimits`]): a silent
//! socket, a trickled or stalled TLS handshake or preface, and an idle
//! keep-alive or HTTP/2 connection are closed, so idle sockets cannot hold
//! the connection slots for good.
//!
//! Shutdown: on SIGINT/SIGTERM (or the future given to [`serve_listener`])
//! the thread stops accepting, asks every connection to finish gracefully
//! (HTTP/1.1: after the response in flight; HTTP/2: GOAWAY), waits for them
//! up to the grace period, and returns.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;

use hyper_util::server::conn::auto;
use ringkit::net::TcpListener;
use ringkit::sync::Drain;
use ringkit::{Backend, LaunchConfig};

#[cfg(feature = "tls")]
use crate::tls::TlsIo;
use crate::TlsConfig;
use crate::{ConnLimits, HttpBody, HttpService, HyperIo, LocalExec, RingkitTimer};

/// HTTP/2 keep-alive: a ping this often while a stream is open, and the
/// connection closed when one goes unanswered this long.
const H2_PING_EVERY: Duration = Duration::from_secs(20);

/// Where and how [`serve`] runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address every thread binds (`SO_REUSEPORT`).
    pub addr: SocketAddr,
    /// Threads, one runtime and listener each.
    pub threads: usize,
    /// CPUs to pin the threads to (thread i on `cpus[i % len]`); empty: none.
    pub cpus: Vec<usize>,
    /// I/O backend.
    pub backend: Backend,
    /// How long connections may take to finish after a shutdown request.
    /// Hosted, `spawn_blocking` jobs still running then get at most this
    /// long again before `serve` returns without them.
    pub grace: Duration,
    /// Serve TLS with this configuration (feature `tls`; see
    /// `tls::server_config`).
    pub tls: Option<TlsConfig>,
    /// Close a connection whose writes have not moved a byte for this long
    /// (a client that stops reading; nginx's `send_timeout`): progress
    /// restarts the clock, so a slow but steady reader is served. 60 s.
    pub send_timeout: Duration,
    /// How long a client may take, from its first byte, to start its first
    /// request (TLS handshake and protocol preface included), and on
    /// HTTP/1.1 to send any request head (slowloris defence; hyper's
    /// `header_read_timeout`). 10 s.
    pub header_timeout: Duration,
    /// How long a connection may stay open with no request in flight: from
    /// the accept until its first byte, and from the end of one request to
    /// the start of the next (HTTP/1.1 keep-alive and HTTP/2 alike). 60 s.
    pub idle_timeout: Duration,
    /// Connections served at once per thread; beyond it a new connection
    /// is accepted and closed at once. 10 000.
    pub max_connections: usize,
    /// Bytes received and not yet part of a started request (request
    /// heads on their way, HTTP/2 frames before a request), across all
    /// connections of a thread; a connection whose read would take the
    /// total past it is closed. Request bodies are the handler's (axum's
    /// `DefaultBodyLimit`). 32 MiB.
    pub max_buffered_bytes: usize,
    /// Feature `tokio`: run the workers in ringkit's hosted mode, so
    /// handlers may use tokio and crates built on it. On by default with
    /// the feature; off measures what hosting costs.
    #[cfg(feature = "tokio")]
    pub host_tokio: bool,
}

impl ServeConfig {
    /// On `addr`: one thread per available core (as tokio's multi-thread
    /// runtime's default; `std::thread::available_parallelism`, 1 if
    /// unknown), each with its own runtime and listener; backend `auto`;
    /// 30 s of grace. Unlike tokio, it does not read `TOKIO_WORKER_THREADS`
    /// (a library reads no environment of its own accord): set `threads`
    /// from it if you want that.
    pub fn new(addr: SocketAddr) -> ServeConfig {
        ServeConfig {
            addr,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpus: Vec::new(),
            backend: Backend::Auto,
            grace: Duration::from_secs(30),
            tls: None,
            send_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_buffered_bytes: 32 << 20,
            #[cfg(feature = "tokio")]
            host_tokio: true,
        }
    }

    /// From the shared server flags (feature `clap`): their address, or
    /// `default_addr`, threads, CPUs and backend.
    #[cfg(feature = "clap")]
    pub fn from_args(a: &ringkit::LaunchArgs, default_addr: &str) -> ServeConfig {
        ServeConfig {
            threads: a.threads,
            cpus: a.cpus.clone(),
            backend: a.backend,
            ..ServeConfig::new(a.addr_or(default_addr))
        }
    }
}

impl Default for ConnLimits {
    fn default() -> ConnLimits {
        ConnLimits::from(&ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))))
    }
}

impl From<&ServeConfig> for ConnLimits {
    fn from(c: &ServeConfig) -> ConnLimits {
        ConnLimits {
            send_timeout: c.send_timeout,
            header_timeout: c.header_timeout,
            idle_timeout: c.idle_timeout,
            max_buffered_bytes: c.max_buffered_bytes,
            max_connections: c.max_connections,
            grace: c.grace,
        }
    }
}

/// Serve the tower service `make()` (an axum `Router`, for one) on every
/// thread until SIGINT/SIGTERM; returns once every thread has drained.
///
/// Every thread's listener is bound before any thread starts, so an
/// address that cannot be bound is this call's error (naming the address),
/// and nothing is left running. The library prints nothing: each thread
/// logs its address and backend through `tracing` (`info`).
///
/// `make` runs once on each worker thread, inside its runtime (hosted
/// tokio included): make per-thread state there, such as a database pool
/// (threads x pool size connections in all) or an HTTP client. State made
/// before `serve`, on another tokio runtime, is driven by that runtime
/// only; with the `tokio` feature `serve` logs a warning when called where
/// a tokio runtime is current for that reason (and because it blocks its
/// thread).
///
/// One pool shared by every thread (fewer database connections) is
/// possible but not what this crate tests: each connection is driven by
/// the runtime its tasks were spawned on, which must keep running, and a
/// request on another worker then wakes that thread and is woken back,
/// two cross-thread wake-ups per query that a per-thread pool does not
/// pay.
pub fn serve<M, S, B>(cfg: ServeConfig, make: M) -> io::Result<()>
where
    M: Fn() -> S + Send + Sync + Clone + 'static,
    S: HttpService<B>,
    B: HttpBody,
{
    #[cfg(feature = "tokio")]
    if tokio::runtime::Handle::try_current().is_ok() {
        // A warning, not an error: from a `spawn_blocking` job (beside a
        // tokio admin server, say) this is legitimate.
        tracing::warn!(
            "ringkit-hyper: serve called where a tokio runtime is current \
             (`#[tokio::main]`?): it blocks this thread until shutdown, so if this is that \
             runtime's thread it never runs again, and anything made on it (a connection \
             pool, a client) hangs the requests that use it. Call serve from a plain \
             `fn main`, and make per-thread state in its closure, which runs once on each \
             worker, inside its runtime"
        );
    }
    // With the `tokio` feature every worker hosts a tokio runtime, so
    // handlers may use tokio and the crates built on it.
    let builder = ringkit::Builder::new().backend(cfg.backend);
    #[cfg(feature = "tokio")]
    let builder = if cfg.host_tokio {
        // A `spawn_blocking` job still running after the drain gets at most
        // one more grace period (the drop of a tokio runtime would wait for
        // it without end).
        builder.host_tokio().host_shutdown_timeout(cfg.grace)
    } else {
        builder
    };
    let launch = LaunchConfig::new(cfg.threads.max(1))
        .cpus(cfg.cpus.clone())
        .builder(builder);
    let (limits, tls) = (ConnLimits::from(&cfg), cfg.tls.clone());
    ringkit::serve_threads(launch, cfg.addr, move |i, listener| {
        let (service, tls) = (make(), tls.clone());
        async move {
            tracing::info!(
                "ringkit-hyper: thread {i} listening on {} with {}",
                listener.local_addr()?,
                ringkit::backend_report().map_or_else(|| "no runtime".into(), |r| r.to_string())
            );
            let shutdown = ringkit::signal::shutdown_requested();
            serve_listener(listener, service, tls, shutdown, limits).await
        }
    })
    .map_err(|e| io::Error::new(e.kind(), format!("ringkit-hyper: {e}")))
}

/// Serve `service` on `listener` (on this runtime thread), through TLS if
/// `tls` is given, until `shutdown` resolves, then drain for at most
/// `limits.grace`.
pub async fn serve_listener<S, B>(
    listener: TcpListener,
    service: S,
    tls: Option<TlsConfig>,
    shutdown: impl Future<Output = ()>,
    limits: ConnLimits,
) -> io::Result<()>
where
    S: HttpService<B>,
    B: HttpBody,
{
    let grace = limits.grace;
    let mut builder = auto::Builder::new(LocalExec);
    builder
        .http1()
        .timer(RingkitTimer)
        .header_read_timeout(limits.header_timeout)
        // Queue head and body (HyperIo is vectored) instead of flattening
        // them into a per-connection buffer that keeps its largest size.
        .writev(true);
    // Pings while streams are open (never on an idle connection, which
    // the idle deadline closes): a peer that stops answering is dropped.
    builder
        .http2()
        .timer(RingkitTimer)
        .keep_alive_interval(Some(H2_PING_EVERY))
        .keep_alive_timeout(H2_PING_EVERY)
        // nginx's http2_max_concurrent_streams.
        .max_concurrent_streams(128);
    let builder = Rc::new(builder);
    let drain = Drain::new();
    // Bytes received before a request starts, across this thread's
    // connections (see `ConnLimits::max_buffered_bytes`).
    let budget = Rc::new(std::cell::Cell::new(0));
    let mut shutdown = pin!(shutdown);
    // Accept errors (EMFILE and friends) back off and keep serving.
    while let Some(stream) = listener.accept_until(shutdown.as_mut()).await {
        if drain.active() >= limits.max_connections.max(1) {
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        stream.set_write_timeout(Some(limits.send_timeout));
        let io = match &tls {
            None => HyperIo::from(stream),
            #[cfg(not(feature = "tls"))]
            Some(cfg) => match *cfg {},
            #[cfg(feature = "tls")]
            Some(cfg) => match TlsIo::new(stream.into_poll_io(), cfg.clone()) {
                Ok(t) => HyperIo::tls(t),
                Err(e) => {
                    tracing::warn!("ringkit-hyper: TLS: {e}");
                    continue;
                }
            },
        };
        let guard = drain.enter();
        let conn = crate::conn::serve(
            builder.clone(),
            io,
            service.clone(),
            limits,
            budget.clone(),
            guard,
        );
        drop(ringkit::spawn(conn));
    }
    // Close the listener before draining: a client that connects now is
    // refused instead of waiting on a connection nobody serves.
    drop(listener);
    drain.start();
    let _ = ringkit::time::timeout(grace, drain.drained()).await;
    Ok(())
}
