//! The server: accept connections on one runtime thread, one task each.
//!
//! ```no_run
//! use ringkit_http::{Request, Response, Server};
//! ringkit::run(async {
//!     Server::bind("127.0.0.1:8080")?
//!         .serve(|_req: Request| async { Response::ok().body("hello\n") })
//!         .await
//! })
//! .unwrap()
//! .unwrap();
//! ```
//!
//! A [`Server`] runs on the current thread's runtime. For several threads,
//! start one per thread with [`ringkit::launch`], each bound with
//! [`Server::bind_reuseport`] to the same address: the kernel spreads
//! connections over their listeners.
//!
//! # Connection cap
//! Each server thread serves at most [`ServerConfig::max_connections`] at
//! once. A connection beyond it is accepted and closed at once: the client
//! sees EOF (rather than waiting in the listen backlog for a slot that may
//! never come, and the backlog stays free for connections that can be served).
//!
//! # Graceful shutdown
//! By default [`Server::serve`] runs until `SIGINT` or `SIGTERM`
//! ([`ringkit::signal::shutdown_requested`]); [`Server::with_shutdown`]
//! takes any future instead. When it resolves:
//! 1. the listener is closed: no new connections;
//! 2. connections waiting between requests close now;
//! 3. connections in the middle of a request finish it; its response carries
//!    `Connection: close`, and the connection closes after it;
//! 4. `serve` returns `Ok` when the last connection is gone, or after
//!    [`ServerConfig::shutdown_grace`]. Connections still open then are
//!    dropped with the runtime.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::rc::Rc;

use ringkit::net::TcpListener;

use crate::conn::{self, Shared};
use crate::{Handler, ServerConfig};

/// An HTTP/1.1 server on one runtime thread. See the module docs.
pub struct Server {
    listener: TcpListener,
    config: ServerConfig,
    accepted: Option<Rc<Cell<u64>>>,
    shutdown: Option<Pin<Box<dyn Future<Output = ()>>>>,
    tls: Option<crate::TlsConfig>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listener", &self.listener)
            .field("config", &self.config)
            .finish()
    }
}

impl Server {
    /// Listen on `addr`.
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<Server> {
        Ok(Server::from_listener(TcpListener::bind(addr)?))
    }

    /// Listen on `addr` with `SO_REUSEPORT`, so every thread of a
    /// thread-per-core server can bind the same address.
    pub fn bind_reuseport(addr: impl ToSocketAddrs) -> io::Result<Server> {
        Ok(Server::from_listener(TcpListener::bind_reuseport(addr)?))
    }

    /// Serve on an existing listener.
    pub fn from_listener(listener: TcpListener) -> Server {
        Server {
            listener,
            config: ServerConfig::default(),
            accepted: None,
            shutdown: None,
            tls: None,
        }
    }

    /// Use these settings.
    pub fn config(mut self, config: ServerConfig) -> Server {
        self.config = config;
        self
    }

    /// Count accepted connections in `counter` (for the benchmark's
    /// counters file; hidden from the docs: not part of the API a program
    /// needs).
    #[doc(hidden)]
    pub fn count_accepted(mut self, counter: Rc<Cell<u64>>) -> Server {
        self.accepted = Some(counter);
        self
    }

    /// Shut down gracefully when `signal` resolves, instead of on
    /// `SIGINT`/`SIGTERM`.
    pub fn with_shutdown(mut self, signal: impl Future<Output = ()> + 'static) -> Server {
        self.shutdown = Some(Box::pin(signal));
        self
    }

    /// Serve TLS with this configuration (`ringkit_tls::server_config`).
    /// This server speaks HTTP/1.x only: any other protocol the
    /// configuration offers in ALPN (`h2`) is taken out of this server's
    /// copy, so a client that prefers h2 negotiates `http/1.1` (a client
    /// that offers only h2 is refused in the handshake) instead of sending
    /// h2 frames to an HTTP/1 parser. (ringkit-hyper's `serve` speaks h2.)
    /// File bodies are read and encrypted, not sent with `sendfile` (no
    /// kTLS).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: crate::TlsConfig) -> Server {
        let http1 = |p: &Vec<u8>| p.as_slice() == b"http/1.1" || p.as_slice() == b"http/1.0";
        let config = if config.alpn_protocols.iter().all(http1) {
            config
        } else {
            let mut c = (*config).clone();
            c.alpn_protocols.retain(http1);
            std::sync::Arc::new(c)
        };
        self.tls = Some(config);
        self
    }

    /// The listening address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve connections with `handler` until shutdown (see the module docs).
    /// Returns an error only if the server cannot run at all.
    pub async fn serve(self, handler: impl Handler) -> io::Result<()> {
        let Server {
            listener,
            config,
            accepted,
            shutdown,
            tls,
        } = self;
        let mut shutdown = match shutdown {
            Some(s) => s,
            None => {
                ringkit::signal::install()?;
                Box::pin(ringkit::signal::shutdown_requested())
            }
        };
        let grace = config.shutdown_grace;
        let nodelay = config.nodelay;
        let send_timeout = config.send_timeout;
        let max = config.max_connections;
        let shared = Rc::new(Shared::new(config, tls));
        let handler = Rc::new(handler);
        // Accept errors (EMFILE, ENFILE, ENOBUFS...) back off and keep serving.
        while let Some(stream) = listener.accept_until(shutdown.as_mut()).await {
            if let Some(c) = &accepted {
                c.set(c.get() + 1);
            }
            if shared.drain.active() >= max {
                drop(stream);
                continue;
            }
            if nodelay {
                let _ = stream.set_nodelay(true);
            }
            stream.set_write_timeout(Some(send_timeout));
            let guard = shared.drain.enter();
            ringkit::spawn(conn::serve(stream, handler.clone(), shared.clone(), guard));
        }
        drop(listener);
        shared.drain.start();
        if ringkit::time::timeout(grace, shared.drain.drained())
            .await
            .is_err()
        {
            tracing::warn!(
                "ringkit-http: {} connections still open after the {grace:?} shutdown grace",
                shared.drain.active()
            );
        }
        Ok(())
    }
}

/// Serve `handler` on `listener` with `config` until `SIGINT`/`SIGTERM`:
/// shorthand for `Server::from_listener(listener).config(config).serve(handler)`.
pub async fn serve_on(
    listener: TcpListener,
    config: ServerConfig,
    handler: impl Handler,
) -> io::Result<()> {
    Server::from_listener(listener)
        .config(config)
        .serve(handler)
        .await
}
