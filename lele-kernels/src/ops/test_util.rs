//! Helpers to build tensors and run kernels in tests.
use alloc::vec;
use alloc::vec::Vec;

use crate::Kernel;
use crate::dtype::{DType, Elem};
use crate::error::KernelError;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// An owned tensor for tests.
#[derive(Debug, Clone)]
pub struct Owned {
    pub dtype: DType,
    pub shape: Shape,
    pub bytes: Vec<u64>,
}

impl Owned {
    pub fn new<T: Elem>(dims: &[usize], data: &[T]) -> Owned {
        let shape = Shape::new(dims).unwrap();
        assert_eq!(shape.numel(), data.len());
        Owned::from_bytes(T::DTYPE, shape, bytemuck::cast_slice(data))
    }
    pub fn boolean(dims: &[usize], data: &[bool]) -> Owned {
        let shape = Shape::new(dims).unwrap();
        let b: Vec<u8> = data.iter().map(|&x| x as u8).collect();
        Owned::from_bytes(DType::Bool, shape, &b)
    }
    pub fn from_bytes(dtype: DType, shape: Shape, b: &[u8]) -> Owned {
        let mut bytes = alloc::vec![0u64; b.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut bytes)[..b.len()].copy_from_slice(b);
        Owned {
            dtype,
            shape,
            bytes,
        }
    }
    pub fn zeros(dtype: DType, shape: Shape) -> Owned {
        Owned::from_bytes(
            dtype,
            shape,
            &alloc::vec![0u8; shape.numel() * dtype.size()],
        )
    }
    pub fn data(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.bytes)[..self.shape.numel() * self.dtype.size()]
    }
    pub fn r(&self) -> TensorRef<'_> {
        TensorRef::new(self.dtype, self.shape, self.data()).unwrap()
    }
    pub fn to<T: Elem>(&self) -> Vec<T> {
        bytemuck::cast_slice::<u8, T>(self.data()).to_vec()
    }
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }
}

/// Runs a kernel: infers the output shapes, allocates the outputs with
/// the given dtypes and runs it.
pub fn run_kernel<K: crate::Kernel>(
    k: &K,
    inputs: &[Option<&Owned>],
    out_dtypes: &[DType],
) -> Result<Vec<Owned>, KernelError> {
    let ins: Vec<Option<TensorRef<'_>>> = inputs.iter().map(|o| o.map(|o| o.r())).collect();
    let mut shapes = alloc::vec![Shape::SCALAR; out_dtypes.len()];
    k.infer(&ins, &mut shapes)?;
    // Shape inference without data must agree (or ask for data).
    let blind: Vec<Option<TensorRef<'_>>> = inputs
        .iter()
        .map(|o| o.map(|o| TensorRef::shape_only(o.dtype, o.shape)))
        .collect();
    let mut shapes2 = alloc::vec![Shape::SCALAR; out_dtypes.len()];
    match k.infer(&blind, &mut shapes2) {
        Ok(()) => assert_eq!(shapes, shapes2),
        Err(KernelError::NeedsData { .. }) => {
            // A stated bound must hold.
            let mut bounds = alloc::vec![0usize; out_dtypes.len()];
            if k.max_output_elems(&blind, &mut bounds)? {
                for (s, b) in shapes.iter().zip(&bounds) {
                    assert!(s.numel() <= *b, "{s:?} exceeds the bound {b}");
                }
            }
        }
        Err(e) => panic!("blind infer failed: {e:?}"),
    }
    let mut outs: Vec<Owned> = out_dtypes
        .iter()
        .zip(&shapes)
        .map(|(&d, &s)| Owned::zeros(d, s))
        .collect();
    let scratch_n = k.scratch_bytes(&ins, &shapes);
    let mut scratch_store = alloc::vec![0u128; scratch_n.div_ceil(16)];
    let scratch = &mut bytemuck::cast_slice_mut::<u128, u8>(&mut scratch_store)[..scratch_n];
    {
        let mut muts: Vec<TensorMut<'_>> = outs
            .iter_mut()
            .map(|o| {
                let n = o.shape.numel() * o.dtype.size();
                let data = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut o.bytes)[..n];
                TensorMut::new(o.dtype, o.shape, data).unwrap()
            })
            .collect();
        k.run(&ins, &mut muts, scratch)?;
    }
    Ok(outs)
}

/// Runs a single-output kernel.
pub fn run1<K: crate::Kernel>(
    k: &K,
    inputs: &[Option<&Owned>],
    out_dtype: DType,
) -> Result<Owned, KernelError> {
    Ok(run_kernel(k, inputs, &[out_dtype])?.remove(0))
}

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
