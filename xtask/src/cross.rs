//! `cargo xtask cross`: lele's tests on the targets this x86_64 machine
//! emulates — aarch64 (NEON) under `qemu-aarch64`, wasm32-wasip1 (simd128,
//! and simd128 with relaxed SIMD) under node's WASI. CI runs each target's kernel tests and the parity
//! tests of the smallest models ([`CI_MODELS`]; on aarch64 both on NEON and
//! on the portable code); `cargo xtask cross --full` runs every model
//! ([`ALL_MODELS`]). Both check correctness: emulated timings mean nothing,
//! and wasm timings come from `cargo xtask bench --target wasm32-wasip1`.
use std::path::Path;

use anyhow::Context;
use std::process::Command;

use crate::python;
use crate::util::run_inherited;

/// Options of `cargo xtask cross`.
#[derive(clap::Args, Default)]
pub struct Opts {
    /// Every model's parity tests, not only the smallest ones CI runs, and
    /// the legs CI skips ([`FULL_ONLY_LEGS`]).
    #[arg(long)]
    pub full: bool,
    /// Only this target (`aarch64` or `wasm`).
    #[arg(long)]
    pub target: Option<String>,
}

/// An emulated target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// aarch64-unknown-linux-gnu under qemu-aarch64.
    Aarch64,
    /// wasm32-wasip1 with simd128 under node.
    Wasm,
    /// wasm32-wasip1 with simd128 and relaxed SIMD under node (the V8 flag
    /// set by the runner where node needs it).
    WasmRelaxed,
}

/// What one leg runs.
#[derive(Clone, Copy, Debug)]
pub enum What {
    /// `lele-kernels`' own tests (every kernel against its reference).
    Kernels,
    /// The root package's model parity tests.
    Models,
    /// The same with `LELE_ISA=scalar` (the portable code, not NEON).
    ModelsPortable,
    /// `lele run --target …` on Silero VAD's first fixture step, its
    /// outputs checked against ONNX Runtime's.
    CliRun,
}

/// One CI leg: a target and what runs on it.
#[derive(Clone, Copy, Debug)]
pub struct Leg {
    /// The target.
    pub target: Target,
    /// What runs there.
    pub what: What,
}

/// The legs `cargo xtask test` and `cargo xtask cross` run.
pub const LEGS: &[Leg] = &[
    Leg {
        target: Target::Aarch64,
        what: What::Kernels,
    },
    Leg {
        target: Target::Aarch64,
        what: What::Models,
    },
    Leg {
        target: Target::Aarch64,
        what: What::ModelsPortable,
    },
    Leg {
        target: Target::Wasm,
        what: What::Kernels,
    },
    Leg {
        target: Target::Wasm,
        what: What::Models,
    },
    Leg {
        target: Target::Wasm,
        what: What::CliRun,
    },
    Leg {
        target: Target::WasmRelaxed,
        what: What::Kernels,
    },
];

/// Legs only `cargo xtask cross --full` runs (CI's time goes to the legs
/// above; the relaxed-SIMD kernels are tested there).
pub const FULL_ONLY_LEGS: &[Leg] = &[Leg {
    target: Target::WasmRelaxed,
    what: What::CliRun,
}];

/// The root package's tests that run real models against ONNX Runtime.
pub const ALL_MODELS: &[&str] = &["silero_vad", "ppocr", "yolov8", "minilm"];

/// The emulated legs of CI run only these (the smallest models): compiling
/// every model for two more targets is most of an emulated leg's time, and
/// the kernel tests already cover every kernel there.
pub const CI_MODELS: &[&str] = &["silero_vad", "minilm"];

impl Target {
    fn triple(self) -> &'static str {
        match self {
            Target::Aarch64 => "aarch64-unknown-linux-gnu",
            Target::Wasm | Target::WasmRelaxed => "wasm32-wasip1",
        }
    }

    /// Its name for `lele run --target`.
    fn lele_target(self) -> &'static str {
        match self {
            Target::WasmRelaxed => "wasm32-wasip1+relaxed-simd",
            _ => self.triple(),
        }
    }

    /// Its own target directory, so that its builds never invalidate the
    /// host's.
    pub fn target_dir(self) -> &'static str {
        match self {
            Target::Aarch64 => "target/cross",
            Target::Wasm => "target/wasm",
            Target::WasmRelaxed => "target/wasm-relaxed",
        }
    }

    /// Sets the linker, the runner and the flags cargo needs for it.
    fn configure(self, cmd: &mut Command) {
        match self {
            Target::Aarch64 => {
                cmd.env(
                    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
                    "aarch64-linux-gnu-gcc",
                )
                .env(
                    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
                    "qemu-aarch64 -L /usr/aarch64-linux-gnu",
                );
            }
            Target::Wasm | Target::WasmRelaxed => {
                let runner = python::repo_root().join("lele-build/src/cli/wasi_runner.mjs");
                let features = if self == Target::WasmRelaxed {
                    "+simd128,+relaxed-simd"
                } else {
                    "+simd128"
                };
                // The main-thread collector, as `lele run` uses: node 20.20
                // has crashed in its garbage collector after a large test
                // module ran.
                cmd.env(
                    "CARGO_TARGET_WASM32_WASIP1_RUNNER",
                    format!(
                        "node --no-warnings --single-threaded-gc {}",
                        runner.display()
                    ),
                )
                .env(
                    "CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS",
                    format!("-C target-feature={features}"),
                );
            }
        }
    }
}

impl Leg {
    /// A line naming the leg.
    pub fn describe(&self) -> String {
        let what = match self.what {
            What::Kernels => "kernel tests",
            What::Models => "model parity tests",
            What::ModelsPortable => "model parity tests, LELE_ISA=scalar,",
            What::CliRun => "`lele run --target` (Silero VAD)",
        };
        format!("{what} on {}", self.target.lele_target())
    }
}

/// Runs one leg on the parity tests of `models`.
pub fn run(leg: &Leg, models: &[&str], zoo: &Path, fixtures: &Path) -> anyhow::Result<()> {
    if let What::CliRun = leg.what {
        return cli_run(leg.target, zoo, fixtures);
    }
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.arg("test")
        .args(["--target", leg.target.triple()])
        .args(["--target-dir", leg.target.target_dir()])
        .current_dir(python::repo_root())
        .env("LELE_ZOO", zoo)
        .env("LELE_FIXTURES", fixtures);
    leg.target.configure(&mut cmd);
    match leg.what {
        What::Kernels => {
            cmd.args(["-p", "lele-kernels"]);
        }
        What::CliRun => unreachable!("handled above"),
        What::Models | What::ModelsPortable => {
            cmd.args(["-p", "lele"]);
            for t in models {
                cmd.args(["--test", t]);
            }
            if matches!(leg.what, What::ModelsPortable) {
                cmd.env("LELE_ISA", "scalar");
            }
        }
    }
    run_inherited(&mut cmd)
}

/// `lele run --target T` (the workspace's debug `lele`, built first) on
/// the first step of the `silero_vad_16k` fixture; each output must match
/// ONNX Runtime's as the parity tests require (|lele - ort| <= 1e-4 +
/// 1e-3 |ort|).
fn cli_run(target: Target, zoo: &Path, fixtures: &Path) -> anyhow::Result<()> {
    let root = python::repo_root();
    run_inherited(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "-p", "lele-build", "--bin", "lele"])
            .current_dir(&root),
    )?;
    let step0 = fixtures.join("silero_vad_16k/step0");
    let out = root.join("target/cli-targets").join(target.lele_target());
    let _ = std::fs::remove_dir_all(&out);
    let mut cmd = Command::new(root.join("target/debug/lele"));
    cmd.arg("run")
        .arg(zoo.join("silero_vad.onnx"))
        .arg("--out")
        .arg(&out)
        .args(["--target", target.lele_target()]);
    for (i, name) in ["input", "state", "sr"].iter().enumerate() {
        cmd.arg("--input").arg(format!(
            "{name}={}",
            step0.join(format!("in_{i}.npy")).display()
        ));
    }
    run_inherited(&mut cmd)?;
    for (i, name) in ["output", "stateN"].iter().enumerate() {
        let got = lele_build::npy::read(&out.join(format!("{name}.npy")))?;
        let want = lele_build::npy::read(&step0.join(format!("out_{i}.npy")))?;
        anyhow::ensure!(
            got.dims == want.dims,
            "{name}: dims {:?} vs {:?}",
            got.dims,
            want.dims
        );
        let numbers = |t: &lele_build::ir::Tensor| {
            t.to_f64s()
                .with_context(|| format!("{name}: not a numeric tensor"))
        };
        let (g, w) = (numbers(&got)?, numbers(&want)?);
        for (k, (a, b)) in g.iter().zip(&w).enumerate() {
            anyhow::ensure!(
                (a - b).abs() <= 1e-4 + 1e-3 * b.abs(),
                "{name}[{k}]: lele on {} gives {a}, ONNX Runtime {b}",
                target.lele_target()
            );
        }
    }
    Ok(())
}

/// `cargo xtask cross [--target T]`.
pub fn run_all(opts: &Opts) -> anyhow::Result<()> {
    crate::models::run(false)?;
    crate::fixtures::run(&crate::fixtures::Opts::default())?;
    let zoo = std::path::absolute(crate::models::zoo_dir())?;
    let fixtures = std::path::absolute(crate::fixtures::fixtures_dir())?;
    let wanted = |t: Target| match opts.target.as_deref() {
        None => true,
        Some("aarch64") => t == Target::Aarch64,
        Some("wasm") => matches!(t, Target::Wasm | Target::WasmRelaxed),
        Some(_) => false,
    };
    if let Some(t) = opts.target.as_deref()
        && !matches!(t, "aarch64" | "wasm")
    {
        anyhow::bail!("--target takes `aarch64` or `wasm`, not `{t}`");
    }
    let extra = if opts.full { FULL_ONLY_LEGS } else { &[] };
    let legs = LEGS.iter().chain(extra).filter(|l| wanted(l.target));
    for leg in legs {
        let models = if opts.full { ALL_MODELS } else { CI_MODELS };
        crate::util::step(&leg.describe(), || run(leg, models, &zoo, &fixtures))?;
    }
    Ok(())
}
