//! `ringkit compare pipeline`: HTTP/1.1 pipelining, `GET /` answered `200`,
//! 16 requests written together per connection, 100 keep-alive
//! connections, every response checked by the built-in generator (wrk
//! pipelines only through a Lua script, and checks no bodies).
//!
//! Contenders: nginx (its `return 200` configuration of `compare http`,
//! one worker), ringkit on io_uring with receive bundles (the default) and
//! without (`--recv-bundle off`: the A/B switch of that lever), and ringkit
//! on epoll, the reference. Pipelined requests are where a connection has
//! several buffers' worth of input at once, so a bundle (one CQE for them)
//! and ringkit-http's one send per batch of responses pay most here.

use std::io;

use crate::harness::server::{Family, RingkitServer};
use crate::harness::study::{Section, StudyOpts};
use crate::http::{self, Site, Spec, Workload};

/// Requests in flight per connection.
pub const DEPTH: usize = 16;

/// Run the pipelining study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let dir = std::path::absolute(opts.out_dir.join("pipeline"))?;
    let mut contenders = Vec::new();
    let mut skipped = Vec::new();
    match http::nginx_contender(&http::nginx_dir(&dir)) {
        Ok(c) => contenders.push(c),
        Err(s) => skipped.push(s),
    }
    for (name, backend, family, bundle) in [
        ("ringkit-uring", "uring", Family::Uring, "on"),
        ("ringkit-uring-nobundle", "uring", Family::Uring, "off"),
        ("ringkit-epoll", "epoll", Family::Epoll, "on"),
    ] {
        let server = RingkitServer::http(&opts.ringkit_bin)
            .backend(backend)
            .threads(1)
            .stats()
            .flag("--recv-bundle", bundle)
            .flag("--pad", http::RETURN_200_PAD);
        contenders.push(server.contender(name, family));
    }
    let conns: &[usize] = if opts.quick { &[100] } else { &[100, 1000] };
    let workloads = conns
        .iter()
        .map(|&c| Workload::new(c, false).pipelined(DEPTH))
        .collect();
    let spec = Spec {
        study: "pipeline",
        title: "HTTP pipelining",
        reference: "ringkit-epoll",
        about: format!(
            "`GET /` answered `200` with an empty body, {DEPTH} requests pipelined per \
             connection (written together, then the {DEPTH} responses read and checked); \
             ringkit pads its responses to nginx's size (`--pad {}`)",
            http::RETURN_200_PAD
        ),
        contenders,
        skipped,
        site: Site::Return200,
        workloads,
        builtin_only: Some(
            "pipelining: wrk pipelines only through a Lua script and checks no bodies; \
             the built-in generator checks every response",
        ),
        scheme: "http",
        mix_file: None,
        count_ringkit_syscalls: true,
    };
    Ok(http::section(&http::run(opts, spec, progress)?))
}
