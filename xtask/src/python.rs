//! The Python virtual environment that holds the reference oracles
//! (onnx, onnxruntime), pinned in `xtask/python/requirements.txt`.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// Root of the repository (the workspace).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Directory of the managed venv (`$LELE_VENV` or `target/venv`).
pub fn venv_dir() -> PathBuf {
    std::env::var_os("LELE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target").join("venv"))
}

/// The venv's python, creating the venv and installing the pinned
/// requirements when they changed.
pub fn python() -> anyhow::Result<PathBuf> {
    let venv = venv_dir();
    let py = venv.join("bin").join("python");
    let req = repo_root()
        .join("xtask")
        .join("python")
        .join("requirements.txt");
    let req_text =
        std::fs::read_to_string(&req).with_context(|| format!("reading {}", req.display()))?;
    let stamp = venv.join("lele-requirements.txt");
    if py.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(req_text.as_str()) {
        return Ok(py);
    }
    if !py.exists() {
        eprintln!("xtask: creating venv {}", venv.display());
        let ok = Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .status()?
            .success();
        if !ok {
            bail!("python3 -m venv failed");
        }
    }
    eprintln!("xtask: installing pinned Python packages");
    let ok = Command::new(&py)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&req)
        .status()?
        .success();
    if !ok {
        bail!("pip install -r {} failed", req.display());
    }
    std::fs::write(&stamp, req_text)?;
    Ok(py)
}

/// Runs python code and returns its stdout.
pub fn python_output(code: &str) -> anyhow::Result<String> {
    let out = Command::new(python()?).arg("-c").arg(code).output()?;
    if !out.status.success() {
        bail!("python failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}
