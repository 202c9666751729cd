//! The `lele` CLI: `inspect`, `gen`, `run`, `bench`, `fetch` and `prepare`.

/// `println!` returning an error instead of panicking when stdout fails:
/// with a closed pipe (`lele bench … | head`) the command then ends
/// quietly (see [`crate::error::BuildError::is_broken_pipe`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err(|source| {
            $crate::error::BuildError::Io {
                path: $crate::error::STDOUT.into(),
                source,
            }
        })?;
    }};
}

pub mod bench;
mod inspect;
pub mod run;
pub mod target;
pub use run::file_name;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::error::{BuildError, Result};

/// Command line of the `lele` binary.
#[derive(Parser, Debug)]
#[command(name = "lele", version, about = "Compile ONNX models into Rust")]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Inputs, outputs, op histogram, parameters and unsupported ops of a model.
    Inspect {
        /// The ONNX file.
        model: PathBuf,
    },
    /// Generates formatted Rust source and a weights file.
    Gen {
        /// The ONNX file.
        model: PathBuf,
        /// Output directory.
        #[arg(short, long)]
        out: PathBuf,
        /// Name of the generated struct.
        #[arg(long, default_value = "Model")]
        name: String,
        /// A model.toml with codegen options and input bounds.
        #[arg(long)]
        toml: Option<PathBuf>,
    },
    /// Compiles the model through generated code, runs it and writes outputs.
    Run(run::RunArgs),
    /// Times the model through generated code (release build): median, min
    /// and max of `--runs` runs after `--warmup`, time to first output, peak RSS
    /// (`--latency`: p50/p99/p99.9/max over at least 10,000 calls and init time).
    Bench(bench::BenchArgs),
    /// Downloads (and verifies) the model and extra files of a model.toml,
    /// and prints their paths and sha256.
    Fetch {
        /// The model.toml.
        toml: PathBuf,
    },
    /// Fetches and compiles a model.toml, and writes its lock file
    /// (`<stem>.lock`) so offline builds can emit the model's API.
    Prepare {
        /// The model.toml.
        toml: PathBuf,
        /// Also copy the compiled artifact (code and weights) into
        /// `<stem>.lele/` next to the toml, for fully offline builds.
        #[arg(long)]
        vendor: bool,
    },
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Inspect { model } => inspect::inspect(&model),
        Cmd::Gen {
            model,
            out,
            name,
            toml,
        } => gen_cmd(&model, &out, &name, toml.as_deref()),
        Cmd::Run(args) => run::run(&args),
        Cmd::Bench(args) => bench::bench(&args),
        Cmd::Fetch { toml } => fetch_cmd(&toml),
        Cmd::Prepare { toml, vendor } => prepare_cmd(&toml, vendor),
    }
}

fn fetch_cmd(toml_path: &std::path::Path) -> Result<()> {
    let toml = crate::ModelToml::load(toml_path)?;
    let base = toml_path.parent().unwrap_or(std::path::Path::new("."));
    let fetched = crate::fetch::resolve(
        &toml,
        base,
        &crate::fetch::FetchOptions {
            offline: crate::fetch::offline_from_env(),
            progress: true,
            cache_root: None,
        },
    )?;
    outln!("model  {}", shown(&fetched.model));
    outln!("sha256 = \"{}\"", fetched.sha256);
    for f in &fetched.files {
        outln!(
            "file   {}  sha256 {}",
            shown(f),
            crate::fetch::sha256_file(f)?
        );
    }
    Ok(())
}

fn prepare_cmd(toml_path: &std::path::Path, vendor: bool) -> Result<()> {
    let (lock, compiled) = crate::driver::prepare(toml_path, vendor, true, None)?;
    outln!(
        "{} {} (key {}, {} inputs, {} outputs)",
        if compiled.from_cache {
            "cached"
        } else {
            "compiled"
        },
        shown(toml_path),
        lock.key,
        lock.signature.inputs.len(),
        lock.signature.outputs.len()
    );
    outln!("wrote {}", shown(&crate::artifact::lock_path(toml_path)));
    if vendor {
        outln!("wrote {}", shown(&crate::artifact::vendor_dir(toml_path)));
    }
    Ok(())
}

pub use crate::emit::format_tokens;

fn gen_cmd(
    model: &std::path::Path,
    out: &std::path::Path,
    name: &str,
    toml: Option<&std::path::Path>,
) -> Result<()> {
    let (cfg, text) = match toml {
        Some(p) => {
            let text = crate::fsutil::read_regular_text(p, crate::fsutil::MAX_TOML_BYTES)?;
            (crate::ModelToml::parse(&text)?, text)
        }
        None => {
            let text = format!(
                "[model]\npath = {}\n",
                toml_string(&model.to_string_lossy())
            );
            (crate::ModelToml::parse(&text)?, text)
        }
    };
    if !name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        || !name.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(BuildError::Config(format!(
            "--name `{name}` must be a CamelCase Rust identifier"
        )));
    }
    std::fs::create_dir_all(out).map_err(|source| BuildError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let mut opts = crate::CompileOptions::new(name);
    opts.attrs = quote::quote!(#[doc = "A model generated by lele."]);
    opts.offline = false;
    let compiled = crate::compile_model(model, &cfg, &text, out, &opts)?;
    let src = format_tokens(compiled.tokens)?;
    let file = out.join(format!("{}.rs", crate::emit::names::snake_ident(name)));
    std::fs::write(&file, src).map_err(|source| BuildError::Io {
        path: file.clone(),
        source,
    })?;
    outln!(
        "wrote {} and {}",
        shown(&file),
        shown(
            compiled
                .weights_path
                .as_deref()
                .unwrap_or(std::path::Path::new("?"))
        )
    );
    Ok(())
}

/// A path as the CLI prints it: control characters and bidi overrides
/// escaped (see [`crate::error::escape_controls`]).
pub(crate) fn shown(p: &std::path::Path) -> String {
    crate::error::escape_controls(&p.display().to_string()).into_owned()
}

/// Quotes a string as a TOML basic string.
pub fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
