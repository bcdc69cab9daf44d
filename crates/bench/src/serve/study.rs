//! The static-file study: what it compares and how.
//!
//! Contenders: nginx in its best documented configuration for static files
//! (`sendfile on`, `tcp_nopush on`, `open_file_cache` for every file of the
//! tree; one worker), `ringkit serve` on io_uring and on epoll (open-file
//! cache as large as nginx's, paths looked up again as often; bodies over
//! 16 KiB by `sendfile`), and, outside `--quick`, ringkit on io_uring with
//! the cache off, with bodies spliced through a pipe, and with bodies
//! copied through the ring, so the report shows what each choice is worth.
//!
//! Workloads, 100 connections each: 1 KiB, 64 KiB and 1 MiB files with
//! keep-alive; 1 KiB with `Connection: close`; and 10 000 files of mixed
//! sizes asked for at random. The built-in generator is the load, always:
//! it checks every response's status and body length (the mix's against
//! each path's own), which wrk cannot, and it drives these servers faster
//! than wrk on the study's machine.

use std::io;
use std::time::Instant;

use super::tree::{self, SINGLES};
use crate::harness::server::{Family, RingkitServer};
use crate::harness::study::{Section, StudyOpts};
use crate::http::{self, Site, Spec, Workload};

/// Files in the mix.
const MIX_FILES: usize = 10_000;
/// The tree's seed.
const SEED: u64 = 20_261_125;
/// Connections of every workload.
const CONNS: usize = 100;

/// Run the static-file study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let dir = opts.out_dir.join("static");
    std::fs::create_dir_all(&dir)?;
    let root = std::path::absolute(dir.join("www"))?;
    let list = std::path::absolute(dir.join("mix.txt"))?;
    let t = Instant::now();
    progress(&format!(
        "writing {MIX_FILES} files under {}",
        root.display()
    ));
    let tree = tree::build(&root, MIX_FILES, SEED, &list)?;
    progress(&format!(
        "tree written in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let cache = MIX_FILES + SINGLES.len();

    let mut contenders = Vec::new();
    let mut skipped = Vec::new();
    match http::nginx_contender(&http::nginx_dir(&dir)) {
        Ok(c) => contenders.push(c),
        Err(s) => skipped.push(s),
    }
    let serve = |backend: &str| {
        RingkitServer::serve(&opts.ringkit_bin, &tree.root)
            .backend(backend)
            .threads(1)
            .stats()
            .flag("--open-file-cache", cache)
            .flag("--open-file-cache-valid", http::CACHE_VALID_SECS)
    };
    contenders.push(serve("uring").contender("ringkit-uring", Family::Uring));
    contenders.push(serve("epoll").contender("ringkit-epoll", Family::Epoll));
    if !opts.quick {
        let nocache = RingkitServer::serve(&opts.ringkit_bin, &tree.root)
            .backend("uring")
            .threads(1)
            .stats()
            .flag("--open-file-cache", 0);
        contenders.push(nocache.contender("ringkit-uring-nocache", Family::Uring));
        for how in ["splice", "copy"] {
            let other = serve("uring").flag("--zero-copy", how);
            contenders.push(other.contender(&format!("ringkit-uring-{how}"), Family::Uring));
        }
    }

    let single = |i: usize, close: bool| {
        let (label, path, size) = SINGLES[i];
        Workload::file(label, CONNS, close, path, size).crc(tree.singles[i])
    };
    let mix = Workload::mix("10k files", CONNS, false, tree.mix.into());
    let workloads = if opts.quick {
        vec![single(0, false), single(1, false), mix]
    } else {
        vec![
            single(0, false),
            single(1, false),
            single(2, false),
            single(0, true),
            mix,
        ]
    };
    let spec = Spec {
        study: "static",
        title: "Static files",
        reference: "nginx",
        about: format!(
            "files from `{}`: 1 KiB, 64 KiB and 1 MiB files, and {MIX_FILES} files of mixed sizes \
             (70% 100 B–8 KiB, 25% 8–64 KiB, 5% 64 KiB–1 MiB, {:.0} KiB on average) asked for \
             uniformly at random; open-file caches of {cache} entries on both sides, each \
             path looked up again after {valid} s on both sides",
            tree.root.display(),
            workloads.last().map_or(0.0, |w| w.mean_body / 1024.0),
            valid = http::CACHE_VALID_SECS,
        ),
        contenders,
        skipped,
        site: Site::Files {
            root: tree.root.clone(),
            cache_max: cache,
            tls: None,
        },
        workloads,
        builtin_only: Some(
            "the built-in generator checks every response's status, body length and body bytes (CRC-32C; wrk cannot for a mix)",
        ),
        scheme: "http",
        mix_file: Some(list),
        // Its own counters miss what the file server calls libc for
        // directly; perf (or strace) sees every syscall.
        count_ringkit_syscalls: true,
    };
    let res = http::run(opts, spec, progress);
    // The tree is ~380 MiB: not left in the results directory.
    let _ = std::fs::remove_dir_all(&root);
    Ok(http::section(&res?))
}
