//! `ringkit torture` in its short CI mode: about 15 s of echo chaos per
//! backend, a graceful-shutdown run (SIGTERM under load), and 10 s of HTTP
//! chaos against `ringkit serve`. Each must exit 0: no byte lost or wrong,
//! no fd leak, the server alive until SIGTERM and exiting 0 after it.
//! (Two tests run at a time: about 30 s of wall time in all.)

use std::process::Command;

fn uring_usable() -> bool {
    match ringkit::Builder::new()
        .backend(ringkit::Backend::Uring)
        .build()
    {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: io_uring unavailable here: {e}");
            false
        }
    }
}

fn torture(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .arg("torture")
        .args(args)
        .env_remove("RINGKIT_BACKEND")
        .output()
        .expect("run ringkit torture");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}\n{stdout}");
    assert!(
        out.status.success(),
        "ringkit torture {args:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("PASSED"), "{stdout}");
    assert!(stdout.contains("mismatches:       0"), "{stdout}");
}

#[test]
fn echo_uring_short() {
    if uring_usable() {
        torture(&["echo", "--secs", "15", "--backend", "uring", "--seed", "7"]);
    }
}

#[test]
fn echo_epoll_short() {
    torture(&["echo", "--secs", "15", "--backend", "epoll", "--seed", "7"]);
}

#[test]
fn echo_sigterm_under_load() {
    let backend = if uring_usable() { "uring" } else { "epoll" };
    torture(&[
        "echo",
        "--sigterm-at",
        "5",
        "--backend",
        backend,
        "--seed",
        "11",
    ]);
}

#[test]
fn http_short() {
    let backend = if uring_usable() { "uring" } else { "epoll" };
    torture(&["http", "--secs", "10", "--backend", backend, "--seed", "13"]);
}

#[test]
fn http_sigterm_under_load_epoll() {
    // The other backend's HTTP run is `http_short`; this one also checks
    // graceful shutdown: no response lost, connections with unanswered
    // pipelined input close cleanly (lingering close), exit 0.
    torture(&[
        "http",
        "--secs",
        "6",
        "--sigterm-at",
        "3",
        "--backend",
        "epoll",
        "--seed",
        "17",
    ]);
}
