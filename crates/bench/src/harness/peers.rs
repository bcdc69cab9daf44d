//! Finding the peers' binaries: `ringkit-peer` (the tokio, monoio and hyper
//! servers of `peers/`) and ringkit-hyper's `axum_app` example, brought up
//! to date with cargo before a study.

use std::path::{Path, PathBuf};

/// The workspace's root, where this crate was built.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `path`, built first by `cargo build <args>` (in the profile of `me`,
/// the running `ringkit`) when the sources are here (`manifest` exists):
/// cargo rebuilds what changed since (a stale peer would serve yesterday's
/// code) and does nothing otherwise. Without the sources an existing
/// binary is used as is. The error says why there is none.
fn built(me: &Path, path: PathBuf, manifest: &str, args: &[&str]) -> Result<PathBuf, String> {
    let root = root();
    if !root.join(manifest).exists() {
        return if path.exists() {
            Ok(path)
        } else {
            Err(format!("{manifest} not found next to this build"))
        };
    }
    let release = me
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == "release");
    let what = args.join(" ");
    eprintln!("ringkit: cargo build {what} (a no-op when up to date)...");
    let st = std::process::Command::new("cargo")
        .arg("build")
        .args(release.then_some("--release"))
        .args(args)
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if st.success() && path.exists() {
        Ok(path)
    } else {
        Err(format!("cargo build {what} failed ({st})"))
    }
}

/// The `ringkit-peer` binary next to `ringkit` (`me`): the tokio, monoio
/// and hyper peers.
pub fn peer_binary(me: &Path) -> Result<PathBuf, String> {
    built(
        me,
        me.with_file_name("ringkit-peer"),
        "peers/Cargo.toml",
        &["-p", "ringkit-peers"],
    )
}

/// The `axum_app` example of ringkit-hyper (hosted mode, feature `tokio`)
/// next to `ringkit` (`me`): `target/<profile>/examples/axum_app`.
pub fn app_binary(me: &Path) -> Result<PathBuf, String> {
    let dir = me.parent().ok_or("the ringkit binary has no directory")?;
    built(
        me,
        dir.join("examples").join("axum_app"),
        "crates/hyper/Cargo.toml",
        &[
            "-p",
            "ringkit-hyper",
            "--features",
            "tokio",
            "--example",
            "axum_app",
        ],
    )
}
