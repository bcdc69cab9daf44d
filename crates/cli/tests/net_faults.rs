//! `ringkit torture --faults PROFILE` in its short CI mode: the server in a
//! network namespace behind a veth pair, the link losing packets (nftables),
//! slowed to 10 Mbit/s (tc tbf), delayed, sliced into tiny segments or
//! resetting connections (the fault proxy), and peers going silent mid-
//! transfer. Every run must pass: every byte verified, no loss the network
//! did not cause, no stall, no fd leak, silent peers freed within the
//! server's timeouts, exit 0 on SIGTERM. Echo, HTTP and HTTPS (rustls
//! clients verifying every body byte), each on both backends. Needs root, `ip`, `nft` and `tc` (CI installs iproute2 and
//! nftables); skips with the reason otherwise.

use std::process::Command;

fn uring_usable() -> bool {
    match ringkit::Builder::new()
        .backend(ringkit::Backend::Uring)
        .build()
    {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped io_uring: unavailable here: {e}");
            false
        }
    }
}

fn torture(mode: &str, backend: &str, profile: &str, secs: &str) {
    let (mode, tls) = match mode {
        "https" => ("http", true),
        m => (m, false),
    };
    let out = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["torture", mode, "--secs", secs, "--backend", backend])
        .args(if tls { &["--tls"][..] } else { &[][..] })
        .args(["--faults", profile, "--seed", "11", "--conns", "32"])
        .args(["--stall-secs", "30"])
        .env_remove("RINGKIT_BACKEND")
        .output()
        .expect("run ringkit torture");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}\n{stdout}");
    assert!(
        out.status.success(),
        "ringkit torture {mode} --faults {profile} --backend {backend} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("PASSED"), "{stdout}");
    assert!(stdout.contains("mismatches:       0"), "{stdout}");
    if tls {
        assert!(stdout.contains("ringkit torture https: PASSED"), "{stdout}");
        assert!(stdout.contains("responses verified"), "{stdout}");
    }
    assert!(
        stdout.contains(&format!("faults:           {profile}")),
        "{stdout}"
    );
    if profile == "silent" {
        assert!(
            stdout.contains("silent peers:     16 connections"),
            "{stdout}"
        );
    }
}

fn backends() -> Vec<&'static str> {
    if uring_usable() {
        vec!["uring", "epoll"]
    } else {
        vec!["epoll"]
    }
}

#[test]
fn echo_across_a_faulty_link() {
    if let Some(why) = ringkit_bench::torture::faults::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    for b in backends() {
        for p in ["loss5", "delay", "slow", "slice", "reset", "silent"] {
            torture("echo", b, p, "4");
        }
    }
}

#[test]
fn https_across_a_faulty_link() {
    if let Some(why) = ringkit_bench::torture::faults::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    for b in backends() {
        for p in ["loss5", "reset", "silent"] {
            torture("https", b, p, "4");
        }
    }
}

#[test]
fn http_across_a_faulty_link() {
    if let Some(why) = ringkit_bench::torture::faults::unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    for b in backends() {
        for p in ["loss5", "reset", "silent"] {
            torture("http", b, p, "4");
        }
    }
}
