//! The compiler as a builder, for `build.rs`:
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     lele_build::Compiler::new()
//!         .with_toml("models/cls.toml")
//!         .with_name("TextClassifier")
//!         .with_default_optimizations()
//!         .build()?;
//!     Ok(())
//! }
//! // src/lib.rs:
//! // include!(concat!(env!("OUT_DIR"), "/text_classifier.rs"));
//! ```
//!
//! `build()` writes `<snake_case name>.rs` into `OUT_DIR` (weights are
//! referenced from lele's artifact cache, as with the macro) and prints the
//! `cargo:rerun-if-*` lines for the toml, the model and the environment
//! variables that change the result.
use std::path::{Path, PathBuf};

use crate::driver::{CompileOptions, TRACKED_ENV, compile_toml};
use crate::error::{BuildError, Result};
use crate::extend::{Extensions, GraphView, NodeInfo, PatternMatch, Replacement};

/// Builder of one model's generated code.
#[derive(Debug, Default)]
pub struct Compiler {
    toml: Option<PathBuf>,
    name: Option<String>,
    constant_folding: Option<bool>,
    out_dir: Option<PathBuf>,
    ext: Extensions,
}

impl Compiler {
    /// A compiler with nothing set.
    pub fn new() -> Compiler {
        Compiler::default()
    }

    /// The `model.toml` (relative paths are relative to `CARGO_MANIFEST_DIR`).
    pub fn with_toml(mut self, path: impl Into<PathBuf>) -> Compiler {
        self.toml = Some(path.into());
        self
    }

    /// Name of the generated struct (CamelCase); the file is its snake_case.
    pub fn with_name(mut self, name: &str) -> Compiler {
        self.name = Some(name.to_string());
        self
    }

    /// The optimizations the macro uses: constant folding, dead-code
    /// elimination, in-place elementwise execution.
    pub fn with_default_optimizations(mut self) -> Compiler {
        self.constant_folding = Some(true);
        self
    }

    /// Turns constant folding on or off (overrides `[codegen]
    /// constant_folding`).
    pub fn with_constant_folding(mut self, on: bool) -> Compiler {
        self.constant_folding = Some(on);
        self
    }

    /// Where `build()` writes (default `OUT_DIR`).
    pub fn with_out_dir(mut self, dir: impl Into<PathBuf>) -> Compiler {
        self.out_dir = Some(dir.into());
        self
    }

    /// Lowers every node of `op` (`"HardSwish"`, or `"domain.Op"` for other
    /// domains) with `codegen`, which returns the user kernel to run instead.
    pub fn with_override(
        mut self,
        op: &str,
        codegen: impl Fn(&NodeInfo<'_>) -> std::result::Result<Replacement, String> + 'static,
    ) -> Compiler {
        self.ext.add_override(op, Box::new(codegen));
        self
    }

    /// Replaces every group of nodes `matcher` finds (anchored at a node
    /// index of the main graph) by the kernel `generator` returns.
    pub fn with_pattern(
        mut self,
        name: &str,
        matcher: impl Fn(&GraphView<'_>, usize) -> Option<PatternMatch> + 'static,
        generator: impl Fn(&GraphView<'_>, &PatternMatch) -> std::result::Result<Replacement, String>
        + 'static,
    ) -> Compiler {
        self.ext
            .add_pattern(name, Box::new(matcher), Box::new(generator));
        self
    }

    /// Compiles and writes `<out dir>/<snake_case name>.rs`; returns its path.
    pub fn build(self) -> Result<PathBuf> {
        let toml = self
            .toml
            .clone()
            .ok_or_else(|| BuildError::Config("Compiler: call with_toml(\"model.toml\")".into()))?;
        let name = self.name.clone().unwrap_or_else(|| "Model".into());
        if !name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            || !name.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(BuildError::Config(format!(
                "Compiler: name `{name}` must be a CamelCase Rust identifier"
            )));
        }
        let toml = if toml.is_absolute() {
            toml
        } else {
            let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
                .map(PathBuf::from)
                .unwrap_or_default();
            manifest.join(toml)
        };
        let out_dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| {
                    BuildError::Config(
                        "Compiler::build: OUT_DIR is not set (call it from build.rs)".into(),
                    )
                })?,
        };
        let mut opts = CompileOptions::new(&name);
        opts.attrs = quote::quote!(#[doc = "A model compiled by lele."]);
        opts.extensions = (!self.ext.is_empty()).then_some(&self.ext);
        opts.constant_folding = self.constant_folding;
        opts.inline_core = true;
        if !self.ext.is_empty() {
            opts.artifact_dir = Some(out_dir.clone());
        }
        let compiled = compile_toml(&toml, &opts)?;
        for f in compiled.tracked.iter().chain(&compiled.generated) {
            println!("cargo:rerun-if-changed={}", f.display());
        }
        for v in TRACKED_ENV
            .iter()
            .copied()
            .chain(compiled.env_vars.iter().map(String::as_str))
        {
            println!("cargo:rerun-if-env-changed={v}");
        }
        let file = out_dir.join(format!("{}.rs", crate::emit::names::snake_ident(&name)));
        let src = crate::emit::format_tokens(compiled.tokens)?;
        write(&file, src.as_bytes())?;
        Ok(file)
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    crate::fsutil::write_atomic(path, bytes)
}
