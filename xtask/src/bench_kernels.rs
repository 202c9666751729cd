//! `cargo xtask bench --kernels`: lele's kernels on one thread, GEMM next
//! to NumPy's BLAS on the same shapes.
use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, bail};

use crate::python::{python, repo_root};

/// Runs a command and returns its stdout lines parsed as JSON objects.
fn json_lines(cmd: &mut Command, what: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let out = cmd.output().with_context(|| format!("starting {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).with_context(|| format!("{what} printed `{l}`")))
        .collect()
}

/// `cargo xtask bench --kernels [--quick] [--isa avx2]`.
pub fn run(quick: bool, isa: Option<&str>) -> anyhow::Result<()> {
    let root = repo_root();
    let mut lele = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    lele.current_dir(&root).args([
        "run",
        "--release",
        "--quiet",
        "-p",
        "lele-kernels",
        "--example",
        "kernel_bench",
        "--",
    ]);
    let mut numpy = Command::new(python()?);
    numpy.arg(root.join("xtask/python/bench_gemm.py"));
    if quick {
        lele.arg("--quick");
        numpy.arg("--quick");
    }
    if isa == Some("avx2") {
        lele.env("LELE_ISA", "avx2");
        // OpenBLAS built for every x86 core type (NumPy's is) takes its
        // kernels from this.
        numpy.env("OPENBLAS_CORETYPE", "Haswell");
    }
    eprintln!("xtask: timing lele's kernels (one thread)");
    let lele_rows = json_lines(&mut lele, "kernel_bench")?;
    eprintln!("xtask: timing NumPy's BLAS (one thread)");
    let np_rows = json_lines(&mut numpy, "bench_gemm.py")?;
    let blas = np_rows
        .iter()
        .find_map(|r| r["blas"].as_str())
        .unwrap_or("unknown")
        .to_string();
    let np_gemm: BTreeMap<String, f64> = np_rows
        .iter()
        .filter(|r| r["kernel"] == "sgemm")
        .filter_map(|r| Some((r["case"].as_str()?.to_string(), r["gflops"].as_f64()?)))
        .collect();

    // The FMA throughput of the ISA lele ran (its `peak` row): each rate's
    // share of it.
    let peak = lele_rows.iter().find(|r| r["kernel"] == "peak");
    let peak_gflops = peak.and_then(|r| r["gflops"].as_f64()).unwrap_or(f64::NAN);
    let peak_isa = peak
        .and_then(|r| r["isa"].as_str())
        .unwrap_or("?")
        .to_string();
    let share = |g: f64| format!("{:.0}%", 100.0 * g / peak_gflops);
    let mut md = format!(
        "lele ran {peak_isa}; its FMA peak on one core here: {peak_gflops:.1} GFLOP/s{}.\n\n",
        if isa == Some("avx2") {
            "; BLAS ran its Haswell (AVX2) kernels"
        } else {
            ""
        }
    );
    md.push_str(&format!(
        "| GEMM (f32, one thread) | lele GFLOP/s | % of peak | NumPy ({blas}) GFLOP/s | % of peak | lele ÷ BLAS |\n|---|---:|---:|---:|---:|---:|\n"
    ));
    let mut jsonl = String::new();
    for r in lele_rows.iter().filter(|r| r["kernel"] == "sgemm") {
        let case = r["case"].as_str().unwrap_or("?");
        let ours = r["gflops"].as_f64().unwrap_or(f64::NAN);
        let theirs = np_gemm.get(case).copied().unwrap_or(f64::NAN);
        if theirs.is_nan() {
            // No NumPy counterpart (a weight packed ahead of time).
            md.push_str(&format!(
                "| {case} | {ours:.1} | {} | – | – | – |\n",
                share(ours)
            ));
        } else {
            md.push_str(&format!(
                "| {case} | {ours:.1} | {} | {theirs:.1} | {} | {:.2} |\n",
                share(ours),
                share(theirs),
                ours / theirs
            ));
        }
        jsonl.push_str(
            &serde_json::json!({
                "kernel": "sgemm", "case": case, "lele_gflops": ours,
                "blas": blas, "blas_gflops": theirs, "lele_over_blas": ours / theirs,
                "isa": peak_isa, "peak_gflops": peak_gflops,
            })
            .to_string(),
        );
        jsonl.push('\n');
    }
    md.push_str("\n| other kernels (lele, one thread) | ms | rate |\n|---|---:|---:|\n");
    for r in lele_rows
        .iter()
        .filter(|r| r["kernel"] != "sgemm" && r["kernel"] != "peak")
    {
        let kernel = r["kernel"].as_str().unwrap_or("?");
        let case = r["case"].as_str().unwrap_or("?");
        let ms = r["ms"].as_f64().unwrap_or(f64::NAN);
        let rate = match (r["gflops"].as_f64(), r["ns_per_elem"].as_f64()) {
            (Some(g), _) => format!("{g:.1} GFLOP/s ({})", share(g)),
            (_, Some(ns)) => format!("{ns:.2} ns/element"),
            _ => String::new(),
        };
        md.push_str(&format!("| {kernel} {case} | {ms:.3} | {rate} |\n"));
        jsonl.push_str(&r.to_string());
        jsonl.push('\n');
    }
    print!("{md}");
    let dir = root.join("target/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("kernels.md"), &md)?;
    std::fs::write(dir.join("kernels.jsonl"), &jsonl)?;
    eprintln!("xtask: wrote target/bench/kernels.md and kernels.jsonl");
    Ok(())
}
