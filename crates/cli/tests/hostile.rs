//! `ringkit torture hostile --short` against every ringkit server, on both
//! backends: idle floods past the connection cap, connect-then-reset
//! floods, openings and bodies trickled a byte a second, silence after a
//! whole opening, replies never read, pipelined bursts then idleness,
//! maximal bodies and partial records, fd exhaustion; on axum HTTP/2
//! WINDOW_UPDATE and PING floods (read and unread), rapid-reset,
//! CONTINUATION, SETTINGS, empty-DATA, MadeYouReset and HPACK-bomb floods,
//! the rest of the 2019 set (data dribble, PRIORITY churn, resets never
//! read, empty headers), zero-window streams answering PINGs and a
//! download beside a full input budget (every byte counted); over TLS
//! large ClientHellos held unfinished and a handshake flood; an HTTP/1
//! pipelining flood on every HTTP server; each beside a well-behaved
//! client. The battery fails (and so does the test) on any missed budget;
//! the budgets are in `ringkit_bench::torture::hostile`.
//!
//! One server at a time (a lock): the servers share CPU 0 and the clients
//! CPU 1, and a budget of 2 s for the well-behaved client should measure
//! the server, not its neighbours.

mod common;

use std::process::Command;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn battery(server: &str) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let backend = if common::backend_usable("uring") {
        "auto"
    } else {
        "epoll"
    };
    let out = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["torture", "hostile", "--short", "--server", server])
        .args(["--backend", backend])
        .env_remove("RINGKIT_BACKEND")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(out.status.success(), "{server}: {stderr}\n{stdout}");
    // Every attack that applies ran, on every backend (echo has no body
    // or partial frame to attack, log no HTTP body).
    let row = format!("{server} ");
    let rows = stdout.lines().filter(|l| l.starts_with(&row)).count();
    let per_backend = match server {
        "echo" => 7,
        "log" => 8,
        // And the fourteen HTTP/2 frame floods, zero-window streams and
        // a download beside a full budget.
        "axum" => 26,
        // And large ClientHellos and a handshake flood.
        "axum-tls" => 28,
        "serve-tls" => 12,
        // The floods and the download only, once: it is tokio's.
        "axum-tokio" => 16,
        "axum-tls-tokio" => 17,
        // Nine, and the HTTP/1 pipelining flood.
        _ => 10,
    };
    let backends = if backend == "auto" && !server.ends_with("-tokio") {
        2
    } else {
        1
    };
    assert_eq!(rows, per_backend * backends, "{stdout}");
}

#[test]
fn http() {
    battery("http");
}

#[test]
fn serve() {
    battery("serve");
}

#[test]
fn serve_tls() {
    battery("serve-tls");
}

#[test]
fn axum() {
    battery("axum");
}

#[test]
fn axum_tls() {
    battery("axum-tls");
}

/// Whether `ringkit-peer` is built (by `cargo build -p ringkit-peers`, as
/// CI does: the peers are not a default member); says so if not.
fn peer_built() -> bool {
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_ringkit"));
    let peer = exe.with_file_name("ringkit-peer");
    if !peer.exists() {
        println!(
            "skipped: {} not built (cargo build -p ringkit-peers)",
            peer.display()
        );
    }
    peer.exists()
}

/// The same axum app on tokio (`ringkit-peer`), on the HTTP/2 floods:
/// the battery measures it beside ringkit's and holds it to no budget, so
/// this checks the attack runs against it.
#[test]
fn axum_tokio() {
    if peer_built() {
        battery("axum-tokio");
    }
}

/// The same over TLS (`ringkit-peer axum-https`), beside `axum-tls`.
#[test]
fn axum_tls_tokio() {
    if peer_built() {
        battery("axum-tls-tokio");
    }
}

#[test]
fn echo() {
    battery("echo");
}

#[test]
fn log() {
    battery("log");
}

/// `--help` names every attack `--only` takes, and a wrong name is told
/// the right ones.
#[test]
fn help_names_every_attack() {
    let help = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["torture", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).replace(['\n', ' '], "");
    for a in ringkit_bench::torture::hostile::attack::ALL {
        assert!(help.contains(a.name()), "--help lacks {}", a.name());
    }
    let wrong = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["torture", "hostile", "--only", "h2-nonsense"])
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("h2-budget-download"), "{err}");
}
