//! `cargo xtask conformance`: the ONNX backend test suite through generated
//! code. Cases come from the pinned `onnx` package (`python/conformance.py`);
//! each is compiled by lele-build into its own module of one runner crate,
//! which cargo builds once; the runner compares every output with the
//! suite's expected values (the case's rtol/atol). Results are compared with
//! the committed ledger `conformance/expectations.toml`.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use quote::{format_ident, quote};

use crate::python::{python, repo_root};
use crate::util::step;

/// Options of `cargo xtask conformance`.
#[derive(clap::Args)]
pub struct Opts {
    /// Fail when a case the ledger marks `pass` does not pass.
    #[arg(long)]
    pub check: bool,
    /// Rewrite the ledger from this run's results.
    #[arg(long)]
    pub update: bool,
    /// Print one JSON object with the totals.
    #[arg(long)]
    pub json: bool,
    /// Only cases whose `suite/name` contains this (or one of several,
    /// separated by commas).
    #[arg(long)]
    pub filter: Option<String>,
    /// Build the runner under its own name (`runner-NAME`, binary
    /// `lele-conformance-NAME`) so several filtered runs can share the
    /// machine without overwriting each other's runner.
    #[arg(long)]
    pub work: Option<String>,
}

#[derive(serde::Deserialize)]
struct CaseInfo {
    suite: String,
    name: String,
    rtol: f64,
    atol: f64,
    sets: usize,
    inputs: Vec<String>,
    #[serde(default)]
    ops: Vec<String>,
    #[serde(default)]
    skip: Option<String>,
    /// Files (`in_0`, `out_1`…) holding bfloat16 bits as uint16.
    #[serde(default)]
    bf16: Vec<String>,
}

struct Case {
    id: String,
    dir: PathBuf,
    info: CaseInfo,
}

/// A result: status class and detail.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// `pass` or a not-yet class.
    pub status: String,
    /// Short explanation.
    pub detail: String,
}

fn outcome(status: &str, detail: impl Into<String>) -> Outcome {
    let detail: String = detail.into();
    let detail = detail
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(160)
        .collect();
    Outcome {
        status: status.into(),
        detail,
    }
}

pub fn conformance_dir() -> PathBuf {
    repo_root().join("target").join("conformance")
}

pub fn ledger_path() -> PathBuf {
    repo_root().join("conformance").join("expectations.toml")
}

fn discover(root: &Path, filter: Option<&str>) -> anyhow::Result<Vec<Case>> {
    let mut out = Vec::new();
    for suite in std::fs::read_dir(root)? {
        let suite = suite?.path();
        if !suite.is_dir() {
            continue;
        }
        for case in std::fs::read_dir(&suite)? {
            let dir = case?.path();
            let json = dir.join("case.json");
            if !json.is_file() {
                continue;
            }
            let info: CaseInfo = serde_json::from_str(&std::fs::read_to_string(&json)?)
                .with_context(|| json.display().to_string())?;
            let id = format!("{}/{}", info.suite, info.name);
            if filter.is_some_and(|f| !f.split(',').any(|part| id.contains(part))) {
                continue;
            }
            out.push(Case { id, dir, info });
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Pins every input to the shape of data set 0.
fn case_toml(case: &Case) -> anyhow::Result<String> {
    let mut t = format!(
        "[model]\npath = {}\n\n[inputs]\n",
        toml::Value::String(case.dir.join("model.onnx").to_string_lossy().into_owned())
    );
    for (i, name) in case.info.inputs.iter().enumerate() {
        let x = lele_build::npy::read(&case.dir.join("set0").join(format!("in_{i}.npy")))?;
        let dims = x.shape()?.dims().to_vec();
        t.push_str(&format!(
            "{} = {:?}\n",
            toml::Value::String(name.clone()),
            dims
        ));
    }
    Ok(t)
}

/// Compiles one case into `src/cases/c<idx>.rs` (+ weights); `Err` is its
/// not-yet outcome.
fn compile_case(case: &Case, idx: usize, src: &Path) -> Result<(), Outcome> {
    if let Some(s) = &case.info.skip {
        return Err(outcome("unsupported-dtype", s.clone()));
    }
    let text = case_toml(case).map_err(|e| outcome("harness-error", e.to_string()))?;
    let toml =
        lele_build::ModelToml::parse(&text).map_err(|e| outcome("compile-error", e.to_string()))?;
    let name = format!("C{idx}");
    let mut opts = lele_build::CompileOptions::new(&name);
    opts.offline = false;
    let model = case.dir.join("model.onnx");
    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        lele_build::compile_model(&model, &toml, &text, src, &opts)
    }))
    .map_err(|_| outcome("compiler-panic", "lele-build panicked"))?
    .map_err(classify)?;
    let sig = &compiled.signature;
    let mut reads = Vec::new();
    let mut args = Vec::new();
    for (k, port) in sig.inputs.iter().enumerate() {
        let t = format_ident!("t{k}");
        let file = format!("in_{k}.npy");
        reads.push(quote! {
            let #t = ::lele_build::npy::read(&dir.join(#file)).map_err(|e| e.to_string())?;
        });
        if case.info.bf16.contains(&format!("in_{k}")) {
            reads.push(quote! {
                let #t = {
                    let dims = #t.shape().map_err(|e| e.to_string())?;
                    ::lele_build::ir::Tensor::from_bytes(::lele::DType::BF16, dims.dims(), #t.bytes()).ok_or("bf16 input")?
                };
            });
        }
        if port.dtype == "bool" {
            args.push(quote!(::lele::TensorView::<u8>::new(#t.bytes(), #t.shape().map_err(|e| e.to_string())?.dims()).map_err(|e| e.to_string())?));
        } else {
            args.push(quote!(::lele::TensorView::from_untyped(#t.view().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?));
        }
    }
    let idents = lele_build::emit::names::unique_idents(
        &sig.outputs
            .iter()
            .map(|p| p.name.clone())
            .collect::<Vec<_>>(),
    );
    let mut outs = Vec::new();
    for (port, ident) in sig.outputs.iter().zip(&idents) {
        let ident = format_ident!("{}", ident);
        let dt = port.dtype.clone();
        outs.push(quote! {
            {
                let t = out.#ident.as_untyped();
                let dtype = ::lele::DType::from_name(#dt).ok_or("dtype")?;
                ::lele_build::ir::Tensor::from_bytes(dtype, t.shape.dims(), t.data).ok_or("output bytes")?
            }
        });
    }
    let ident = format_ident!("{}", name);
    let runner = quote! {
        /// Runs the case on one data set.
        pub fn run(dir: &::std::path::Path) -> crate::Outputs {
            #(#reads)*
            let model = #ident::new().map_err(|e| e.to_string())?;
            let mut ws = model.workspace();
            let out = model.forward(&mut ws, #(#args),*).map_err(|e| e.to_string())?;
            Ok(vec![#(#outs),*])
        }
    };
    let file = src.join(format!("c{idx}.rs"));
    let code = format!(
        "{}\n{}",
        lele_build::cli::format_tokens(compiled.tokens).map_err(classify)?,
        lele_build::cli::format_tokens(runner).map_err(classify)?
    );
    std::fs::write(&file, code).map_err(|e| outcome("harness-error", e.to_string()))?;
    Ok(())
}

fn classify(e: lele_build::BuildError) -> Outcome {
    use lele_build::BuildError as B;
    match &e {
        B::Unsupported(list) => {
            let mut ops: Vec<String> = list
                .iter()
                .map(|u| format!("{}: {}", u.op, u.reason))
                .collect();
            ops.dedup();
            outcome("unsupported-op", ops.join("; "))
        }
        other => {
            let msg = other.to_string();
            if msg.contains("output shape depends on input values") {
                // The test feeds shape-determining values (axes, pads, sizes)
                // as graph inputs; lele sizes buffers at build time and needs
                // them to be constants.
                outcome("data-dependent-shape", msg)
            } else if msg.contains("dtype") || msg.contains("data type") {
                outcome("unsupported-dtype", msg)
            } else {
                outcome("compile-error", msg)
            }
        }
    }
}

/// Writes the runner crate for `ok` cases (index, case).
///
/// The kernels are built as shipped (`opt-level = 3`); everything else,
/// lele-build and its dependencies included, unoptimized: the cases are
/// tiny, so optimizing the rest only lengthens the build (542 s against
/// 232 s from scratch on 2 cores).
fn write_runner(dir: &Path, package: &str, ok: &[(usize, &Case)]) -> anyhow::Result<()> {
    let src = dir.join("src");
    let lele = repo_root();
    let manifest = format!(
        "[package]\nname = \"{package}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\nlele = {{ path = {} }}\nlele-build = {{ path = {} }}\n\n[workspace]\n\n\
         [profile.dev]\ndebug = false\n\n[profile.dev.package.lele-kernels]\nopt-level = 3\n",
        toml::Value::String(lele.to_string_lossy().into_owned()),
        toml::Value::String(lele.join("lele-build").to_string_lossy().into_owned())
    );
    std::fs::write(dir.join("Cargo.toml"), manifest)?;
    std::fs::copy(repo_root().join("Cargo.lock"), dir.join("Cargo.lock"))?;
    std::fs::write(src.join("main.rs"), include_str!("../runner/main.rs"))?;
    let mut cases = String::from(
        "//! Generated: the compiled conformance cases.\n#![allow(clippy::all, unused)]\n",
    );
    for (idx, _) in ok {
        cases.push_str(&format!("#[path = \"c{idx}.rs\"]\nmod c{idx};\n"));
    }
    cases.push_str("\n/// (case, data sets, rtol, atol, run)\npub static CASES: &[(&str, usize, f64, f64, fn(&std::path::Path) -> crate::Outputs)] = &[\n");
    for (idx, c) in ok {
        cases.push_str(&format!(
            "    ({:?}, {}, {:e}, {:e}, c{idx}::run),\n",
            c.id, c.info.sets, c.info.rtol, c.info.atol
        ));
    }
    cases.push_str("];\n");
    std::fs::write(src.join("cases.rs"), cases)?;
    Ok(())
}

/// Builds the runner; returns the indices whose files rustc rejected.
fn build_runner(dir: &Path) -> anyhow::Result<Vec<usize>> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--offline",
            "--message-format=json-diagnostic-short",
        ])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(conformance_dir().join("target"))
        .output()?;
    if out.status.success() {
        return Ok(Vec::new());
    }
    let mut bad = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-message" || v["message"]["level"] != "error" {
            continue;
        }
        for span in v["message"]["spans"].as_array().into_iter().flatten() {
            let file = span["file_name"].as_str().unwrap_or("");
            let stem = Path::new(file)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("");
            if let Some(n) = stem.strip_prefix('c').and_then(|n| n.parse().ok()) {
                bad.push(n);
            }
        }
    }
    bad.sort_unstable();
    bad.dedup();
    if bad.is_empty() {
        bail!(
            "building the conformance runner failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(bad)
}

fn read_ledger() -> anyhow::Result<BTreeMap<String, String>> {
    let p = ledger_path();
    if !p.is_file() {
        return Ok(BTreeMap::new());
    }
    #[derive(serde::Deserialize)]
    struct Ledger {
        cases: BTreeMap<String, String>,
    }
    let l: Ledger =
        toml::from_str(&std::fs::read_to_string(&p)?).with_context(|| p.display().to_string())?;
    Ok(l.cases)
}

fn ledger_line(o: &Outcome) -> String {
    if o.status == "pass" {
        "pass".into()
    } else {
        format!("{}: {}", o.status, o.detail)
    }
}

fn write_ledger(results: &BTreeMap<String, Outcome>, path: &Path) -> anyhow::Result<()> {
    let mut text = String::from(
        "# ONNX backend test cases through generated code: `pass`, or the reason class and a\n\
         # note. Written by `cargo xtask conformance --update`; `--check` fails when a `pass`\n\
         # here no longer passes.\n\n[cases]\n",
    );
    for (id, o) in results {
        text.push_str(&format!(
            "{} = {}\n",
            toml::Value::String(id.clone()),
            toml::Value::String(ledger_line(o))
        ));
    }
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    std::fs::write(path, text)?;
    Ok(())
}

/// Runs the suite; returns results by case id.
pub fn run_suite(
    filter: Option<&str>,
    work: Option<&str>,
) -> anyhow::Result<BTreeMap<String, Outcome>> {
    let root = conformance_dir();
    let cases_dir = root.join("cases");
    generate(&cases_dir)?;
    let cases = discover(&cases_dir, filter)?;
    let package = match work {
        Some(w) if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') => {
            format!("lele-conformance-{w}")
        }
        Some(w) => bail!("--work `{w}`: use letters, digits and `-`"),
        None => "lele-conformance".to_string(),
    };
    let runner = root.join(package.replacen("lele-conformance", "runner", 1));
    let src = runner.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src)?;
    let mut results: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut ok: Vec<(usize, &Case)> = Vec::new();
    step("conformance: compiling cases with lele-build", || {
        std::panic::set_hook(Box::new(|_| {}));
        for (idx, c) in cases.iter().enumerate() {
            match compile_case(c, idx, &src) {
                Ok(()) => ok.push((idx, c)),
                Err(o) => {
                    results.insert(c.id.clone(), o);
                }
            }
        }
        let _ = std::panic::take_hook();
        Ok(())
    })?;
    step("conformance: building the runner", || {
        for _ in 0..4 {
            write_runner(&runner, &package, &ok)?;
            let bad = build_runner(&runner)?;
            if bad.is_empty() {
                return Ok(());
            }
            ok.retain(|(idx, c)| {
                let rejected = bad.contains(idx);
                if rejected {
                    results.insert(
                        c.id.clone(),
                        outcome("rust-compile-error", "rustc rejected the generated code"),
                    );
                }
                !rejected
            });
        }
        bail!("the conformance runner still does not build")
    })?;
    step("conformance: running", || {
        let exe = root.join("target/debug").join(&package);
        let out = Command::new(exe).arg(&cases_dir).output()?;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line)?;
            let id = v["case"].as_str().unwrap_or("").to_string();
            let status = v["status"].as_str().unwrap_or("").to_string();
            results.insert(id, outcome(&status, v["detail"].as_str().unwrap_or("")));
        }
        for (_, c) in &ok {
            results
                .entry(c.id.clone())
                .or_insert_with(|| outcome("crash", "the runner stopped before this case"));
        }
        Ok(())
    })?;
    Ok(results)
}

/// `cargo xtask ops-table`: the operator table of docs/operators.md, from the ledger
/// and the node cases' op types (expanded function bodies are not counted).
pub fn ops_table() -> anyhow::Result<()> {
    let cases_dir = conformance_dir().join("cases");
    generate(&cases_dir)?;
    let ledger = read_ledger()?;
    if ledger.is_empty() {
        bail!("no ledger; run `cargo xtask conformance --update`");
    }
    let mut per_op: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for c in discover(&cases_dir, Some("node/"))? {
        if c.info.name.contains("_expanded") || c.info.ops.len() != 1 {
            continue;
        }
        let e = per_op.entry(c.info.ops[0].clone()).or_default();
        e.0 += 1;
        if ledger.get(&c.id).map(String::as_str) == Some("pass") {
            e.1 += 1;
        }
    }
    let mut table = String::from(
        "| operator | node cases passing | operator | node cases passing |\n|---|---|---|---|\n",
    );
    let rows: Vec<String> = per_op
        .iter()
        .map(|(op, (n, p))| {
            let mark = if p == n {
                ""
            } else if *p == 0 {
                " ✗"
            } else {
                " ◐"
            };
            format!("{op} | {p}/{n}{mark}")
        })
        .collect();
    let half = rows.len().div_ceil(2);
    for i in 0..half {
        let right = rows.get(i + half).cloned().unwrap_or_else(|| " | ".into());
        table.push_str(&format!("| {} | {} |\n", rows[i], right));
    }
    let readme = repo_root().join("docs").join("operators.md");
    let text = std::fs::read_to_string(&readme)?;
    let (start, end) = ("<!-- ops-table:start -->", "<!-- ops-table:end -->");
    let (Some(a), Some(b)) = (text.find(start), text.find(end)) else {
        bail!("docs/operators.md has no {start} … {end} markers");
    };
    let new = format!(
        "{}{start}\n<!-- generated by `cargo xtask ops-table` from conformance/expectations.toml; do not edit -->\n{table}{}",
        &text[..a],
        &text[b..]
    );
    std::fs::write(&readme, new)?;
    eprintln!(
        "updated the operator table in docs/operators.md ({} operators)",
        per_op.len()
    );
    Ok(())
}

fn generate(cases_dir: &Path) -> anyhow::Result<()> {
    step("conformance: generating cases", || {
        let py = python()?;
        let script = repo_root().join("xtask/python/conformance.py");
        let ok = Command::new(py)
            .arg(script)
            .arg("--out")
            .arg(cases_dir)
            .status()?
            .success();
        if !ok {
            bail!("conformance.py failed");
        }
        Ok(())
    })
}

/// `cargo xtask conformance`.
pub fn run(opts: &Opts) -> anyhow::Result<()> {
    let results = run_suite(opts.filter.as_deref(), opts.work.as_deref())?;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for o in results.values() {
        *counts.entry(o.status.clone()).or_default() += 1;
    }
    let total = results.len();
    let pass = counts.get("pass").copied().unwrap_or(0);
    let node_total = results.keys().filter(|k| k.starts_with("node/")).count();
    let node_pass = results
        .iter()
        .filter(|(k, o)| k.starts_with("node/") && o.status == "pass")
        .count();
    if opts.json {
        let mut obj = serde_json::Map::new();
        obj.insert("total".into(), total.into());
        obj.insert("pass".into(), pass.into());
        obj.insert("node_total".into(), node_total.into());
        obj.insert("node_pass".into(), node_pass.into());
        for (k, v) in &counts {
            if k != "pass" {
                obj.insert(k.clone(), (*v).into());
            }
        }
        println!("{}", serde_json::Value::Object(obj));
    } else {
        println!("conformance: {pass}/{total} pass (node cases {node_pass}/{node_total})");
        for (k, v) in &counts {
            println!("  {k:20} {v}");
        }
    }
    // Every run's results, in ledger form, for a look at the failures.
    let last = conformance_dir().join(format!(
        "last-{}.toml",
        opts.work.as_deref().unwrap_or("run")
    ));
    write_ledger(&results, &last)?;
    eprintln!("results: {}", last.display());
    let ledger = read_ledger()?;
    let mut regressions = Vec::new();
    let mut newly = Vec::new();
    for (id, o) in &results {
        match ledger.get(id).map(String::as_str) {
            Some("pass") if o.status != "pass" => {
                regressions.push(format!("{id}: {}", ledger_line(o)))
            }
            Some(l) if l != "pass" && o.status == "pass" => newly.push(id.clone()),
            None if o.status == "pass" => newly.push(id.clone()),
            _ => {}
        }
    }
    if !newly.is_empty() {
        eprintln!("newly passing ({}): {}", newly.len(), newly.join(", "));
    }
    if opts.update {
        if opts.filter.is_some() {
            bail!("--update needs the whole suite (no --filter)");
        }
        write_ledger(&results, &ledger_path())?;
        eprintln!("wrote {}", ledger_path().display());
    }
    if opts.check && !regressions.is_empty() {
        bail!(
            "{} case(s) the ledger marks `pass` no longer pass:\n  {}",
            regressions.len(),
            regressions.join("\n  ")
        );
    }
    Ok(())
}
