//! `ringkit compare app` and `compare hosting`: a real axum service
//! (ringkit-hyper's `axum_app` example: PostgreSQL through a pool, Redis,
//! tokio timers) on ringkit in hosted mode (io_uring and epoll) and the
//! same binary on tokio's current-thread runtime (`--runtime tokio`).
//!
//! PostgreSQL and Redis are started from the system's packages in temp
//! dirs and pinned, with the load generator, to the client CPU; the
//! server to the server CPU. The table `items` has 10 000 rows, Redis 1 000
//! keys, both seeded before the first sample. Workloads (keep-alive, 100
//! connections, the built-in generator, which checks every body's bytes
//! against the row or value each path must return): `GET /`, `GET
//! /db/{id}` over every id at random, `GET /cache/{key}` over every key at
//! random. The server CPU includes only the app's process: the database's
//! and Redis' work is on the client CPU, the same for every contender.
//!
//! `hosting`: what hosting tokio costs ringkit: `GET /` on the same binary
//! with and without `--unhosted`, both backends.

use std::io;
use std::process::{Command, Stdio};
use std::sync::Arc;

use crate::harness::peers;
use crate::harness::server::{Contender, Family};
use crate::harness::services::{Postgres, Redis};
use crate::harness::study::{Section, StudyOpts};
use crate::http::load::Target;
use crate::http::{self, Site, Spec, Workload};

/// Rows of `items`.
const ROWS: u32 = 10_000;
/// Redis keys.
const KEYS: u32 = 1_000;
/// Connections of every workload.
const CONNS: usize = 100;
/// `GET /`'s body.
const HELLO: &[u8] = b"Hello, World!";

/// The JSON `GET /db/{id}` answers (serde_json, keys in order).
fn row_body(id: u32) -> String {
    format!(
        "{{\"id\":{id},\"name\":\"item-{id}\",\"score\":{}}}",
        (id as u64 * 7919) % 1000
    )
}

fn target(path: String, body: &[u8]) -> Target {
    Target {
        path,
        body_len: body.len(),
        crc32c: Some(crc32c::crc32c(body)),
    }
}

/// What both studies share: the binary and the running databases.
struct Stage {
    bin: String,
    pg: Postgres,
    redis: Redis,
}

impl Stage {
    fn start(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Stage> {
        let bin = peers::app_binary(&opts.ringkit_bin).map_err(io::Error::other)?;
        let cpu = Some(opts.client_cpu);
        // Missing packages skip the study (as a missing peer does).
        let missing = |what: &str| {
            crate::harness::err::unsupported(format!("{what} is not installed or did not start (apt-get install postgresql redis-server)"))
        };
        let pg = Postgres::start(cpu).ok_or_else(|| missing("PostgreSQL"))?;
        let redis = Redis::start(cpu).ok_or_else(|| missing("redis-server"))?;
        progress(&format!(
            "PostgreSQL on port {} and Redis on port {}, pinned to CPU {}; seeding {ROWS} rows and {KEYS} keys",
            pg.port, redis.port, opts.client_cpu
        ));
        let st = Command::new(&bin)
            .args([
                "--pg",
                &pg.url(),
                "--redis",
                &redis.url(),
                "--upstream",
                "http://127.0.0.1:1/",
            ])
            .args([
                "--seed-rows",
                &ROWS.to_string(),
                "--seed-keys",
                &KEYS.to_string(),
            ])
            .arg("--seed-only")
            .stdout(Stdio::null())
            .status()?;
        if !st.success() {
            return Err(io::Error::other(format!(
                "seeding with {} failed ({st})",
                bin.display()
            )));
        }
        Ok(Stage {
            bin: bin.display().to_string(),
            pg,
            redis,
        })
    }

    fn contender(&self, name: &str, family: Family, args: &[&str]) -> Contender {
        app_contender(
            &self.bin,
            name,
            family,
            &self.pg.url(),
            &self.redis.url(),
            args,
        )
    }
}

/// A contender running the `axum_app` binary `bin` on `{addr}` against
/// `pg` and `redis` (no upstream), with `args` after.
pub(crate) fn app_contender(
    bin: &str,
    name: &str,
    family: Family,
    pg: &str,
    redis: &str,
    args: &[&str],
) -> Contender {
    let mut cmd: Vec<String> = [bin, "--addr", "{addr}", "--pg", pg, "--redis", redis]
        .iter()
        .map(|a| a.to_string())
        .collect();
    cmd.extend(["--upstream".into(), "http://127.0.0.1:1/".into()]);
    cmd.extend(args.iter().map(|a| a.to_string()));
    Contender {
        name: name.into(),
        family,
        cmd,
        ringkit: false,
    }
}

fn spec(study: &'static str, title: &'static str, reference: &'static str, about: String) -> Spec {
    Spec {
        study,
        title,
        reference,
        about,
        contenders: Vec::new(),
        skipped: Vec::new(),
        site: Site::Return200,
        workloads: Vec::new(),
        builtin_only: Some(
            "the built-in generator checks every response's body bytes against the row or value its path must return (wrk cannot for a mix)",
        ),
        scheme: "http",
        mix_file: None,
        count_ringkit_syscalls: false,
    }
}

/// `compare app`: the service's routes on ringkit (hosted) and tokio.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let stage = Stage::start(opts, progress)?;
    let mut s = spec(
        "app",
        "A real axum service (PostgreSQL, Redis) on ringkit, hosted, and on tokio",
        "app-tokio",
        format!(
            "ringkit-hyper's `axum_app` example, the same binary for every contender \
             (`--runtime tokio` for tokio's current-thread runtime with `axum::serve`): \
             `GET /`, a row of a {ROWS}-row PostgreSQL table by random id through an \
             8-connection deadpool-postgres pool (`/db/{{id}}`), a Redis value by random \
             key of {KEYS} (`/cache/{{key}}`); PostgreSQL and Redis pinned with the load"
        ),
    );
    s.contenders = vec![
        stage.contender("app-tokio", Family::Epoll, &["--runtime", "tokio"]),
        stage.contender("app-ringkit-uring", Family::Uring, &["--backend", "uring"]),
        stage.contender("app-ringkit-epoll", Family::Epoll, &["--backend", "epoll"]),
    ];
    let rows: Arc<[Target]> = (1..=ROWS)
        .map(|id| target(format!("/db/{id}"), row_body(id).as_bytes()))
        .collect();
    let keys: Arc<[Target]> = (0..KEYS)
        .map(|i| target(format!("/cache/k{i}"), format!("value-{i:06}").as_bytes()))
        .collect();
    s.workloads = vec![
        Workload::file("GET /", CONNS, false, "/", HELLO.len()).bytes(HELLO),
        Workload::mix("GET /db/{id}", CONNS, false, rows),
        Workload::mix("GET /cache/{key}", CONNS, false, keys),
    ];
    let res = http::run(opts, s, progress);
    drop(stage);
    Ok(http::section(&res?))
}

/// `compare hosting`: `GET /` with and without hosting tokio.
pub fn hosting(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let stage = Stage::start(opts, progress)?;
    let mut s = spec(
        "hosting",
        "What hosting tokio costs ringkit (axum_app, GET /)",
        "app-uring-unhosted",
        "`GET /` of the `axum_app` example on ringkit with tokio hosted (the default of \
         ringkit-hyper's `tokio` feature) and with `--unhosted` (plain ringkit), both backends; \
         the ratios are against io_uring unhosted"
            .into(),
    );
    s.contenders = vec![
        stage.contender(
            "app-uring-unhosted",
            Family::Uring,
            &["--backend", "uring", "--unhosted"],
        ),
        stage.contender("app-uring-hosted", Family::Uring, &["--backend", "uring"]),
        stage.contender(
            "app-epoll-unhosted",
            Family::Epoll,
            &["--backend", "epoll", "--unhosted"],
        ),
        stage.contender("app-epoll-hosted", Family::Epoll, &["--backend", "epoll"]),
    ];
    s.workloads = vec![Workload::file("GET /", CONNS, false, "/", HELLO.len()).bytes(HELLO)];
    let res = http::run(opts, s, progress);
    drop(stage);
    Ok(http::section(&res?))
}
