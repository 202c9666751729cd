//! `cargo xtask cycles`: fails when modules of `lele-build` or
//! `lele-kernels` depend on each other in a cycle.
//!
//! A module is a source file (`a/mod.rs` is `a`). It depends on another
//! when its code (comments and in-file `mod tests` left out: a doc link is
//! not a dependency) names a path through it, `crate::x::y` or
//! `super::x`. The modules are then merged to each depth (depth 1: the
//! crate's top-level modules; 2: their children; …) and each merged graph
//! is searched for strongly connected components, ignoring a module's use
//! of its own ancestors or descendants (a parent that declares and
//! re-exports its children, children that use their parent's items).
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::python::repo_root;

/// The crates checked, by their source directories.
const CRATES: &[&str] = &["lele-build/src", "lele-kernels/src"];

type Module = Vec<String>;

/// Every `.rs` file under `root` with its module path.
fn modules(root: &Path) -> anyhow::Result<BTreeMap<Module, PathBuf>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root)?.with_extension("");
            let mut module: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            if module == ["lib"] || module == ["main"] {
                module.clear();
            }
            out.insert(module, path);
        }
    }
    Ok(out)
}

/// The code of a file without its comment lines and its in-file tests.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `crate::…` and `super::…` paths in `code`, as segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !ident(bytes[i]) || (i > 0 && ident(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (ident(bytes[i]) || bytes[i..].starts_with(b"::")) {
            i += if bytes[i] == b':' { 2 } else { 1 };
        }
        let path = code[start..i].trim_end_matches("::");
        if path.starts_with("crate::") || path.starts_with("super::") {
            out.push(path.split("::").map(str::to_string).collect());
        }
    }
    out
}

/// The module a path in `from` (declared by a `mod.rs` when `is_dir`)
/// resolves to: the longest prefix that is a module.
fn resolve(
    path: &[String],
    from: &Module,
    is_dir: bool,
    mods: &BTreeMap<Module, PathBuf>,
) -> Option<Module> {
    let (mut base, mut rest) = if path[0] == "crate" {
        (Vec::new(), &path[1..])
    } else {
        let here = if is_dir {
            from.clone()
        } else {
            from[..from.len().saturating_sub(1)].to_vec()
        };
        (here, path)
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    (1..=base.len())
        .rev()
        .map(|k| base[..k].to_vec())
        .find(|m| mods.contains_key(m))
}

/// The cycles (strongly connected components of more than one module) of
/// `edges`.
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        found: Vec<Vec<Module>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: &Module) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v.clone(), low);
                } else if self.stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v.clone(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    let done = &w == v;
                    component.push(w);
                    if done {
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
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    let nodes: BTreeSet<Module> = edges
        .iter()
        .flat_map(|(a, bs)| std::iter::once(a).chain(bs))
        .cloned()
        .collect();
    for v in &nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

/// The module cycles of the crate at `root`, at every depth.
fn crate_cycles(root: &Path) -> anyhow::Result<Vec<(usize, Vec<Module>)>> {
    let mods = modules(root)?;
    let mut uses: Vec<(Module, Module)> = Vec::new();
    for (m, path) in &mods {
        let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
        let is_dir = path
            .file_name()
            .is_some_and(|f| f == "mod.rs" || f == "lib.rs");
        for p in paths(&code(&text)) {
            if let Some(to) = resolve(&p, m, is_dir, &mods) {
                uses.push((m.clone(), to));
            }
        }
    }
    let deepest = mods.keys().map(Vec::len).max().unwrap_or(0);
    let mut found = Vec::new();
    for depth in 1..=deepest {
        let cut = |m: &Module| m[..m.len().min(depth)].to_vec();
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (a, b) in &uses {
            let (a, b) = (cut(a), cut(b));
            let related = a.starts_with(&b) || b.starts_with(&a);
            if !related {
                edges.entry(a).or_default().insert(b);
            }
        }
        found.extend(cycles(&edges).into_iter().map(|c| (depth, c)));
    }
    Ok(found)
}

/// `cargo xtask cycles`.
pub fn run() -> anyhow::Result<()> {
    let mut all = Vec::new();
    for krate in CRATES {
        let root = repo_root().join(krate);
        let found = crate_cycles(&root)?;
        let count = modules(&root)?.len();
        println!(
            "{krate}: {count} modules, {} cycles at any depth",
            found.len()
        );
        for (depth, cycle) in found {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            all.push(format!("{krate} (depth {depth}): {}", names.join(" <-> ")));
        }
    }
    if !all.is_empty() {
        bail!("module cycles:\n  {}", all.join("\n  "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Module {
        s.split("::").map(str::to_string).collect()
    }

    #[test]
    fn paths_are_found_and_resolved() {
        let code = "use crate::ops::gemm::Gemm;\nlet x = super::super::ir::Graph::default();";
        let found = paths(code);
        assert_eq!(
            found,
            vec![
                m("crate::ops::gemm::Gemm"),
                m("super::super::ir::Graph::default")
            ]
        );
        let mods: BTreeMap<Module, PathBuf> =
            [m("ops"), m("ops::gemm"), m("ir"), m("passes::fold")]
                .into_iter()
                .map(|k| (k, PathBuf::new()))
                .collect();
        let from = m("passes::fold");
        assert_eq!(
            resolve(&found[0], &from, false, &mods),
            Some(m("ops::gemm"))
        );
        assert_eq!(resolve(&found[1], &from, false, &mods), Some(m("ir")));
    }

    #[test]
    fn a_cycle_is_found_and_a_chain_is_not() {
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        edges.entry(m("a")).or_default().insert(m("b"));
        edges.entry(m("b")).or_default().insert(m("c"));
        assert!(cycles(&edges).is_empty());
        edges.entry(m("c")).or_default().insert(m("a"));
        assert_eq!(cycles(&edges), vec![vec![m("a"), m("b"), m("c")]]);
    }
}
