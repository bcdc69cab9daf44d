//! The axum app of the `axum_hello` example, of `ringkit axum` and of the
//! `axum-tokio` peer of `ringkit compare axum` (one definition, so every
//! contender serves the same bytes).
//!
//! - `GET /`: `Hello, World!` as plain text (13 bytes).
//! - `GET /json`: `{"message":"Hello, World!"}` (27 bytes).
//! - `GET /user/{id}`: `{"id":"<id>"}`.
//! - `GET /bytes/{n}`: `n` bytes (at most 16 MiB; for memory studies),
//!   slices of one buffer shared by every request, so a client that asks
//!   for many and reads none makes the server allocate nothing per request.

use axum::extract::Path;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

/// Body of `GET /`.
pub const ROOT_BODY: &str = "Hello, World!";
/// Body of `GET /json`.
pub const JSON_BODY: &str = r#"{"message":"Hello, World!"}"#;
/// Body length of `GET /`.
pub const ROOT_LEN: usize = ROOT_BODY.len();
/// Body length of `GET /json`.
pub const JSON_LEN: usize = JSON_BODY.len();

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

#[derive(Serialize)]
struct User {
    id: String,
}

/// `n` bytes of `x` (at most 16 MiB), shared.
fn bytes(n: usize) -> axum::body::Bytes {
    static ALL: std::sync::OnceLock<axum::body::Bytes> = std::sync::OnceLock::new();
    ALL.get_or_init(|| axum::body::Bytes::from(vec![b'x'; 16 << 20]))
        .slice(..n.min(16 << 20))
}

/// The app.
pub fn app() -> Router {
    Router::new()
        .route("/", get(|| async { ROOT_BODY }))
        .route(
            "/json",
            get(|| async {
                Json(Message {
                    message: "Hello, World!",
                })
            }),
        )
        .route(
            "/user/{id}",
            get(|Path(id): Path<String>| async { Json(User { id }) }),
        )
        .route(
            "/bytes/{n}",
            get(|Path(n): Path<usize>| async move { bytes(n) }),
        )
}
