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

/// The prompt of `cargo xtask llm-bench`: 128 tokens with BOS.
const BENCH_PROMPT: &str = "The old lighthouse keeper climbed the spiral stairs every evening at dusk, \
carrying a small brass lamp and a notebook in which he wrote down the weather, the ships he saw, and the \
birds that rested on the railing. Over forty years the notebook grew into a shelf of volumes, and the \
villagers came to rely on them: fishermen checked the tides he had recorded, teachers brought children to \
read his sketches of gulls and terns, and a visiting scientist once spent a whole summer copying his notes \
on storms. When the keeper finally retired at last, he quietly gave all the books to the school and asked \
only one small thing in return:";

/// Tokens decoded after the prompt.
const BENCH_DECODE: usize = 64;

/// Options of `cargo xtask llm-bench`.
#[derive(clap::Args)]
pub struct BenchOpts {
    /// Thread counts to time (each side uses the same).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
}

/// One side's speeds.
#[derive(serde::Deserialize)]
struct Speed {
    prompt_tokens: usize,
    prefill_tokens_per_s: f64,
    decode_tokens_per_s: f64,
}

/// The last line of `cmd`'s standard output, as JSON.
fn last_json_line(cmd: &mut Command) -> anyhow::Result<Speed> {
    let out = cmd.output()?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("reading {line:?}"))
}

/// `cargo xtask llm-bench`: lele's chat example and llama.cpp on the same
/// prompt, one after the other for each thread count, best of three runs
/// each; prints tokens per second and lele's ratio.
pub fn bench(opts: &BenchOpts) -> anyhow::Result<()> {
    let py = python()?;
    ensure_llama_cpp(&py)?;
    let zoo = std::path::absolute(zoo_dir())?;
    run_inherited(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--release", "-p", "lele-example-chat"])
            .current_dir(repo_root())
            .env("LELE_ZOO", &zoo),
    )?;
    let chat = repo_root().join("target/release/chat");
    println!(
        "{:<8} {:>7} | {:>15} {:>15} | {:>15} {:>15}",
        "threads", "prompt", "lele prefill/s", "llama.cpp", "lele decode/s", "llama.cpp"
    );
    for &threads in &opts.threads {
        let mut lele: Option<Speed> = None;
        for _ in 0..3 {
            let run = last_json_line(
                Command::new(&chat)
                    .args([
                        "--raw",
                        "--temperature",
                        "0",
                        "--timings",
                        "--prompt",
                        BENCH_PROMPT,
                    ])
                    .args(["--max-tokens", &(BENCH_DECODE + 1).to_string()])
                    .args(["--threads", &threads.to_string()]),
            )?;
            lele = Some(match lele {
                None => run,
                Some(best) => Speed {
                    prompt_tokens: best.prompt_tokens,
                    prefill_tokens_per_s: best.prefill_tokens_per_s.max(run.prefill_tokens_per_s),
                    decode_tokens_per_s: best.decode_tokens_per_s.max(run.decode_tokens_per_s),
                },
            });
        }
        let lele = lele.context("no lele run")?;
        let reference = last_json_line(
            Command::new(&py)
                .arg(repo_root().join("xtask/python/llm_bench.py"))
                .arg("--zoo")
                .arg(&zoo)
                .args(["--prompt", BENCH_PROMPT])
                .args(["--decode", &BENCH_DECODE.to_string()])
                .args(["--threads", &threads.to_string()]),
        )?;
        if lele.prompt_tokens != reference.prompt_tokens {
            bail!(
                "the prompt is {} tokens for lele, {} for llama.cpp",
                lele.prompt_tokens,
                reference.prompt_tokens
            );
        }
        println!(
            "{threads:<8} {:>7} | {:>15.1} {:>15.1} | {:>15.1} {:>15.1}   (lele/llama.cpp: prefill {:.2}x, decode {:.2}x)",
            lele.prompt_tokens,
            lele.prefill_tokens_per_s,
            reference.prefill_tokens_per_s,
            lele.decode_tokens_per_s,
            reference.decode_tokens_per_s,
            lele.prefill_tokens_per_s / reference.prefill_tokens_per_s,
            lele.decode_tokens_per_s / reference.decode_tokens_per_s,
        );
    }
    Ok(())
}
