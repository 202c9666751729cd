//! `cargo xtask test`: the full check of the repository, as CI runs it.
//!
//! Fetches the models, generates the fixtures, then runs rustfmt, clippy and
//! the tests, then the ONNX conformance regression check, with `LELE_ZOO` and `LELE_FIXTURES` pointing at them.
use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::util::run_inherited;
use crate::{cross, fixtures, models, python};

fn cargo() -> PathBuf {
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// Model parity tests run on the host's narrower ISAs but not in the
/// emulated legs (whose kernel tests cover the same kernels), to keep CI
/// short.
const HOST_ONLY_MODELS: &[&str] = &["audio_features", "gtcrn", "minilm_ort_opt"];

fn step(name: &str, f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    crate::util::step(&format!("xtask test: {name}"), || {
        f().with_context(|| format!("xtask test: step `{name}` failed"))
    })
}

/// With `LELE_PRUNE_TARGETS=1` (which `.ci/run` sets), removes `dir` (in
/// the repository) once no later step builds in it: a CI machine's disk
/// holds the whole run only so. Kept otherwise, for the next run's
/// incremental builds.
fn prune_dir(dir: &str) {
    if std::env::var_os("LELE_PRUNE_TARGETS").is_none_or(|v| v != "1") {
        return;
    }
    let path = python::repo_root().join(dir);
    if path.exists() {
        match std::fs::remove_dir_all(&path) {
            Ok(()) => eprintln!("xtask test: removed {dir} (LELE_PRUNE_TARGETS=1)"),
            Err(e) => eprintln!("xtask test: could not remove {dir}: {e}"),
        }
    }
}

/// `cargo xtask test [-- ARGS]`; `ARGS` are appended to `cargo test --workspace`.
pub fn run(extra: &[String]) -> anyhow::Result<()> {
    step("cargo xtask models", || models::run(false))?;
    step("cargo xtask fixtures", || {
        fixtures::run(&fixtures::Opts::default())
    })?;

    let zoo = std::path::absolute(models::zoo_dir())?;
    let fixtures = std::path::absolute(fixtures::fixtures_dir())?;
    let cargo_step = |name: &str, args: &[&str], extra: &[String]| {
        step(name, || {
            run_inherited(
                Command::new(cargo())
                    .args(args)
                    .args(extra)
                    .current_dir(python::repo_root())
                    .env("LELE_ZOO", &zoo)
                    .env("LELE_FIXTURES", &fixtures),
            )
        })
    };
    cargo_step("cargo fmt", &["fmt", "--all", "--", "--check"], &[])?;
    step("module cycles", crate::cycles::run)?;
    cargo_step(
        "cargo clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    // The kernel layer, its tests and examples included, must build for
    // the other targets lele serves (`.ci/run` installs them with rustup).
    for target in ["aarch64-unknown-linux-gnu", "wasm32-unknown-unknown"] {
        cargo_step(
            &format!("cargo check -p lele-kernels --all-targets --target {target}"),
            &[
                "check",
                "-p",
                "lele-kernels",
                "--all-targets",
                "--target",
                target,
            ],
            &[],
        )?;
    }
    // The light build (no network sources, no command line in the macro)
    // must keep compiling.
    cargo_step(
        "cargo check -p lele --no-default-features",
        &["check", "-p", "lele", "--no-default-features"],
        &[],
    )?;
    // The crates users depend on document without a warning (broken or
    // private links).
    step("cargo doc of the published crates", || {
        run_inherited(
            Command::new(cargo())
                .args(["doc", "--no-deps"])
                .args([
                    "-p",
                    "lele",
                    "-p",
                    "lele-macros",
                    "-p",
                    "lele-build",
                    "-p",
                    "lele-kernels",
                ])
                .current_dir(python::repo_root())
                .env("RUSTDOCFLAGS", "-D warnings"),
        )
    })?;
    cargo_step("cargo test", &["test", "--workspace"], extra)?;
    // The model parity tests again on the narrower paths the CPU can run,
    // so no path rots while CI has AVX-512 (LELE_ISA caps the ISA at run
    // time; the test binaries are the ones just built).
    for isa in ["avx2", "scalar"] {
        step(&format!("model parity tests, LELE_ISA={isa}"), || {
            run_inherited(
                Command::new(cargo())
                    .args(["test", "-p", "lele"])
                    .args(
                        cross::ALL_MODELS
                            .iter()
                            .chain(HOST_ONLY_MODELS)
                            .flat_map(|t| ["--test", t]),
                    )
                    .current_dir(python::repo_root())
                    .env("LELE_ZOO", &zoo)
                    .env("LELE_FIXTURES", &fixtures)
                    .env("LELE_ISA", isa),
            )
        })?;
    }
    // trybuild's builds of the UI tests are done with.
    prune_dir("target/tests");
    for (i, leg) in cross::LEGS.iter().enumerate() {
        step(&format!("{} (CI leg)", leg.describe()), || {
            cross::run(leg, cross::CI_MODELS, &zoo, &fixtures)
        })?;
        let dir = leg.target.target_dir();
        if cross::LEGS[i + 1..]
            .iter()
            .all(|l| l.target.target_dir() != dir)
        {
            prune_dir(dir);
        }
    }
    step("cargo xtask conformance --check", || {
        crate::conformance::run(&crate::conformance::Opts {
            check: true,
            update: false,
            json: false,
            filter: None,
            work: None,
        })
    })?;
    eprintln!("\nxtask test: all steps passed");
    Ok(())
}
