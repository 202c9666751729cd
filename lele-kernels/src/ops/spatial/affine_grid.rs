//! `AffineGrid`: the sampling grid of a batch of 2-D or 3-D affine
//! transforms (PyTorch's `affine_grid`), to be fed to `GridSample`.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out, raw, raw_mut, read_list};
use crate::ops::dtype_dispatch::dispatch;
use crate::ops::num::Num;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

use super::set_out;

const OP: &str = "AffineGrid";

/// ONNX `AffineGrid`: inputs `theta` (float, `(N, 2, 3)` or `(N, 3, 4)`)
/// and `size` (int64, `(N, C, H, W)` or `(N, C, D, H, W)`). Output
/// `(N, H, W, 2)` or `(N, D, H, W, 3)`: `theta[n]` applied to the
/// homogeneous normalized position `(x, y[, z], 1)` of each output cell,
/// positions spanning `[-1, 1]` (pixel centers with `align_corners`, else
/// pixel edges).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AffineGrid {
    /// Whether `-1` and `1` are the centers of the corner pixels.
    pub align_corners: bool,
}
crate::to_rust_struct!(ops::spatial::affine_grid::AffineGrid { align_corners });

/// Batch, spatial dims (`[D,] H, W`) and spatial rank (2 or 3).
struct Plan {
    out: Shape,
    n: usize,
    sp: [usize; 3],
    r: usize,
}

fn plan(inputs: &[Option<TensorRef<'_>>]) -> Result<Plan, KernelError> {
    let theta = input(inputs, 0, OP)?;
    let (size, len) = read_list(input(inputs, 1, OP)?, OP)?;
    let r = match len {
        4 => 2,
        5 => 3,
        _ => {
            return Err(KernelError::Shape {
                op: OP,
                msg: "size must be (N, C, H, W) or (N, C, D, H, W)",
            });
        }
    };
    let mut dims = [0usize; 5];
    for (d, &v) in dims.iter_mut().zip(&size[..len]) {
        *d = usize::try_from(v).map_err(|_| KernelError::Invalid {
            op: OP,
            msg: "size must not be negative",
        })?;
    }
    let n = dims[0];
    if theta.shape.dims() != [n, r, r + 1] {
        return Err(KernelError::Shape {
            op: OP,
            msg: "theta must be (N, 2, 3) for a 2-D size or (N, 3, 4) for a 3-D size",
        });
    }
    let mut sp = [0usize; 3];
    sp[..r].copy_from_slice(&dims[2..2 + r]);
    let mut out = [n, 0, 0, 0, 0];
    out[1..1 + r].copy_from_slice(&sp[..r]);
    out[1 + r] = r;
    Ok(Plan {
        out: Shape::new(&out[..r + 2])?,
        n,
        sp,
        r,
    })
}

impl Kernel for AffineGrid {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let p = plan(inputs)?;
        set_out(outputs, p.out, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let theta = input(inputs, 0, OP)?;
        check_data(theta, OP)?;
        let p = plan(inputs)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, theta.dtype, &p.out, OP)?;
        let align = self.align_corners;
        dispatch!(theta.dtype, OP, [
            F32 => f32, F64 => f64, F16 => ::half::f16, BF16 => ::half::bf16,
        ], |T| {
            grid::<T>(raw(theta, OP)?, raw_mut(out, OP)?, &p, align);
            Ok(())
        })
    }
}

/// Normalized coordinate of index `i` along a dim of `d` cells.
fn base(i: usize, d: usize, align: bool) -> f64 {
    if d <= 1 {
        return 0.0;
    }
    if align {
        let step = 2.0 / (d - 1) as f64;
        -1.0 + i as f64 * step
    } else {
        let step = 2.0 / d as f64;
        (-1.0 + step / 2.0) + i as f64 * step
    }
}

fn grid<T: Num>(theta: &[T], out: &mut [T], p: &Plan, align: bool) {
    let r = p.r;
    let cells: usize = p.sp[..r].iter().product();
    if cells == 0 || p.n == 0 {
        return;
    }
    // Spatial dims innermost first: W, H[, D] pair with x, y[, z].
    let mut dims = [1usize; 3];
    for (i, d) in dims[..r].iter_mut().enumerate() {
        *d = p.sp[r - 1 - i];
    }
    let tn = r * (r + 1);
    let mut o = 0;
    for b in 0..p.n {
        let mut th = [0f64; 12];
        for (t, v) in th[..tn].iter_mut().zip(&theta[b * tn..(b + 1) * tn]) {
            *t = v.to_f64();
        }
        let mut idx = [0usize; 3];
        for _ in 0..cells {
            let mut pos = [1f64; 4];
            for i in 0..r {
                pos[i] = base(idx[i], dims[i], align);
            }
            for k in 0..r {
                let row = &th[k * (r + 1)..(k + 1) * (r + 1)];
                let v: f64 = row.iter().zip(&pos[..r + 1]).map(|(a, b)| a * b).sum();
                out[o] = T::from_f64(v);
                o += 1;
            }
            // Next cell: x (innermost) fastest.
            for i in 0..r {
                idx[i] += 1;
                if idx[i] < dims[i] {
                    break;
                }
                idx[i] = 0;
            }
        }
    }
}
