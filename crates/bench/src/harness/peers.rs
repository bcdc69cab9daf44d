//! Finding the peers' binaries: `ringkit-peer` (the tokio, monoio and hyper
//! servers of `peers/`), built with cargo on first use.

use std::path::{Path, PathBuf};

/// The `ringkit-peer` binary next to `ringkit` (`me`), building it with
/// cargo (same profile) when missing. The error says why it is not there.
pub fn peer_binary(me: &Path) -> Result<PathBuf, String> {
    let path = me.with_file_name("ringkit-peer");
    if path.exists() {
        return Ok(path);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join("peers/Cargo.toml").exists() {
        return Err("peers/ sources not found next to this build".into());
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
    eprintln!("ringkit: building the tokio/monoio peers (cargo build -p ringkit-peers), once...");
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
