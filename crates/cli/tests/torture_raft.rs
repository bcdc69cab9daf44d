//! `ringkit torture raft` in its short form, on each backend: three node
//! processes, rounds of SIGKILLs and (as root, with nft) partitions, and
//! the clients' history checked: nothing acknowledged lost or reordered,
//! no stale read. (`ringkit torture raft --rounds 20` is the long form.)

use std::process::Command;

fn torture(backend: &str, port: u16, seed: u64) {
    let o = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["torture", "raft", "--rounds", "5", "--clients", "3"])
        .arg(format!("--seed={seed}"))
        .arg(format!("--backend={backend}"))
        .arg(format!("--port={port}"))
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    println!("{err}{out}");
    assert!(o.status.success(), "{err}{out}");
    assert!(out.contains("nothing lost, reordered or stale"), "{out}");
    for fault in ["kill the leader", "kill a node"] {
        assert!(err.contains(fault), "no {fault:?} round: {err}");
    }
    assert!(
        err.contains("cut a node off") || err.contains("partitions skipped"),
        "{err}"
    );
}

#[test]
fn raft_survives_kills_and_partitions_on_io_uring() {
    torture("uring", 7310, 3);
}

#[test]
fn raft_survives_kills_and_partitions_on_epoll() {
    torture("epoll", 7320, 4);
}
