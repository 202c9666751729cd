//! `cargo xtask demo`: the main job on a fresh machine. Fetches the models,
//! builds the four example apps (release), runs them on our inputs
//! (`examples/data/` and the zoo's `astronaut.png`), then times ONNX Runtime
//! on the very model calls the examples made and prints both side by side.
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use serde_json::Value;

use crate::models::zoo_dir;
use crate::python::{python, repo_root};
use crate::util::{run_captured, run_inherited, step};

/// Options of `cargo xtask demo`.
#[derive(clap::Args, Debug, Default)]
pub struct Opts {
    /// Skip the ONNX Runtime timings (no Python needed).
    #[arg(long)]
    pub no_ort: bool,
}

const EXAMPLES: [&str; 6] = ["vad", "ocr", "detect", "embed", "denoise", "chat"];

fn cargo() -> PathBuf {
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// One (example, model, what) group of model calls.
#[derive(Default)]
struct Group {
    lele_ms: Vec<f64>,
    ort_ms: Option<f64>,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn str_field<'a>(v: &'a Value, key: &str) -> anyhow::Result<&'a str> {
    v[key]
        .as_str()
        .with_context(|| format!("no string `{key}` in {v}"))
}

type Key = (String, String, String);

fn read_calls(path: &Path) -> anyhow::Result<BTreeMap<Key, Group>> {
    let mut groups: BTreeMap<Key, Group> = BTreeMap::new();
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).with_context(|| format!("parsing {line}"))?;
        let key = (
            str_field(&v, "example")?.to_owned(),
            str_field(&v, "model")?.to_owned(),
            str_field(&v, "what")?.to_owned(),
        );
        let ms = v["ms"]
            .as_f64()
            .with_context(|| format!("no `ms` in {line}"))?;
        groups.entry(key).or_default().lele_ms.push(ms);
    }
    Ok(groups)
}

/// `cargo xtask demo`.
/// Our speech plus seeded white noise at 5 dB SNR (a 16-bit WAV), the
/// denoiser's input.
fn write_noisy_speech(clean: &Path, out: &Path) -> anyhow::Result<()> {
    let mut reader = hound::WavReader::open(clean).with_context(|| clean.display().to_string())?;
    let rate = reader.spec().sample_rate;
    let speech: Vec<f32> = reader
        .samples::<i16>()
        .map(|s| s.map(|v| f32::from(v) / 32768.0))
        .collect::<Result<_, _>>()?;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    // Box-Muller normal samples.
    let noise: Vec<f64> = (0..speech.len())
        .map(|_| {
            let (u, v) = (uniform(), uniform());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        })
        .collect();
    let power = |x: &mut dyn Iterator<Item = f64>| x.map(|v| v * v).sum::<f64>();
    let gain = (power(&mut speech.iter().map(|&v| f64::from(v)))
        / power(&mut noise.iter().copied())
        / 10f64.powf(0.5))
    .sqrt();
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(out, spec)?;
    for (&s, &n) in speech.iter().zip(&noise) {
        let v = (f64::from(s) + gain * n).clamp(-1.0, 1.0);
        writer.write_sample((v * 32767.0).round() as i16)?;
    }
    writer.finalize()?;
    Ok(())
}

pub fn run(opts: &Opts) -> anyhow::Result<()> {
    step("xtask demo: models", || crate::models::run(false))?;
    let root = repo_root();
    let zoo = std::path::absolute(zoo_dir())?;
    let out = root.join("target").join("demo");
    fs::create_dir_all(&out)?;
    let calls = out.join("calls.jsonl");
    if calls.exists() {
        fs::remove_file(&calls)?;
    }
    step("xtask demo: build the examples (release)", || {
        let mut cmd = Command::new(cargo());
        cmd.args(["build", "--release"])
            .current_dir(&root)
            .env("LELE_ZOO", &zoo);
        for ex in EXAMPLES {
            cmd.args(["-p", &format!("lele-example-{ex}")]);
        }
        run_inherited(&mut cmd)
    })?;
    let bin = |name: &str| root.join("target").join("release").join(name);
    let data = root.join("examples").join("data");
    let boxes = out.join("astronaut_boxes.png");
    let noisy = out.join("noisy_speech.wav");
    let enhanced = out.join("enhanced_speech.wav");
    write_noisy_speech(&data.join("speech_16k.wav"), &noisy)?;
    let runs: Vec<(&str, Vec<PathBuf>)> = vec![
        ("vad", vec!["--stream".into(), data.join("speech_16k.wav")]),
        ("vad", vec![data.join("speech_8k.wav")]),
        ("ocr", vec![data.join("text.png")]),
        ("ocr", vec!["--v6".into(), data.join("text.png")]),
        (
            "detect",
            vec!["--out".into(), boxes.clone(), zoo.join("astronaut.png")],
        ),
        (
            "embed",
            vec![
                "--tokenizer".into(),
                zoo.join("minilm_tokenizer.json"),
                "--sentences".into(),
                data.join("sentences.txt"),
            ],
        ),
        (
            "denoise",
            vec![
                noisy.clone(),
                "-o".into(),
                enhanced.clone(),
                "--timings".into(),
            ],
        ),
    ];
    for (name, args) in &runs {
        let mut cmd = Command::new(bin(name));
        // The denoiser's `--timings` prints its latency summary; its model
        // calls go to `--calls`.
        let calls_flag = if *name == "denoise" {
            "--calls"
        } else {
            "--timings"
        };
        cmd.args(args).arg(calls_flag).arg(&calls);
        println!(
            "\n$ {}",
            crate::util::describe(&cmd).replace(&root.display().to_string(), ".")
        );
        run_inherited(&mut cmd)?;
    }
    // The language model, greedy, with its speeds (llama.cpp's side is
    // `cargo xtask llm-bench`). The zoo's Gemma is the pretrained one, not
    // the instruction-tuned: it continues text (`--raw`) rather than chats.
    let mut chat = Command::new(bin("chat"));
    chat.args(["--raw", "--prompt", "The capital of France is"])
        .args(["--max-tokens", "32", "--temperature", "0", "--timings"]);
    println!(
        "\n$ {}",
        crate::util::describe(&chat).replace(&root.display().to_string(), ".")
    );
    run_inherited(&mut chat)?;
    let mut groups = read_calls(&calls)?;
    if !opts.no_ort {
        let py = python()?;
        let lines = step("xtask demo: ONNX Runtime on the same calls", || {
            run_captured(
                Command::new(py)
                    .arg(root.join("xtask").join("python").join("time_ort_calls.py"))
                    .arg("--zoo")
                    .arg(&zoo)
                    .arg("--calls")
                    .arg(&calls),
            )
        })?;
        for line in lines.lines().filter(|l| l.starts_with('{')) {
            let v: Value = serde_json::from_str(line)?;
            let key = (
                str_field(&v, "example")?.to_owned(),
                str_field(&v, "model")?.to_owned(),
                str_field(&v, "what")?.to_owned(),
            );
            if let Some(g) = groups.get_mut(&key) {
                g.ort_ms = v["ort_ms"].as_f64();
            }
        }
    }
    let mut table = String::from(
        "| example | model | call | calls | lele ms/call | ONNX Runtime ms/call | ORT ÷ lele |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for ((example, model, what), g) in &groups {
        let lele = median(&g.lele_ms);
        let (ort, ratio) = match g.ort_ms {
            Some(o) => (format!("{o:.2}"), format!("{:.2}", o / lele)),
            None => ("–".into(), "–".into()),
        };
        table.push_str(&format!(
            "| {example} | {model} | {what} | {} | {lele:.2} | {ort} | {ratio} |\n",
            g.lele_ms.len()
        ));
    }
    let summary = out.join("summary.md");
    fs::write(&summary, &table)?;
    println!(
        "\nTime per model call, one thread, median (lele: the examples above; ONNX Runtime: the same models and input shapes):\n\n{table}\nwrote {} and {}",
        summary.display(),
        boxes.display()
    );
    Ok(())
}
