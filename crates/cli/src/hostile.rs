//! `ringkit torture hostile`: the battery of hostile clients, server by
//! server and backend by backend, as one table.

use std::io;
use std::path::PathBuf;

use ringkit::Backend;
use ringkit_bench::torture::hostile::{self, attack::Attack, target::Target, HostileConfig};

use crate::torture::TortureArgs;

/// Run the battery as `a` asks; fails if any budget is missed.
pub fn hostile(a: &TortureArgs, exe: PathBuf, log: &mut dyn FnMut(&str)) -> io::Result<()> {
    let bad = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
    let mut targets = Vec::new();
    for s in &a.server {
        if s == "all" {
            targets.extend(hostile::target::RINGKIT);
        } else {
            targets.push(Target::parse(s).map_err(bad)?);
        }
    }
    let only = a
        .only
        .iter()
        .map(|s| Attack::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let backends: Vec<&str> = match a.backend {
        Backend::Uring => vec!["uring"],
        Backend::Epoll => vec!["epoll"],
        Backend::Auto => vec!["uring", "epoll"],
    };
    // A directory of our own: the one given (which must not exist yet),
    // or a new one under the temp dir, removed at the end.
    let (base, made) = match &a.dir {
        Some(d) => (d.clone(), false),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let d = std::env::temp_dir()
                .join(format!("ringkit-hostile-{}-{nanos}", std::process::id()));
            (d, true)
        }
    };
    ringkit_bench::harness::made_dir::must_be_new_or_empty(&base)?;
    std::fs::create_dir_all(&base)?;
    let res = battery(a, &exe, &base, &targets, &only, &backends, log);
    if made {
        let _ = std::fs::remove_dir_all(&base);
    }
    res
}

/// Every target on every backend.
fn battery(
    a: &TortureArgs,
    exe: &std::path::Path,
    base: &std::path::Path,
    targets: &[Target],
    only: &[Attack],
    backends: &[&str],
    log: &mut dyn FnMut(&str),
) -> io::Result<()> {
    let mut rows = Vec::new();
    let mut run = 0;
    for &t in targets {
        if t.nginx() && !std::path::Path::new(ringkit_bench::http::NGINX).exists() {
            log(&format!("{}: skipped: nginx is not installed", t.name()));
            continue;
        }
        let own = t.own_backend().map(|b| [b]);
        let bs: &[&str] = own.as_ref().map_or(backends, |b| &b[..]);
        for &b in bs {
            run += 1;
            let dir = base.join(format!("run-{run}"));
            let mut cfg = HostileConfig::new(t, exe.to_path_buf(), b, dir);
            cfg.short = a.short;
            cfg.cap = a.cap.max(1);
            cfg.only = only.to_vec();
            if a.server_cpu.is_some() {
                cfg.server_cpu = a.server_cpu;
            }
            if a.client_cpu.is_some() {
                cfg.client_cpu = a.client_cpu;
            }
            rows.extend(hostile::run(&cfg, log)?);
        }
    }
    println!("{}", hostile::table(&rows));
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    let failed: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            r.failures
                .iter()
                .map(move |f| format!("{} {} {}: {f}", r.target, r.backend, r.attack))
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "hostile FAILED:\n  {}",
            failed.join("\n  ")
        )))
    }
}
