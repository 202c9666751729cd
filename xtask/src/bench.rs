//! `cargo xtask bench`: lele, ONNX Runtime and tract on the same inputs
//! (the fixtures' first step), each run in its own process, interleaved in
//! rounds, after warm-up. Prints a markdown table and JSON lines, and writes
//! both to `target/bench/`.
//!
//! Every engine runner speaks one protocol: it prints a JSON line with the
//! threads it used, the time from the start of its `main` to the end of the
//! first run (model load, optimization, first inference), each timed run,
//! and its peak RSS (`VmHWM`). lele's runner is the generated code built by
//! `lele bench` (release); ORT's is `xtask/python/bench_ort.py` (graph
//! optimizations on); tract's is the standalone crate `xtask/tract-bench`.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use lele_build::cli::bench::{RunnerReport, bench_runner, run_bench_runner, summary};
use lele_build::cli::run::InputArgs;
use lele_build::cli::target::Target;

use crate::fixtures::fixtures_dir;
use crate::models::zoo_dir;
use crate::python::{python, repo_root};
use crate::util::step;

/// The benchmark set: (label, fixture case).
const SET: &[(&str, &str)] = &[
    ("Silero VAD v6 (576 samples + state)", "silero_vad_16k"),
    ("PP-OCRv4 det 640x640", "ppocr_v4_det_640x640"),
    ("PP-OCRv4 rec 48x320", "ppocr_v4_rec_48x320"),
    ("PP-OCR cls 48x192", "ppocr_cls_48x192"),
    ("PP-OCRv6 small det 480x480", "ppocr_v6_det_480x480"),
    ("PP-OCRv6 small rec 48x320", "ppocr_v6_rec_48x320"),
    ("YOLOv8n 640x640", "yolov8n_640"),
    ("paraphrase-MiniLM-L3 seq 128", "minilm_l3_seq128"),
    ("ddddocr common", "ddddocr_common_160"),
    ("DeepFilterNet3 enc, 100 frames", "dfn3_enc_100"),
    ("DeepFilterNet3 erb_dec, 100 frames", "dfn3_erb_dec_100"),
    ("DeepFilterNet3 df_dec, 100 frames", "dfn3_df_dec_100"),
    ("GTCRN, one 16 ms hop", "gtcrn_200"),
    ("Whisper log-mel 80 (STFT), 30 s", "asr_whisper80_10s"),
    ("Whisper log-mel 80 (Conv), 30 s", "asr_whisper80_conv_10s"),
    ("Kaldi fbank 80 (STFT), 10 s", "asr_kaldi_10s"),
    ("Kaldi fbank 80 (Conv), 10 s", "asr_kaldi_conv_10s"),
    ("NeMo log-mel 80 (STFT), 10 s", "asr_nemo80_10s"),
    ("NeMo log-mel 80 (Conv), 10 s", "asr_nemo80_conv_10s"),
    ("Resample 44.1 -> 16 kHz, 1 s", "asr_resample_44_16_1s"),
    ("Resample 48 -> 16 kHz, 1 s", "asr_resample_48_16_1s"),
];

/// Options of `cargo xtask bench`.
#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Only cases whose fixture name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    /// Thread counts for lele and ONNX Runtime (tract runs on one thread).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    pub threads: Vec<usize>,
    /// Rounds; each round runs every engine once, in rotating order.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Untimed runs per process after the first one.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs per process.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Instead of the models: lele's kernels (GEMM shapes, convolutions,
    /// activations) on one thread, with GEMM next to NumPy's BLAS.
    #[arg(long)]
    pub kernels: bool,
    /// With `--kernels`: short time budgets (a smoke run, noisy numbers).
    #[arg(long)]
    pub quick: bool,
    /// With `--kernels`: `avx2` runs lele's AVX2 paths (`LELE_ISA=avx2`)
    /// next to OpenBLAS's Haswell (AVX2) kernels (`OPENBLAS_CORETYPE`), so
    /// an AVX-512 machine compares the two on AVX2.
    #[arg(long, value_parser = ["avx2"])]
    pub isa: Option<String>,
    /// `wasm32-wasip1`: lele's models built for wasm (simd128) and timed in
    /// node, next to onnxruntime-web's wasm backend (SIMD, one thread) in
    /// node: both with V8's default tiering, after at least 10 warm-up runs
    /// (past the tier-up of the hot code). One thread; no tract.
    /// `wasm32-wasip1+relaxed-simd`: lele's build with relaxed SIMD too.
    #[arg(
        long,
        value_parser = ["host", "wasm32-wasip1", "wasm32-wasip1+relaxed-simd"],
        default_value = "host"
    )]
    pub target: String,
}

/// The onnxruntime-web release compared with in `--target wasm32-wasip1`.
const ORT_WEB_VERSION: &str = "1.30.0";

/// Installs the pinned onnxruntime-web into `target/npm/ort-web` (once) and
/// returns the package's directory.
fn ort_web() -> anyhow::Result<PathBuf> {
    let root = repo_root().join("target/npm/ort-web");
    let package = root.join("node_modules/onnxruntime-web");
    let installed = std::fs::read_to_string(package.join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v["version"] == ORT_WEB_VERSION);
    if !installed {
        std::fs::create_dir_all(&root)?;
        std::fs::write(
            root.join("package.json"),
            "{\"name\": \"lele-ort-web-bench\", \"private\": true}\n",
        )?;
        crate::util::run_inherited(
            Command::new("npm")
                .current_dir(&root)
                .args(["install", "--no-audit", "--no-fund", "--ignore-scripts"])
                .arg(format!("onnxruntime-web@{ORT_WEB_VERSION}")),
        )
        .context("installing onnxruntime-web with npm")?;
    }
    Ok(package)
}

/// One engine configuration of one model.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Config {
    engine: &'static str,
    threads: usize,
}

/// What a model needs for the engines: its file and its inputs.
struct Case {
    label: &'static str,
    name: &'static str,
    model: PathBuf,
    /// `(input name, .npy file)` in graph order.
    inputs: Vec<(String, PathBuf)>,
}

fn load_case(label: &'static str, name: &'static str) -> anyhow::Result<Case> {
    let dir = fixtures_dir().join(name);
    let text = std::fs::read_to_string(dir.join("case.json"))
        .with_context(|| format!("fixture {name} (run `cargo xtask fixtures`)"))?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    let model = zoo_dir().join(v["model"].as_str().context("case.json: model")?);
    let mut inputs = Vec::new();
    for (i, inp) in v["inputs"]
        .as_array()
        .context("case.json: inputs")?
        .iter()
        .enumerate()
    {
        let n = inp["name"].as_str().context("case.json: input name")?;
        inputs.push((n.to_string(), dir.join("step0").join(format!("in_{i}.npy"))));
    }
    Ok(Case {
        label,
        name,
        model,
        inputs,
    })
}

/// The tract runner, built once (release) into `target/tract-bench`.
fn tract_runner() -> anyhow::Result<PathBuf> {
    let manifest = repo_root().join("xtask/tract-bench/Cargo.toml");
    let target = repo_root().join("target/tract-bench");
    let ok = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .status()?
        .success();
    if !ok {
        bail!("building xtask/tract-bench failed");
    }
    Ok(target.join("release/tract-bench"))
}

/// Runs an external runner (ORT or tract) and parses its JSON line.
fn run_external(
    mut cmd: Command,
    case: &Case,
    c: &Config,
    o: &Opts,
    warmup: usize,
) -> anyhow::Result<RunnerReport> {
    cmd.arg("--model").arg(&case.model);
    for (n, f) in &case.inputs {
        cmd.arg("--input").arg(format!("{n}={}", f.display()));
    }
    cmd.args(["--threads", &c.threads.to_string()])
        .args(["--warmup", &warmup.to_string()])
        .args(["--runs", &o.runs.to_string()]);
    let out = cmd.output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).with_context(|| format!("unreadable report `{line}`"))
}

/// The aggregate of one configuration over all rounds.
#[derive(Default)]
struct Agg {
    times: Vec<f64>,
    first: Vec<f64>,
    rss_kb: u64,
    threads_used: usize,
    /// The ISA the engine reported (lele's runners do; the others pick
    /// their kernels from CPUID, see [`host_cpu`]).
    isa: Option<String>,
    error: Option<String>,
}

impl Agg {
    fn median(&self) -> Option<f64> {
        summary(&self.times).map(|s| s.0)
    }
}

/// `cargo xtask bench`.
pub fn run(o: &Opts) -> anyhow::Result<()> {
    if o.kernels {
        return crate::bench_kernels::run(o.quick, o.isa.as_deref());
    }
    if o.rounds == 0 || o.runs == 0 {
        bail!("--rounds and --runs must be at least 1");
    }
    let cases: Vec<Case> = SET
        .iter()
        .filter(|(_, n)| o.models.is_empty() || o.models.iter().any(|m| n.contains(m.as_str())))
        .map(|&(l, n)| load_case(l, n))
        .collect::<anyhow::Result<_>>()?;
    if cases.is_empty() {
        bail!("no benchmark case matches {:?}", o.models);
    }
    let target: Target = o.target.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    let wasm = target != Target::Host;
    // The ORT engine: native ONNX Runtime from Python, or onnxruntime-web
    // in node.
    let ort_cmd: Box<dyn Fn() -> Command> = if wasm {
        let package = step("bench: installing onnxruntime-web", ort_web)?;
        let script = repo_root().join("xtask/runners/bench_ort_web.mjs");
        Box::new(move || {
            let mut c = Command::new("node");
            c.arg("--no-warnings")
                .arg(&script)
                .arg("--ort")
                .arg(&package);
            c
        })
    } else {
        let py = python()?;
        let script = repo_root().join("xtask/python/bench_ort.py");
        Box::new(move || {
            let mut c = Command::new(&py);
            c.arg(&script);
            c
        })
    };
    let mut configs = Vec::new();
    let tract = if wasm {
        None
    } else {
        configs.push(Config {
            engine: "tract",
            threads: 1,
        });
        Some(step("bench: building the tract runner", tract_runner)?)
    };
    let threads: &[usize] = if wasm { &[1] } else { &o.threads };
    // Wasm runs need V8 to have tiered up the hot code first.
    let warmup = if wasm { o.warmup.max(10) } else { o.warmup };
    for &t in threads {
        for engine in ["lele", "ort"] {
            configs.push(Config { engine, threads: t });
        }
    }
    let mut results: BTreeMap<(&str, Config), Agg> = BTreeMap::new();
    for case in &cases {
        let lele = step(
            &format!("bench: building lele's runner for {}", case.name),
            || {
                let io = InputArgs {
                    inputs: case
                        .inputs
                        .iter()
                        .map(|(n, f)| format!("{n}={}", f.display()))
                        .collect(),
                    ..Default::default()
                };
                let dir = repo_root().join("target/bench/inputs").join(case.name);
                Ok(bench_runner(&case.model, &io, &dir, target)?)
            },
        );
        step(&format!("bench: {}", case.name), || {
            for round in 0..o.rounds {
                for k in 0..configs.len() {
                    // Rotate the order so no engine always runs first.
                    let c = &configs[(k + round) % configs.len()];
                    let report = match c.engine {
                        "lele" => match &lele {
                            Ok((exe, files)) => run_bench_runner(
                                exe, files, warmup, o.runs, false, c.threads, target,
                            )
                            .map_err(anyhow::Error::from),
                            Err(e) => Err(anyhow::anyhow!("{e}")),
                        },
                        "ort" => run_external(ort_cmd(), case, c, o, warmup),
                        _ => match &tract {
                            Some(t) => run_external(Command::new(t), case, c, o, warmup),
                            None => Err(anyhow::anyhow!("no tract runner")),
                        },
                    };
                    let agg = results.entry((case.name, c.clone())).or_default();
                    match report {
                        Ok(r) => {
                            agg.times.extend(&r.times_ms);
                            agg.first.push(r.first_output_ms);
                            agg.rss_kb = agg.rss_kb.max(r.peak_rss_kb);
                            agg.threads_used = r.threads;
                            agg.isa = r.isa.or(agg.isa.take());
                        }
                        Err(e) => agg.error = Some(e.to_string()),
                    }
                }
            }
            Ok(())
        })?;
    }
    report(&cases, &configs, &results, o, target, threads)
}

fn report(
    cases: &[Case],
    configs: &[Config],
    results: &BTreeMap<(&str, Config), Agg>,
    o: &Opts,
    target: Target,
    threads: &[usize],
) -> anyhow::Result<()> {
    let wasm = target != Target::Host;
    let ort = if wasm { "ORT-web" } else { "ORT" };
    let (lele_name, ort_name) = if wasm {
        (
            format!("lele ({}, node)", target.name()),
            "onnxruntime-web (wasm, SIMD, node)",
        )
    } else {
        ("lele".to_string(), "ONNX Runtime")
    };
    let mut jsonl = String::new();
    let mut md = String::new();
    let ort_median = |case: &str, threads: usize| {
        results
            .get(&(
                case,
                Config {
                    engine: "ort",
                    threads,
                },
            ))
            .and_then(Agg::median)
    };
    for case in cases {
        for c in configs {
            let Some(a) = results.get(&(case.name, c.clone())) else {
                continue;
            };
            let mut obj = serde_json::json!({
                "model": case.name,
                "engine": c.engine,
                "threads_requested": c.threads,
                "threads": a.threads_used,
            });
            if let Some(isa) = &a.isa {
                obj["isa"] = isa.clone().into();
            }
            if let Some((median, min, max)) = summary(&a.times) {
                obj["median_ms"] = median.into();
                obj["min_ms"] = min.into();
                obj["max_ms"] = max.into();
                obj["runs"] = a.times.len().into();
                obj["first_output_ms"] = summary(&a.first).map_or(f64::NAN, |s| s.0).into();
                obj["peak_rss_kb"] = a.rss_kb.into();
                if let Some(ort) = ort_median(case.name, c.threads) {
                    obj["ort_over_this"] = (ort / median).into();
                }
            }
            if let Some(e) = &a.error {
                obj["error"] = e.clone().into();
            }
            writeln!(jsonl, "{obj}")?;
        }
    }
    // The table: one row per model and thread count.
    let cell = |case: &str, engine: &'static str, threads: usize| -> String {
        match results.get(&(case, Config { engine, threads })) {
            Some(a) => match (a.median(), &a.error) {
                (Some(m), _) => format!("{m:.2}"),
                (None, Some(_)) => "fails".into(),
                (None, None) => "–".into(),
            },
            None => "–".into(),
        }
    };
    let mut geo: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut lele_isas: Vec<&str> = results
        .iter()
        .filter(|((_, c), _)| c.engine == "lele")
        .filter_map(|(_, a)| a.isa.as_deref())
        .collect();
    lele_isas.sort_unstable();
    lele_isas.dedup();
    writeln!(
        md,
        "\nCPU: {}. lele's kernels ran on: {}; {ort} and tract choose theirs from CPUID.",
        host_cpu(),
        if lele_isas.is_empty() {
            "(not reported)".to_string()
        } else {
            lele_isas.join(", ")
        }
    )?;
    for &t in threads {
        writeln!(
            md,
            "\n**{lele_name} and {ort_name} with {t} thread{}**{}, median ms of {} runs × {} rounds:\n",
            if t == 1 { "" } else { "s" },
            if wasm { "" } else { " (tract: 1 thread)" },
            o.runs,
            o.rounds
        )?;
        writeln!(
            md,
            "| model | lele | {ort} | tract | {ort} / lele | lele first output (ms) | {ort} first output (ms) | lele peak RSS (MiB) | {ort} peak RSS (MiB) |"
        )?;
        writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
        for case in cases {
            let lele = results.get(&(
                case.name,
                Config {
                    engine: "lele",
                    threads: t,
                },
            ));
            let ort = results.get(&(
                case.name,
                Config {
                    engine: "ort",
                    threads: t,
                },
            ));
            let ratio = match (lele.and_then(Agg::median), ort.and_then(Agg::median)) {
                (Some(l), Some(r)) => {
                    geo.entry(t).or_default().push(r / l);
                    format!("{:.2}", r / l)
                }
                _ => "–".into(),
            };
            let first = |a: Option<&Agg>| {
                a.and_then(|a| summary(&a.first))
                    .map_or("–".into(), |s| format!("{:.1}", s.0))
            };
            let rss = |a: Option<&Agg>| {
                a.filter(|a| a.rss_kb > 0)
                    .map_or("–".into(), |a| format!("{:.1}", a.rss_kb as f64 / 1024.0))
            };
            writeln!(
                md,
                "| {} | {} | {} | {} | {ratio} | {} | {} | {} | {} |",
                case.label,
                cell(case.name, "lele", t),
                cell(case.name, "ort", t),
                cell(case.name, "tract", 1),
                first(lele),
                first(ort),
                rss(lele),
                rss(ort)
            )?;
        }
        if let Some(r) = geo.get(&t).filter(|r| !r.is_empty()) {
            let g = (r.iter().map(|v| v.ln()).sum::<f64>() / r.len() as f64).exp();
            writeln!(
                md,
                "\nGeometric mean of {ort} / lele over {} models: {g:.2}",
                r.len()
            )?;
        }
    }
    let errors: Vec<String> = results
        .iter()
        .filter_map(|((case, c), a)| {
            a.error
                .as_ref()
                .map(|e| format!("- {case} / {} ({} threads): {e}", c.engine, c.threads))
        })
        .collect();
    if !errors.is_empty() {
        writeln!(md, "\nFailures:\n{}", errors.join("\n"))?;
    }
    print!("{jsonl}");
    println!("{md}");
    let dir = repo_root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("results.jsonl"), &jsonl)?;
    std::fs::write(dir.join("results.md"), &md)?;
    eprintln!("wrote {}", dir.join("results.md").display());
    Ok(())
}

/// The host CPU as `/proc/cpuinfo` names it (model name, family and model)
/// and the widest x86 SIMD it offers, for the report's header: the ISA an
/// engine picks by CPUID follows from it.
fn host_cpu() -> String {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return format!("{} (no /proc/cpuinfo)", std::env::consts::ARCH);
    };
    let field = |key: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let flags = field("flags").unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    let simd = if has("avx512f") {
        "AVX-512"
    } else if has("avx2") && has("fma") {
        "AVX2 + FMA, no AVX-512"
    } else if std::env::consts::ARCH == "x86_64" {
        "no AVX2"
    } else {
        std::env::consts::ARCH
    };
    format!(
        "{} (family {} model {}), {simd}",
        field("model name").unwrap_or_else(|| "unknown".into()),
        field("cpu family").unwrap_or_else(|| "?".into()),
        field("model").unwrap_or_else(|| "?".into()),
    )
}
