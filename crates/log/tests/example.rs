//! The `wal` example, built by `cargo test`, run on both backends: it must
//! replay the same map it wrote, twice in a row on one directory.

use std::process::Command;

#[test]
fn wal_example_replays_what_it_wrote() {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/wal
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("examples/wal");
    if !path.exists() {
        eprintln!(
            "skipped: {} not built (run through `cargo test`)",
            path.display()
        );
        return;
    }
    for backend in ["epoll", "uring"] {
        let t = tempfile::tempdir().unwrap();
        for run in 0..2 {
            let out = Command::new(&path)
                .arg(t.path())
                .arg(backend)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let err = String::from_utf8_lossy(&out.stderr);
            if backend == "uring" && err.contains("io_uring") && !out.status.success() {
                eprintln!("skipped on io_uring: {err}");
                break;
            }
            assert!(out.status.success(), "{backend} run {run}: {text}{err}");
            assert!(text.contains("800 sets durable"), "{text}");
            assert!(text.contains(&format!("replayed {} keys", 800)), "{text}");
        }
    }
}
