//! `lele bench`: times a model through generated code (a release build of
//! the same runner crate `lele run` uses, with a timing `main`).
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::run::{InputArgs, RunnerKind, build_runner, prepare_inputs};
use super::target::Target;
use crate::error::{BuildError, Result, escape_controls as esc};

/// Arguments of `lele bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The ONNX file.
    pub model: PathBuf,
    /// The inputs (as for `lele run`).
    #[command(flatten)]
    pub io: InputArgs,
    /// Threads the kernels may use (GEMM and convolutions split their
    /// columns over a pool; the rest runs on the calling thread).
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
    /// Latency of a real-time caller: at least 10,000 timed runs (and 100
    /// warm-up runs), reported as p50, p99, p99.9 and max per call, with
    /// the model's init time and the time to the first output.
    #[arg(long)]
    pub latency: bool,
    /// After the timed runs, as many profiled runs: prints the mean time
    /// of each node (fused nodes count once), slowest first.
    #[arg(long)]
    pub profile: bool,
    /// With `--profile`: how many nodes to list (0 = all).
    #[arg(long, default_value_t = 25)]
    pub top: usize,
    /// Build and time the model for this target (as for `lele run`):
    /// `wasm32-wasip1` (or `wasm32-wasip1+relaxed-simd`) times wasm code in
    /// node; an aarch64 build on another
    /// host runs under qemu, which checks it but says nothing of speed.
    #[arg(long, default_value = "host")]
    pub target: Target,
}

/// What a runner process prints (lele's, and the ORT and tract runners
/// of `cargo xtask bench`, which speak the same protocol).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerReport {
    /// `lele`, `ort` or `tract`.
    pub engine: String,
    /// The instruction set the engine's kernels ran on, where it reports
    /// one (lele's runner: the dispatched ISA, after any `LELE_ISA` cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isa: Option<String>,
    /// Threads the engine actually used.
    pub threads: usize,
    /// `Model::new` and its workspace (lele's runner only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_ms: Option<f64>,
    /// From the start of the process's `main` to the end of the first run.
    pub first_output_ms: f64,
    /// Each timed run.
    pub times_ms: Vec<f64>,
    /// Peak resident set size (`VmHWM`).
    pub peak_rss_kb: u64,
    /// Per-node times of the profiled runs (lele with `--profile` only),
    /// slowest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile: Vec<NodeTimeReport>,
}

/// One node of a profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeTimeReport {
    /// ONNX op type (a fused node shows its fused op).
    pub op: String,
    /// ONNX node name.
    pub name: String,
    /// Mean time per run.
    pub mean_ms: f64,
    /// Share of the time of all nodes (0..=1).
    pub share: f64,
    /// Arithmetic of one run (a multiply-add counting two; 0 for nodes
    /// without products).
    #[serde(default)]
    pub flops: u64,
    /// Bytes the node's kernels read and write in one run.
    #[serde(default)]
    pub bytes: u64,
}

impl NodeTimeReport {
    /// GFLOP/s of the node (`None` without arithmetic or time).
    pub fn gflops(&self) -> Option<f64> {
        (self.flops > 0 && self.mean_ms > 0.0).then(|| self.flops as f64 / self.mean_ms / 1e6)
    }

    /// GB/s of its inputs and outputs (`None` without bytes or time).
    pub fn gbps(&self) -> Option<f64> {
        (self.bytes > 0 && self.mean_ms > 0.0).then(|| self.bytes as f64 / self.mean_ms / 1e6)
    }

    /// The node's rate: GFLOP/s where it computes products, else GB/s.
    pub fn rate(&self) -> String {
        match (self.gflops(), self.gbps()) {
            (Some(g), _) => format!("{g:.1} GFLOP/s"),
            (None, Some(b)) => format!("{b:.1} GB/s"),
            (None, None) => String::new(),
        }
    }
}

/// One profile row as a JSON object (what a timing runner prints).
pub fn node_time_json(row: &NodeTimeReport) -> String {
    json_terminal_safe(
        &serde_json::json!({
            "op": row.op, "name": row.name, "mean_ms": row.mean_ms, "share": row.share,
            "flops": row.flops, "bytes": row.bytes,
        })
        .to_string(),
    )
}

/// JSON text with every character a terminal could act on (C1 controls,
/// bidi overrides: see [`crate::error::is_unsafe_char`]; serde_json
/// escapes C0 itself) written as a `\uXXXX` escape: the same JSON value,
/// safe to print.
pub fn json_terminal_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if crate::error::is_unsafe_char(c) {
            // All of them are in the BMP: one escape each.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
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

/// The `q`-quantile (`0 < q <= 1`) of a sorted sample by the nearest-rank
/// rule: the smallest value with at least `q` of the sample at or below it.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

/// Builds the timing runner of `model` (release) and writes its inputs
/// into `dir`; returns the executable and the input files in order.
pub fn bench_runner(
    model: &Path,
    io: &InputArgs,
    dir: &Path,
    target: Target,
) -> Result<(PathBuf, Vec<PathBuf>)> {
    let p = prepare_inputs(model, io, dir)?;
    let exe = build_runner(&p.model, &p.graph, &p.toml_text, RunnerKind::Bench, target)?;
    Ok((exe, p.input_files))
}

/// Runs a timing runner (built for `target`) once and parses its report.
#[allow(clippy::too_many_arguments)]
pub fn run_bench_runner(
    exe: &Path,
    inputs: &[PathBuf],
    warmup: usize,
    runs: usize,
    profile: bool,
    threads: usize,
    target: Target,
) -> Result<RunnerReport> {
    let out = target
        .command(exe)?
        .arg(warmup.to_string())
        .arg(runs.to_string())
        .arg(if profile { "profile" } else { "time" })
        .arg(threads.to_string())
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
    if args.threads == 0 {
        return Err(BuildError::Config("--threads must be at least 1".into()));
    }
    if args.runs == 0 {
        return Err(BuildError::Config("--runs must be at least 1".into()));
    }
    let dir = crate::fetch::cache_root().join("bench").join("inputs");
    let (exe, inputs) = bench_runner(&args.model, &args.io, &dir, args.target)?;
    let (warmup, runs) = if args.latency {
        (args.warmup.max(100), args.runs.max(10_000))
    } else {
        (args.warmup, args.runs)
    };
    let r = run_bench_runner(
        &exe,
        &inputs,
        warmup,
        runs,
        args.profile,
        args.threads,
        args.target,
    )?;
    let (median, min, max) = summary(&r.times_ms)
        .ok_or_else(|| BuildError::Other("the runner reported no timings".into()))?;
    let mut sorted: Vec<f64> = r
        .times_ms
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    sorted.sort_by(f64::total_cmp);
    let q = |p: f64| quantile(&sorted, p).unwrap_or(f64::NAN);
    if args.json {
        let mut obj = serde_json::json!({
            "model": args.model.to_string_lossy(),
            "engine": "lele",
            "threads": r.threads,
            "isa": r.isa,
            "runs": r.times_ms.len(),
            "median_ms": median,
            "min_ms": min,
            "max_ms": max,
            "first_output_ms": r.first_output_ms,
            "peak_rss_kb": r.peak_rss_kb,
        });
        if args.latency {
            obj["p99_ms"] = q(0.99).into();
            obj["p999_ms"] = q(0.999).into();
            obj["init_ms"] = r.init_ms.into();
        }
        outln!("{}", json_terminal_safe(&obj.to_string()));
        for row in &r.profile {
            outln!("{}", node_time_json(row));
        }
    } else if args.latency {
        outln!(
            "{}: per call p50 {median:.4} ms, p99 {:.4}, p99.9 {:.4}, max {max:.4} \
             (p99.9 / p50 {:.2}) over {} calls, {} thread(s); init {} ms; first output {:.1} ms \
             after start; peak RSS {:.1} MiB",
            esc(&args.model.display().to_string()),
            q(0.99),
            q(0.999),
            q(0.999) / median,
            r.times_ms.len(),
            r.threads,
            r.init_ms.map_or("?".to_string(), |v| format!("{v:.3}")),
            r.first_output_ms,
            r.peak_rss_kb as f64 / 1024.0
        );
    } else {
        outln!(
            "{}: median {median:.3} ms (min {min:.3}, max {max:.3}) over {} runs, {} thread(s), \
             kernels on {}; first output {:.1} ms after start; peak RSS {:.1} MiB",
            esc(&args.model.display().to_string()),
            r.times_ms.len(),
            r.threads,
            r.isa.as_deref().unwrap_or("?"),
            r.first_output_ms,
            r.peak_rss_kb as f64 / 1024.0
        );
        if args.profile {
            print_profile(&r.profile, args.top)?;
        }
    }
    Ok(())
}

/// The profile as a table: per node and per op type.
fn print_profile(rows: &[NodeTimeReport], top: usize) -> Result<()> {
    let total: f64 = rows.iter().map(|r| r.mean_ms).sum();
    outln!("\nper node (mean of the profiled runs; total {total:.3} ms):");
    outln!(
        "{:>9}  {:>6}  {:>14}  {:<22} name",
        "ms",
        "share",
        "rate",
        "op"
    );
    let shown = if top == 0 {
        rows.len()
    } else {
        top.min(rows.len())
    };
    for r in &rows[..shown] {
        outln!(
            "{:>9.3}  {:>5.1}%  {:>14}  {:<22} {}",
            r.mean_ms,
            r.share * 100.0,
            r.rate(),
            esc(&r.op),
            esc(&r.name)
        );
    }
    if shown < rows.len() {
        outln!(
            "  ... {} more nodes (--top 0 lists all)",
            rows.len() - shown
        );
    }
    let mut by_op: Vec<(String, f64, usize)> = Vec::new();
    for r in rows {
        match by_op.iter_mut().find(|(op, ..)| *op == r.op) {
            Some(e) => {
                e.1 += r.mean_ms;
                e.2 += 1;
            }
            None => by_op.push((r.op.clone(), r.mean_ms, 1)),
        }
    }
    by_op.sort_by(|a, b| b.1.total_cmp(&a.1));
    outln!("\nper op type:");
    for (op, ms, n) in by_op {
        let share = if total > 0.0 { ms / total * 100.0 } else { 0.0 };
        outln!("{ms:>9.3}  {share:>5.1}%  {:<22} ×{n}", esc(&op));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{NodeTimeReport, node_time_json, quantile, summary};

    #[test]
    fn json_rows_escape_what_a_terminal_would_act_on() {
        let row = node_time_json(&NodeTimeReport {
            op: "Add\u{9b}2J".into(),
            name: "n\u{1b}[31m\u{202e}é".into(),
            mean_ms: 1.5,
            share: 0.25,
            flops: 3_000_000,
            bytes: 0,
        });
        assert!(!row.chars().any(crate::error::is_unsafe_char), "{row}");
        let back: NodeTimeReport = serde_json::from_str(&row).unwrap();
        assert_eq!(back.op, "Add\u{9b}2J");
        assert_eq!(back.name, "n\u{1b}[31m\u{202e}é");
        assert_eq!(back.flops, 3_000_000);
        // 3 MFLOP in 1.5 ms: 2 GFLOP/s; no bytes, no GB/s.
        assert_eq!(back.rate(), "2.0 GFLOP/s");
        assert_eq!(back.gbps(), None);
    }

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let t: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(quantile(&t, 0.5), Some(500.0));
        assert_eq!(quantile(&t, 0.99), Some(990.0));
        assert_eq!(quantile(&t, 0.999), Some(999.0));
        assert_eq!(quantile(&t, 1.0), Some(1000.0));
        assert_eq!(quantile(&[7.0], 0.999), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn summary_takes_the_middle() {
        assert_eq!(summary(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(summary(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(summary(&[]), None);
    }
}
