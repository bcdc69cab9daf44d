//! `ringkit compare hostile`: the battery against every ringkit server and
//! against nginx where nginx does the same job (static files, in the clear
//! and over TLS), and against the same axum app on tokio, in the clear
//! and over rustls, on the HTTP/2 floods (a row of ringkit's axum says
//! where its well-behaved client did worse), one table with each attack's
//! rows side by side.
//!
//! The study runs the short form (timeouts of seconds, the same for nginx:
//! `keepalive_timeout`, `client_header_timeout`, `client_body_timeout` and
//! `send_timeout` are set to the ringkit servers' values), on io_uring
//! (and epoll too with `--full`); `ringkit torture hostile` without
//! `--short` runs the servers' real defaults.

use std::fmt::Write as _;
use std::io;

use crate::harness::study::{Section, StudyOpts};

use super::attack::ALL;
use super::target::{Target, RINGKIT};
use super::{run, HostileConfig, Row};

/// Run the study.
pub fn study(opts: &StudyOpts, log: &mut dyn FnMut(&str)) -> io::Result<Section> {
    let base = opts.out_dir.join("logs").join("hostile");
    crate::harness::made_dir::must_be_new_or_empty(&base)?;
    let backends: &[&str] = if opts.quick {
        &["uring"]
    } else {
        &["uring", "epoll"]
    };
    let mut skipped = Vec::new();
    let mut targets: Vec<Target> = RINGKIT.to_vec();
    if std::path::Path::new(crate::http::NGINX).exists() {
        targets.extend([Target::Nginx, Target::NginxTls]);
    } else {
        skipped.push(("nginx".to_string(), "nginx is not installed".to_string()));
    }
    match crate::harness::peers::peer_binary(&opts.ringkit_bin) {
        Ok(_) => targets.extend([Target::AxumTokio, Target::AxumTlsTokio]),
        Err(e) => skipped.push(("axum-tokio, axum-tls-tokio".to_string(), e)),
    }
    let mut rows = Vec::new();
    let mut n = 0;
    for &t in &targets {
        let own = t.own_backend().map(|b| [b]);
        let bs: &[&str] = own.as_ref().map_or(backends, |b| &b[..]);
        for &b in bs {
            n += 1;
            let mut cfg = HostileConfig::new(
                t,
                opts.ringkit_bin.clone(),
                b,
                base.join(format!("run-{n}")),
            );
            cfg.short = true;
            cfg.server_cpu = Some(opts.server_cpu);
            cfg.client_cpu = Some(opts.client_cpu);
            rows.extend(run(&cfg, log)?);
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    against_tokio(&mut rows);
    Ok(Section {
        skipped,
        ..section(&rows)
    })
}

/// The study's section of the report, from its rows (results.json's
/// `studies.hostile`).
pub fn section(rows: &[Row]) -> Section {
    Section {
        study: "hostile".into(),
        table: super::table(&by_attack(rows)),
        markdown: markdown(&by_attack(rows)),
        json: serde_json::to_value(rows).unwrap_or_default(),
        svgs: Vec::new(),
        skipped: Vec::new(),
    }
}

/// On each attack axum on tokio faced, ringkit's axum rows (the same app,
/// the same hyper; `axum` beside `axum-tokio`, `axum-tls` beside
/// `axum-tls-tokio`) get a note where its well-behaved client did worse
/// than tokio's: fewer answers, or a p99 more than 10% and 20 ms over.
fn against_tokio(rows: &mut [Row]) {
    let peers: Vec<Row> = rows
        .iter()
        .filter(|r| r.target == "axum-tokio" || r.target == "axum-tls-tokio")
        .cloned()
        .collect();
    for p in peers {
        let ours = if p.target == "axum-tokio" {
            "axum"
        } else {
            "axum-tls"
        };
        for r in rows
            .iter_mut()
            .filter(|r| r.target == ours && r.attack == p.attack)
        {
            let (a, b) = (&r.probe, &p.probe);
            if a.answered < b.answered || a.p99_ms > (b.p99_ms * 1.1).max(b.p99_ms + 20.0) {
                r.notes.push(format!(
                    "worse than axum on tokio: {} answered against {}, p99 {:.0} ms against {:.0}",
                    a.answered, b.answered, a.p99_ms, b.p99_ms
                ));
            }
        }
    }
}

/// The rows ordered attack by attack, servers side by side.
fn by_attack(rows: &[Row]) -> Vec<Row> {
    let mut out = Vec::with_capacity(rows.len());
    for a in ALL {
        out.extend(rows.iter().filter(|r| r.attack == a.name()).cloned());
    }
    out
}

/// The report's section.
fn markdown(rows: &[Row]) -> String {
    let mut md = String::from("## Hostile clients\n\n");
    md += "Each attack against a fresh server, beside a well-behaved client that makes a fresh \
           connection and one exchange every 200 ms (with an HTTP server every third one an \
           upload of 20 000 bytes). Short form: idle timeout 4 s, header 2 s, \
           send 3 s (nginx set to the same); cap 256 connections where the server has one; the \
           fd attack lowers the server's soft and hard fd limit to 256. *answered*, *p99*: \
           the well-behaved client's answered exchanges and their p99 (budget under the \
           HTTP/2 floods: 0.5 s; axum-tokio, the same app on tokio, is measured, not \
           judged). *wait*: the \
           well-behaved client's longest wait (budget 2 s; where the cap or the fd table is \
           full, the idle timeout + 2 s). *closed*: seconds until the server had closed every \
           hostile connection (budget: its timeout + 2 s). *KiB/conn*: RSS growth per hostile \
           connection at the peak and once they are gone; burst-then-idle gives KiB per \
           connection fresh and after the bursts (budget 2x fresh + 1 MiB in all). \
           *fds*: before / peak / after.\n\n";
    md += "| attack | server | backend | conns | answered | p99 ms | wait s | closed s | KiB/conn peak | after | fds | ok |\n";
    md += "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n";
    for r in rows {
        let closed = match (r.all_closed_after_secs, r.close_budget_secs) {
            (Some(x), Some(b)) => format!("{x:.1} (≤ {b:.0})"),
            (None, Some(b)) => format!("{}/{} by {b:.0}", r.closed, r.hostile),
            _ => "-".into(),
        };
        let (peak, after) = r.memory_cells(" fresh");
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {} | {} | {} | {}/{}/{} | {} |",
            r.attack,
            r.target,
            r.backend,
            r.hostile,
            r.probe.answered,
            r.probe.p99_ms,
            r.probe.worst_wait_secs,
            closed,
            peak,
            after,
            r.fds[0],
            r.fds[1],
            r.fds[2],
            if r.failures.is_empty() {
                "yes".to_string()
            } else {
                format!("**no**: {}", r.failures.join("; "))
            }
        );
    }
    let notes: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            r.notes
                .iter()
                .map(move |n| format!("{} {} {}: {n}", r.target, r.backend, r.attack))
        })
        .collect();
    if !notes.is_empty() {
        md += "\nNotes:\n\n";
        for n in notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    md
}
