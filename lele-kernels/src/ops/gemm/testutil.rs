//! Helpers shared by the operator tests.
use alloc::vec;
use alloc::vec::Vec;

use crate::{DType, Kernel, KernelError, Shape, TensorMut, TensorRef};

/// A deterministic pseudo-random vector in [-1, 1).
pub fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// An f32 tensor view of `data`.
pub fn t<'a>(data: &'a [f32], dims: &[usize]) -> TensorRef<'a> {
    TensorRef::new(
        DType::F32,
        Shape::new(dims).unwrap(),
        bytemuck::cast_slice(data),
    )
    .unwrap()
}

/// An i64 tensor view of `data`.
pub fn ti<'a>(data: &'a [i64], dims: &[usize]) -> TensorRef<'a> {
    TensorRef::new(
        DType::I64,
        Shape::new(dims).unwrap(),
        bytemuck::cast_slice(data),
    )
    .unwrap()
}

/// Output dims and values of each output.
pub type Outputs = Vec<(Vec<usize>, Vec<f32>)>;

/// Runs `k` (infer, scratch, run) and returns the f32 outputs.
pub fn run(
    k: &(impl Kernel + ?Sized),
    inputs: &[Option<TensorRef<'_>>],
    n_out: usize,
) -> Result<Outputs, KernelError> {
    let mut shapes = vec![Shape::SCALAR; n_out];
    k.infer(inputs, &mut shapes)?;
    let mut bufs: Vec<Vec<f32>> = shapes.iter().map(|s| vec![f32::NAN; s.numel()]).collect();
    let sb = k.scratch_bytes(inputs, &shapes);
    // NaN in every float of the scratch: a kernel must not read scratch it
    // did not write (in generated code the arena holds earlier nodes' data).
    let mut scratch = vec![u64::MAX; sb.div_ceil(8) + 8];
    let sbytes: &mut [u8] = bytemuck::cast_slice_mut(&mut scratch);
    {
        let mut outs: Vec<TensorMut<'_>> = shapes
            .iter()
            .zip(bufs.iter_mut())
            .map(|(s, b)| TensorMut::new(DType::F32, *s, bytemuck::cast_slice_mut(b)).unwrap())
            .collect();
        k.run(inputs, &mut outs, &mut sbytes[..sb])?;
    }
    Ok(shapes.iter().map(|s| s.dims().to_vec()).zip(bufs).collect())
}

/// Asserts two slices agree within `tol` (relative to magnitude).
#[track_caller]
pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length mismatch");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "mismatch at {i}: got {g}, want {w}");
    }
}
