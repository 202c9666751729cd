//! Compiles `model.toml` with `lele_build::Compiler`: ONNX `HardSigmoid` is
//! lowered to this crate's own kernel, and the hard-swish subgraph
//! (Add → Clip → Mul → Div) is fused into one kernel by a pattern.
#[path = "src/kernels.rs"]
#[allow(dead_code)]
mod kernels;

use lele_build::ir::OutDType;
use lele_build::{Compiler, GraphView, PatternMatch, Replacement};
use quote::quote;

/// The f32 scalar constant `v` holds, if any.
fn scalar(g: &GraphView<'_>, v: Option<usize>) -> Option<f64> {
    let t = g.constant(v?)?;
    match t.to_f64s()?.as_slice() {
        [x] => Some(*x),
        _ => None,
    }
}

/// `Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)`, anchored at the Div.
fn hard_swish(g: &GraphView<'_>, i: usize) -> Option<PatternMatch> {
    let nodes = g.nodes();
    let div = &nodes[i];
    if div.op_type != "Div" || scalar(g, *div.inputs.get(1)?)? != 6.0 {
        return None;
    }
    let mul_i = g.producer((*div.inputs.first()?)?)?;
    let mul = &nodes[mul_i];
    if mul.op_type != "Mul" {
        return None;
    }
    let (x, clip_out) = ((*mul.inputs.first()?)?, (*mul.inputs.get(1)?)?);
    let clip_i = g.producer(clip_out)?;
    let clip = &nodes[clip_i];
    if clip.op_type != "Clip"
        || scalar(g, *clip.inputs.get(1)?)? != 0.0
        || scalar(g, *clip.inputs.get(2)?)? != 6.0
    {
        return None;
    }
    let add_i = g.producer((*clip.inputs.first()?)?)?;
    let add = &nodes[add_i];
    if add.op_type != "Add"
        || *add.inputs.first()? != Some(x)
        || scalar(g, *add.inputs.get(1)?)? != 3.0
    {
        return None;
    }
    Some(PatternMatch {
        nodes: vec![add_i, clip_i, mul_i, i],
        inputs: vec![Some(x)],
        outputs: vec![*div.outputs.first()?],
    })
}

fn main() {
    let result = Compiler::new()
        .with_toml("model.toml")
        .with_name("TextDirection")
        .with_default_optimizations()
        .with_override("HardSigmoid", |node| {
            let alpha = node.attrs.float("alpha", 0.2);
            let beta = node.attrs.float("beta", 0.5);
            Ok(Replacement::new(
                kernels::HardSigmoid { alpha, beta },
                quote!(crate::kernels::HardSigmoid { alpha: #alpha, beta: #beta }),
                vec![OutDType::Input(0)],
            ))
        })
        .with_pattern("HardSwish", hard_swish, |_, _| {
            Ok(Replacement::new(
                kernels::HardSwish,
                quote!(crate::kernels::HardSwish),
                vec![OutDType::Input(0)],
            ))
        })
        .build()
        .and_then(|_| {
            // The same model without constant folding (a check that the
            // folding switch keeps results unchanged).
            Compiler::new()
                .with_toml("model.toml")
                .with_name("TextDirectionUnfolded")
                .with_constant_folding(false)
                .build()
        });
    if let Err(e) = result {
        // Shown by cargo as the build script's failure.
        eprintln!("lele: {e}");
        std::process::exit(1);
    }
}
