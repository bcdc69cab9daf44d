//! What a connection serves and within which limits: the service and
//! body traits [`crate::serve`] takes, and [`ConnLimits`].

use std::time::Duration;

use http_body::Body;
use hyper::body::Incoming;
use hyper::{Request, Response};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body [`serve`](crate::serve) can send (any `http_body::Body` whose error
/// converts to a boxed error; axum's `Body` is one).
pub trait HttpBody: Body<Error: Into<BoxError>> + 'static {}

impl<B: Body<Error: Into<BoxError>> + 'static> HttpBody for B {}

/// A tower service [`serve`](crate::serve) can run (an axum `Router` is one): hyper
/// requests in, responses with an [`HttpBody`] out; cloned per connection,
/// so it need not be `Send`.
pub trait HttpService<B: HttpBody>:
    tower_service::Service<
        Request<Incoming>,
        Response = Response<B>,
        Error: Into<BoxError>,
        Future: 'static,
    > + Clone
    + 'static
{
}

impl<S, B> HttpService<B> for S
where
    B: HttpBody,
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + 'static,
    S::Error: Into<BoxError>,
    S::Future: 'static,
{
}

/// The per-connection limits of [`serve_listener`](crate::serve_listener); the default is
/// [`crate::ServeConfig::new`]'s.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// See [`crate::ServeConfig::send_timeout`].
    pub send_timeout: Duration,
    /// See [`crate::ServeConfig::header_timeout`].
    pub header_timeout: Duration,
    /// See [`crate::ServeConfig::idle_timeout`].
    pub idle_timeout: Duration,
    /// See [`crate::ServeConfig::max_buffered_bytes`].
    pub max_buffered_bytes: usize,
    /// See [`crate::ServeConfig::max_connections`].
    pub max_connections: usize,
    /// See [`crate::ServeConfig::grace`].
    pub grace: Duration,
}
