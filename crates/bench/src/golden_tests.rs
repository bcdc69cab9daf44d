//! Every study's report, rendered from a committed run's results.json,
//! against what it rendered when the golden files were written: the
//! terminal table, report.md's section, results.json's entry and the
//! charts. A change to how a study's results are reported (or read back)
//! that changes what a report says fails here; how a study is run is not
//! checked (the input is a committed run). After a change meant to alter a
//! report, write the golden files anew with `RINGKIT_BLESS_REPORTS=1 cargo
//! test -p ringkit-bench --lib golden` and read the diff.
//!
//! A run recorded before its study kept a field reads it as its default,
//! so for such a run the golden file pins how it renders, not what was
//! measured: the CPUs of the log, raft and grpc runs say "(not
//! recorded)", hostile's p99 of the well-behaved client reads 0, and the
//! c10k run's open-loop capacity and host stalls read 0.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::harness::study::Section;

/// (study, run under docs/results whose results.json holds it): every study of `ringkit compare`.
const CASES: &[(&str, &str)] = &[
    ("echo", "compare-2026-11-30-echo-10rounds"),
    ("echo", "echo-2026-11-30-rust-echo-bench-t20"),
    ("http", "http-2026-11-25-quick"),
    ("static", "compare-2026-11-27-v3-static"),
    ("axum", "compare-2026-11-26-v3-http"),
    ("tls", "tls-2026-11-25-adapter"),
    ("app", "compare-2026-11-27-v3-app"),
    ("hosting", "hosting-2026-11-25"),
    ("pipeline", "compare-2026-11-26-v3-http"),
    ("file", "file-sqpoll-2026-11-27"),
    ("wakeup", "compare-2026-11-26-after-cycle"),
    ("nop", "compare-2026-11-26-after-cycle"),
    ("generator", "compare-2026-11-26-after-cycle"),
    ("latency", "latency-2026-11-27"),
    ("c10k", "c10k-2026-11-26"),
    ("raft", "raft-compare-2026-11-28"),
    ("log", "log-dsync-2026-11-30"),
    ("log", "compare-2026-11-27-glommio-log"),
    ("grpc", "grpc-2026-11-25"),
    ("hostile", "hostile-2026-11-26"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn of<T: DeserializeOwned>(study: &str, v: serde_json::Value) -> T {
    serde_json::from_value(v)
        .unwrap_or_else(|e| panic!("{study}: results.json does not read back: {e}"))
}

/// The study's section from its entry in results.json.
fn render(study: &str, v: serde_json::Value) -> Section {
    match study {
        "echo" => crate::echo::report::section(&of(study, v)),
        "file" => crate::file::section(&of(study, v)),
        "wakeup" => crate::wakeup::section(&of(study, v)),
        "nop" => crate::nop::section(&of(study, v)),
        "generator" => crate::generator::section(&of(study, v)),
        "raft" => crate::raft::section(&of(study, v)),
        "log" => crate::log::study::section(&of(study, v)),
        "grpc" => crate::grpc::section(&of(study, v)),
        "hostile" => crate::torture::hostile::study::section(&of::<Vec<_>>(study, v)),
        "latency" | "c10k" => crate::latency::report::section(&of(study, v)),
        _ => crate::http::section(&of(study, v)),
    }
}

/// What the golden file of a section holds: its table, markdown, and a
/// checksum and length of its JSON and of each chart.
fn golden(s: &Section) -> String {
    let digest = |b: &str| format!("{:08x} {}", crc32c::crc32c(b.as_bytes()), b.len());
    let mut out = format!(
        "# study {}\n# json {}\n",
        s.study,
        digest(&s.json.to_string())
    );
    for (name, svg) in &s.svgs {
        out.push_str(&format!("# chart {name} {}\n", digest(svg)));
    }
    for (name, why) in &s.skipped {
        out.push_str(&format!("# skipped {name}: {why}\n"));
    }
    out.push_str("# table\n");
    out.push_str(&s.table);
    out.push_str("# markdown\n");
    out.push_str(&s.markdown);
    out
}

#[test]
fn every_study_reports_as_its_golden_file_says() {
    let bless = std::env::var_os("RINGKIT_BLESS_REPORTS").is_some();
    let mut wrong = Vec::new();
    for &(study, run) in CASES {
        let path = root().join("docs/results").join(run).join("results.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let all: serde_json::Value = serde_json::from_str(&text).unwrap();
        let entry = all["studies"][study].clone();
        assert!(!entry.is_null(), "{} has no study {study}", path.display());
        let got = golden(&render(study, entry));
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(format!("{study}-{run}.txt"));
        if bless {
            std::fs::write(&file, &got).unwrap();
            continue;
        }
        let want =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if got != want {
            let line = got.lines().zip(want.lines()).position(|(a, b)| a != b);
            wrong.push(format!(
                "{study}: differs from {} at line {line:?}",
                file.display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
