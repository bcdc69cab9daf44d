//! What the latency study measures: four workloads, their contenders, how
//! each server starts and how one load run goes (closed loop, or open loop
//! at a rate), on the echo and HTTP studies' machinery.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::{Point, Variant};
use crate::echo::load::{self as echo_load, EchoLoadConfig};
use crate::harness::phase::Phase;
use crate::harness::server::{free_addr, Contender, Family, RingkitServer, Server};
use crate::harness::stalls::StallProbe;
use crate::harness::study::StudyOpts;
use crate::http::load::{self as http_load, HttpLoadConfig};
use crate::http::{self, LoadTool, Run, Site, Workload};
use crate::serve::tree::{self, SINGLES};

/// One workload and the servers it compares.
pub(super) struct Bench<'a> {
    /// Label, e.g. "echo 512 B c=1000".
    pub name: String,
    /// Connections of every run.
    pub conns: usize,
    pub contenders: Vec<Contender>,
    pub kind: Kind<'a>,
}

/// How a workload drives its servers.
pub(super) enum Kind<'a> {
    /// The echo generator, `len`-byte messages.
    Echo { len: usize, out: std::path::PathBuf },
    /// The built-in HTTP generator asking for `w`'s path.
    Http { run: Box<Run<'a>>, w: Workload },
}

/// Connections of the 10 000-connection variant, and the limit its
/// ringkit servers get (nginx's `worker_connections` in the study's
/// configuration is the same).
const C10K: usize = 10_000;
const C10K_LIMIT: usize = 16_384;

/// The workloads of `variant` (contenders that cannot run go to
/// `skipped`). The static workload's files go under `dir/static/www`.
pub(super) fn benches<'a>(
    opts: &'a StudyOpts,
    dir: &Path,
    skipped: &mut Vec<(String, String)>,
    variant: Variant,
) -> io::Result<Vec<Bench<'a>>> {
    let mut out = Vec::new();
    let c10k = variant == Variant::C10k;
    // Connections of the HTTP, static and axum workloads.
    let (http_conns, file_conns) = if c10k { (C10K, C10K) } else { (1000, 100) };
    let limit = |s: RingkitServer| {
        if c10k {
            s.flag("--max-connections", C10K_LIMIT)
        } else {
            s
        }
    };

    // Echo: the echo study's servers, its default list's four, and
    // ringkit-uring with the adaptive batch wait (what it costs or saves
    // at each load).
    let (list, skip) =
        crate::echo::contenders::contenders(&opts.ringkit_bin, &opts.peer_bin, false);
    skipped.extend(skip);
    let keep = [
        "ringkit-uring",
        "ringkit-uring-auto",
        "ringkit-epoll",
        "tokio",
        "monoio-uring",
    ];
    if !c10k {
        out.push(Bench {
            name: format!("echo {} B c=1000", opts.msg_len),
            conns: 1000,
            contenders: list
                .into_iter()
                .filter(|c| keep.contains(&c.name.as_str()))
                .collect(),
            kind: Kind::Echo {
                len: opts.msg_len,
                out: dir.join("echo"),
            },
        });
    }

    // HTTP `GET /` and static 1 KiB: ringkit on both backends and nginx.
    let http_run = |sub: &str, site: Site| Run {
        opts,
        dir: dir.join(sub),
        nginx_dir: http::nginx_dir(&dir.join(sub)),
        tool: LoadTool::Builtin,
        secs: 0.0,
        site,
        scheme: "http",
    };
    let nginx = |sub: &str, skipped: &mut Vec<(String, String)>| match http::nginx_contender(
        &http::nginx_dir(&dir.join(sub)),
    ) {
        Ok(c) => Some(c),
        Err(s) => {
            skipped.push(s);
            None
        }
    };
    let mut cs: Vec<Contender> = nginx("http", skipped).into_iter().collect();
    for (name, backend, family) in [
        ("ringkit-uring", "uring", Family::Uring),
        ("ringkit-epoll", "epoll", Family::Epoll),
    ] {
        let s = RingkitServer::http(&opts.ringkit_bin)
            .backend(backend)
            .threads(1)
            .flag("--pad", http::RETURN_200_PAD);
        cs.push(limit(s).contender(name, family));
    }
    out.push(Bench {
        name: format!("http GET / c={http_conns}"),
        conns: http_conns,
        contenders: cs,
        kind: Kind::Http {
            run: Box::new(http_run("http", Site::Return200)),
            w: Workload::new(http_conns, false),
        },
    });

    let root = std::path::absolute(dir.join("static").join("www"))?;
    let t = tree::build(&root, 0, 1, &dir.join("static").join("list.txt"))?;
    let mut cs: Vec<Contender> = nginx("static", skipped).into_iter().collect();
    for (name, backend, family) in [
        ("ringkit-uring", "uring", Family::Uring),
        ("ringkit-epoll", "epoll", Family::Epoll),
    ] {
        let s = RingkitServer::serve(&opts.ringkit_bin, &t.root)
            .backend(backend)
            .threads(1)
            .flag("--open-file-cache", SINGLES.len())
            .flag("--open-file-cache-valid", crate::http::CACHE_VALID_SECS);
        cs.push(limit(s).contender(name, family));
    }
    let (label, path, size) = SINGLES[0];
    out.push(Bench {
        name: format!("static {label} c={file_conns}"),
        conns: file_conns,
        contenders: cs,
        kind: Kind::Http {
            run: Box::new(http_run(
                "static",
                Site::Files {
                    root: t.root.clone(),
                    cache_max: SINGLES.len(),
                    tls: None,
                },
            )),
            w: Workload::file(label, file_conns, false, path, size).crc(t.singles[0]),
        },
    });

    // axum: the same app on ringkit (io_uring) and on tokio.
    let mut cs = Vec::new();
    match opts
        .peer_bin
        .clone()
        .and_then(|p| http::peer_has(&p, "axum-http").map(|()| p))
    {
        Ok(p) => cs.push(Contender {
            name: "axum-tokio".into(),
            family: Family::Epoll,
            cmd: vec![p.display().to_string(), "axum-http".into(), "{addr}".into()],
            ringkit: false,
        }),
        Err(e) => skipped.push(("axum-tokio".into(), e)),
    }
    let s = RingkitServer::axum(&opts.ringkit_bin)
        .backend("uring")
        .threads(1);
    cs.push(limit(s).contender("axum-ringkit-uring", Family::Uring));
    let body = ringkit_hyper::hello::ROOT_BODY;
    out.push(Bench {
        name: format!("axum GET / c={file_conns}"),
        conns: file_conns,
        contenders: cs,
        kind: Kind::Http {
            run: Box::new(http_run("axum", Site::Return200)),
            w: Workload::file("GET /", file_conns, false, "/", body.len()).bytes(body.as_bytes()),
        },
    });
    Ok(out)
}

/// What one load run measured.
fn point(c: &Contender, b: &Bench<'_>, rate: Option<f64>) -> Point {
    Point {
        workload: b.name.clone(),
        contender: c.name.clone(),
        epoll: matches!(c.family, Family::Epoll),
        rate,
        ..Point::default()
    }
}

/// Run the load on a thread pinned to `cpu`.
fn pinned<T: Send>(cpu: usize, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            ringkit::pin_to_cpu(cpu)?;
            f()
        })
        .join()
        .map_err(|_| io::Error::other("load generator panicked"))?
    })
}

/// Start `c`, drive it for `secs` (closed loop when `rate` is `None`),
/// stop it. `tag` names its log.
pub(super) fn sample(
    opts: &StudyOpts,
    b: &Bench<'_>,
    c: &Contender,
    rate: Option<f64>,
    secs: f64,
    tag: &str,
) -> Point {
    let mut p = point(c, b, rate);
    let mut go = || -> io::Result<()> {
        let dur = Duration::from_secs_f64(secs);
        // The host's own stalls on both CPUs, over the same window.
        let probe = StallProbe::start(&[opts.server_cpu, opts.client_cpu])?;
        let mut hook = |ph: Phase| probe.window(ph == Phase::WindowStart);
        match &b.kind {
            Kind::Echo { len, out } => {
                std::fs::create_dir_all(out.join("logs"))?;
                let addr: SocketAddr = free_addr()?;
                let stats = out.join(format!("{}-{tag}.stats", c.name));
                let log = out.join("logs").join(format!("{}-{tag}.log", c.name));
                let server = Server::start(c, addr, &stats, opts.server_cpu, &log)?;
                let cfg = EchoLoadConfig {
                    addr,
                    conns: b.conns,
                    len: *len,
                    duration: dur,
                    pipeline: 1,
                    backend: ringkit::Backend::Auto,
                    rate,
                };
                let r = pinned(opts.client_cpu, || echo_load::run_load(&cfg, &mut hook))?;
                drop(server);
                p.rps = r.rps();
                (p.p50_us, p.p90_us, p.p99_us) = (r.p50_us, r.p90_us, r.p99_us);
                (p.p999_us, p.max_us) = (r.p999_us, r.max_us);
                p.jain = rate.is_none().then_some(r.jain);
                p.errors = r.failed_conns + r.mismatches;
                (p.unanswered, p.unsent) = (r.unanswered, r.unsent);
                p.most_in_flight = r.most_in_flight;
                if !r.ok() {
                    p.error = Some(r.first_error.unwrap_or_else(|| "failed run".into()));
                }
            }
            Kind::Http { run, w } => {
                std::fs::create_dir_all(run.dir.join("logs"))?;
                std::fs::create_dir_all(run.dir.join("tmp"))?;
                let (server, addr, _) = run.start(c, tag)?;
                let mut cfg = HttpLoadConfig::new(addr, b.conns, dur);
                cfg.path.clone_from(&w.path);
                cfg.expect_body_len = w.body_len;
                cfg.expect_crc32c = w.crc32c;
                cfg.rate = rate;
                let r = pinned(opts.client_cpu, || http_load::run_load(&cfg, &mut hook))?;
                drop(server);
                p.rps = r.rps();
                (p.p50_us, p.p90_us, p.p99_us) = (r.p50_us, r.p90_us, r.p99_us);
                (p.p999_us, p.max_us) = (r.p999_us, r.max_us);
                p.jain = rate.is_none().then_some(r.jain);
                p.errors = r.errors();
                (p.unanswered, p.unsent) = (r.unanswered, r.unsent);
                p.most_in_flight = r.most_in_flight;
                if !r.ok() {
                    p.error = Some(r.first_error.unwrap_or_else(|| "failed run".into()));
                }
            }
        }
        p.host = probe.finish()?;
        Ok(())
    };
    if let Err(e) = go() {
        p.error = Some(e.to_string());
    }
    p
}
