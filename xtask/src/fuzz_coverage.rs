//! `cargo xtask fuzz --coverage`: which lines and regions of lele a fuzz
//! target reaches, measured with rustc's `-C instrument-coverage` and the
//! llvm-profdata / llvm-cov of rustup's `llvm-tools` component.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::python::repo_root;
use crate::util::run_captured;

/// The sources each target aims at: its coverage is reported over these
/// (the compiler's over both crates, as it runs every pass and folds
/// constants through the kernels).
fn focus(target: &str) -> &'static [&'static str] {
    match target {
        "onnx_loader" => &["lele-build/src/onnx"],
        "npy_reader" => &["lele-build/src/npy.rs", "lele-kernels/src/npy.rs"],
        "toml_parser" => &["lele-build/src/config.rs"],
        _ => &["lele-build/src", "lele-kernels/src"],
    }
}

/// llvm-profdata and llvm-cov from the toolchain's sysroot.
pub struct Tools {
    profdata: PathBuf,
    cov: PathBuf,
}

impl Tools {
    /// Finds the tools, installing the component when rustup is there.
    pub fn find() -> anyhow::Result<Tools> {
        let sysroot = run_captured(Command::new("rustc").args(["--print", "sysroot"]))?;
        let host = run_captured(Command::new("rustc").args(["--print", "host-tuple"]))?;
        let bin = Path::new(sysroot.trim())
            .join("lib/rustlib")
            .join(host.trim())
            .join("bin");
        let tools = Tools {
            profdata: bin.join("llvm-profdata"),
            cov: bin.join("llvm-cov"),
        };
        if !tools.cov.exists() {
            crate::util::run_inherited(Command::new("rustup").args([
                "component",
                "add",
                "llvm-tools",
            ]))
            .context("llvm-cov is missing and rustup could not add llvm-tools")?;
        }
        if !tools.cov.exists() || !tools.profdata.exists() {
            bail!("no llvm-cov / llvm-profdata in {}", bin.display());
        }
        Ok(tools)
    }

    /// Merges the target's raw profiles and returns llvm-cov's summary over
    /// the target's focus.
    pub fn report(&self, target: &str, binary: &Path, profiles: &Path) -> anyhow::Result<String> {
        let raw: Vec<PathBuf> = std::fs::read_dir(profiles)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "profraw"))
            .collect();
        if raw.is_empty() {
            bail!("the {target} run wrote no coverage profile");
        }
        let merged = profiles.join("merged.profdata");
        run_captured(
            Command::new(&self.profdata)
                .args(["merge", "-sparse", "-o"])
                .arg(&merged)
                .args(&raw),
        )?;
        let root = repo_root();
        let table = run_captured(
            Command::new(&self.cov)
                .arg("report")
                .arg(binary)
                .arg(format!("--instr-profile={}", merged.display()))
                .args(focus(target).iter().map(|f| root.join(f))),
        )?;
        let total = table
            .lines()
            .find(|l| l.starts_with("TOTAL"))
            .context("llvm-cov printed no TOTAL line")?;
        // TOTAL, regions, missed, cover, functions, missed, executed,
        // lines, missed, cover, branches…
        let cols: Vec<&str> = total.split_whitespace().collect();
        let region_cover = cols.get(3).copied().unwrap_or("?");
        let line_cover = cols.get(9).copied().unwrap_or("?");
        Ok(format!(
            "coverage {target}: lines {line_cover} ({} of {} lines), regions {region_cover} ({} of {}), \
             over {}\n",
            count_covered(&cols, 7, 8),
            cols.get(7).copied().unwrap_or("?"),
            count_covered(&cols, 1, 2),
            cols.get(1).copied().unwrap_or("?"),
            focus(target).join(", ")
        ))
    }
}

/// `total - missed` of two columns of llvm-cov's TOTAL line.
fn count_covered(cols: &[&str], total: usize, missed: usize) -> String {
    let n = |i: usize| cols.get(i).and_then(|c| c.parse::<u64>().ok());
    match (n(total), n(missed)) {
        (Some(t), Some(m)) => t.saturating_sub(m).to_string(),
        _ => "?".into(),
    }
}

/// Builds the fuzz test (`cmd` is its `cargo test --no-run`) and returns the
/// test binary's path, from cargo's JSON messages.
pub fn test_binary(cmd: &mut Command) -> anyhow::Result<PathBuf> {
    let out = run_captured(cmd.arg("--message-format=json-render-diagnostics"))?;
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "fuzz")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .context("cargo built no `fuzz` test binary")
}

/// An empty directory for the target's raw profiles.
pub fn fresh_profile_dir(target: &str) -> anyhow::Result<PathBuf> {
    let dir = repo_root().join("target/fuzz-cov/profiles").join(target);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Appends the report to the target's `runs.log` beside its findings.
pub fn append_log(target: &str, report: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = repo_root().join("target/fuzz-findings").join(target);
    std::fs::create_dir_all(&dir)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("runs.log"))?;
    f.write_all(report.as_bytes())?;
    Ok(())
}
