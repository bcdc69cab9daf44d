//! The `axum_app` example in hosted mode against a real PostgreSQL, a real
//! Redis and an upstream HTTP server, driven by reqwest; on both backends.
//! Also its faults: PostgreSQL stopped and restarted, Redis restarted, the
//! upstream gone.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringkit_bench::harness::services::{self, wait_for_port, Postgres, Proc, Redis, Upstream};

struct App {
    _proc: Proc,
    base: String,
}

fn start_app(
    backend: &str,
    pg: &Postgres,
    redis: &Redis,
    upstream: &str,
    seed: bool,
) -> Option<App> {
    let bin = services::built_example("axum_app")?;
    let port = services::free_port();
    let mut cmd = Command::new(bin);
    cmd.args(["--addr", &format!("127.0.0.1:{port}"), "--backend", backend])
        .args([
            "--pg",
            &pg.url(),
            "--redis",
            &redis.url(),
            "--upstream",
            upstream,
        ])
        .args(["--db-timeout-ms", "1000", "--pool", "4"])
        .stdout(Stdio::null());
    if seed {
        cmd.args(["--seed-rows", "100"]);
    }
    let child = Proc(cmd.spawn().unwrap());
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    assert!(
        wait_for_port(addr, Duration::from_secs(20)),
        "axum_app did not start"
    );
    Some(App {
        _proc: child,
        base: format!("http://{addr}"),
    })
}

fn client() -> (tokio::runtime::Runtime, reqwest::Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    (rt, c)
}

async fn get(c: &reqwest::Client, url: String) -> (u16, String) {
    let r = c
        .get(&url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

/// Poll `url` until it answers `want` (up to `limit`); the last answer.
async fn until(c: &reqwest::Client, url: String, want: u16, limit: Duration) -> (u16, String) {
    let start = Instant::now();
    loop {
        let got = match c.get(&url).send().await {
            Ok(r) => {
                let s = r.status().as_u16();
                (s, r.text().await.unwrap_or_default())
            }
            Err(e) => (0, e.to_string()),
        };
        if got.0 == want || start.elapsed() > limit {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The tests of this file run one at a time: each picks free ports by
/// binding and releasing them, and the fault tests leave a port free while
/// a server is down, which a test running beside it could take.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn services() -> Option<(Postgres, Redis, Upstream)> {
    let pg = Postgres::start(None)?;
    let redis = Redis::start(None)?;
    Some((pg, redis, Upstream::start()))
}

fn every_route(backend: &str) {
    let _serial = one_at_a_time();
    let Some((pg, redis, upstream)) = services() else {
        return;
    };
    let Some(app) = start_app(backend, &pg, &redis, &upstream.url(), true) else {
        return;
    };
    let (rt, c) = client();
    let b = app.base.clone();
    rt.block_on(async move {
        assert_eq!(
            get(&c, format!("{b}/")).await,
            (200, "Hello, World!".into())
        );
        let (s, body) = get(&c, format!("{b}/db/42")).await;
        assert_eq!(s, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["id"], 42);
        assert_eq!(v["name"], "item-42");
        assert_eq!(v["score"], (42 * 7919) % 1000);
        let (s, body) = get(&c, format!("{b}/db/100000")).await;
        assert_eq!(s, 404, "{body}");
        assert!(body.contains("no such row"), "{body}");
        let (s, _) = get(&c, format!("{b}/cache/missing")).await;
        assert_eq!(s, 404);
        let r = c
            .put(format!("{b}/cache/k1"))
            .body("v1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
        assert_eq!(get(&c, format!("{b}/cache/k1")).await, (200, "v1".into()));
        assert_eq!(
            get(&c, format!("{b}/proxy")).await,
            (200, "upstream ok".into())
        );
        let t = Instant::now();
        assert_eq!(
            get(&c, format!("{b}/sleep/50")).await,
            (200, "slept 50 ms".into())
        );
        assert!(t.elapsed() >= Duration::from_millis(50));

        // 200 requests at once, mixing the routes, each checked.
        let mut tasks = Vec::new();
        for i in 0..200u32 {
            let (c, b) = (c.clone(), b.clone());
            tasks.push(tokio::spawn(async move {
                match i % 5 {
                    0 => assert_eq!(get(&c, format!("{b}/")).await.0, 200),
                    1 => {
                        let id = i % 100 + 1;
                        let (s, body) = get(&c, format!("{b}/db/{id}")).await;
                        assert_eq!(s, 200, "{body}");
                        assert!(body.contains(&format!("\"item-{id}\"")), "{body}");
                    }
                    2 => assert_eq!(get(&c, format!("{b}/cache/k1")).await, (200, "v1".into())),
                    3 => assert_eq!(
                        get(&c, format!("{b}/proxy")).await,
                        (200, "upstream ok".into())
                    ),
                    _ => assert_eq!(get(&c, format!("{b}/sleep/20")).await.0, 200),
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn every_route_uring() {
    every_route("uring");
}

#[test]
fn every_route_epoll() {
    every_route("epoll");
}

/// PostgreSQL stopped mid-run: `/db` answers 503 with a clear message
/// within the pool timeout while `/` keeps answering; once it is back,
/// `/db` recovers. Redis restarted: `/cache` recovers. Upstream gone:
/// `/proxy` is 502.
fn faults(backend: &str) {
    let _serial = one_at_a_time();
    let Some((mut pg, mut redis, upstream)) = services() else {
        return;
    };
    let Some(app) = start_app(backend, &pg, &redis, &upstream.url(), true) else {
        return;
    };
    let (rt, c) = client();
    let b = app.base.clone();
    rt.block_on(async {
        assert_eq!(get(&c, format!("{b}/db/7")).await.0, 200);
        pg.stop();
        let t = Instant::now();
        let (s, body) = get(&c, format!("{b}/db/7")).await;
        assert_eq!(s, 503, "{body}");
        assert!(body.contains("database"), "{body}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "503 took {:?}",
            t.elapsed()
        );
        assert_eq!(get(&c, format!("{b}/")).await.0, 200);
        assert!(pg.restart(), "PostgreSQL did not restart");
        let (s, body) = until(&c, format!("{b}/db/7"), 200, Duration::from_secs(15)).await;
        assert_eq!(s, 200, "after the restart: {body}");

        let r = c
            .put(format!("{b}/cache/k"))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
        assert!(redis.restart(), "redis-server did not restart");
        // The restarted Redis is empty: recovery is a 404 (no such key),
        // then a PUT and GET that work.
        let (s, body) = until(&c, format!("{b}/cache/k"), 404, Duration::from_secs(15)).await;
        assert_eq!(s, 404, "after the restart: {body}");
        let r = c
            .put(format!("{b}/cache/k"))
            .body("y")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204);
        assert_eq!(get(&c, format!("{b}/cache/k")).await, (200, "y".into()));
    });
    drop(upstream);
    std::thread::sleep(Duration::from_millis(50));
    // The upstream's listener is closed once its accept loop sees the flag.
    rt.block_on(async {
        let (s, body) = until(&c, format!("{b}/proxy"), 502, Duration::from_secs(5)).await;
        assert_eq!(s, 502, "{body}");
        assert!(body.contains("upstream"), "{body}");
        assert_eq!(get(&c, format!("{b}/")).await.0, 200);
    });
}

#[test]
fn faults_uring() {
    faults("uring");
}

#[test]
fn faults_epoll() {
    faults("epoll");
}
