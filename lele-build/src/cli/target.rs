//! `--target` of `lele run` and `lele bench`: the machine a model's runner is
//! built for, and how this host runs it (directly, under qemu, or under
//! node's WASI).
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{BuildError, Result};

/// A target a runner can be built for and run from this host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Target {
    /// The host itself (cargo's default target).
    #[default]
    Host,
    /// 64-bit ARM Linux: NEON code, run under `qemu-aarch64` on other hosts
    /// (for correctness; emulated timings mean nothing).
    Aarch64Linux,
    /// WebAssembly with WASI preview 1 and simd128, run under node.
    Wasm32Wasip1,
    /// [`Target::Wasm32Wasip1`] also built with relaxed SIMD (fused
    /// multiply-adds where the CPU has them), which Chromium-based
    /// browsers run by default; node before 22 needs a V8 flag, which the
    /// runner sets.
    Wasm32Wasip1RelaxedSimd,
}

const AARCH64: &str = "aarch64-unknown-linux-gnu";
const WASM: &str = "wasm32-wasip1";
const WASM_RELAXED: &str = "wasm32-wasip1+relaxed-simd";

/// The node runner of wasm32-wasip1 programs.
const WASI_RUNNER: &str = include_str!("wasi_runner.mjs");

impl std::str::FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "host" => Ok(Target::Host),
            AARCH64 => Ok(Target::Aarch64Linux),
            WASM => Ok(Target::Wasm32Wasip1),
            WASM_RELAXED => Ok(Target::Wasm32Wasip1RelaxedSimd),
            _ if s == host_triple() => Ok(Target::Host),
            _ => Err(format!(
                "unsupported target (supported: host, {AARCH64}, {WASM}, {WASM_RELAXED})"
            )),
        }
    }
}

/// The triple this `lele` was built for.
fn host_triple() -> &'static str {
    if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        "x86_64-unknown-linux-gnu"
    } else if cfg!(all(target_arch = "aarch64", target_os = "linux")) {
        AARCH64
    } else {
        "host"
    }
}

fn missing(tool: &str, why: &str, install: &str) -> BuildError {
    BuildError::Config(format!(
        "{why} needs `{tool}`, which is not on PATH ({install})"
    ))
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

impl Target {
    /// The rustc target triple (`None`: the host).
    pub fn triple(self) -> Option<&'static str> {
        match self {
            Target::Host => None,
            Target::Aarch64Linux if cfg!(target_arch = "aarch64") => None,
            Target::Aarch64Linux => Some(AARCH64),
            Target::Wasm32Wasip1 | Target::Wasm32Wasip1RelaxedSimd => Some(WASM),
        }
    }

    /// A name for cache keys and messages.
    pub fn name(self) -> &'static str {
        match self {
            Target::Wasm32Wasip1RelaxedSimd => WASM_RELAXED,
            _ => self.triple().unwrap_or("host"),
        }
    }

    /// The cargo target directory (under the runners' cache) of builds for
    /// this target: one of its own where the compiler flags differ from
    /// another target's with the same triple, so switching between them
    /// rebuilds nothing.
    pub fn build_dir_name(self) -> &'static str {
        match self {
            Target::Wasm32Wasip1RelaxedSimd => "target-relaxed-simd",
            _ => "target",
        }
    }

    /// Adds `--target` and what building for it needs to a `cargo build`:
    /// the cross linker for aarch64, simd128 for wasm (unless the user's
    /// environment already says otherwise).
    pub fn configure_build(self, cmd: &mut Command) -> Result<()> {
        let Some(triple) = self.triple() else {
            return Ok(());
        };
        cmd.arg("--target").arg(triple);
        match self {
            Target::Aarch64Linux => {
                let key = "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER";
                if std::env::var_os(key).is_none() {
                    let linker = "aarch64-linux-gnu-gcc";
                    if !on_path(linker) {
                        return Err(missing(
                            linker,
                            "linking for aarch64",
                            "Debian: gcc-aarch64-linux-gnu",
                        ));
                    }
                    cmd.env(key, linker);
                }
            }
            Target::Wasm32Wasip1 | Target::Wasm32Wasip1RelaxedSimd => {
                let key = "CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS";
                if std::env::var_os(key).is_none() {
                    let features = if self == Target::Wasm32Wasip1RelaxedSimd {
                        "+simd128,+relaxed-simd"
                    } else {
                        "+simd128"
                    };
                    cmd.env(key, format!("-C target-feature={features}"));
                }
            }
            Target::Host => {}
        }
        Ok(())
    }

    /// The built program of `package` under `target_dir`.
    pub fn executable(self, target_dir: &Path, profile: &str, package: &str) -> PathBuf {
        let dir = match self.triple() {
            Some(t) => target_dir.join(t).join(profile),
            None => target_dir.join(profile),
        };
        match self {
            Target::Wasm32Wasip1 | Target::Wasm32Wasip1RelaxedSimd => {
                dir.join(format!("{package}.wasm"))
            }
            _ => dir.join(package),
        }
    }

    /// A command running `exe` on this host. Wasm runs in node with V8's
    /// default tiering: the hot kernels reach the optimizing tier during
    /// the first runs, so timings need warm-up runs. (`--no-liftoff`, the
    /// other way, compiles every function up front and overflows node's
    /// native stack on the largest generated `forward`s.)
    pub fn command(self, exe: &Path) -> Result<Command> {
        match (self, self.triple()) {
            (_, None) => Ok(Command::new(exe)),
            (Target::Aarch64Linux, Some(_)) => {
                let qemu = "qemu-aarch64";
                if !on_path(qemu) {
                    return Err(missing(
                        qemu,
                        "running aarch64 code on this host",
                        "Debian: qemu-user",
                    ));
                }
                let mut c = Command::new(qemu);
                let sysroot = Path::new("/usr/aarch64-linux-gnu");
                if sysroot.is_dir() {
                    c.arg("-L").arg(sysroot);
                }
                c.arg(exe);
                Ok(c)
            }
            (_, Some(_)) => {
                if !on_path("node") {
                    return Err(missing(
                        "node",
                        "running wasm32-wasip1 code",
                        "Node.js 20 or later",
                    ));
                }
                let runner = crate::fetch::cache_root()
                    .join("run")
                    .join("wasi_runner.mjs");
                if std::fs::read_to_string(&runner).ok().as_deref() != Some(WASI_RUNNER) {
                    let dir = runner.parent().unwrap_or(Path::new("."));
                    std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
                        path: dir.to_path_buf(),
                        source,
                    })?;
                    std::fs::write(&runner, WASI_RUNNER).map_err(|source| BuildError::Io {
                        path: runner.clone(),
                        source,
                    })?;
                }
                let mut c = Command::new("node");
                // Node 20.20 segfaults in its JavaScript after some large
                // models have run (PP-OCR's detectors, once their output is
                // printed) unless the garbage collector runs on the main
                // thread. The model's wasm allocates nothing the collector
                // sees, so its timings are unchanged.
                c.arg("--no-warnings")
                    .arg("--single-threaded-gc")
                    .arg(&runner)
                    .arg(exe);
                Ok(c)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_name_their_programs() {
        assert_eq!("host".parse(), Ok(Target::Host));
        assert_eq!(WASM.parse(), Ok(Target::Wasm32Wasip1));
        assert_eq!(WASM_RELAXED.parse(), Ok(Target::Wasm32Wasip1RelaxedSimd));
        assert_eq!(Target::Wasm32Wasip1RelaxedSimd.triple(), Some(WASM));
        assert_ne!(
            Target::Wasm32Wasip1RelaxedSimd.build_dir_name(),
            Target::Wasm32Wasip1.build_dir_name()
        );
        assert_eq!(AARCH64.parse(), Ok(Target::Aarch64Linux));
        assert!("riscv64gc-unknown-linux-gnu".parse::<Target>().is_err());
        let t = Path::new("t");
        assert_eq!(
            Target::Wasm32Wasip1.executable(t, "release", "p"),
            Path::new("t/wasm32-wasip1/release/p.wasm")
        );
        assert_eq!(
            Target::Host.executable(t, "debug", "p"),
            Path::new("t/debug/p")
        );
    }
}
