//! The compiler pipeline: model.toml → ONNX → IR → passes → plan → Rust.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use sha2::{Digest, Sha256};

use crate::config::{Dim, ModelToml};
use crate::emit::{EmitInput, WeightsMode};
use crate::error::{BuildError, Result, Unsupported};
use crate::ir::{DeclaredDim, Graph, Op};
use crate::passes;

/// Version of the compiler, part of every cache key.
pub const COMPILER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A compiled model.
pub struct Compiled {
    /// The items replacing the annotated struct.
    pub tokens: TokenStream,
    /// The weights file the tokens reference.
    pub weights_path: PathBuf,
    /// The ONNX file that was compiled.
    pub model_path: PathBuf,
    /// Content hash (model, toml, compiler version).
    pub hash: String,
    /// Arena bytes.
    pub arena_bytes: usize,
    /// Whether the result came from the artifact cache (no recompilation).
    pub from_cache: bool,
}

/// Options of one compilation.
pub struct CompileOptions<'a> {
    /// Name of the generated struct.
    pub name: &'a str,
    /// Visibility tokens (`pub`, `pub(crate)`, nothing).
    pub vis: TokenStream,
    /// Attributes (doc comments…) of the user's struct.
    pub attrs: TokenStream,
    /// Directory for the weights file (default: [`cache_dir`]).
    pub out_dir: Option<PathBuf>,
    /// Name the weights file after the struct and reference it relative to
    /// the generated source (for `lele gen`), instead of by absolute path.
    pub relative_weights: bool,
}

/// Directory of build artifacts (`$LELE_CACHE_DIR`, else the user cache).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("LELE_CACHE_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("lele").join("build")
}

/// Every unsupported node of the graph.
pub fn unsupported_nodes(g: &Graph) -> Vec<Unsupported> {
    let mut out = Vec::new();
    g.for_each_node(&mut |n| {
        if let Op::Unsupported { reason } = &n.op {
            let op = if n.domain.is_empty() {
                n.op_type.clone()
            } else {
                format!("{}.{}", n.domain, n.op_type)
            };
            out.push(Unsupported {
                op,
                node: n.name.clone(),
                reason: reason.clone(),
            });
        }
    });
    out
}

/// Resolves each input's dims from the toml and the model's declarations.
pub fn resolve_input_dims(g: &Graph, toml: &ModelToml) -> Result<Vec<Vec<Dim>>> {
    let mut problems = Vec::new();
    let names: Vec<&str> = g
        .inputs
        .iter()
        .map(|&v| g.values[v].name.as_str())
        .collect();
    for key in toml.inputs.keys() {
        if !names.contains(&key.as_str()) {
            problems.push(format!(
                "[inputs] `{key}` is not an input of the model (inputs: {})",
                names.join(", ")
            ));
        }
    }
    let mut all = Vec::new();
    for &v in &g.inputs {
        let val = &g.values[v];
        let declared = val.declared.clone().unwrap_or_default();
        let dims = match toml.input_dims(&val.name) {
            Some(Ok(dims)) => {
                if !declared.is_empty() && declared.len() != dims.len() {
                    problems.push(format!(
                        "[inputs] `{}` has {} dims but the model declares {}",
                        val.name,
                        dims.len(),
                        declared.len()
                    ));
                }
                for (i, (d, decl)) in dims.iter().zip(&declared).enumerate() {
                    if let (Dim::Fixed(a), DeclaredDim::Fixed(b)) = (d, decl)
                        && a != b
                    {
                        problems.push(format!(
                            "[inputs] `{}` dim {i} is {a} but the model fixes it to {b}",
                            val.name
                        ));
                    }
                }
                dims
            }
            Some(Err(e)) => {
                problems.push(format!("[inputs] `{}`: {e}", val.name));
                continue;
            }
            None => {
                let mut dims = Vec::new();
                let mut dynamic = false;
                for d in &declared {
                    match d {
                        DeclaredDim::Fixed(n) => dims.push(Dim::Fixed(*n)),
                        DeclaredDim::Dynamic(_) => dynamic = true,
                    }
                }
                if dynamic || val.declared.is_none() {
                    let shown: Vec<String> = declared
                        .iter()
                        .map(|d| match d {
                            DeclaredDim::Fixed(n) => n.to_string(),
                            DeclaredDim::Dynamic(s) if s.is_empty() => "?".into(),
                            DeclaredDim::Dynamic(s) => s.clone(),
                        })
                        .collect();
                    problems.push(format!(
                        "input `{}` has dynamic dims [{}]; pin or bound them in [inputs], e.g. {} = [{}]",
                        val.name,
                        shown.join(", "),
                        crate::emit::names::snake_ident(&val.name),
                        declared
                            .iter()
                            .map(|d| match d {
                                DeclaredDim::Fixed(n) => n.to_string(),
                                DeclaredDim::Dynamic(_) => "\"n <= 512\"".into(),
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                dims
            }
        };
        all.push(dims);
    }
    if !problems.is_empty() {
        return Err(BuildError::Config(problems.join("\n")));
    }
    Ok(all)
}

/// Fingerprint of the compiler's sources, part of every cache key.
pub const COMPILER_FINGERPRINT: &str = env!("LELE_BUILD_FINGERPRINT");

fn hash_inputs(model_bytes: &[u8], toml_text: &str, name: &str) -> String {
    let mut h = Sha256::new();
    h.update(COMPILER_VERSION.as_bytes());
    h.update(COMPILER_FINGERPRINT.as_bytes());
    h.update([0]);
    h.update(toml_text.as_bytes());
    h.update([0]);
    h.update(name.as_bytes());
    h.update([0]);
    h.update(model_bytes);
    let d = h.finalize();
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Runs the passes on a loaded graph.
pub fn optimize(g: &mut Graph, dims: &[Vec<Dim>]) -> Result<()> {
    let unsupported = unsupported_nodes(g);
    if !unsupported.is_empty() {
        return Err(BuildError::Unsupported(unsupported));
    }
    passes::infer_dtypes(g)?;
    let fully_static = dims
        .iter()
        .all(|d| d.iter().all(|x| matches!(x, Dim::Fixed(_))));
    for _ in 0..8 {
        let mut changed = passes::fold_constants(g, None)?;
        passes::eliminate_dead_code(g);
        if fully_static {
            let point: Vec<Vec<usize>> = dims
                .iter()
                .map(|d| d.iter().map(Dim::max).collect())
                .collect();
            let sizes = passes::size_graph(g, &[point])?;
            changed |= passes::fold_constants(g, Some(&sizes.shapes))?;
            passes::eliminate_dead_code(g);
        }
        if !changed {
            break;
        }
    }
    Ok(())
}

/// Sample points for sizing: upper bounds, lower bounds, midpoint.
pub fn sizing_points(dims: &[Vec<Dim>]) -> Vec<Vec<Vec<usize>>> {
    let at = |f: &dyn Fn(&Dim) -> usize| -> Vec<Vec<usize>> {
        dims.iter().map(|d| d.iter().map(f).collect()).collect()
    };
    let mut pts = vec![
        at(&Dim::max),
        at(&Dim::min),
        at(&|d: &Dim| d.min() + (d.max() - d.min()) / 2),
    ];
    pts.dedup();
    pts
}

/// Compiles a model from its toml.
pub fn compile_toml(toml_path: &Path, opts: &CompileOptions<'_>) -> Result<Compiled> {
    let toml_text = std::fs::read_to_string(toml_path).map_err(|source| BuildError::Io {
        path: toml_path.to_path_buf(),
        source,
    })?;
    let toml = ModelToml::parse(&toml_text)?;
    let base = toml_path.parent().unwrap_or(Path::new("."));
    let model_path = toml.model_path(base)?;
    let written = toml.model.path.clone().unwrap_or_default();
    if !model_path.is_file() {
        return Err(BuildError::Config(format!(
            "model file `{written}` does not exist (relative paths are relative to the model.toml){}",
            if written.contains("${LELE_ZOO}") {
                "; run `cargo xtask models` to fetch the model zoo"
            } else {
                ""
            }
        )));
    }
    compile_model(&model_path, &toml, &toml_text, opts).map_err(|e| match e {
        BuildError::Config(m) => BuildError::Config(
            m.replace(&model_path.display().to_string(), &format!("`{written}`")),
        ),
        other => other,
    })
}

/// Compiles an ONNX file with settings from a parsed toml.
pub fn compile_model(
    model_path: &Path,
    toml: &ModelToml,
    toml_text: &str,
    opts: &CompileOptions<'_>,
) -> Result<Compiled> {
    let model_bytes = std::fs::read(model_path).map_err(|source| BuildError::Io {
        path: model_path.to_path_buf(),
        source,
    })?;
    if let Some(expected) = &toml.model.sha256 {
        let actual: String = Sha256::digest(&model_bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if !actual.eq_ignore_ascii_case(expected.trim()) {
            return Err(BuildError::Config(format!(
                "sha256 mismatch for {}: model.toml expects {expected}, the file has {actual}",
                model_path.display()
            )));
        }
    }
    let hash = hash_inputs(&model_bytes, toml_text, opts.name);
    let out_dir = opts.out_dir.clone().unwrap_or_else(cache_dir);
    // The artifact cache: generated tokens keyed by everything they depend on.
    let key = {
        let mut h = Sha256::new();
        h.update(hash.as_bytes());
        h.update(opts.vis.to_string().as_bytes());
        h.update([0]);
        h.update(opts.attrs.to_string().as_bytes());
        h.update([u8::from(opts.relative_weights)]);
        let d = h.finalize();
        d.iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let tokens_path = out_dir.join(format!("{key}.tokens"));
    let use_cache = !opts.relative_weights;
    if use_cache && let Some(hit) = cached_artifact(&tokens_path, model_path, &hash) {
        return Ok(hit);
    }
    let limits = crate::onnx::Limits::default();
    let proto = {
        use prost::Message;
        crate::onnx::proto::ModelProto::decode(model_bytes.as_slice())
            .map_err(|e| BuildError::Decode(e.to_string()))?
    };
    drop(model_bytes);
    let dir = model_path.parent().unwrap_or(Path::new("."));
    let mut g = crate::onnx::from_proto(&proto, dir, &limits)?;
    drop(proto);
    let dims = resolve_input_dims(&g, toml)?;
    optimize(&mut g, &dims)?;
    copy_outputs_out_of_inputs_and_weights(&mut g);
    let sizes = passes::size_graph(&g, &sizing_points(&dims))?;
    check_legacy_softmax(&g, &sizes)?;
    let plan = crate::plan::plan(&g, &sizes);

    std::fs::create_dir_all(&out_dir).map_err(|source| BuildError::Io {
        path: out_dir.clone(),
        source,
    })?;
    let (weights_path, wpath) = if opts.relative_weights {
        let file = format!("{}.weights", crate::emit::names::snake_ident(opts.name));
        (out_dir.join(&file), file)
    } else {
        let p = out_dir.join(format!("{hash}.weights"));
        let s = p.to_string_lossy().into_owned();
        (p, s)
    };
    write_atomic(&weights_path, &plan.weights)?;
    let weights = match toml.codegen.weights.as_str() {
        "mmap" => WeightsMode::Mmap(wpath),
        _ => WeightsMode::Embed(wpath),
    };
    let tokens = crate::emit::emit(
        &EmitInput {
            name: opts.name,
            graph: &g,
            plan: &plan,
            input_dims: &dims,
            weights,
            hash: &hash,
        },
        &opts.vis,
        &opts.attrs,
    );
    let meta = format!(
        "{}\n{}\n{}\n{}",
        weights_path.display(),
        plan.weights.len(),
        plan.arena_bytes,
        tokens
    );
    if use_cache {
        write_atomic(&tokens_path, meta.as_bytes())?;
    }
    Ok(Compiled {
        tokens,
        weights_path,
        model_path: model_path.to_path_buf(),
        hash,
        arena_bytes: plan.arena_bytes,
        from_cache: false,
    })
}

/// Reads a cached artifact: weights path, weights length, arena bytes, then
/// the generated tokens. Anything inconsistent is a miss.
fn cached_artifact(tokens_path: &Path, model_path: &Path, hash: &str) -> Option<Compiled> {
    let text = std::fs::read_to_string(tokens_path).ok()?;
    let mut parts = text.splitn(4, '\n');
    let weights_path = PathBuf::from(parts.next()?);
    let weights_len: u64 = parts.next()?.parse().ok()?;
    let arena_bytes: usize = parts.next()?.parse().ok()?;
    let tokens: TokenStream = parts.next()?.parse().ok()?;
    if std::fs::metadata(&weights_path).ok()?.len() != weights_len {
        return None;
    }
    Some(Compiled {
        tokens,
        weights_path,
        model_path: model_path.to_path_buf(),
        hash: hash.to_string(),
        arena_bytes,
        from_cache: true,
    })
}

/// Model outputs are returned as views of the workspace; an output that is
/// a model input or a constant (possibly through views) gets a copy node.
pub fn copy_outputs_out_of_inputs_and_weights(g: &mut Graph) {
    let mut view_src: HashMap<crate::ir::ValueId, crate::ir::ValueId> = HashMap::new();
    for n in &g.main.nodes {
        if let (Op::View(_), Some(Some(src)), Some(&out)) =
            (&n.op, n.inputs.first(), n.outputs.first())
        {
            view_src.insert(out, *src);
        }
    }
    for i in 0..g.outputs.len() {
        let v = g.outputs[i];
        let mut root = v;
        while let Some(&src) = view_src.get(&root) {
            root = src;
        }
        let external = g.inputs.contains(&root) || g.values[root].constant.is_some();
        if !external {
            continue;
        }
        let name = g.values[v].name.clone();
        let dtype = g.values[v].dtype;
        let copy = g.add_value(&name, dtype);
        g.main.nodes.push(crate::ir::Node {
            name: format!("{name}::copy"),
            op_type: "Identity".into(),
            domain: String::new(),
            op: Op::Kernel(Box::new(lele_kernels::ops::layout::Identity)),
            inputs: vec![Some(v)],
            outputs: vec![copy],
            out_dtypes: vec![crate::ir::OutDType::Input(0)],
        });
        g.outputs[i] = copy;
    }
}

fn check_legacy_softmax(g: &Graph, sizes: &passes::Sizes) -> Result<()> {
    let ranks: HashMap<_, _> = sizes.shapes.iter().map(|(v, s)| (*v, s.rank())).collect();
    for &(v, axis) in &g.legacy_softmax {
        if let Some(&r) = ranks.get(&v) {
            let a = if axis < 0 { axis + r as i64 } else { axis };
            if a != r as i64 - 1 {
                return Err(BuildError::Unsupported(vec![Unsupported {
                    op: "Softmax".into(),
                    node: g.values[v].name.clone(),
                    reason:
                        "opset < 13 softmax over a non-last axis (2-D coercion) is not supported"
                            .into(),
                }]));
            }
        }
    }
    Ok(())
}

/// Writes a file atomically (temp file + rename), skipping identical content.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Ok(meta) = std::fs::metadata(path)
        && meta.len() == bytes.len() as u64
        && std::fs::read(path).ok().as_deref() == Some(bytes)
    {
        return Ok(());
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|source| BuildError::Io {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, path).map_err(|source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    })
}
