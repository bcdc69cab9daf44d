//! Finding the peers' binaries: `ringkit-peer` (the tokio, monoio and hyper
//! servers of `peers/`), brought up to date with cargo before a study.

use std::path::{Path, PathBuf};

/// The `ringkit-peer` binary next to `ringkit` (`me`), built with cargo
/// (same profile) whenever the sources are here: cargo rebuilds it if
/// `peers/` or a crate it uses changed since (a stale peer would serve
/// yesterday's app) and does nothing otherwise. Without the sources, an
/// existing binary is used as is. The error says why there is none.
pub fn peer_binary(me: &Path) -> Result<PathBuf, String> {
    let path = me.with_file_name("ringkit-peer");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join("peers/Cargo.toml").exists() {
        return if path.exists() {
            Ok(path)
        } else {
            Err("peers/ sources not found next to this build".into())
        };
    }
    let profile = if me
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == "release")
    {
        vec!["--release"]
    } else {
        vec![]
    };
    eprintln!("ringkit: cargo build -p ringkit-peers (the tokio/monoio/hyper peers; a no-op when up to date)...");
    let st = std::process::Command::new("cargo")
        .arg("build")
        .args(&profile)
        .args(["-p", "ringkit-peers"])
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if st.success() && path.exists() {
        Ok(path)
    } else {
        Err(format!("cargo build -p ringkit-peers failed ({st})"))
    }
}

/// The `axum_app` example of ringkit-hyper (hosted mode, feature `tokio`)
/// next to `ringkit` (`me`): `target/<profile>/examples/axum_app`, brought
/// up to date with cargo (same profile) when the sources are here.
pub fn app_binary(me: &Path) -> Result<PathBuf, String> {
    let dir = me.parent().ok_or("the ringkit binary has no directory")?;
    let path = dir.join("examples").join("axum_app");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join("crates/hyper/Cargo.toml").exists() {
        return if path.exists() {
            Ok(path)
        } else {
            Err("crates/hyper sources not found next to this build".into())
        };
    }
    let release = dir.file_name().is_some_and(|n| n == "release");
    eprintln!("ringkit: cargo build -p ringkit-hyper --features tokio --example axum_app (a no-op when up to date)...");
    let st = std::process::Command::new("cargo")
        .arg("build")
        .args(release.then_some("--release"))
        .args([
            "-p",
            "ringkit-hyper",
            "--features",
            "tokio",
            "--example",
            "axum_app",
        ])
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if st.success() && path.exists() {
        Ok(path)
    } else {
        Err(format!("cargo build of the axum_app example failed ({st})"))
    }
}
