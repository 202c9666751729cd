//! `cargo xtask fuzz`: the fuzz targets of `lele-build/tests/fuzz`, for as
//! long as asked, one after the other. See `docs/fuzzing.md`.
use std::process::Command;

use crate::python::repo_root;
use crate::util::run_inherited;

/// The targets, in the order they run.
pub const TARGETS: &[&str] = &[
    "onnx_loader",
    "npy_reader",
    "toml_parser",
    "compiler",
    "gguf_reader",
];

/// Options of `cargo xtask fuzz`.
#[derive(clap::Args)]
pub struct Opts {
    /// Seconds each target runs (`LELE_FUZZ_SECS`; default 60 unless
    /// `--cpu-secs` is given).
    #[arg(long)]
    pub secs: Option<f64>,
    /// CPU seconds each target may use (`LELE_FUZZ_CPU_SECS`): the measure
    /// of a long run on a machine shared with other work, e.g. under `nice`.
    #[arg(long)]
    pub cpu_secs: Option<f64>,
    /// Only this target (default: all four).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(TARGETS))]
    pub target: Option<String>,
    /// The run's seed (`LELE_FUZZ_SEED`; default the tests' fixed seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Replay one case of the seed (`LELE_FUZZ_CASE`), as a finding's
    /// report says.
    #[arg(long)]
    pub case: Option<u64>,
    /// Address-space limit of the fuzzing process in bytes, through
    /// `prlimit --as` when it is installed (a runaway allocation then
    /// aborts visibly instead of swapping); 0 for none.
    #[arg(long, default_value_t = 8_000_000_000)]
    pub max_memory: u64,
    /// Build with `-C instrument-coverage` (in `target/fuzz-cov`) and, after
    /// each target, print the line and region coverage of the code it
    /// aims at (llvm-cov, from rustup's `llvm-tools` component).
    #[arg(long)]
    pub coverage: bool,
}

/// The build's environment: release speed with overflow checks and debug
/// assertions on (the macro and build scripts run with them, so an
/// overflow there is a panic), in a target directory of its own so that
/// the workspace's release build is not rebuilt back and forth. Findings
/// still go to `target/fuzz-findings`.
fn build_env(cmd: &mut Command, coverage: bool) -> &mut Command {
    let root = repo_root();
    if coverage {
        cmd.env("CARGO_ENCODED_RUSTFLAGS", "-Cinstrument-coverage");
        // Build scripts are instrumented too: their profiles go here, not
        // into the working directory (a target's run sets its own).
        cmd.env(
            "LLVM_PROFILE_FILE",
            root.join("target/fuzz-cov/build-profiles/%p-%m.profraw"),
        );
    }
    let dir = if coverage { "fuzz-cov" } else { "fuzz-build" };
    cmd.current_dir(&root)
        .env("CARGO_TARGET_DIR", root.join("target").join(dir))
        .env("CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS", "true")
        .env("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "true")
        .env(
            "LELE_FUZZ_FINDINGS",
            root.join("target").join("fuzz-findings"),
        )
}

const TEST: [&str; 6] = ["test", "--release", "-p", "lele-build", "--test", "fuzz"];

/// Runs `cargo test --release -p lele-build --test fuzz` on each target.
pub fn run(opts: &Opts) -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let targets: Vec<&str> = match &opts.target {
        Some(t) => vec![t.as_str()],
        None => TARGETS.to_vec(),
    };
    // Build first, without the memory limit (rustc is not what is tested).
    let binary = if opts.coverage {
        let tools = crate::fuzz_coverage::Tools::find()?;
        let bin = crate::fuzz_coverage::test_binary(build_env(
            Command::new(&cargo).args(TEST).arg("--no-run"),
            true,
        ))?;
        Some((tools, bin))
    } else {
        run_inherited(
            build_env(&mut Command::new(&cargo), false)
                .args(TEST)
                .arg("--no-run"),
        )?;
        None
    };
    let prlimit = opts.max_memory > 0
        && Command::new("prlimit")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    for target in targets {
        let mut cmd = if prlimit {
            let mut c = Command::new("prlimit");
            c.arg(format!("--as={}", opts.max_memory)).arg(&cargo);
            c
        } else {
            Command::new(&cargo)
        };
        build_env(&mut cmd, opts.coverage).args(TEST).args([
            "--",
            "--nocapture",
            "--test-threads",
            "1",
            "--exact",
            target,
        ]);
        match (opts.secs, opts.cpu_secs) {
            (None, None) => {
                cmd.env("LELE_FUZZ_SECS", "60");
            }
            (secs, cpu) => {
                if let Some(s) = secs {
                    cmd.env("LELE_FUZZ_SECS", s.to_string());
                }
                if let Some(c) = cpu {
                    cmd.env("LELE_FUZZ_CPU_SECS", c.to_string());
                }
            }
        }
        if let Some(seed) = opts.seed {
            cmd.env("LELE_FUZZ_SEED", seed.to_string());
        }
        if let Some(case) = opts.case {
            cmd.env("LELE_FUZZ_CASE", case.to_string());
        }
        let Some((tools, bin)) = &binary else {
            run_inherited(&mut cmd)?;
            continue;
        };
        let profiles = crate::fuzz_coverage::fresh_profile_dir(target)?;
        cmd.env("LLVM_PROFILE_FILE", profiles.join("%p-%m.profraw"));
        // A finding fails the run; the coverage it reached is still shown.
        let ran = run_inherited(&mut cmd);
        let report = tools.report(target, bin, &profiles)?;
        print!("{report}");
        crate::fuzz_coverage::append_log(target, &report)?;
        ran?;
    }
    Ok(())
}
