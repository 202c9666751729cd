//! `CenterCropPad`: crops or zero-pads chosen axes to target sizes, keeping
//! the content centered.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out, raw, raw_mut, read_list};
use crate::ops::dtype_dispatch::dispatch_size;
use crate::shape::{IntList, MAX_RANK, Shape, normalize_axis};
use crate::tensor::{TensorMut, TensorRef};

use super::set_out;

const OP: &str = "CenterCropPad";

/// ONNX `CenterCropPad`: inputs `input_data` (any dtype) and `shape`
/// (int32/int64, one target size per axis in `axes`). A larger dim is
/// cropped starting at `floor((dim - size) / 2)`; a smaller one is padded
/// with zeros, `floor((size - dim) / 2)` before and the rest after.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CenterCropPad {
    /// Axes the target sizes apply to (may be negative); empty means all.
    pub axes: IntList,
}
crate::to_rust_struct!(ops::spatial::center_crop_pad::CenterCropPad { axes });

/// Output shape and, per axis, the input coordinate of output coordinate 0
/// (negative when padding before).
struct Plan {
    shape: Shape,
    shift: [i64; MAX_RANK],
}

fn plan(k: &CenterCropPad, inputs: &[Option<TensorRef<'_>>]) -> Result<Plan, KernelError> {
    let x = input(inputs, 0, OP)?;
    let rank = x.shape.rank();
    let (sizes, n) = read_list(input(inputs, 1, OP)?, OP)?;
    let mut axes = [0usize; 2 * MAX_RANK];
    let naxes = if k.axes.len == 0 {
        for (i, a) in axes[..rank].iter_mut().enumerate() {
            *a = i;
        }
        rank
    } else {
        for (dst, &a) in axes.iter_mut().zip(k.axes.as_slice()) {
            *dst = normalize_axis(a, rank, OP)?;
        }
        k.axes.len
    };
    if n != naxes {
        return Err(KernelError::Shape {
            op: OP,
            msg: "shape must have one entry per axis",
        });
    }
    let mut p = Plan {
        shape: x.shape,
        shift: [0; MAX_RANK],
    };
    let mut seen = [false; MAX_RANK];
    for (&a, &size) in axes[..naxes].iter().zip(&sizes[..n]) {
        if seen[a] {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "repeated axis",
            });
        }
        seen[a] = true;
        if size < 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "negative target size",
            });
        }
        let dim = i64::try_from(x.shape.dim(a)).map_err(|_| KernelError::Invalid {
            op: OP,
            msg: "dim too large",
        })?;
        p.shift[a] = if size <= dim {
            (dim - size) / 2
        } else {
            -((size - dim) / 2)
        };
        p.shape.dims_mut()[a] = usize::try_from(size).map_err(|_| KernelError::Invalid {
            op: OP,
            msg: "target size too large",
        })?;
    }
    Ok(p)
}

impl Kernel for CenterCropPad {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let p = plan(self, inputs)?;
        set_out(outputs, p.shape, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let p = plan(self, inputs)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &p.shape, OP)?;
        dispatch_size!(x.dtype, OP, |T| {
            let dst = raw_mut::<T>(out, OP)?;
            dst.fill(bytemuck::Zeroable::zeroed());
            copy(raw::<T>(x, OP)?, &x.shape, dst, &p);
            Ok(())
        })
    }
}

/// Copies the overlap of input and output; `dst` is already zeroed.
fn copy<T: Copy>(src: &[T], in_shape: &Shape, dst: &mut [T], p: &Plan) {
    let r = in_shape.rank();
    if p.shape.numel() == 0 || src.is_empty() {
        return;
    }
    if r == 0 {
        dst[0] = src[0];
        return;
    }
    let (id, od) = (in_shape.dims(), p.shape.dims());
    let (ist, ost) = (in_shape.strides(), p.shape.strides());
    // Range of output coordinates holding input data along each axis.
    let mut lo = [0usize; MAX_RANK];
    let mut hi = [0usize; MAX_RANK];
    for a in 0..r {
        let s = p.shift[a];
        lo[a] = (-s).clamp(0, od[a] as i64) as usize;
        hi[a] = (id[a] as i64 - s).clamp(0, od[a] as i64) as usize;
        if lo[a] >= hi[a] {
            return;
        }
    }
    let last = r - 1;
    let run = hi[last] - lo[last];
    let mut idx = lo;
    loop {
        let mut so = 0usize;
        let mut d = 0usize;
        for a in 0..r {
            so += (idx[a] as i64 + p.shift[a]) as usize * ist[a];
            d += idx[a] * ost[a];
        }
        dst[d..d + run].copy_from_slice(&src[so..so + run]);
        // Next row (all axes but the last).
        let mut a = last;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < hi[a] {
                break;
            }
            idx[a] = lo[a];
        }
    }
}
