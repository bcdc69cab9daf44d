//! The gRPC service `ringkit.demo.Demo` (demo.proto) as axum routes:
//! tonic's server-side codec and framing over ringkit-hyper's HTTP/2.
//! `Count` streams from a tokio task; when the client goes away the stream
//! is dropped, the task's next send fails and it ends (`GET /grpc/live`
//! counts the ones still running).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tonic::{server::Grpc, Status};
use tonic_prost::ProstCodec;

use crate::proto::{CountReply, CountRequest, SayReply, SayRequest, SERVICE};

/// `Count` producers still running, in this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(&format!("/{SERVICE}/Say"), post(say))
        .route(&format!("/{SERVICE}/Count"), post(count))
        .route(
            "/grpc/live",
            get(|| async { LIVE.load(Ordering::SeqCst).to_string() }),
        )
}

async fn say(req: Request) -> Response {
    let svc = tower::service_fn(|r: tonic::Request<SayRequest>| async move {
        let name = r.into_inner().name;
        if name.is_empty() {
            return Err(Status::invalid_argument("name is empty"));
        }
        Ok(tonic::Response::new(SayReply {
            message: format!("Hello, {name}!"),
        }))
    });
    let mut grpc = Grpc::new(ProstCodec::<SayReply, SayRequest>::default());
    grpc.unary(svc, req)
        .await
        .map(axum::body::Body::new)
        .into_response()
}

type CountStream = tokio_stream::wrappers::ReceiverStream<Result<CountReply, Status>>;

async fn count(req: Request) -> Response {
    let svc = tower::service_fn(|r: tonic::Request<CountRequest>| async move {
        let CountRequest { to, interval_ms } = r.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        LIVE.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            for n in 1..=to {
                if tx.send(Ok(CountReply { n })).await.is_err() {
                    break; // the client went away
                }
                tokio::time::sleep(Duration::from_millis(interval_ms.into())).await;
            }
            LIVE.fetch_sub(1, Ordering::SeqCst);
        });
        Ok::<_, Status>(tonic::Response::new(CountStream::new(rx)))
    });
    let mut grpc = Grpc::new(ProstCodec::<CountReply, CountRequest>::default());
    grpc.server_streaming(svc, req)
        .await
        .map(axum::body::Body::new)
        .into_response()
}
