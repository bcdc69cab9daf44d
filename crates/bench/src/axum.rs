//! `ringkit compare axum`: the same axum app (`ringkit_hyper::hello`) on
//! ringkit through hyper (io_uring and epoll) and on tokio's current-thread
//! runtime with `axum::serve`, side by side, on the HTTP study's machinery
//! (interleaved rotated rounds, server pinned, CPU from /proc, wrk or the
//! built-in generator, syscalls counted by perf for all three).
//!
//! Workloads: `GET /` (13-byte text) and `GET /json` (27-byte JSON),
//! keep-alive at 100 and 1000 connections (`--quick`: 100 only). Ratios are
//! against axum on tokio, paired per round.

use std::io;

use crate::harness::server::{Contender, Family, RingkitServer};
use crate::harness::study::{Section, StudyOpts};
use crate::http::{self, Site, Spec, Workload};

/// Run the axum study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let mut contenders = Vec::new();
    let mut skipped = Vec::new();
    match opts
        .peer_bin
        .clone()
        .and_then(|p| http::peer_has(&p, "axum-http").map(|()| p))
    {
        Ok(p) => contenders.push(Contender {
            name: "axum-tokio".into(),
            family: Family::Epoll,
            cmd: vec![p.display().to_string(), "axum-http".into(), "{addr}".into()],
            ringkit: false,
        }),
        Err(e) => skipped.push(("axum-tokio".into(), e)),
    }
    for (name, backend, family) in [
        ("axum-ringkit-uring", "uring", Family::Uring),
        ("axum-ringkit-epoll", "epoll", Family::Epoll),
    ] {
        let server = RingkitServer::axum(&opts.ringkit_bin)
            .backend(backend)
            .threads(1);
        contenders.push(server.contender(name, family));
    }
    let conns: &[usize] = if opts.quick { &[100] } else { &[100, 1000] };
    let mut workloads = Vec::new();
    for (label, path, body) in [
        ("GET /", "/", ringkit_hyper::hello::ROOT_BODY),
        ("GET /json", "/json", ringkit_hyper::hello::JSON_BODY),
    ] {
        for &c in conns {
            workloads
                .push(Workload::file(label, c, false, path, body.len()).bytes(body.as_bytes()));
        }
    }
    let spec = Spec {
        study: "axum",
        title: "axum",
        reference: "axum-tokio",
        about: "the axum app of `ringkit_hyper::hello` (the same code in every contender), \
                on ringkit-hyper (`ringkit axum`) and on tokio current_thread with `axum::serve`"
            .into(),
        contenders,
        skipped,
        site: Site::Return200,
        workloads,
        builtin_only: None,
        scheme: "http",
        mix_file: None,
        count_ringkit_syscalls: false,
    };
    Ok(http::section(&http::run(opts, spec, progress)?))
}
