//! ringkit-http: HTTP/1.1 on the ringkit runtime.
//!
//! - A sans-I/O parser: [`parse_head`] (request heads, on httparse, with the
//!   framing and request-smuggling rules of RFC 9112), [`ChunkedDecoder`]
//!   (the chunked coding as a pure state machine) and [`RequestDecoder`]
//!   (whole requests out of a byte stream, pipelined ones in order).
//! - [`Limits`] and [`ServerConfig`]: sizes and timeouts, with production
//!   defaults; every refusal maps to a status ([`Error::status`]).
//! - [`Handler`] (any `async fn(Request) -> Response`), [`Router`],
//!   [`Response`] with static, owned or file [`Body`].
//! - [`Server`]: one task per connection on the thread-per-core runtime,
//!   zero-copy pooled reads, one write per batch of pipelined responses,
//!   graceful shutdown on `SIGINT`/`SIGTERM`.
//!
//! ```no_run
//! use ringkit_http::{Request, Response, Router, Server};
//! ringkit::run(async {
//!     let app = Router::new().get("/", |_req: Request| async { Response::ok().body("hi\n") });
//!     Server::bind("127.0.0.1:8080")?.serve(app).await
//! })
//! .unwrap()
//! .unwrap();
//! ```

#![warn(missing_docs)]

mod budget;
pub mod chunked;
mod conn;
pub mod date;
pub mod decode;
mod encode;
mod error;
mod handler;
mod head;
mod limits;
mod method;
pub mod parse;
mod request;
mod response;
mod router;
pub mod server;
mod spare;
pub mod static_files;
mod status;
mod threads;
mod transport;

pub use chunked::ChunkedDecoder;
pub use decode::RequestDecoder;
pub use error::Error;
pub use handler::{BoxResponse, Handler};
pub use head::{Framing, Head};
pub use limits::{FileSend, Limits, ServerConfig, MAX_HEADERS_CAP};
pub use method::{Method, Version};
pub use parse::{parse_head, Parsed};
pub use request::Request;
pub use response::{Body, FileBody, HeaderText, Response};
pub use router::Router;
pub use server::{serve_on, Server};
pub use status::StatusCode;
pub use threads::serve;

/// What [`Server::tls`] takes: a rustls server configuration (feature
/// `tls`; build one with `ringkit_tls::server_config`).
#[cfg(feature = "tls")]
pub type TlsConfig = std::sync::Arc<ringkit_tls::rustls::ServerConfig>;

/// Without the `tls` feature there is no TLS and no value of this type.
#[cfg(not(feature = "tls"))]
#[derive(Debug, Clone)]
pub enum TlsConfig {}
