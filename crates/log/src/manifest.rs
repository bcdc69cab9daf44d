//! The log directory's manifest and listing: the names of its files, which
//! segments it holds, and writing the manifest (by rename).

use std::io;
use std::path::Path;

use crate::frame::Manifest;
use crate::segment;

/// The manifest's name.
pub const MANIFEST: &str = "MANIFEST";
/// The name a new manifest is written under before its rename.
pub const MANIFEST_TMP: &str = "MANIFEST.tmp";

/// The segments of `dir` by first LSN, and whether it has a manifest.
pub fn list(dir: &Path) -> io::Result<(Vec<u64>, bool)> {
    let mut firsts = Vec::new();
    let mut manifest = false;
    let entries = std::fs::read_dir(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("log dir {}: {e}", dir.display())))?;
    for e in entries {
        let name = e?.file_name();
        let Some(name) = name.to_str() else { continue };
        if name == MANIFEST {
            manifest = true;
        } else if let Some(first) = segment::parse_name(name) {
            firsts.push(first);
        }
    }
    firsts.sort_unstable();
    Ok((firsts, manifest))
}

/// Write `dir/MANIFEST` durably: to a temporary name, synced, renamed,
/// the directory synced.
pub async fn write_manifest(dir: &Path, m: &Manifest) -> io::Result<()> {
    ringkit::fs::write_replace(dir.join(MANIFEST), m.encode().to_vec()).await
}
