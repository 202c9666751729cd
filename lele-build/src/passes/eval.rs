//! Evaluating a kernel on owned tensors (constant folding and sizing use
//! the very same `infer`/`run` as generated code).
use lele_kernels::{DType, Shape, TensorRef};

use crate::ir::Tensor;
use crate::ops::OpKernel;

/// Runs `k` on `inputs`, producing outputs of the given dtypes.
pub fn eval_kernel(
    k: &dyn OpKernel,
    inputs: &[Option<TensorRef<'_>>],
    out_dtypes: &[DType],
) -> Result<Vec<Tensor>, String> {
    let mut shapes = vec![Shape::SCALAR; out_dtypes.len()];
    k.infer(inputs, &mut shapes).map_err(|e| e.to_string())?;
    let mut outs: Vec<Tensor> = shapes
        .iter()
        .zip(out_dtypes)
        .map(|(s, d)| Tensor::zeros(*d, s.dims()))
        .collect();
    let scratch_len = k.scratch_bytes(inputs, &shapes);
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
