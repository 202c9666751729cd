//! The compiler pipeline: model.toml → ONNX → IR → passes → plan → Rust.
use std::collections::HashMap;
use std::path::Path;

use crate::artifact::Artifact;
use crate::config::{Dim, ModelToml};
use crate::emit::EmitInput;
use crate::error::{BuildError, Result, Unsupported};
use crate::extend::Extensions;
use crate::ir::{DeclaredDim, Graph, Op};
use crate::passes;

/// Every unsupported node of the graph.
pub fn unsupported_nodes(g: &Graph) -> Vec<Unsupported> {
    let mut out = Vec::new();
    g.for_each_node(&mut |n| {
        if let Op::Unsupported { reason } = &n.op {
            out.push(Unsupported {
                op: crate::extend::qualified_op(&n.domain, &n.op_type),
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

/// Runs the passes on a loaded graph ([`passes::pipeline::rounds`]).
pub fn optimize(g: &mut Graph, dims: &[Vec<Dim>], fold: bool, ext: &Extensions) -> Result<()> {
    let unsupported = unsupported_nodes(g);
    if !unsupported.is_empty() {
        return Err(BuildError::Unsupported(unsupported));
    }
    let cx = passes::pipeline::Context { dims, ext };
    passes::pipeline::run(g, passes::pipeline::rounds(fold), &cx)?;
    Ok(())
}

pub use passes::sizing::sizing_points;

/// Compiles an ONNX file into an [`Artifact`] whose weights are written to
/// `weights_path` (the artifact is not stored).
pub fn compile_artifact(
    model_path: &Path,
    toml: &ModelToml,
    key: &str,
    weights_path: &Path,
    ext: &Extensions,
) -> Result<Artifact> {
    let (mut g, dims, tokenizer) = if crate::gguf::is_gguf_file(model_path)? {
        load_decoder(model_path, toml)?
    } else {
        let limits = crate::onnx::Limits::default();
        let proto = crate::onnx::read_model_proto(model_path, &limits)?;
        let dir = model_path.parent().unwrap_or(Path::new("."));
        let g = crate::onnx::from_proto_with(&proto, dir, &limits, ext)?;
        drop(proto);
        let dims = resolve_input_dims(&g, toml)?;
        (g, dims, None)
    };
    optimize(&mut g, &dims, toml.codegen.constant_folding, ext)?;
    if toml.codegen.flush_subnormal_weights {
        let cx = passes::pipeline::Context { dims: &dims, ext };
        passes::pipeline::run(&mut g, &[passes::pipeline::FLUSH_SUBNORMALS], &cx)?;
    }
    copy_outputs_out_of_inputs_and_weights(&mut g);
    let sizes = passes::size_graph(&g, &sizing_points(&dims))?;
    check_legacy_softmax(&g, &sizes)?;
    check_value_cap(&g, &sizes, toml.codegen.max_arena_bytes)?;
    let mut plan = crate::plan::plan(&g, &sizes);
    check_arena_cap(plan.arena_bytes, toml.codegen.max_arena_bytes)?;
    if let Some(blob) = tokenizer {
        append_tokenizer(&mut g, &mut plan.weights, &blob);
    }
    if let Some(dir) = weights_path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    crate::fsutil::write_atomic(weights_path, &plan.weights)?;
    crate::fsutil::backdate(weights_path)?;
    let (core, signature, layout) = crate::emit::emit_core(&EmitInput {
        graph: &g,
        plan: &plan,
        input_dims: &dims,
        hash: key,
    });
    Ok(Artifact {
        key: key.to_string(),
        signature,
        layout,
        core: crate::artifact::Core::Tokens(core),
        weights_path: weights_path.to_path_buf(),
        weights_mode: toml.codegen.weights.clone(),
        weights_file: toml.codegen.weights_file.clone(),
    })
}

/// Appends the tokenizer blob to the weights (64-byte aligned) and records
/// where in the metadata, for `lele::llm` to read it back.
fn append_tokenizer(g: &mut Graph, weights: &mut Vec<u8>, blob: &[u8]) {
    let offset = weights.len().next_multiple_of(64);
    weights.resize(offset, 0);
    weights.extend_from_slice(blob);
    g.metadata.push((
        lele_kernels::rt::TOKENIZER_KEY.into(),
        format!("{offset},{}", blob.len()),
    ));
}

/// A decoder graph, its input dims and its tokenizer blob.
type Decoder = (Graph, Vec<Vec<Dim>>, Option<Vec<u8>>);

/// Builds the decoder graph of a GGUF file (see [`crate::gguf::decoder_graph`])
/// with the toml's `[inputs] tokens` bound and `[decoder] context`, and
/// its tokenizer.
fn load_decoder(path: &Path, toml: &ModelToml) -> Result<Decoder> {
    let data = crate::gguf::read_file(path)?;
    let file = crate::gguf::parse(&data, data.len() as u64, &crate::gguf::Limits::default())?;
    let cfg = crate::gguf::decoder_config(&file)?;
    let tokenizer = crate::gguf::tokenizer_blob(&file)?;
    // The tokens bound decides the sliding-window caches' size, so it is
    // read before the graph exists.
    let tokens_max = match toml.input_dims(crate::gguf::TOKENS) {
        Some(Ok(dims)) => match dims[..] {
            [d] => d.max(),
            _ => {
                return Err(BuildError::Config(
                    "[inputs] tokens must have one dim, e.g. tokens = [\"n <= 64\"]".into(),
                ));
            }
        },
        Some(Err(e)) => return Err(BuildError::Config(format!("[inputs] `tokens`: {e}"))),
        None => {
            return Err(BuildError::Config(
                "a GGUF decoder needs [inputs] tokens = [\"n <= 64\"] (the most tokens per call)"
                    .into(),
            ));
        }
    };
    let mut g = crate::gguf::decoder_graph(&file, &data, &cfg, tokens_max, toml.decoder.context)?;
    g.metadata.push((
        lele_kernels::rt::CONTEXT_KEY.into(),
        toml.decoder.context.to_string(),
    ));
    let dims = resolve_input_dims(&g, toml)?;
    Ok((g, dims, tokenizer))
}

/// Refuses a model whose largest value (or node scratch) exceeds `cap`
/// bytes at the `[inputs]` bounds, before planning, so that the planner's
/// sums stay small; [`check_arena_cap`] then checks the planned total.
pub fn check_value_cap(g: &Graph, sizes: &passes::Sizes, cap: u64) -> Result<()> {
    let largest = sizes
        .max_bytes
        .iter()
        .chain(&sizes.scratch)
        .max_by_key(|(v, b)| (**b, std::cmp::Reverse(**v)));
    match largest {
        Some((&v, &bytes)) if bytes as u64 > cap => {
            let name = g.values.get(v).map_or("?", |x| x.name.as_str());
            Err(BuildError::Limit(format!(
                "value `{name}` (or a node's scratch beside it) would need {bytes} bytes, more \
                 than max_arena_bytes = {cap}; {ARENA_HINT}"
            )))
        }
        _ => Ok(()),
    }
}

/// Refuses a planned arena of more than `cap` bytes: the generated
/// `workspace()` would otherwise abort the user's process when it allocates.
pub fn check_arena_cap(arena_bytes: usize, cap: u64) -> Result<()> {
    if arena_bytes as u64 > cap {
        return Err(BuildError::Limit(format!(
            "the workspace would need {arena_bytes} bytes, more than max_arena_bytes = {cap}; \
             {ARENA_HINT}"
        )));
    }
    Ok(())
}

const ARENA_HINT: &str = "raise `[codegen] max_arena_bytes` in model.toml if this is intended, \
                          or lower the `[inputs]` bounds";

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
