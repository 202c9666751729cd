//! `cargo xtask fixtures`: reference inputs and outputs of the zoo models,
//! computed by onnxruntime in the managed venv (`xtask/python/fixtures.py`).
//!
//! Layout: `<fixtures>/<case>/case.json` and
//! `<fixtures>/<case>/step<k>/{in_<i>,out_<j>}.npy`, where `i`/`j` are the
//! positions of the graph inputs (initializers excluded) and outputs in ONNX
//! order. The example apps' references (`apps_reference.py`) go to
//! `<fixtures>/apps/{vad,detect,embed}.json`.
use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::models::zoo_dir;
use crate::python::{python, repo_root};
use crate::util::run_inherited;

/// The fixtures directory: `$LELE_FIXTURES`, else `<repo>/target/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("LELE_FIXTURES")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target").join("fixtures"))
}

/// The generator script.
pub fn script() -> PathBuf {
    repo_root().join("xtask").join("python").join("fixtures.py")
}

/// Options of `cargo xtask fixtures`.
#[derive(clap::Args, Debug, Default)]
pub struct Opts {
    /// Regenerate even the cases that are up to date.
    #[arg(long)]
    pub force: bool,
    /// List the cases and exit.
    #[arg(long)]
    pub list: bool,
    /// Only these cases (default: all).
    pub cases: Vec<String>,
}

/// `cargo xtask fixtures`.
pub fn run(opts: &Opts) -> anyhow::Result<()> {
    let py = python()?;
    let out = std::path::absolute(fixtures_dir())?;
    let zoo = std::path::absolute(zoo_dir())?;
    let mut cmd = Command::new(&py);
    cmd.arg(script())
        .arg("--zoo")
        .arg(&zoo)
        .arg("--out")
        .arg(&out);
    if opts.force {
        cmd.arg("--force");
    }
    if opts.list {
        cmd.arg("--list");
    }
    cmd.args(&opts.cases);
    run_inherited(&mut cmd).context("generating fixtures")?;
    if opts.list || !opts.cases.is_empty() {
        return Ok(());
    }
    app_references(&py, &zoo, &out.join("apps"))?;
    audio_references(&py, &zoo, &out.join("audio"))?;
    ggml_references(&py, &out.join("ggml"))?;
    llm_f64_reference(&py, &zoo, &out.join("llm"))
}

/// Gemma 3's first-step logits in float64 from its dequantized weights
/// (`xtask/python/llm_f64_reference.py`) into `out`.
fn llm_f64_reference(
    py: &std::path::Path,
    zoo: &std::path::Path,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    if out.join("gemma3_270m_f64.json").is_file() {
        return Ok(());
    }
    let mut cmd = Command::new(py);
    cmd.arg(
        repo_root()
            .join("xtask")
            .join("python")
            .join("llm_f64_reference.py"),
    )
    .arg("--zoo")
    .arg(zoo)
    .arg("--out")
    .arg(out);
    run_inherited(&mut cmd).context("Gemma 3's float64 reference logits")
}

/// Dequantized ggml blocks by llama.cpp's `gguf` package
/// (`xtask/python/ggml_reference.py`) into `out`.
fn ggml_references(py: &std::path::Path, out: &std::path::Path) -> anyhow::Result<()> {
    let mut cmd = Command::new(py);
    cmd.arg(
        repo_root()
            .join("xtask")
            .join("python")
            .join("ggml_reference.py"),
    )
    .arg("--out")
    .arg(out);
    run_inherited(&mut cmd).context("dequantizing ggml blocks with the gguf package")
}

/// NumPy references of `lele::audio` (`xtask/python/audio_reference.py`)
/// into `out`.
fn audio_references(
    py: &std::path::Path,
    zoo: &std::path::Path,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let mut cmd = Command::new(py);
    cmd.arg(
        repo_root()
            .join("xtask")
            .join("python")
            .join("audio_reference.py"),
    )
    .arg("--zoo")
    .arg(zoo)
    .arg("--out")
    .arg(out);
    run_inherited(&mut cmd).context("computing the NumPy references of lele::audio")
}

/// ONNX Runtime runs of the example apps' pipelines
/// (`xtask/python/apps_reference.py`) into `out`.
fn app_references(
    py: &std::path::Path,
    zoo: &std::path::Path,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let root = repo_root();
    let mut cmd = Command::new(py);
    cmd.arg(root.join("xtask").join("python").join("apps_reference.py"))
        .arg("--zoo")
        .arg(zoo)
        .arg("--data")
        .arg(root.join("examples").join("data"))
        .arg("--out")
        .arg(out);
    run_inherited(&mut cmd).context("running the example apps' ONNX Runtime references")
}
