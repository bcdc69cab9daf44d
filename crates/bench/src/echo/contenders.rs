//! The echo study's contenders: ringkit on each backend and path, and the
//! peers a user would pick instead (tokio, monoio, glommio).

use std::path::Path;

use crate::harness::server::{Contender, Family, RingkitServer};

/// The contenders (`quick`: the short list) and those that cannot run here,
/// with the reason. `ringkit` is the ringkit binary, `peer` the
/// `ringkit-peer` binary or why it is missing.
pub fn contenders(
    ringkit: &Path,
    peer: &Result<std::path::PathBuf, String>,
    quick: bool,
) -> (Vec<Contender>, Vec<(String, String)>) {
    let rk = |name: &str, backend: &str, recv: &str, family, extra: &[(&str, &str)]| {
        let mut s = RingkitServer::echo(ringkit)
            .backend(backend)
            .threads(1)
            .flag("--recv", recv)
            .stats();
        for (k, v) in extra {
            s = s.flag(k, v);
        }
        s.contender(name, family)
    };
    let mut v = vec![rk(
        "ringkit-uring",
        "uring",
        "multishot",
        Family::Uring,
        &[],
    )];
    if !quick {
        v.push(rk(
            "ringkit-uring-plain",
            "uring",
            "single",
            Family::Uring,
            &[("--fixed-files", "0")],
        ));
        v.push(rk(
            "ringkit-uring-nofixed",
            "uring",
            "multishot",
            Family::Uring,
            &[("--fixed-files", "0")],
        ));
        v.push(rk(
            "ringkit-uring-nobundle",
            "uring",
            "multishot",
            Family::Uring,
            &[("--recv-bundle", "off")],
        ));
        v.push(rk(
            "ringkit-uring-linked",
            "uring",
            "multishot",
            Family::Uring,
            &[("--send-batch", "linked")],
        ));
        v.push(rk(
            "ringkit-uring-sendbundle",
            "uring",
            "multishot",
            Family::Uring,
            &[("--send-batch", "bundle")],
        ));
        v.push(rk(
            "ringkit-uring-batch",
            "uring",
            "multishot",
            Family::Uring,
            &[("--batch-wait", "32:50")],
        ));
        // Waits for batches only while the loop is the bottleneck.
        v.push(rk(
            "ringkit-uring-auto",
            "uring",
            "multishot",
            Family::Uring,
            &[("--batch-wait", "auto")],
        ));
    }
    v.push(rk("ringkit-epoll", "epoll", "single", Family::Epoll, &[]));
    let mut skipped = Vec::new();
    match peer {
        Ok(p) => {
            let p = p.display().to_string();
            let peer = |name: &str, sub: &str, family| Contender {
                name: name.into(),
                family,
                cmd: vec![p.clone(), sub.into(), "{addr}".into()],
                ringkit: false,
            };
            v.push(peer("tokio", "tokio-echo", Family::Epoll));
            v.push(peer("monoio-uring", "monoio-echo", Family::Uring));
            v.push(peer("glommio", "glommio-echo", Family::Uring));
            if !quick {
                v.push(peer("monoio-legacy", "monoio-legacy-echo", Family::Epoll));
            }
        }
        Err(e) => {
            for n in ["tokio", "monoio-uring", "glommio", "monoio-legacy"] {
                skipped.push((n.to_string(), e.clone()));
            }
        }
    }
    (v, skipped)
}
