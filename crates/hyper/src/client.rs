//! A hyper HTTP/1.1 client connection over a ringkit stream.

use http_body::Body;
use hyper::client::conn::http1::{self, Connection, SendRequest};

use crate::HyperIo;

/// Handshake HTTP/1.1 over `io` (e.g. `TcpStream::connect(..).await?.into()`).
/// Spawn the returned connection (`ringkit::spawn`) and send requests with
/// the `SendRequest`.
pub async fn handshake<B>(
    io: impl Into<HyperIo>,
) -> hyper::Result<(SendRequest<B>, Connection<HyperIo, B>)>
where
    B: Body + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    http1::Builder::new().handshake(io.into()).await
}
