//! `ringkit axum` at start-up: a missing or garbage TLS certificate or key
//! is a clear error naming the file and a non-zero exit, never a server
//! that runs without what was asked for.

use std::process::Command;

fn start(cert: &str, key: &str) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args([
            "axum",
            "--addr",
            "127.0.0.1:0",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ])
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn bad_tls_files_fail_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, b"-----BEGIN NOTHING-----\n").unwrap();
    let g = garbage.to_str().unwrap();
    let missing = dir.path().join("missing.pem");
    let m = missing.to_str().unwrap();
    for (cert, key, named) in [(m, g, "missing.pem"), (g, g, "garbage.pem")] {
        let (code, err) = start(cert, key);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains(named), "{err}");
    }
    // --tls-cert without --tls-key is a usage error.
    let o = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["axum", "--tls-cert", g])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
