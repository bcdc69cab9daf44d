//! [`serve`]: a ringkit-http server on N threads, one `SO_REUSEPORT`
//! listener each ([`ringkit::serve_threads`], the one way ringkit's
//! servers start), until `SIGINT`/`SIGTERM` and a graceful drain.

use std::io;
use std::net::SocketAddr;

use ringkit::LaunchConfig;

use crate::{Handler, Server, ServerConfig};

/// Serve on `launch`'s threads: thread `i` builds a [`Server`] on its
/// listener with `config`, and `make(server, i)` returns the server (with
/// any per-thread setting added, such as [`Server::tls`]) and its handler.
/// Returns once every thread has drained after `SIGINT`/`SIGTERM`, or with
/// the first thread's error (an address that cannot be bound is this
/// call's error, naming the address, before any thread runs). Prints
/// nothing.
///
/// ```no_run
/// use ringkit_http::{serve, Request, Response, ServerConfig};
/// serve(ringkit::LaunchConfig::new(2), "127.0.0.1:8080".parse().unwrap(),
///       ServerConfig::default(), |server, _thread| {
///     (server, |_req: Request| async { Response::ok().body("hello\n") })
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve<H, F>(
    launch: LaunchConfig,
    addr: SocketAddr,
    config: ServerConfig,
    make: F,
) -> io::Result<()>
where
    H: Handler,
    F: Fn(Server, usize) -> (Server, H) + Send + Sync + Clone + 'static,
{
    ringkit::serve_threads(launch, addr, move |i, listener| {
        let (make, config) = (make.clone(), config.clone());
        async move {
            let server = Server::from_listener(listener).config(config);
            let (server, handler) = make(server, i);
            server.serve(handler).await
        }
    })
}
