//! `lele bench`: times a model through generated code (a release build of
//! the same runner crate `lele run` uses, with a timing `main`).
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::run::{InputArgs, RunnerKind, build_runner, prepare_inputs};
use crate::error::{BuildError, Result};

/// Arguments of `lele bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The ONNX file.
    pub model: PathBuf,
    /// The inputs (as for `lele run`).
    #[command(flatten)]
    pub io: InputArgs,
    /// Threads (lele runs on one thread; other values are rejected).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Untimed runs after the first one.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs.
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Print one JSON object instead of a summary line.
    #[arg(long)]
    pub json: bool,
    /// Time per node (not implemented yet: rejected).
    #[arg(long)]
    pub profile: bool,
}

/// What a runner process prints (lele's, and the ORT and tract runners
/// of `cargo xtask bench`, which speak the same protocol).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerReport {
    /// `lele`, `ort` or `tract`.
    pub engine: String,
    /// Threads the engine actually used.
    pub threads: usize,
    /// From the start of the process's `main` to the end of the first run.
    pub first_output_ms: f64,
    /// Each timed run.
    pub times_ms: Vec<f64>,
    /// Peak resident set size (`VmHWM`).
    pub peak_rss_kb: u64,
}

/// Median, min and max of a sample (`None` when empty).
pub fn summary(times: &[f64]) -> Option<(f64, f64, f64)> {
    let mut t: Vec<f64> = times.iter().copied().filter(|v| v.is_finite()).collect();
    if t.is_empty() {
        return None;
    }
    t.sort_by(f64::total_cmp);
    let n = t.len();
    let median = if n % 2 == 1 {
        t[n / 2]
    } else {
        (t[n / 2 - 1] + t[n / 2]) / 2.0
    };
    Some((median, t[0], t[n - 1]))
}

/// Builds the timing runner of `model` (release) and writes its inputs
/// into `dir`; returns the executable and the input files in order.
pub fn bench_runner(model: &Path, io: &InputArgs, dir: &Path) -> Result<(PathBuf, Vec<PathBuf>)> {
    let p = prepare_inputs(model, io, dir)?;
    let exe = build_runner(&p.model, &p.graph, &p.toml_text, RunnerKind::Bench)?;
    Ok((exe, p.input_files))
}

/// Runs a timing runner once and parses its report.
pub fn run_bench_runner(
    exe: &Path,
    inputs: &[PathBuf],
    warmup: usize,
    runs: usize,
) -> Result<RunnerReport> {
    let out = Command::new(exe)
        .arg(warmup.to_string())
        .arg(runs.to_string())
        .args(inputs)
        .output()
        .map_err(|source| BuildError::Io {
            path: exe.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        return Err(BuildError::Other(format!(
            "the generated model failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line)
        .map_err(|e| BuildError::Other(format!("unreadable runner report `{line}`: {e}")))
}

/// Runs `lele bench`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    if args.profile {
        return Err(BuildError::Config(
            "--profile (time per node) is not implemented yet".into(),
        ));
    }
    if args.threads != 1 {
        return Err(BuildError::Config(
            "lele runs a model on one thread; it has no thread pool yet (use --threads 1)".into(),
        ));
    }
    if args.runs == 0 {
        return Err(BuildError::Config("--runs must be at least 1".into()));
    }
    let dir = crate::fetch::cache_root().join("bench").join("inputs");
    let (exe, inputs) = bench_runner(&args.model, &args.io, &dir)?;
    let r = run_bench_runner(&exe, &inputs, args.warmup, args.runs)?;
    let (median, min, max) = summary(&r.times_ms)
        .ok_or_else(|| BuildError::Other("the runner reported no timings".into()))?;
    if args.json {
        let obj = serde_json::json!({
            "model": args.model.to_string_lossy(),
            "engine": "lele",
            "threads": r.threads,
            "runs": r.times_ms.len(),
            "median_ms": median,
            "min_ms": min,
            "max_ms": max,
            "first_output_ms": r.first_output_ms,
            "peak_rss_kb": r.peak_rss_kb,
        });
        println!("{obj}");
    } else {
        println!(
            "{}: median {median:.3} ms (min {min:.3}, max {max:.3}) over {} runs, 1 thread; \
             first output {:.1} ms after start; peak RSS {:.1} MiB",
            args.model.display(),
            r.times_ms.len(),
            r.first_output_ms,
            r.peak_rss_kb as f64 / 1024.0
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::summary;

    #[test]
    fn summary_takes_the_middle() {
        assert_eq!(summary(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(summary(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(summary(&[]), None);
    }
}
