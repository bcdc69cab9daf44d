//! The crate's modules form layers: no import cycle among its top-level
//! modules (`driver` never reaches `runtime`, `context` never reaches
//! `task` or `time`, ...). The test reads the sources: every `crate::name`
//! path outside comments and unit-test modules is an edge from the file's
//! top-level module to `name`'s, with the crate root's re-exports followed
//! to the module that defines them.

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
