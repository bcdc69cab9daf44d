//! The documents a newcomer reads first name files that exist: every path
//! in backticks in `README.md`, `docs/ARCHITECTURE.md` and
//! `docs/results/README.md` (one under `crates/`, `docs/`, `scripts/` or
//! `.ci/`, one ending in `/`, or a file name ending in `.rs`, `.md`,
//! `.toml`, `.sh`, `.py`, `.txt`, `.json` or `.jsonl`; a name broken over
//! two lines after a `/` is joined) is a file or directory the repository tracks (`git
//! ls-files`; the directory tree where git is missing), named from the
//! root (`crates/log/src/flush.rs`) or by its last components (`flush.rs`,
//! `crashcheck/judge.rs`). A renamed or deleted file fails here until the
//! documents follow it. Not checked: system paths such as `/proc/...`, a
//! suffix shorthand such as `-log/` after a whole name, words with spaces
//! (`scripts/profile-echo.sh 50 8` is a command), and which of several
//! files a bare name means (`coop.rs` is found if any file has that name).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file and directory the repository tracks (relative,
/// `/`-separated; directories end in `/`): `git ls-files`, or the tree
/// without build output where git is missing.
fn tree(root: &Path) -> BTreeSet<String> {
    let listed = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
        .ok()
        .filter(|o| o.status.success() && !o.stdout.is_empty());
    if let Some(o) = listed {
        let mut out = BTreeSet::new();
        for f in String::from_utf8_lossy(&o.stdout)
            .split('\0')
            .filter(|f| !f.is_empty())
        {
            let parts: Vec<&str> = f.split('/').collect();
            for i in 1..parts.len() {
                out.insert(format!("{}/", parts[..i].join("/")));
            }
            out.insert(f.to_string());
        }
        return out;
    }
    walk(root)
}

/// The directory tree under `root`, without `target/` and `.git/`.
fn walk(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if rel.as_os_str().is_empty() && (name == "target" || name == ".git") {
                continue;
            }
            let path = rel.join(&name);
            let shown = path.to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.insert(format!("{shown}/"));
                stack.push(path);
            } else {
                out.insert(shown);
            }
        }
    }
    out
}

/// The backticked words of `text` that name a path (see the module docs).
fn named_paths(text: &str) -> BTreeSet<String> {
    let plain = |t: &str| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
    };
    text.split('`')
        .skip(1)
        .step_by(2)
        // A name broken over two lines after a `/`: its pieces joined.
        .map(|t| {
            if t.contains("/\n") {
                t.split_whitespace().collect::<String>()
            } else {
                t.to_string()
            }
        })
        .filter(|t| plain(t) && !t.starts_with('/') && !t.starts_with('-'))
        .filter(|t| {
            ["crates/", "docs/", "scripts/", ".ci/"]
                .iter()
                .any(|p| t.starts_with(p))
                || t.ends_with('/')
                || [
                    ".rs", ".md", ".toml", ".sh", ".py", ".txt", ".json", ".jsonl",
                ]
                .iter()
                .any(|x| t.ends_with(x))
        })
        .collect()
}

/// Whether `name` is a path of `tree`, whole or as its last components.
fn exists(tree: &BTreeSet<String>, name: &str) -> bool {
    let file = name.trim_end_matches('/');
    let dir = format!("{file}/");
    tree.iter().any(|p| {
        p == file
            || *p == dir
            || p.ends_with(&format!("/{file}"))
            || p.ends_with(&format!("/{dir}"))
    })
}

#[test]
fn every_path_the_documents_name_exists() {
    let root = root();
    let tree = tree(&root);
    assert!(
        tree.contains("crates/rt/src/lib.rs"),
        "the tree walk found the sources"
    );
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in [
        "README.md",
        "docs/ARCHITECTURE.md",
        "docs/results/README.md",
    ] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for name in named_paths(&text) {
            checked += 1;
            if !exists(&tree, &name) {
                missing.push(format!("{doc}: `{name}`"));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: is the pattern right?"
    );
    assert!(
        missing.is_empty(),
        "paths the documents name but the tree lacks:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_sees_a_missing_path() {
    let tree = tree(&root());
    let names = named_paths(
        "see `crates/log/src/flush.rs`, `flush.rs`, `crashcheck/judge.rs`, `crates/rt/\n  src/coop.rs` and `nowhere/gone.rs`, not `http/1.1`",
    );
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names.contains("crates/rt/src/coop.rs"), "{names:?}");
    let missing: Vec<_> = names.iter().filter(|n| !exists(&tree, n)).collect();
    assert_eq!(missing, ["nowhere/gone.rs"]);
}

/// The architecture document tells each design point once and points to
/// the module docs for the rest; past this many lines it is retelling
/// them (it was 1 726 lines when that rule was made, under half of 1 334
/// is 667).
const ARCHITECTURE_MAX_LINES: usize = 660;

#[test]
fn the_architecture_document_stays_short() {
    let text = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= ARCHITECTURE_MAX_LINES,
        "docs/ARCHITECTURE.md has {lines} lines, over {ARCHITECTURE_MAX_LINES}: move the \
         detail into the module docs of the code it describes and point there"
    );
}
