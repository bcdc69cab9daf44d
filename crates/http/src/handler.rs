//! What serves a request: any `Fn(Request) -> impl Future<Output = Response>`.
//!
//! Handlers run on the connection's runtime thread and need not be `Send`.
//! The server shares one handler among the connections of a thread (in an
//! `Rc`); with several threads, each builds its own (see
//! [`crate::Server::serve`]).

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::{Request, Response};

/// Serves requests. Implemented for every `Fn(Request) -> Fut` where `Fut`
/// yields a [`Response`], and by [`crate::Router`].
///
/// ```
/// use ringkit_http::{Handler, Request, Response};
/// async fn hello(_req: Request) -> Response {
///     Response::ok().body("hello")
/// }
/// fn takes_handler(_: impl Handler) {}
/// takes_handler(hello);
/// ```
pub trait Handler: 'static {
    /// Serve one request.
    fn call(&self, req: Request) -> impl Future<Output = Response>;
}

impl<F, Fut> Handler for F
where
    F: Fn(Request) -> Fut + 'static,
    Fut: Future<Output = Response>,
{
    fn call(&self, req: Request) -> impl Future<Output = Response> {
        self(req)
    }
}

/// A boxed response future (what type-erased handlers return).
pub type BoxResponse = Pin<Box<dyn Future<Output = Response>>>;

/// A [`Handler`] behind an `Rc`, for tables of different handlers. The
/// returned future owns a clone of the `Rc`, so it borrows nothing.
pub(crate) trait DynHandler {
    fn call_boxed(self: Rc<Self>, req: Request) -> BoxResponse;
}

impl<H: Handler> DynHandler for H {
    fn call_boxed(self: Rc<Self>, req: Request) -> BoxResponse {
        Box::pin(async move { self.call(req).await })
    }
}
