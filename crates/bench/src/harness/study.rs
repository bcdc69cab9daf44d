//! What every study of `ringkit compare` shares: its options and the
//! section it contributes to the report.
//!
//! Each study (echo, generator, http, static, axum, tls, wakeup, nop, file) is a function
//! `fn study(opts: &StudyOpts, progress: &mut dyn FnMut(&str)) -> io::Result<Section>`.
//! `ringkit compare` runs the studies one after another and writes one
//! directory: `results.json` (`{"system": …, "studies": {name: json}}`),
//! `report.md` (a header, then each section's markdown) and every section's
//! SVG charts.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use crate::harness::sysinfo::SystemInfo;

/// Options common to every study of `ringkit compare`.
#[derive(Debug, Clone)]
pub struct StudyOpts {
    /// `--quick`: about a minute for the study, fewer contenders/variants.
    pub quick: bool,
    /// Rounds (each contender once per round, interleaved); `None` = the
    /// study's default.
    pub rounds: Option<usize>,
    /// Measured seconds per sample; `None` = the study's default.
    pub secs: Option<f64>,
    /// CPU for servers / the measured side.
    pub server_cpu: usize,
    /// CPU for load generators / the other side.
    pub client_cpu: usize,
    /// How to count peers' syscalls (`None`: not counted).
    pub peer_syscalls: Option<crate::harness::syscalls::SyscallTool>,
    /// Output directory of the whole compare run (a study may write logs
    /// under `out_dir/logs/<study>`).
    pub out_dir: PathBuf,
    /// Path of the `ringkit` binary (to start ringkit servers).
    pub ringkit_bin: PathBuf,
    /// Path of the `ringkit-peer` binary, or why there is none.
    pub peer_bin: Result<PathBuf, String>,
    /// Whether the user asked for peers' syscalls (not `--no-strace`, not
    /// `--quick`); with no tool for it, a study says so.
    pub want_peer_syscalls: bool,
    /// Connection counts (echo; empty: the study's default).
    pub conns: Vec<usize>,
    /// Message length in bytes (echo).
    pub msg_len: usize,
    /// Messages in flight per connection (echo; 1: one at a time).
    pub pipeline: usize,
    /// Only these contenders (echo; empty: all).
    pub only: Vec<String>,
    /// The echo study's load generator.
    pub echo_client: crate::echo::EchoClient,
    /// rust_echo_bench's binary (`None`: `echo_bench` on `PATH`), for the
    /// `RustEchoBench` client.
    pub echo_bench: Option<PathBuf>,
}

/// One study's contribution to the report.
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// Short name: "echo", "http", "wakeup", "nop", "file".
    pub study: String,
    /// Terminal table printed at the end of the run.
    pub table: String,
    /// Markdown for report.md, starting with a `## ` heading.
    pub markdown: String,
    /// Everything measured, for results.json (`studies.<study>`).
    pub json: serde_json::Value,
    /// SVG charts: (file name, document). Referenced from `markdown`.
    pub svgs: Vec<(String, String)>,
    /// Rows/contenders skipped, with the reason (also in `markdown`).
    pub skipped: Vec<(String, String)>,
}

/// Write results.json, report.md and the charts of `sections` into `dir`.
pub fn write_sections(system: &SystemInfo, sections: &[Section], dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut studies = serde_json::Map::new();
    for s in sections {
        studies.insert(s.study.clone(), s.json.clone());
    }
    let json = serde_json::json!({ "system": system, "studies": studies });
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    let mut md = String::new();
    let _ = writeln!(md, "# ringkit compare\n");
    let _ = writeln!(
        md,
        "- date: {}\n- command: `{}`\n- kernel: {}\n- CPU: {} ({} cores)\n- ringkit {}\n- studies: {}\n",
        system.date,
        system.command,
        system.kernel,
        system.cpu_model,
        system.cores,
        system.tool_version,
        sections
            .iter()
            .map(|s| s.study.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for s in sections {
        md.push_str(&s.markdown);
        if !md.ends_with('\n') {
            md.push('\n');
        }
        md.push('\n');
        for (name, doc) in &s.svgs {
            std::fs::write(dir.join(name), doc)?;
        }
    }
    std::fs::write(dir.join("report.md"), md)?;
    Ok(())
}
