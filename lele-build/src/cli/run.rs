//! `lele run`: compiles a model through the generated-code path into a small
//! cached binary, runs it on `.npy` inputs and writes `.npy` outputs.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use lele_kernels::DType;
use proc_macro2::Literal;
use quote::{format_ident, quote};
use sha2::{Digest, Sha256};

use super::target::Target;
use super::{format_tokens, toml_string};
use crate::error::{BuildError, Result};
use crate::ir::{DeclaredDim, Tensor};

/// How `lele run` and `lele bench` get their inputs.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InputArgs {
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
}

/// Arguments of `lele run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The ONNX file.
    pub model: PathBuf,
    /// The inputs.
    #[command(flatten)]
    pub io: InputArgs,
    /// Directory for the outputs.
    #[arg(long)]
    pub out: PathBuf,
    /// Build the model for this target and run it there: `host` (default),
    /// `aarch64-unknown-linux-gnu` (under qemu on other hosts),
    /// `wasm32-wasip1` (simd128, under node) or `wasm32-wasip1+relaxed-simd`
    /// (also relaxed SIMD's multiply-add).
    #[arg(long, default_value = "host")]
    pub target: Target,
}

/// Which program the generated crate around a model is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunnerKind {
    /// Reads `.npy` inputs, runs once, writes `.npy` outputs (debug build,
    /// kernels optimized).
    Run,
    /// Times `forward` and prints one JSON line (release build).
    Bench,
}

/// A model loaded and its inputs written as `.npy` files, ready for a
/// runner.
pub struct Prepared {
    /// The canonical model path.
    pub model: PathBuf,
    /// The loaded graph.
    pub graph: crate::ir::Graph,
    /// One `.npy` file per model input, in input order.
    pub input_files: Vec<PathBuf>,
    /// The model.toml text pinning every input to its file's shape.
    pub toml_text: String,
}

fn parse_kv(s: &str, what: &str) -> Result<(String, String)> {
    let (k, v) = s
        .rsplit_once('=')
        .ok_or_else(|| BuildError::Config(format!("{what} `{s}` must look like NAME=VALUE")))?;
    Ok((k.to_string(), v.to_string()))
}

/// `NAME=d0,d1,…` of `--shape`: every dim a number, at most
/// [`crate::npy::MAX_RANK`] of them, and a shape whose element count fits
/// in [`crate::npy::MAX_DATA_BYTES`] bytes even at one byte an element
/// (the input's dtype is checked in [`check_dims`]).
fn parse_shape(s: &str) -> Result<(String, Vec<usize>)> {
    let (k, v) = parse_kv(s, "--shape")?;
    let dims = v
        .split(',')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| BuildError::Config(format!("bad dim `{}` in --shape {s}", d.trim())))
        })
        .collect::<Result<Vec<_>>>()?;
    crate::npy::checked_bytes(&dims, 1)
        .map_err(|m| BuildError::Config(format!("--shape of input `{k}`: {m}")))?;
    Ok((k, dims))
}

/// Checks `dims` for input `val` before a tensor of them exists (or goes
/// further): the rank and fixed dims the model declares, and the size cap
/// at the input's element size.
fn check_dims(val: &crate::ir::Value, dtype: DType, dims: &[usize]) -> Result<()> {
    crate::npy::checked_bytes(dims, dtype.size())
        .map_err(|m| BuildError::Config(format!("input `{}`: {m}", val.name)))?;
    // As `compile::resolve_input_dims`: no shape, or a rank-0 one (some
    // exporters write that for "unknown"), does not constrain the rank.
    let declared = val.declared.as_deref().unwrap_or_default();
    if declared.is_empty() {
        return Ok(());
    }
    if declared.len() != dims.len() {
        return Err(BuildError::Config(format!(
            "input `{}` has {} dims {dims:?} but the model declares {}",
            val.name,
            dims.len(),
            declared.len()
        )));
    }
    for (i, (d, decl)) in dims.iter().zip(declared).enumerate() {
        if let DeclaredDim::Fixed(n) = decl
            && n != d
        {
            return Err(BuildError::Config(format!(
                "input `{}` dim {i} is {d} but the model fixes it to {n}",
                val.name
            )));
        }
    }
    Ok(())
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
    let n = crate::npy::checked_bytes(dims, 1).map_err(BuildError::Config)?;
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

/// Longest sanitized name part of a `lele run` file name (file systems
/// refuse names past 255 bytes).
const MAX_FILE_STEM: usize = 96;

/// File names of `lele run`'s inputs (`NAME.input.npy`) and outputs
/// (`NAME.npy`), which share one directory: [`file_name`] of each ONNX name
/// (cut to `MAX_FILE_STEM` bytes), then `_2`, `_3`, … until no two are
/// equal ignoring ASCII case (`a/b` and `a_b`, or two non-ASCII names,
/// would otherwise overwrite each other, also on case-insensitive file
/// systems).
pub fn run_file_names(inputs: &[&str], outputs: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    let mut unique = |name: &str, ext: &str| {
        let mut base = file_name(name);
        // `file_name` leaves ASCII only, so any byte is a char boundary.
        base.truncate(MAX_FILE_STEM);
        let mut cand = format!("{base}{ext}");
        let mut k = 2;
        while !seen.insert(cand.to_ascii_lowercase()) {
            cand = format!("{base}_{k}{ext}");
            k += 1;
        }
        cand
    };
    let ins = inputs.iter().map(|n| unique(n, ".input.npy")).collect();
    let outs = outputs.iter().map(|n| unique(n, ".npy")).collect();
    (ins, outs)
}

/// [`run_file_names`] of a graph's inputs and outputs.
fn graph_file_names(g: &crate::ir::Graph) -> (Vec<String>, Vec<String>) {
    let names = |vs: &[crate::ir::ValueId]| -> Vec<&str> {
        vs.iter().map(|&v| g.values[v].name.as_str()).collect()
    };
    run_file_names(&names(&g.inputs), &names(&g.outputs))
}

/// The `model.toml` of a `lele run`: the model's path and every input
/// pinned to its dims. Serialized by `toml`, so any ONNX name (quotes,
/// newlines, `]`) is a well-formed key.
pub fn run_toml(model: &Path, inputs: &[(String, Vec<usize>)]) -> Result<String> {
    let mut m = toml::Table::new();
    m.insert(
        "path".into(),
        toml::Value::String(model.to_string_lossy().into_owned()),
    );
    let mut ins = toml::Table::new();
    for (name, dims) in inputs {
        let dims = dims
            .iter()
            .map(|&d| {
                i64::try_from(d)
                    .map(toml::Value::Integer)
                    .map_err(|_| BuildError::Config(format!("input `{name}`: dim {d} too large")))
            })
            .collect::<Result<Vec<_>>>()?;
        ins.insert(name.clone(), toml::Value::Array(dims));
    }
    let mut doc = toml::Table::new();
    doc.insert("model".into(), toml::Value::Table(m));
    doc.insert("inputs".into(), toml::Value::Table(ins));
    toml::to_string(&doc).map_err(|e| BuildError::Other(format!("cannot write the run toml: {e}")))
}

/// Directory of the lele sources used by generated run crates.
fn lele_source_dir() -> PathBuf {
    std::env::var_os("LELE_SOURCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// Loads the model and resolves its inputs (given files, or seeded random
/// tensors written into `dir`); every input ends up as a file in `dir`
/// unless it was given.
pub fn prepare_inputs(model: &Path, args: &InputArgs, dir: &Path) -> Result<Prepared> {
    let model = model.canonicalize().map_err(|source| BuildError::Io {
        path: model.to_path_buf(),
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
        .map(|s| parse_shape(s))
        .collect::<Result<_>>()?;
    let input_names: Vec<&str> = g
        .inputs
        .iter()
        .map(|&v| g.values[v].name.as_str())
        .collect();
    for (flag, name) in given
        .keys()
        .map(|k| ("--input", k))
        .chain(shapes.keys().map(|k| ("--shape", k)))
    {
        if !input_names.contains(&name.as_str()) {
            return Err(BuildError::Config(format!(
                "{flag} `{name}` is not an input of the model (inputs: {})",
                input_names.join(", ")
            )));
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut rng = Rng(args.seed);
    let mut input_files = Vec::new();
    let mut toml_inputs = Vec::new();
    let (in_files, _) = graph_file_names(&g);
    for (&v, file) in g.inputs.iter().zip(&in_files) {
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
            check_dims(val, dtype, &t.dims)?;
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
            // Checked against the model and the size cap before anything
            // of that size is allocated.
            check_dims(val, dtype, &dims)?;
            let t = random_tensor(dtype, &dims, &mut rng)?;
            crate::npy::write(&dir.join(file), t.dtype, &t.dims, t.bytes())?;
            t
        } else {
            return Err(BuildError::Config(format!(
                "no value for input `{}`: pass --input {}=FILE.npy or --random",
                val.name, val.name
            )));
        };
        let p = dir.join(file);
        // A given input is copied next to the others (random ones were
        // written above), so the directory always holds this run's inputs.
        if given.contains_key(&val.name) {
            crate::npy::write(&p, tensor.dtype, &tensor.dims, tensor.bytes())?;
        }
        toml_inputs.push((val.name.clone(), tensor.dims.clone()));
        input_files.push(p.canonicalize().map_err(|source| BuildError::Io {
            path: p.clone(),
            source,
        })?);
    }
    let toml_text = run_toml(&model, &toml_inputs)?;
    Ok(Prepared {
        model,
        graph: g,
        input_files,
        toml_text,
    })
}

/// Runs `lele run`.
pub fn run(args: &RunArgs) -> Result<()> {
    let p = prepare_inputs(&args.model, &args.io, &args.out)?;
    let (model, g, toml_text, input_files) = (p.model, p.graph, p.toml_text, p.input_files);
    let exe = build_runner(&model, &g, &toml_text, RunnerKind::Run, args.target)?;
    // Absolute, so that a runner under node's WASI finds it too.
    std::fs::create_dir_all(&args.out).map_err(|source| BuildError::Io {
        path: args.out.clone(),
        source,
    })?;
    let out_dir = args.out.canonicalize().map_err(|source| BuildError::Io {
        path: args.out.clone(),
        source,
    })?;
    // The runner's messages can quote the model's names: captured, and
    // shown escaped with the error.
    let done = args
        .target
        .command(&exe)?
        .arg(&out_dir)
        .args(&input_files)
        .output()
        .map_err(|source| BuildError::Io {
            path: exe.clone(),
            source,
        })?;
    if !done.status.success() {
        return Err(BuildError::Other(format!(
            "the generated model failed ({}): {}",
            done.status,
            String::from_utf8_lossy(&done.stderr).trim()
        )));
    }
    let (_, out_files) = graph_file_names(&g);
    for (&v, file) in g.outputs.iter().zip(&out_files) {
        outln!(
            "wrote {} (output `{}`)",
            super::shown(&args.out.join(file)),
            crate::error::escape_controls(&g.values[v].name)
        );
    }
    Ok(())
}

/// Generates (once per content hash) and builds the runner crate of `kind`;
/// returns its executable.
pub fn build_runner(
    model: &Path,
    g: &crate::ir::Graph,
    toml_text: &str,
    kind: RunnerKind,
    target: Target,
) -> Result<PathBuf> {
    let model_bytes = std::fs::read(model).map_err(|source| BuildError::Io {
        path: model.to_path_buf(),
        source,
    })?;
    let mut h = Sha256::new();
    h.update(crate::version::COMPILER_VERSION.as_bytes());
    // The compiler binary itself is part of the key, so a rebuilt lele never
    // reuses code generated by an older one.
    if let Ok(exe) = std::env::current_exe().and_then(std::fs::read) {
        h.update(&exe);
    }
    h.update(toml_text.as_bytes());
    h.update(&model_bytes);
    h.update(format!("{kind:?} {}", target.name()).as_bytes());
    let hash: String = h
        .finalize()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    let root = crate::fetch::cache_root().join("run");
    let dir = root.join(&hash);
    let (package, profile) = match kind {
        RunnerKind::Run => (format!("lele-run-{hash}"), "debug"),
        RunnerKind::Bench => (format!("lele-bench-{hash}"), "release"),
    };
    let target_dir = root.join(target.build_dir_name());
    let exe = target.executable(&target_dir, profile, &package);
    let release = kind == RunnerKind::Bench;
    if exe.exists() && dir.join("src").join("model.rs").exists() {
        // Generated already: cargo only relinks if a lele source changed.
        cargo_build(&dir, &target_dir, release, target)?;
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
    let main = match kind {
        RunnerKind::Run => run_main(g, &compiled.signature)?,
        RunnerKind::Bench => bench_main(g),
    };
    std::fs::write(src.join("main.rs"), format_tokens(main)?).map_err(|source| BuildError::Io {
        path: src.join("main.rs"),
        source,
    })?;
    let lele_dir = lele_source_dir();
    let manifest = format!(
        "[package]\nname = \"{package}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\nlele = {{ path = {} }}\nlele-kernels = {{ path = {}, features = [\"npy\"] }}\n\n\
         [workspace]\n\n\
         [profile.dev]\ndebug = false\n\n[profile.dev.package.lele-kernels]\nopt-level = 3\n\n\
         [profile.release]\ndebug = false\n",
        toml_string(&lele_dir.to_string_lossy()),
        toml_string(&lele_dir.join("lele-kernels").to_string_lossy())
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).map_err(|source| BuildError::Io {
        path: dir.join("Cargo.toml"),
        source,
    })?;
    cargo_build(&dir, &target_dir, release, target)?;
    Ok(exe)
}

/// The reads of a runner's `main`: input `k` from `argv[first + k]`, and
/// the `forward` arguments viewing them.
fn input_reads(
    g: &crate::ir::Graph,
    first: usize,
) -> (Vec<proc_macro2::TokenStream>, Vec<proc_macro2::TokenStream>) {
    let mut reads = Vec::new();
    let mut args = Vec::new();
    for k in 0..g.inputs.len() {
        let t = format_ident!("t{k}");
        let a = k + first;
        reads.push(quote! {
            let #t = ::lele::kernels::npy::parse(&::std::fs::read(&argv[#a])?)?;
        });
        args.push(quote!(::lele::kernels::TensorView::from_untyped(#t.view()?)?));
    }
    (reads, args)
}

/// `main` of a `lele run` crate: read inputs, run once, write outputs,
/// each labelled with the dtype the compiler computed for it (`sig`), not
/// the one the model declares.
fn run_main(
    g: &crate::ir::Graph,
    sig: &crate::signature::Signature,
) -> Result<proc_macro2::TokenStream> {
    let (reads, args) = input_reads(g, 2);
    let mut writes = Vec::new();
    let out_names = crate::emit::names::unique_idents(
        &sig.outputs
            .iter()
            .map(|p| p.name.clone())
            .collect::<Vec<_>>(),
    );
    let (_, files) = graph_file_names(g);
    for ((port, ident), file) in sig.outputs.iter().zip(&out_names).zip(&files) {
        let ident = format_ident!("{}", ident);
        let file = Literal::string(file);
        let dtype_code = port.dtype()?.onnx_code();
        writes.push(quote! {
            {
                let t = out.#ident.as_untyped();
                let dtype = ::lele::DType::from_onnx_code(#dtype_code).ok_or("dtype")?;
                let bytes = ::lele::kernels::npy::to_bytes(dtype, t.shape.dims(), t.data);
                ::std::fs::write(out_dir.join(#file), bytes)?;
            }
        });
    }
    Ok(quote! {
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
    })
}

/// `main` of a `lele bench` crate: `argv` = warm-up runs, timed runs,
/// `time` or `profile`, threads, input files. Prints one JSON line: the
/// time `Model::new` and its workspace take, time from `main`
/// to the first output (reading inputs, loading weights, first `forward`),
/// each timed run, the peak resident set size and, with `profile`, the mean
/// time of every node over as many extra (profiled) runs, slowest first.
fn bench_main(g: &crate::ir::Graph) -> proc_macro2::TokenStream {
    let (reads, args) = input_reads(g, 5);
    quote! {
        include!("model.rs");
        fn peak_rss_kb() -> u64 {
            ::std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmHWM:"))
                        .and_then(|l| l.split_whitespace().nth(1))
                        .and_then(|v| v.parse().ok())
                })
                .unwrap_or(0)
        }
        fn main() -> ::core::result::Result<(), Box<dyn ::std::error::Error>> {
            let start = ::std::time::Instant::now();
            let argv: Vec<String> = ::std::env::args().collect();
            let warmup: usize = argv[1].parse()?;
            let runs: usize = argv[2].parse()?;
            let threads = ::lele::kernels::threads::set_num_threads(argv[4].parse()?);
            #(#reads)*
            let init_start = ::std::time::Instant::now();
            let model = Model::new()?;
            let mut ws = model.workspace();
            let init = init_start.elapsed().as_secs_f64() * 1e3;
            ::std::hint::black_box(model.forward(&mut ws, #(#args),*)?);
            let first = start.elapsed().as_secs_f64() * 1e3;
            for _ in 0..warmup {
                ::std::hint::black_box(model.forward(&mut ws, #(#args),*)?);
            }
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs {
                let t = ::std::time::Instant::now();
                ::std::hint::black_box(model.forward(&mut ws, #(#args),*)?);
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let mut profile = String::new();
            if argv[3] == "profile" {
                let mut timer = ::lele::NodeTimer::new(Model::node_labels().len());
                for _ in 0..runs {
                    ::std::hint::black_box(model.forward_profiled(&mut ws, &mut timer, #(#args),*)?);
                }
                let rows: Vec<String> = timer
                    .report(Model::node_labels())
                    .iter()
                    .map(|r| r.to_json())
                    .collect();
                profile = format!(",\"profile\":[{}]", rows.join(","));
            }
            let times: Vec<String> = times.iter().map(|t| format!("{t:.4}")).collect();
            // The instruction set the kernels dispatched to (after any
            // `LELE_ISA` cap), so a report says which code was timed.
            let mut isa = format!("{:?}", ::lele::kernels::simd::best_isa()).to_lowercase();
            if cfg!(target_feature = "relaxed-simd") {
                isa.push_str("+relaxed-simd");
            }
            println!(
                "{{\"engine\":\"lele\",\"isa\":\"{isa}\",\"threads\":{threads},\"init_ms\":{init:.4},\"first_output_ms\":{first:.4},\"times_ms\":[{}],\"peak_rss_kb\":{}{profile}}}",
                times.join(","),
                peak_rss_kb()
            );
            Ok(())
        }
    }
}

fn cargo_build(dir: &Path, target_dir: &Path, release: bool, target: Target) -> Result<()> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.arg("build");
    target.configure_build(&mut cmd)?;
    let status = cmd
        .args(release.then_some("--release"))
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .map_err(|source| BuildError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    if !status.success() {
        let hint = match target.triple() {
            Some(t) => format!(" (is the target installed? `rustup target add {t}`)"),
            None => String::new(),
        };
        return Err(BuildError::Other(format!(
            "building the generated model for {} failed{hint}",
            target.name()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_never_collide() {
        let (ins, outs) = run_file_names(
            &["a/b", "a_b", "x"],
            &["é", "ü", "A_B", "x.input", "a/b", &"n".repeat(400)],
        );
        assert_eq!(ins, vec!["a_b.input.npy", "a_b_2.input.npy", "x.input.npy"]);
        assert_eq!(
            outs[..5],
            ["_.npy", "__2.npy", "A_B.npy", "x.input_2.npy", "a_b_2.npy"]
        );
        assert_eq!(outs[5], format!("{}.npy", "n".repeat(MAX_FILE_STEM)));
        let mut all: Vec<String> = ins.iter().chain(&outs).map(|f| f.to_lowercase()).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 9);
    }

    #[test]
    fn the_run_toml_keeps_any_input_name() {
        let names = [
            "plain",
            "line\nbreak",
            "cr\rhere",
            "quote\"and'apostrophe",
            "]\n[model]\npath = \"/etc/passwd\"",
            "tab\tesc\u{1b}[31m",
        ];
        let inputs: Vec<(String, Vec<usize>)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), vec![1, i + 2]))
            .collect();
        let text = run_toml(Path::new("/models/m\n.onnx"), &inputs).unwrap();
        let cfg = crate::ModelToml::parse(&text).unwrap();
        for (i, n) in names.iter().enumerate() {
            let dims = cfg.input_dims(n).expect(n).unwrap();
            assert_eq!(
                dims,
                vec![
                    crate::config::Dim::Fixed(1),
                    crate::config::Dim::Fixed(i + 2)
                ]
            );
        }
        assert_eq!(cfg.inputs.len(), names.len());
    }

    #[test]
    fn shapes_are_checked_before_allocating() {
        let e = parse_shape("x=99999999999,4").unwrap_err().to_string();
        assert!(e.contains("input `x`") && e.contains("exceeds"), "{e}");
        let e = parse_shape("x=4294967296,4294967296,0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exceeds"), "{e}");
        assert!(parse_shape("x=1,-3").is_err());
        assert!(parse_shape("x=18446744073709551616").is_err());
        assert_eq!(
            parse_shape("a=b=2, 3").unwrap(),
            ("a=b".to_string(), vec![2, 3])
        );
    }
}
