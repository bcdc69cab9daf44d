//! The cross-check: one row of the study measured again by an outside
//! open-loop client, `oha` (crates.io; `cargo install oha`), with a fixed
//! request rate (`-q`) and latency counted from each request's scheduled
//! start (`--latency-correction`), beside the built-in generator's figures
//! for the same server at the same rate.

use std::io;
use std::path::PathBuf;
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::plan::{self, Bench, Kind};
use crate::harness::study::StudyOpts;

/// One server at one rate, by both clients.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CrossCheck {
    /// Workload label.
    pub workload: String,
    /// Server name.
    pub contender: String,
    /// Offered rate, requests/s (`None`: closed loop).
    pub rate: f64,
    /// oha: achieved requests/s and latency percentiles (µs).
    pub oha_rps: f64,
    /// oha: p50, µs.
    pub oha_p50_us: f64,
    /// oha: p90, µs.
    pub oha_p90_us: f64,
    /// oha: p99, µs.
    pub oha_p99_us: f64,
    /// oha: p99.9, µs.
    pub oha_p999_us: f64,
    /// Responses that were not `200`, and transport errors.
    pub oha_errors: u64,
    /// The built-in generator, same server, same rate, run just before.
    pub builtin_rps: f64,
    /// Built-in: p50, µs.
    pub builtin_p50_us: f64,
    /// Built-in: p90, µs.
    pub builtin_p90_us: f64,
    /// Built-in: p99, µs.
    pub builtin_p99_us: f64,
    /// Built-in: p99.9, µs.
    pub builtin_p999_us: f64,
    /// The oha command (PORT for the port).
    pub command: String,
    /// Why the run failed, if it did.
    pub error: Option<String>,
}

/// Where `oha` is: on `PATH`, or where `cargo install` puts it.
pub fn find() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("oha"))
        .find(|p| p.is_file())
}

/// oha's arguments for `secs` seconds at `rate` over `conns` connections.
fn args(url: &str, conns: usize, rate: f64, secs: f64) -> Vec<String> {
    vec![
        "--no-tui".into(),
        "--output-format".into(),
        "json".into(),
        "-z".into(),
        format!("{}s", secs.ceil().max(1.0) as u64),
        "-c".into(),
        conns.to_string(),
        "-q".into(),
        format!("{rate:.0}"),
        "--latency-correction".into(),
        url.into(),
    ]
}

/// Percentiles (µs), requests/s and errors from oha's JSON.
pub(super) fn parse(json: &str) -> io::Result<(f64, [f64; 4], u64)> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(io::Error::other)?;
    let pct = &v["latencyPercentiles"];
    let us = |k: &str| pct[k].as_f64().map(|s| s * 1e6);
    let missing = || io::Error::other("oha's JSON has no latencyPercentiles");
    let p = [
        us("p50").ok_or_else(missing)?,
        us("p90").ok_or_else(missing)?,
        us("p99").ok_or_else(missing)?,
        us("p99.9").ok_or_else(missing)?,
    ];
    let rps = v["summary"]["requestsPerSec"].as_f64().unwrap_or(0.0);
    let not_ok: u64 = v["statusCodeDistribution"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.as_str() != "200")
                .filter_map(|(_, n)| n.as_u64())
                .sum()
        })
        .unwrap_or(0);
    // oha cancels what is in flight when `-z` runs out ("aborted due to
    // deadline"): the end of the run, not an error of the server.
    let errs: u64 = v["errorDistribution"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !k.contains("deadline"))
                .filter_map(|(_, n)| n.as_u64())
                .sum()
        })
        .unwrap_or(0);
    Ok((rps, p, not_ok + errs))
}

/// Measure `reference` and ringkit-uring on `b` at `rate` with oha and
/// with the built-in generator; nothing when oha is not installed.
pub(super) fn cross_check(
    opts: &StudyOpts,
    b: &Bench<'_>,
    reference: &str,
    rate: f64,
    secs: f64,
    progress: &mut dyn FnMut(&str),
) -> Vec<CrossCheck> {
    let Some(oha) = find() else {
        progress("oha not installed (cargo install oha): no cross-check");
        return Vec::new();
    };
    let Kind::Http { run, w } = &b.kind else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in b
        .contenders
        .iter()
        .filter(|c| c.name == reference || c.name == "ringkit-uring")
    {
        let mine = plan::sample(opts, b, c, Some(rate), secs, "oha-builtin");
        let cmd_shown = format!(
            "taskset -c {} oha {}",
            opts.client_cpu,
            args(
                &format!("http://127.0.0.1:PORT{}", w.path),
                b.conns,
                rate,
                secs
            )
            .join(" ")
        );
        let mut x = CrossCheck {
            workload: b.name.clone(),
            contender: c.name.clone(),
            rate,
            oha_rps: 0.0,
            oha_p50_us: 0.0,
            oha_p90_us: 0.0,
            oha_p99_us: 0.0,
            oha_p999_us: 0.0,
            oha_errors: 0,
            builtin_rps: mine.rps,
            builtin_p50_us: mine.p50_us,
            builtin_p90_us: mine.p90_us,
            builtin_p99_us: mine.p99_us,
            builtin_p999_us: mine.p999_us,
            command: cmd_shown,
            error: mine.error.clone(),
        };
        let go = || -> io::Result<(f64, [f64; 4], u64)> {
            let (server, addr, _) = run.start(c, "oha")?;
            let url = format!("http://{addr}{}", w.path);
            let o = Command::new("taskset")
                .arg("-c")
                .arg(opts.client_cpu.to_string())
                .arg(&oha)
                .args(args(&url, b.conns, rate, secs))
                .output()?;
            drop(server);
            if !o.status.success() {
                return Err(io::Error::other(format!(
                    "oha failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                )));
            }
            parse(&String::from_utf8_lossy(&o.stdout))
        };
        match go() {
            Ok((rps, p, errs)) => {
                x.oha_rps = rps;
                [x.oha_p50_us, x.oha_p90_us, x.oha_p99_us, x.oha_p999_us] = p;
                x.oha_errors = errs;
            }
            Err(e) => x.error = Some(e.to_string()),
        }
        progress(&format!(
            "oha {} at {rate:.0} req/s: p99 {:.0} µs (built-in {:.0} µs)",
            c.name, x.oha_p99_us, x.builtin_p99_us
        ));
        out.push(x);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_ohas_json() {
        let j = r#"{"summary":{"successRate":1.0,"requestsPerSec":1234.5},
            "latencyPercentiles":{"p10":0.0001,"p50":0.0002,"p90":0.0004,"p99":0.001,"p99.9":0.002},
            "statusCodeDistribution":{"200":100,"503":2},
            "errorDistribution":{"connection reset":1,"aborted due to deadline":9}}"#;
        let (rps, p, errs) = super::parse(j).unwrap();
        assert_eq!(rps, 1234.5);
        assert!((p[2] - 1000.0).abs() < 1e-6 && (p[3] - 2000.0).abs() < 1e-6);
        assert_eq!(errs, 3);
        assert!(super::parse("{}").is_err());
    }
}
