//! `lele run`: compiles a model through the generated-code path into a small
//! cached binary, runs it on `.npy` inputs and writes `.npy` outputs.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use lele_kernels::DType;
use proc_macro2::Literal;
use quote::{format_ident, quote};
use sha2::{Digest, Sha256};

use super::{format_tokens, toml_string};
use crate::error::{BuildError, Result};
use crate::ir::{DeclaredDim, Tensor};

/// Arguments of `lele run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The ONNX file.
    pub model: PathBuf,
    /// `NAME=FILE.npy` for an input.
    #[arg(long = "input")]
    pub inputs: Vec<String>,
    /// `NAME=1,3,480,640` shape of an input (for --random).
    #[arg(long = "shape")]
    pub shapes: Vec<String>,
    /// Make seeded random inputs for those not given with --input.
    #[arg(long)]
    pub random: bool,
    /// Seed of --random.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Directory for the outputs.
    #[arg(long)]
    pub out: PathBuf,
}

fn parse_kv(s: &str, what: &str) -> Result<(String, String)> {
    let (k, v) = s
        .rsplit_once('=')
        .ok_or_else(|| BuildError::Config(format!("{what} `{s}` must look like NAME=VALUE")))?;
    Ok((k.to_string(), v.to_string()))
}

/// A deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn random_tensor(dtype: DType, dims: &[usize], rng: &mut Rng) -> Result<Tensor> {
    let n: usize = dims.iter().product();
    let bad = || BuildError::Other("cannot build a random tensor".into());
    match dtype {
        DType::F32 => Tensor::from_values::<f32>(
            dims,
            &(0..n)
                .map(|_| (rng.unit() * 2.0 - 1.0) as f32)
                .collect::<Vec<_>>(),
        ),
        DType::F64 => Tensor::from_values::<f64>(
            dims,
            &(0..n).map(|_| rng.unit() * 2.0 - 1.0).collect::<Vec<_>>(),
        ),
        DType::I64 => Tensor::from_values::<i64>(
            dims,
            &(0..n)
                .map(|_| (rng.next() % 100) as i64)
                .collect::<Vec<_>>(),
        ),
        DType::I32 => Tensor::from_values::<i32>(
            dims,
            &(0..n)
                .map(|_| (rng.next() % 100) as i32)
                .collect::<Vec<_>>(),
        ),
        DType::U8 => Tensor::from_values::<u8>(
            dims,
            &(0..n).map(|_| (rng.next() % 100) as u8).collect::<Vec<_>>(),
        ),
        DType::I8 => Tensor::from_values::<i8>(
            dims,
            &(0..n).map(|_| (rng.next() % 100) as i8).collect::<Vec<_>>(),
        ),
        DType::Bool => Tensor::from_bytes(
            DType::Bool,
            dims,
            &(0..n).map(|_| (rng.next() % 2) as u8).collect::<Vec<_>>(),
        ),
        d => {
            return Err(BuildError::Other(format!(
                "--random does not support dtype {}",
                d.name()
            )));
        }
    }
    .ok_or_else(bad)
}

/// File-system safe version of an ONNX name.
pub fn file_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// Directory of the lele sources used by generated run crates.
fn lele_source_dir() -> PathBuf {
    std::env::var_os("LELE_SOURCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// Runs `lele run`.
pub fn run(args: &RunArgs) -> Result<()> {
    let model = args.model.canonicalize().map_err(|source| BuildError::Io {
        path: args.model.clone(),
        source,
    })?;
    let g = crate::onnx::load(&model)?;
    let given: BTreeMap<String, String> = args
        .inputs
        .iter()
        .map(|s| parse_kv(s, "--input"))
        .collect::<Result<_>>()?;
    let shapes: BTreeMap<String, Vec<usize>> = args
        .shapes
        .iter()
        .map(|s| {
            let (k, v) = parse_kv(s, "--shape")?;
            let dims = v
                .split(',')
                .map(|d| {
                    d.trim()
                        .parse::<usize>()
                        .map_err(|_| BuildError::Config(format!("bad dim in --shape {s}")))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((k, dims))
        })
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(&args.out).map_err(|source| BuildError::Io {
        path: args.out.clone(),
        source,
    })?;
    let mut rng = Rng(args.seed);
    let mut input_files = Vec::new();
    let mut toml_inputs = String::from("[inputs]\n");
    for &v in &g.inputs {
        let val = &g.values[v];
        let dtype = val
            .dtype
            .ok_or_else(|| BuildError::Other(format!("input `{}` has no dtype", val.name)))?;
        let tensor = if let Some(path) = given.get(&val.name) {
            let t = crate::npy::read(Path::new(path))?;
            if t.dtype != dtype {
                return Err(BuildError::Config(format!(
                    "input `{}` is {} in the model but {} in {path}",
                    val.name,
                    dtype.name(),
                    t.dtype.name()
                )));
            }
            t
        } else if args.random {
            let dims = match shapes.get(&val.name) {
                Some(d) => d.clone(),
                None => val
                    .declared
                    .clone()
                    .unwrap_or_default()
                    .iter()
                    .map(|d| match d {
                        DeclaredDim::Fixed(n) => Ok(*n),
                        DeclaredDim::Dynamic(_) => Err(BuildError::Config(format!(
                            "input `{}` has dynamic dims; give them with --shape {}=…",
                            val.name, val.name
                        ))),
                    })
                    .collect::<Result<Vec<_>>>()?,
            };
            let t = random_tensor(dtype, &dims, &mut rng)?;
            let p = args.out.join(format!("{}.input.npy", file_name(&val.name)));
            crate::npy::write(&p, t.dtype, &t.dims, t.bytes())?;
            t
        } else {
            return Err(BuildError::Config(format!(
                "no value for input `{}`: pass --input {}=FILE.npy or --random",
                val.name, val.name
            )));
        };
        let p = args.out.join(format!("{}.input.npy", file_name(&val.name)));
        if !p.exists() {
            crate::npy::write(&p, tensor.dtype, &tensor.dims, tensor.bytes())?;
        }
        toml_inputs.push_str(&format!(
            "{} = [{}]\n",
            toml_string(&val.name),
            tensor
                .dims
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        input_files.push(p.canonicalize().map_err(|source| BuildError::Io {
            path: p.clone(),
            source,
        })?);
    }
    let toml_text = format!(
        "[model]\npath = {}\n\n{toml_inputs}",
        toml_string(&model.to_string_lossy())
    );
    let exe = build_runner(&model, &g, &toml_text)?;
    let status = Command::new(&exe)
        .arg(&args.out)
        .args(&input_files)
        .status()
        .map_err(|source| BuildError::Io {
            path: exe.clone(),
            source,
        })?;
    if !status.success() {
        return Err(BuildError::Other(format!(
            "the generated model failed ({status})"
        )));
    }
    Ok(())
}

/// Generates (once per content hash) and builds the runner crate.
fn build_runner(model: &Path, g: &crate::ir::Graph, toml_text: &str) -> Result<PathBuf> {
    let model_bytes = std::fs::read(model).map_err(|source| BuildError::Io {
        path: model.to_path_buf(),
        source,
    })?;
    let mut h = Sha256::new();
    h.update(crate::compile::COMPILER_VERSION.as_bytes());
    // The compiler binary itself is part of the key, so a rebuilt lele never
    // reuses code generated by an older one.
    if let Ok(exe) = std::env::current_exe().and_then(std::fs::read) {
        h.update(&exe);
    }
    h.update(toml_text.as_bytes());
    h.update(&model_bytes);
    let hash: String = h
        .finalize()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    let root = crate::fetch::cache_root().join("run");
    let dir = root.join(&hash);
    let target = root.join("target");
    let exe = target.join("debug").join(format!("lele-run-{hash}"));
    if exe.exists() && dir.join("src").join("model.rs").exists() {
        // Generated already: cargo only relinks if a lele source changed.
        cargo_build(&dir, &target)?;
        return Ok(exe);
    }
    let src = dir.join("src");
    std::fs::create_dir_all(&src).map_err(|source| BuildError::Io {
        path: src.clone(),
        source,
    })?;
    let cfg = crate::ModelToml::parse(toml_text)?;
    let mut opts = crate::CompileOptions::new("Model");
    opts.offline = false;
    let compiled = crate::compile_model(model, &cfg, toml_text, &src, &opts)?;
    std::fs::write(src.join("model.rs"), format_tokens(compiled.tokens)?).map_err(|source| {
        BuildError::Io {
            path: src.join("model.rs"),
            source,
        }
    })?;
    // main.rs: read inputs, run, write outputs.
    let mut reads = Vec::new();
    let mut args = Vec::new();
    for k in 0..g.inputs.len() {
        let t = format_ident!("t{k}");
        let a = k + 2;
        reads.push(quote! {
            let #t = ::lele_build::npy::read(::std::path::Path::new(&argv[#a]))?;
        });
        args.push(quote!(::lele::kernels::TensorView::from_untyped(#t.view()?)?));
    }
    let mut writes = Vec::new();
    let out_names = crate::emit::names::unique_idents(
        &g.outputs
            .iter()
            .map(|&v| g.values[v].name.clone())
            .collect::<Vec<_>>(),
    );
    for (&v, ident) in g.outputs.iter().zip(&out_names) {
        let ident = format_ident!("{}", ident);
        let file = Literal::string(&format!("{}.npy", file_name(&g.values[v].name)));
        let dtype_code = g.values[v].dtype.unwrap_or(DType::F32).onnx_code();
        writes.push(quote! {
            {
                let t = out.#ident.as_untyped();
                let dtype = ::lele::DType::from_onnx_code(#dtype_code).ok_or("dtype")?;
                ::lele_build::npy::write(&out_dir.join(#file), dtype, t.shape.dims(), t.data)?;
            }
        });
    }
    let main = quote! {
        include!("model.rs");
        fn main() -> ::core::result::Result<(), Box<dyn ::std::error::Error>> {
            let argv: Vec<String> = ::std::env::args().collect();
            let out_dir = ::std::path::PathBuf::from(&argv[1]);
            #(#reads)*
            let model = Model::new()?;
            let mut ws = model.workspace();
            let out = model.forward(&mut ws, #(#args),*)?;
            #(#writes)*
            Ok(())
        }
    };
    std::fs::write(src.join("main.rs"), format_tokens(main)?).map_err(|source| BuildError::Io {
        path: src.join("main.rs"),
        source,
    })?;
    let lele_dir = lele_source_dir();
    let manifest = format!(
        "[package]\nname = \"lele-run-{hash}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\nlele = {{ path = {} }}\nlele-build = {{ path = {} }}\n\n[workspace]\n\n\
         [profile.dev]\ndebug = false\n\n[profile.dev.package.lele-kernels]\nopt-level = 3\n",
        toml_string(&lele_dir.to_string_lossy()),
        toml_string(&lele_dir.join("lele-build").to_string_lossy())
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).map_err(|source| BuildError::Io {
        path: dir.join("Cargo.toml"),
        source,
    })?;
    cargo_build(&dir, &target)?;
    Ok(exe)
}

fn cargo_build(dir: &Path, target: &Path) -> Result<()> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .arg("build")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target)
        .status()
        .map_err(|source| BuildError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    if !status.success() {
        return Err(BuildError::Other(
            "building the generated model failed".into(),
        ));
    }
    Ok(())
}
