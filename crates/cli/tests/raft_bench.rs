//! `ringkit raft bench` runs a cluster and measures it, on each ringkit
//! backend and, with `--engine tokio`, as the openraft-on-tokio peer
//! (`ringkit-peer openraft-node`, which `compare raft` sets beside
//! ringkit): every write answered, none failed. Figures are the
//! benchmark's business, not this test's.

use std::path::PathBuf;
use std::process::Command;

fn bench(engine: &str, backend: &str, port: u16, extra: &[String]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args([
            "raft",
            "bench",
            "--json",
            "--secs=1",
            "--warmup=0.3",
            "--clients=4",
        ])
        .arg(format!("--engine={engine}"))
        .arg(format!("--backend={backend}"))
        .arg(format!("--port={port}"))
        .args(extra)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}{out}");
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert!(v["commits_per_sec"].as_f64().unwrap() > 0.0, "{out}");
    assert_eq!(v["failed"], 0, "{out}");
    v
}

#[test]
fn raft_bench_on_io_uring_and_epoll() {
    for (backend, port) in [("uring", 7330), ("epoll", 7331)] {
        let v = bench("ringkit", backend, port, &[]);
        assert_eq!(v["engine"], format!("ringkit-{backend}"));
    }
}

#[test]
fn raft_bench_of_the_openraft_tokio_peer() {
    // Built by `cargo build -p ringkit-peers` (CI does; `compare raft`
    // builds it itself): the peers are not a default member.
    let peer = PathBuf::from(env!("CARGO_BIN_EXE_ringkit")).with_file_name("ringkit-peer");
    if !peer.exists() {
        println!(
            "skipped: {} not built (cargo build -p ringkit-peers)",
            peer.display()
        );
        return;
    }
    let v = bench(
        "tokio",
        "auto",
        7332,
        &[format!("--peer-bin={}", peer.display())],
    );
    assert_eq!(v["engine"], "openraft-tokio");
    // The peer's log cannot be O_DIRECT: said, not ignored.
    let o = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["raft", "bench", "--engine=tokio", "--direct", "--port=7333"])
        .arg(format!("--peer-bin={}", peer.display()))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("buffered"));
}
