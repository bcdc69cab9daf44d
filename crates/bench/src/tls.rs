//! `ringkit compare tls`: a 1 KiB file over HTTPS, keep-alive, 100
//! connections: nginx (`ssl`, TLS 1.3, `TLS_AES_256_GCM_SHA384`, the static
//! configuration of `compare static`, one worker) against `ringkit serve
//! --tls-cert --tls-key` (rustls) on io_uring and epoll, with the same
//! certificate (made for the run, ECDSA P-256). The load is wrk (it speaks
//! https; the built-in generator does not), on the HTTP study's machinery.

use std::io;

use crate::harness::server::{Family, RingkitServer};
use crate::harness::study::{Section, StudyOpts};
use crate::http::{self, Site, Spec, Workload};

/// Run the TLS study for `ringkit compare`.
pub fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let dir = std::path::absolute(opts.out_dir.join("tls"))?;
    let root = dir.join("www");
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join("1k.bin"), vec![b'k'; 1024])?;
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()])
        .map_err(|e| io::Error::other(format!("certificate: {e}")))?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem())?;
    std::fs::write(&key, ck.key_pair.serialize_pem())?;
    progress(&format!("certificate and 1 KiB file in {}", dir.display()));

    let mut contenders = Vec::new();
    let mut skipped = Vec::new();
    match http::nginx_contender(&http::nginx_dir(&dir)) {
        Ok(c) => contenders.push(c),
        Err(s) => skipped.push(s),
    }
    for (name, backend, family) in [
        ("ringkit-uring-tls", "uring", Family::Uring),
        ("ringkit-epoll-tls", "epoll", Family::Epoll),
    ] {
        let server = RingkitServer::serve(&opts.ringkit_bin, &root)
            .backend(backend)
            .threads(1)
            .stats()
            .flag("--open-file-cache-valid", crate::http::CACHE_VALID_SECS)
            .flag("--tls-cert", cert.display())
            .flag("--tls-key", key.display());
        contenders.push(server.contender(name, family));
    }
    let spec = Spec {
        study: "tls",
        title: "TLS",
        reference: "nginx",
        about: "`GET /1k.bin` over HTTPS (TLS 1.3, TLS_AES_256_GCM_SHA384 on nginx; rustls \
                follows the client's order, which puts the same suite first), one \
                certificate for both"
            .into(),
        contenders,
        skipped,
        site: Site::Files {
            root: root.clone(),
            cache_max: 1000,
            tls: Some((cert, key)),
        },
        workloads: vec![Workload::file("1 KiB", 100, false, "/1k.bin", 1024).bytes(&[b'k'; 1024])],
        builtin_only: None,
        scheme: "https",
        mix_file: None,
        count_ringkit_syscalls: true,
    };
    Ok(http::section(&http::run(opts, spec, progress)?))
}
