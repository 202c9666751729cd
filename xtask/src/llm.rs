//! `cargo xtask llm-reference`: llama.cpp's generations of the zoo's GGUF
//! language model (`xtask/python/llm_reference.py`), the oracle of issue
//! 55. llama-cpp-python is built from source into the managed venv the
//! first time (about ten minutes on two cores), so this is not part of
//! `cargo xtask test` yet.
use std::process::Command;

use anyhow::{Context, bail};

use crate::fixtures::fixtures_dir;
use crate::models::zoo_dir;
use crate::python::{python, repo_root};
use crate::util::run_inherited;

/// The pinned llama-cpp-python (llama.cpp's CPU build, without downloads).
const LLAMA_CPP_PYTHON: &str = "llama-cpp-python==0.3.36";

/// Options of `cargo xtask llm-reference`.
#[derive(clap::Args)]
pub struct Opts {
    /// Threads llama.cpp uses.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

/// Installs llama-cpp-python into the venv when it is not there.
fn ensure_llama_cpp(py: &std::path::Path) -> anyhow::Result<()> {
    let have = Command::new(py)
        .args(["-c", "import llama_cpp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if have {
        return Ok(());
    }
    eprintln!("xtask: building {LLAMA_CPP_PYTHON} from source (about ten minutes)");
    let ok = Command::new(py)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-binary",
            "llama-cpp-python",
        ])
        .arg(LLAMA_CPP_PYTHON)
        // The host's own instruction sets, and no network code in llama.cpp.
        .env("CMAKE_ARGS", "-DGGML_NATIVE=ON -DLLAMA_CURL=OFF")
        .status()?
        .success();
    if !ok {
        bail!("pip install {LLAMA_CPP_PYTHON} failed");
    }
    Ok(())
}

/// `cargo xtask llm-reference`.
pub fn run(opts: &Opts) -> anyhow::Result<()> {
    let py = python()?;
    ensure_llama_cpp(&py)?;
    let mut cmd = Command::new(&py);
    cmd.arg(
        repo_root()
            .join("xtask")
            .join("python")
            .join("llm_reference.py"),
    )
    .arg("--zoo")
    .arg(std::path::absolute(zoo_dir())?)
    .arg("--out")
    .arg(std::path::absolute(fixtures_dir())?.join("llm"))
    .arg("--threads")
    .arg(opts.threads.to_string());
    run_inherited(&mut cmd).context("llama.cpp's reference generations")
}
