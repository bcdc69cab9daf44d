//! A real axum service on ringkit in hosted mode: PostgreSQL through a
//! pool, Redis, an upstream HTTP call and tokio timers in its handlers.
//! The same app runs on tokio's current-thread runtime with `--runtime
//! tokio`, for comparison.
//!
//! ```text
//! cargo run --release -p ringkit-hyper --features tokio --example axum_app -- \
//!     --addr 127.0.0.1:8080 --backend auto --pg postgres://app@127.0.0.1:5432/app \
//!     --redis redis://127.0.0.1:6379/ --upstream http://127.0.0.1:9000/
//! ```
//!
//! Routes: `GET /` hello; `GET /db/{id}` a row of table `items` as JSON
//! (404 when missing, 503 when the database is unreachable);
//! `GET|PUT /cache/{key}` Redis (404 when missing, 503 when Redis is
//! down); `GET /proxy` the upstream's answer (502 when it is down);
//! `GET /sleep/{ms}` answers after `tokio::time::sleep`. `--seed-rows N`
//! creates and fills `items` with ids 1..=N before serving. On the same
//! port, gRPC over HTTP/2: `ringkit.demo.Demo` (demo.proto), a unary
//! `Say` and a server-streaming `Count`.

mod grpc;
mod proto;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use clap::Parser;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Timeouts};
use serde_json::json;

#[derive(Parser, Debug, Clone)]
#[command(about = "An axum service (PostgreSQL, Redis, reqwest, tokio timers) on ringkit or tokio")]
#[command(mut_arg("addr", |a| a.default_value("127.0.0.1:8080")))]
struct Opts {
    /// Address (default 127.0.0.1:8080), ringkit backend, worker threads
    /// (one runtime each), CPUs.
    #[command(flatten)]
    launch: ringkit::LaunchArgs,
    /// Run on `ringkit` (hosted mode) or on `tokio` (current-thread).
    #[arg(long, default_value = "ringkit")]
    runtime: String,
    /// PostgreSQL URL, e.g. postgres://user@127.0.0.1:5432/db.
    #[arg(long)]
    pg: String,
    /// Redis URL, e.g. redis://127.0.0.1:6379/.
    #[arg(long)]
    redis: String,
    /// Upstream HTTP URL that `GET /proxy` fetches.
    #[arg(long)]
    upstream: String,
    /// Database connections per worker thread.
    #[arg(long, default_value_t = 8)]
    pool: usize,
    /// How long a request waits for the database before a 503, in ms.
    #[arg(long, default_value_t = 2000)]
    db_timeout_ms: u64,
    /// Create table `items` and fill it with ids 1..=N before serving.
    #[arg(long)]
    seed_rows: Option<u32>,
    /// Set Redis keys k0..k{N-1} to `value-NNNNNN` (six digits) before serving.
    #[arg(long)]
    seed_keys: Option<u32>,
    /// Seed (--seed-rows, --seed-keys) and exit without serving.
    #[arg(long)]
    seed_only: bool,
    /// ringkit without hosting tokio (measures what hosting costs): only
    /// `GET /` works; the other routes need tokio and fail.
    #[arg(long)]
    unhosted: bool,
}

/// What each worker thread's handlers share (made once per thread: the
/// pool's connections and Redis' connection live on that thread's loop).
#[derive(Clone)]
struct AppState {
    db: Pool,
    redis: Arc<tokio::sync::OnceCell<redis::aio::ConnectionManager>>,
    redis_client: redis::Client,
    http: reqwest::Client,
    upstream: Arc<str>,
}

fn state(o: &Opts) -> AppState {
    let pg: tokio_postgres::Config = o.pg.parse().expect("--pg: not a PostgreSQL URL");
    let mgr = Manager::from_config(
        pg,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let t = Some(Duration::from_millis(o.db_timeout_ms));
    let db = Pool::builder(mgr)
        .max_size(o.pool)
        .timeouts(Timeouts {
            wait: t,
            create: t,
            recycle: t,
        })
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .expect("database pool");
    AppState {
        db,
        redis: Arc::new(tokio::sync::OnceCell::new()),
        redis_client: redis::Client::open(o.redis.as_str()).expect("--redis: not a Redis URL"),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("HTTP client"),
        upstream: o.upstream.as_str().into(),
    }
}

fn app(s: AppState) -> Router {
    Router::new()
        .route("/", get(|| async { "Hello, World!" }))
        .route("/db/{id}", get(db_row))
        .route("/cache/{key}", get(cache_get).put(cache_put))
        .route("/proxy", get(proxy))
        .route("/sleep/{ms}", get(sleep))
        .merge(grpc::routes())
        .with_state(s)
}

/// An error answer: status and a JSON message.
fn fail(status: StatusCode, what: &str, e: impl std::fmt::Display) -> Response {
    (status, Json(json!({ "error": format!("{what}: {e}") }))).into_response()
}

async fn db_row(State(s): State<AppState>, Path(id): Path<i32>) -> Response {
    let client = match s.db.get().await {
        Ok(c) => c,
        Err(e) => return fail(StatusCode::SERVICE_UNAVAILABLE, "database unavailable", e),
    };
    let stmt = match client
        .prepare_cached("SELECT id, name, score FROM items WHERE id = $1")
        .await
    {
        Ok(st) => st,
        Err(e) => return fail(StatusCode::SERVICE_UNAVAILABLE, "database error", e),
    };
    match client.query_opt(&stmt, &[&id]).await {
        Ok(Some(row)) => Json(json!({
            "id": row.get::<_, i32>(0),
            "name": row.get::<_, String>(1),
            "score": row.get::<_, i64>(2),
        }))
        .into_response(),
        Ok(None) => fail(StatusCode::NOT_FOUND, "no such row", id),
        Err(e) => fail(StatusCode::SERVICE_UNAVAILABLE, "database error", e),
    }
}

async fn redis_conn(s: &AppState) -> Result<redis::aio::ConnectionManager, Response> {
    s.redis
        .get_or_try_init(|| redis::aio::ConnectionManager::new(s.redis_client.clone()))
        .await
        .cloned()
        .map_err(|e| fail(StatusCode::SERVICE_UNAVAILABLE, "redis unavailable", e))
}

async fn cache_get(State(s): State<AppState>, Path(key): Path<String>) -> Response {
    let mut c = match redis_conn(&s).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let v: redis::RedisResult<Option<Vec<u8>>> =
        redis::cmd("GET").arg(&key).query_async(&mut c).await;
    match v {
        Ok(Some(v)) => v.into_response(),
        Ok(None) => fail(StatusCode::NOT_FOUND, "no such key", key),
        Err(e) => fail(StatusCode::SERVICE_UNAVAILABLE, "redis error", e),
    }
}

async fn cache_put(
    State(s): State<AppState>,
    Path(key): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let mut c = match redis_conn(&s).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let r: redis::RedisResult<()> = redis::cmd("SET")
        .arg(&key)
        .arg(body.as_ref())
        .query_async(&mut c)
        .await;
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => fail(StatusCode::SERVICE_UNAVAILABLE, "redis error", e),
    }
}

async fn proxy(State(s): State<AppState>) -> Response {
    let r = match s.http.get(&*s.upstream).send().await {
        Ok(r) => r,
        Err(e) => return fail(StatusCode::BAD_GATEWAY, "upstream unreachable", e),
    };
    let status = StatusCode::from_u16(r.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    match r.bytes().await {
        Ok(b) => (status, b).into_response(),
        Err(e) => fail(StatusCode::BAD_GATEWAY, "upstream body", e),
    }
}

async fn sleep(Path(ms): Path<u64>) -> String {
    tokio::time::sleep(Duration::from_millis(ms.min(60_000))).await;
    format!("slept {ms} ms")
}

/// Create `items` with ids 1..=rows (idempotent).
async fn seed(pg: &str, rows: u32) -> Result<(), tokio_postgres::Error> {
    let (client, conn) = tokio_postgres::connect(pg, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(conn);
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS items (id integer PRIMARY KEY, name text NOT NULL, score bigint NOT NULL)",
        )
        .await?;
    let rows = rows as i32;
    client
        .execute(
            "INSERT INTO items SELECT g, 'item-' || g, (g * 7919) % 1000 FROM generate_series(1, $1) g \
             ON CONFLICT (id) DO NOTHING",
            &[&rows],
        )
        .await?;
    drop(client);
    let _ = driver.await;
    Ok(())
}

/// Set k0..k{keys-1} to `value-NNNNNN`.
async fn seed_redis(url: &str, keys: u32) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut c = client.get_multiplexed_async_connection().await?;
    for chunk in (0..keys).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET")
                .arg(format!("k{i}"))
                .arg(format!("value-{i:06}"))
                .ignore();
        }
        p.query_async::<()>(&mut c).await?;
    }
    Ok(())
}

/// The same app on tokio: one current-thread runtime per worker, each
/// with its own `SO_REUSEPORT` listener and `axum::serve`, `TCP_NODELAY`
/// on every connection.
fn serve_on_tokio(o: &Opts) -> std::io::Result<()> {
    let mut handles = Vec::new();
    for i in 0..o.launch.threads.max(1) {
        let o = o.clone();
        let listener = reuseport(o.launch.addr_or("127.0.0.1:8080"))?;
        handles.push(std::thread::spawn(move || -> std::io::Result<()> {
            if !o.launch.cpus.is_empty() {
                ringkit::pin_to_cpu(o.launch.cpus[i % o.launch.cpus.len()])?;
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                use axum::serve::ListenerExt;
                let l = tokio::net::TcpListener::from_std(listener)?;
                println!(
                    "listening on {} with tokio (current-thread)",
                    l.local_addr()?
                );
                // TCP_NODELAY on every connection, as ringkit-hyper sets it
                // (axum's documented way; without it HTTP/2 and gRPC wait
                // on Nagle's algorithm).
                let l = l.tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                axum::serve(l, app(state(&o)))
                    .with_graceful_shutdown(async {
                        let _ = tokio::signal::ctrl_c().await;
                    })
                    .await
            })
        }));
    }
    for h in handles {
        h.join()
            .map_err(|_| std::io::Error::other("a worker panicked"))??;
    }
    Ok(())
}

fn reuseport(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let l = ringkit::bind_reuseport_std(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

fn main() {
    let o = Opts::parse();
    let rt = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
    };
    if let Some(rows) = o.seed_rows {
        if let Err(e) = rt().block_on(seed(&o.pg, rows)) {
            eprintln!("axum_app: cannot seed the database at {}: {e}", o.pg);
            std::process::exit(1);
        }
    }
    if let Some(keys) = o.seed_keys {
        if let Err(e) = rt().block_on(seed_redis(&o.redis, keys)) {
            eprintln!("axum_app: cannot seed Redis at {}: {e}", o.redis);
            std::process::exit(1);
        }
    }
    if o.seed_only {
        return;
    }
    let r = match o.runtime.as_str() {
        "tokio" => serve_on_tokio(&o),
        "ringkit" => {
            let mut cfg = ringkit_hyper::ServeConfig::from_args(&o.launch, "127.0.0.1:8080");
            cfg.grace = Duration::from_secs(5);
            cfg.host_tokio = !o.unhosted;
            println!(
                "listening on {} with ringkit (hosted: {})",
                o.launch.addr_or("127.0.0.1:8080"),
                cfg.host_tokio
            );
            let opts = o.clone();
            ringkit_hyper::serve(cfg, move || app(state(&opts)))
        }
        other => {
            eprintln!("axum_app: --runtime {other}: expected ringkit or tokio");
            std::process::exit(2);
        }
    };
    if let Err(e) = r {
        eprintln!("axum_app: {e}");
        std::process::exit(1);
    }
}
