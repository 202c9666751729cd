//! Evaluating a kernel on owned tensors (constant folding and sizing use
//! the very same `infer`/`run` as generated code).
use lele_kernels::{DType, Shape, TensorRef};

use crate::ir::Tensor;
use crate::ops::OpKernel;

/// The most bytes a build-time evaluation may allocate for its outputs (and,
/// separately, its scratch): the callers fold and size far smaller values,
/// so this only stops a hostile shape from exhausting memory.
pub const MAX_EVAL_BYTES: usize = 1 << 30;

fn too_large(shapes: &[Shape]) -> String {
    format!(
        "outputs of shapes {:?} are too large to evaluate at build time",
        shapes.iter().map(Shape::dims).collect::<Vec<_>>()
    )
}

/// Runs `k` on `inputs`, producing outputs of the given dtypes.
pub fn eval_kernel(
    k: &dyn OpKernel,
    inputs: &[Option<TensorRef<'_>>],
    out_dtypes: &[DType],
) -> Result<Vec<Tensor>, String> {
    let mut shapes = vec![Shape::SCALAR; out_dtypes.len()];
    k.infer(inputs, &mut shapes).map_err(|e| e.to_string())?;
    let mut total = 0usize;
    for (s, d) in shapes.iter().zip(out_dtypes) {
        // The rule the sizing pass holds every value to, here for the
        // values folded before it runs.
        if !super::sizing::addressable(s, d.size()) {
            return Err(too_large(&shapes));
        }
        total = s
            .checked_bytes(d.size())
            .and_then(|b| total.checked_add(b))
            .ok_or_else(|| too_large(&shapes))?;
    }
    if total > MAX_EVAL_BYTES {
        return Err(too_large(&shapes));
    }
    let mut outs: Vec<Tensor> = shapes
        .iter()
        .zip(out_dtypes)
        .map(|(s, d)| Tensor::zeros(*d, s.dims()).ok_or_else(|| too_large(&shapes)))
        .collect::<Result<_, _>>()?;
    let scratch_len = k.scratch_bytes(inputs, &shapes);
    if scratch_len > MAX_EVAL_BYTES {
        return Err(format!(
            "evaluating it at build time needs {scratch_len} bytes of scratch"
        ));
    }
    let mut scratch = lele_kernels::Arena::new(scratch_len);
    {
        let mut views = Vec::with_capacity(outs.len());
        for o in outs.iter_mut() {
            views.push(o.view_mut().map_err(|e| e.to_string())?);
        }
        k.run(inputs, &mut views, &mut scratch.bytes_mut()[..scratch_len])
            .map_err(|e| e.to_string())?;
    }
    Ok(outs)
}
