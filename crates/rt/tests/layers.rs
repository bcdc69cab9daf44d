//! The crate's modules form layers: no import cycle among its top-level
//! modules (`driver` never reaches `runtime`, `context` never reaches
//! `task` or `time`, ...). The test reads the sources: every `crate::name`
//! path outside comments and unit-test modules is an edge from the file's
//! top-level module to `name`'s, with the crate root's re-exports followed
//! to the module that defines them.
//!
//! And in every crate of the workspace, no circle of files: no file reaches
//! itself through the `crate::` and `super::` paths files name
//! (`file_circles`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module of `rel` (a path under `src/`).
fn top_module(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The source without `//` comments and without `#[cfg(test)] mod tests`.
fn code_of(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Names right after `crate::`, and each name inside `crate::{a, b::c}`.
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            for part in inner.split(',') {
                let name = ident(part.trim());
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// `name -> module` for the root's `pub use module::...::name` and
/// `pub(crate) use` lines.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in lib.lines() {
        let l = line.trim();
        let Some(rest) = l
            .strip_prefix("pub use ")
            .or_else(|| l.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let module = rest.split("::").next().unwrap().to_string();
        let names = match rest.find('{') {
            Some(b) => rest[b + 1..rest.rfind('}').unwrap()]
                .split(',')
                .map(|s| s.trim().to_string())
                .collect(),
            None => vec![rest.rsplit("::").next().unwrap().to_string()],
        };
        for n in names.into_iter().filter(|n| !n.is_empty()) {
            map.insert(n, module.clone());
        }
    }
    map
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            for w in self.g.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    comp.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    let nodes: BTreeSet<&str> = graph
        .iter()
        .flat_map(|(k, v)| std::iter::once(k.as_str()).chain(v.iter().map(String::as_str)))
        .collect();
    for n in nodes {
        if !t.index.contains_key(n) {
            t.visit(n);
        }
    }
    t.out
}

fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let reexports = root_reexports(&lib);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let from = top_module(rel);
        if from == "lib" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        for name in crate_paths(&code) {
            // A module of that name wins over a re-exported item (the
            // function `metrics` is re-exported; the module is `metrics`).
            let is_module = src.join(format!("{name}.rs")).exists() || src.join(&name).is_dir();
            let to = match reexports.get(&name) {
                Some(m) if !is_module => m.clone(),
                _ => name,
            };
            if to != from && to != "lib" {
                graph.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    graph
}

#[test]
fn no_import_cycle_among_modules() {
    let graph = import_graph();
    // The reader sees the layering it checks (and that it found edges).
    for (from, to) in &graph {
        println!(
            "{from} -> {}",
            to.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    assert!(graph["runtime"].contains("driver") && graph["task"].contains("context"));
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles among rt's modules: {found:?}"
    );
}

#[test]
fn the_checker_sees_a_cycle() {
    // The checker itself: a cycle through a root re-export is found.
    let lib = "pub use runtime::Runtime;\npub(crate) use runtime::{with, without};\n";
    let re = root_reexports(lib);
    assert_eq!(re["without"], "runtime");
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for name in crate_paths("use crate::{without, time::Sleep}; // crate::ignored") {
        let to = re.get(&name).cloned().unwrap_or(name);
        g.entry("driver".into()).or_default().insert(to);
    }
    g.entry("runtime".into())
        .or_default()
        .insert("driver".into());
    assert_eq!(
        cycles(&g),
        vec![vec!["driver".to_string(), "runtime".to_string()]]
    );
}

/// Every module path a file names after `crate::` or `super::`, as
/// segments (`super` kept as the first segment), groups expanded
/// (`crate::a::{b, c::d}` names `a::b` and `a::c::d`).
fn module_paths(code: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    // The segments of `rest` (after a `::`), then a group if one follows.
    fn walk(
        rest: &str,
        base: Vec<String>,
        out: &mut Vec<Vec<String>>,
        ident: &dyn Fn(&str) -> String,
    ) {
        let mut segs = base;
        let mut rest = rest;
        loop {
            if let Some(group) = rest.strip_prefix('{') {
                let inner = &group[..group.find('}').unwrap_or(group.len())];
                for part in inner.split(',') {
                    let part = part.trim();
                    if !part.is_empty() && part != "self" {
                        walk(part, segs.clone(), out, ident);
                    }
                }
                return;
            }
            let name = ident(rest);
            if name.is_empty() {
                break;
            }
            rest = &rest[name.len()..];
            segs.push(name);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.push(segs);
    }
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", vec![]), ("super::", vec!["super".to_string()])] {
        for (i, _) in code.match_indices(prefix) {
            // Not the tail of a longer path (`a::super::b` does not occur;
            // `crate::` inside `$crate::` is a macro's own).
            if code[..i].ends_with('$') {
                continue;
            }
            walk(&code[i + prefix.len()..], base.clone(), &mut out, &ident);
        }
    }
    out
}

/// The module path of a source file under `src/` (`lib.rs`, `main.rs`:
/// the root, `[]`; `a/mod.rs` and `a.rs`: `[a]`; `a/b.rs`: `[a, b]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut segs: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        segs.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segs.pop();
    }
    segs
}

/// The circles of files in crate `src`: every `crate::` and `super::` path
/// a file names is an edge to the file of the longest module prefix of
/// that path (the root, and a file's own module, are no edge). A parent
/// naming its child by a relative path is not counted: a module owns its
/// children. Files are named by module path, `a/b`.
fn file_circles(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Vec<String>, std::path::PathBuf> = files
        .into_iter()
        .filter(|f| !f.strip_prefix(src).unwrap().starts_with("bin"))
        .map(|f| (module_of(f.strip_prefix(src).unwrap()), f))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, f) in &modules {
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        for path in module_paths(&code) {
            let path = match path.first().map(String::as_str) {
                Some("super") => {
                    let mut p = m[..m.len().saturating_sub(1)].to_vec();
                    p.extend(path[1..].iter().cloned());
                    p
                }
                _ => path,
            };
            let target = (1..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|p| modules.contains_key(*p));
            if let Some(t) = target {
                if t != m.as_slice() {
                    graph.entry(m.join("/")).or_default().insert(t.join("/"));
                }
            }
        }
    }
    cycles(&graph)
}

/// Circles of files known and not yet broken, by crate: the test fails on
/// any other, and on any of these once broken (take it off the list).
/// None are left.
const KNOWN_CIRCLES: &[(&str, &[&str])] = &[];

#[test]
fn no_circle_of_files_in_any_crate() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = BTreeSet::new();
    let mut names: Vec<_> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for c in &names {
        let name = c.file_name().unwrap().to_string_lossy().into_owned();
        for circle in file_circles(&c.join("src")) {
            found.insert((name.clone(), circle));
        }
    }
    let known: BTreeSet<(String, Vec<String>)> = KNOWN_CIRCLES
        .iter()
        .map(|(c, files)| (c.to_string(), files.iter().map(|f| f.to_string()).collect()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    let broken: Vec<_> = known.difference(&found).collect();
    assert!(new.is_empty(), "circles of files (break them): {new:?}");
    assert!(
        broken.is_empty(),
        "circles no longer there (take them off KNOWN_CIRCLES): {broken:?}"
    );
}

#[test]
fn the_file_checker_sees_a_circle() {
    let t = std::env::temp_dir().join(format!("ringkit-circles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&t);
    std::fs::create_dir_all(t.join("a")).unwrap();
    std::fs::write(t.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(t.join("a/mod.rs"), "mod c;\nuse crate::b::X;\n").unwrap();
    std::fs::write(t.join("a/c.rs"), "use super::Y; // crate::b ignored\n").unwrap();
    std::fs::write(t.join("b.rs"), "use crate::{a::c::{Z, W}, x};\n").unwrap();
    let found = file_circles(&t);
    std::fs::remove_dir_all(&t).unwrap();
    // b -> a/c -> a -> b (a/c names a by `super`, a names b, b names a/c).
    assert_eq!(
        found,
        vec![vec!["a".to_string(), "a/c".to_string(), "b".to_string()]]
    );
}
