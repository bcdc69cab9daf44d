//! Copies tokio's integration tests (the version Cargo.lock pins) into
//! `OUT_DIR`, with one mechanical edit per test attribute, and writes
//! `suite.rs`: one `#[path] mod` per test file, for `tests/*.rs` to
//! include. `known.txt` lists the files left out and the tests marked
//! `#[ignore]`, each with its reason.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

const CRATE_PATH: &str = "crate = \"crate::hosted\"";

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let lock = manifest.join("../../Cargo.lock");
    let known_path = manifest.join("known.txt");
    println!("cargo::rerun-if-changed={}", lock.display());
    println!("cargo::rerun-if-changed={}", known_path.display());
    println!("cargo::rerun-if-changed=build.rs");

    let version = tokio_version(&fs::read_to_string(&lock).expect("reading Cargo.lock"));
    let src = tokio_tests_dir(&version);
    let known = Known::parse(&fs::read_to_string(&known_path).expect("reading known.txt"));

    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("tokio-tests");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(out.join("support")).unwrap();
    for entry in fs::read_dir(src.join("support")).unwrap() {
        let p = entry.unwrap().path();
        fs::copy(&p, out.join("support").join(p.file_name().unwrap())).unwrap();
    }

    let mut files: Vec<PathBuf> = fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let mut suite = format!("// tokio {version}'s tests, from {}\n", src.display());
    for path in files {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        if known.files.contains_key(&stem) {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let dest = out.join(path.file_name().unwrap());
        fs::write(&dest, rewrite(&stem, &text, &known)).unwrap();
        suite.push_str(&format!(
            "#[path = {:?}]\nmod {stem};\n",
            dest.display().to_string()
        ));
    }
    fs::write(out.join("suite.rs"), suite).unwrap();
}

/// The tokio version in Cargo.lock (the workspace locks one).
fn tokio_version(lock: &str) -> String {
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l == "name = \"tokio\"" {
            let v = lines.next().expect("version line after name");
            return v
                .trim_start_matches("version = \"")
                .trim_end_matches('"')
                .to_string();
        }
    }
    panic!("tokio is not in Cargo.lock");
}

/// `tests/` of the tokio package cargo unpacked for this build.
fn tokio_tests_dir(version: &str) -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .expect("CARGO_HOME or HOME must be set");
    let registry = home.join("registry/src");
    for entry in fs::read_dir(&registry).unwrap_or_else(|e| panic!("{}: {e}", registry.display())) {
        let dir = entry.unwrap().path().join(format!("tokio-{version}/tests"));
        if dir.is_dir() {
            return dir;
        }
    }
    panic!(
        "tokio {version}'s sources are not under {}: the suite reads tokio's tests from \
         cargo's registry (a vendored build has no copy there)",
        registry.display()
    );
}

/// What `known.txt` leaves out (`file STEM: reason`) or marks ignored
/// (`test STEM::NAME: reason`).
struct Known {
    files: BTreeMap<String, String>,
    tests: BTreeMap<String, String>,
}

impl Known {
    fn parse(text: &str) -> Known {
        let mut k = Known {
            files: BTreeMap::new(),
            tests: BTreeMap::new(),
        };
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (kind, rest) = line.split_once(' ').expect("`file` or `test`, then a name");
            let (name, reason) = rest.split_once(": ").expect("NAME: reason");
            let map = match kind {
                "file" => &mut k.files,
                "test" => &mut k.tests,
                _ => panic!("known.txt: {line}"),
            };
            map.insert(name.to_string(), reason.to_string());
        }
        k
    }
}

/// `crate::` paths are made relative to the file's module; each tokio
/// test attribute names `crate::hosted` as its crate; each
/// known-failing test gets `#[ignore = reason]` before its `fn`.
fn rewrite(stem: &str, text: &str, known: &Known) -> String {
    let mut out = String::with_capacity(text.len() + 4096);
    for line in text.lines() {
        let mut line = root_paths(stem, line);
        if !line.contains("crate =") && !line.contains("crate=") {
            for attr in ["tokio::test", "maybe_tokio_test"] {
                if line.contains(&format!("{attr}]")) {
                    line = line.replace(&format!("{attr}]"), &format!("{attr}({CRATE_PATH})]"));
                } else {
                    line = line.replace(&format!("{attr}("), &format!("{attr}({CRATE_PATH}, "));
                }
            }
        }
        if let Some(name) = fn_name(&line) {
            if let Some(reason) = known.tests.get(&format!("{stem}::{name}")) {
                let indent = &line[..line.len() - line.trim_start().len()];
                out.push_str(&format!(
                    "{indent}#[ignore = {:?}]\n",
                    format!("hosted: {reason}")
                ));
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `crate::x` in a test file meant its own root: here that is the
/// module the file became (`$crate::` and `foo_crate::` are left alone).
fn root_paths(stem: &str, line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        out.push_str(&rest[..at + "crate::".len()]);
        if !before.is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric()) {
            out.push_str(stem);
            out.push_str("::");
        }
        rest = &rest[at + "crate::".len()..];
    }
    out.push_str(rest);
    out
}

/// The name of the function a line declares, if it does.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for prefix in ["pub(crate) ", "pub ", "async ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}
