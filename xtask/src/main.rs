//! Repository tasks: `cargo xtask <command>`.
mod bench;
mod bench_kernels;
mod conformance;
mod cross;
mod cycles;
mod demo;
mod fixtures;
mod fuzz;
mod fuzz_coverage;
mod llm;
mod models;
mod protos;
mod python;
mod test;
mod util;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "lele repository tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The main job: fetch the models, build the example apps (VAD, OCR,
    /// detection, embeddings), run them on our inputs, compare per-call
    /// times with ONNX Runtime.
    Demo(demo::Opts),
    /// Regenerate the committed prost types of onnx.proto (pure Rust, no protoc).
    Protos,
    /// Fetch the real models into the zoo ($LELE_ZOO, else ~/.cache/lele/zoo).
    Models {
        /// Also fetch the large models (Kokoro TTS).
        #[arg(long)]
        all: bool,
    },
    /// Generate onnxruntime reference data into $LELE_FIXTURES (default target/fixtures).
    Fixtures(fixtures::Opts),
    /// The ONNX backend test suite through generated code, against the ledger.
    Conformance(conformance::Opts),
    /// Regenerate the operator table (docs/operators.md) from the conformance ledger.
    OpsTable,
    /// lele vs ONNX Runtime vs tract on the benchmark models (markdown + JSON lines).
    Bench(bench::Opts),
    /// The fuzz targets of lele-build (ONNX loader, .npy reader, model.toml
    /// parser, compiler), each for `--secs` seconds, in release.
    Fuzz(fuzz::Opts),
    /// The kernel and model parity tests on aarch64 (under qemu, on NEON
    /// and on the portable code) and the kernel tests on wasm32-wasip1
    /// (under node).
    Cross(cross::Opts),
    /// Fail on module cycles inside lele-build or lele-kernels.
    Cycles,
    /// llama.cpp's greedy generations and first logits of the zoo's GGUF
    /// model (builds llama-cpp-python into the venv the first time).
    LlmReference(llm::Opts),
    /// lele's chat example against llama.cpp: prefill (128 tokens) and decode tokens per second, 1 and 2 threads.
    LlmBench(llm::BenchOpts),
    /// Everything CI checks: models, fixtures, fmt, clippy, tests.
    Test {
        /// Extra arguments for `cargo test --workspace` (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Demo(opts) => demo::run(&opts),
        Cmd::Protos => protos::run(),
        Cmd::Models { all } => models::run(all),
        Cmd::Fixtures(opts) => fixtures::run(&opts),
        Cmd::Conformance(opts) => conformance::run(&opts),
        Cmd::OpsTable => conformance::ops_table(),
        Cmd::Bench(opts) => bench::run(&opts),
        Cmd::Fuzz(opts) => fuzz::run(&opts),
        Cmd::Cross(opts) => cross::run_all(&opts),
        Cmd::Cycles => cycles::run(),
        Cmd::LlmReference(opts) => llm::run(&opts),
        Cmd::LlmBench(opts) => llm::bench(&opts),
        Cmd::Test { args } => test::run(&args),
    }
}
