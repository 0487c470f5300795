//! The shape of the code base, kept by test (issue 14's "room to live in"):
//!
//! - no import cycle between the top-level modules of a crate (module `a`
//!   naming `crate::b::...` while `b` names `crate::a::...`, directly or
//!   round a longer loop); test modules (`tests.rs`, `#[cfg(test)] mod`)
//!   may name anything;
//! - no source file in `crates/*/src` over [`MAX_FILE_LINES`] lines, except
//!   those listed in [`LONG_FILES`] with the reason;
//! - the binary crate (`crates/inca/src`) under [`MAX_BINARY_LINES`] lines:
//!   it is CLI glue; the work lives in libraries.
//!
//! The module graph is read from the source text (every `crate::name`
//! path outside comments), which is what a reader follows too.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Longest source file allowed.
const MAX_FILE_LINES: usize = 1_500;
/// Longest the binary crate may be, all files together.
const MAX_BINARY_LINES: usize = 2_500;
/// Files allowed to be longer, each with its reason: (path from the
/// workspace root, reason).
const LONG_FILES: &[(&str, &str)] = &[];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn crates() -> Vec<PathBuf> {
    let mut v: Vec<_> = fs::read_dir(workspace().join("crates"))
        .expect("crates/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    v.sort();
    v
}

/// The source without comment lines and without an inline test module at
/// the end of the file (`#[cfg(test)] mod name {`).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        if !t.starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Every `name` in `crate::name` and in `crate::{a, b::c}` groups.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `inca_crate::`, not `crate::`
        }
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let name = ident(item.trim());
                if !name.is_empty() {
                    names.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// Top-level module name -> the top-level modules it names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let top = |f: &Path| -> Option<String> {
        let rel = f.strip_prefix(src).ok()?;
        let first = rel.components().next()?.as_os_str().to_str()?;
        let name = first.strip_suffix(".rs").unwrap_or(first);
        (!matches!(name, "lib" | "main")).then(|| name.to_string())
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top(f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for f in &files {
        let Some(m) = top(f) else { continue };
        let is_test = f.file_name().is_some_and(|n| n == "tests.rs")
            || f.components().any(|c| c.as_os_str() == "tests");
        if is_test {
            continue;
        }
        let text = fs::read_to_string(f).expect("readable source");
        for name in crate_paths(&code_of(&text)) {
            if name != m && modules.contains(&name) {
                graph.get_mut(&m).expect("known").insert(name);
            }
        }
    }
    graph
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in &self.graph[v] {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found
}

#[test]
fn the_cycle_finder_finds_a_cycle_and_ignores_comments_and_tests() {
    assert_eq!(
        crate_paths("use crate::{a, b::c};\nlet x = crate::d::e;\ninca_crate::f"),
        ["a", "b", "d"].map(String::from).into_iter().collect()
    );
    let code = code_of("use crate::a;\n// crate::b\n#[cfg(test)]\nmod tests {\nuse crate::c;\n}\n");
    assert_eq!(
        crate_paths(&code),
        ["a"].map(String::from).into_iter().collect()
    );
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [("x", "y"), ("y", "z"), ("z", "x"), ("z", "w")] {
        g.entry(a.into()).or_default().insert(b.into());
        g.entry(b.into()).or_default();
    }
    assert_eq!(cycles(&g), vec![vec!["x", "y", "z"]]);
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let mut found = Vec::new();
    for c in crates() {
        let graph = module_graph(&c.join("src"));
        for cycle in cycles(&graph) {
            let edges: Vec<String> = cycle
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| cycle.contains(b))
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            found.push(format!(
                "{}: {}",
                c.file_name().unwrap_or_default().to_string_lossy(),
                edges.join(", ")
            ));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn no_source_file_is_too_long_to_live_in() {
    let root = workspace();
    let mut long = Vec::new();
    for c in crates() {
        let mut files = Vec::new();
        rust_files(&c.join("src"), &mut files);
        for f in files {
            let lines = fs::read_to_string(&f).expect("readable").lines().count();
            let rel = f
                .strip_prefix(&root)
                .unwrap_or(&f)
                .to_string_lossy()
                .into_owned();
            if lines > MAX_FILE_LINES && !LONG_FILES.iter().any(|(p, _)| *p == rel) {
                long.push(format!("{rel}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them, or list them in LONG_FILES with the reason):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_binary_is_cli_glue() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates/inca/src"), &mut files);
    let lines: usize = files
        .iter()
        .map(|f| fs::read_to_string(f).expect("readable").lines().count())
        .sum();
    assert!(
        lines < MAX_BINARY_LINES,
        "crates/inca/src has {lines} lines; move the work into a library crate"
    );
}
