//! `MaxUnpool`: scatters pooled values back to the positions `MaxPool`'s
//! `Indices` name.
use super::MAX_SPATIAL;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::access::{raw, raw_mut, read_list};
use crate::ops::dtype_dispatch::dispatch_size;
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "MaxUnpool";

/// ONNX `MaxUnpool` over 1 to 3 spatial dims (any dtype).
///
/// Inputs: `X` `[N, C, D1, …]`, `I` (int64, shape of `X`: flat indices into
/// the unpooled tensor, as `MaxPool` writes them with `storage_order = 0`),
/// optional `output_shape`. The unpooled shape is
/// `(D - 1) * stride - pad_begin - pad_end + kernel` per spatial dim; `Y`
/// is zero except `Y[I[e]] = X[e]`. With `output_shape` (at least the
/// unpooled shape in every dim) the unpooled tensor is placed at the origin
/// of a zero tensor of that shape, as the ONNX reference does. An index
/// outside the unpooled tensor is an error.
///
/// The window attributes are right-aligned like [`super::Window`]'s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxUnpool {
    /// Number of spatial dims (`1..=3`).
    pub spatial: usize,
    /// Window size per spatial dim.
    pub kernel: [usize; MAX_SPATIAL],
    /// Strides per spatial dim.
    pub strides: [usize; MAX_SPATIAL],
    /// Begin pads of each spatial dim, then end pads.
    pub pads: [usize; 2 * MAX_SPATIAL],
}
crate::to_rust_struct!(ops::pool::MaxUnpool {
    spatial,
    kernel,
    strides,
    pads
});

impl MaxUnpool {
    /// The unpooled shape (before `output_shape`) and the output shape.
    fn shapes(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<(Shape, Shape), KernelError> {
        if self.spatial == 0 || self.spatial > MAX_SPATIAL {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "pools have 1 to 3 spatial dims",
            });
        }
        let x = input(inputs, 0, OP)?;
        let ix = input(inputs, 1, OP)?;
        if ix.dtype != DType::I64 {
            return Err(KernelError::UnsupportedDType {
                op: OP,
                dtype: ix.dtype,
            });
        }
        if ix.shape != x.shape {
            return Err(KernelError::Shape {
                op: OP,
                msg: "I must have the shape of X",
            });
        }
        if x.shape.rank() != 2 + self.spatial {
            return Err(KernelError::Shape {
                op: OP,
                msg: "input rank is not 2 + the number of kernel dims",
            });
        }
        let lead = MAX_SPATIAL - self.spatial;
        let mut unpooled = x.shape;
        for (i, d) in unpooled.dims_mut()[2..].iter_mut().enumerate() {
            let a = lead + i;
            let (k, s) = (self.kernel[a], self.strides[a]);
            if k == 0 || s == 0 {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "kernel and strides must be positive",
                });
            }
            let pads = self.pads[a] + self.pads[MAX_SPATIAL + a];
            let full = d
                .saturating_sub(1)
                .checked_mul(s)
                .and_then(|v| v.checked_add(k))
                .ok_or(KernelError::Invalid {
                    op: OP,
                    msg: "output size overflows",
                })?;
            *d = full.checked_sub(pads).ok_or(KernelError::Shape {
                op: OP,
                msg: "pads larger than the unpooled size",
            })?;
            if x.shape.dim(2 + i) == 0 {
                *d = 0;
            }
        }
        let out = match opt_input(inputs, 2) {
            None => unpooled,
            Some(t) => {
                if !t.has_data() {
                    return Err(KernelError::NeedsData { op: OP });
                }
                let (v, n) = read_list(t, OP)?;
                if n != x.shape.rank() {
                    return Err(KernelError::Shape {
                        op: OP,
                        msg: "output_shape must have one entry per dim of X",
                    });
                }
                let mut dims = [0usize; MAX_RANK];
                for (i, (d, &u)) in dims.iter_mut().zip(&v[..n]).enumerate() {
                    *d = usize::try_from(u)
                        .ok()
                        .filter(|&d| d >= unpooled.dim(i))
                        .ok_or(KernelError::Shape {
                            op: OP,
                            msg: "output_shape is smaller than the unpooled shape",
                        })?;
                }
                Shape::new(&dims[..n])?
            }
        };
        Ok((unpooled, out))
    }
}

impl Kernel for MaxUnpool {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        *outputs.first_mut().ok_or(KernelError::Invalid {
            op: OP,
            msg: "expected 1 output",
        })? = self.shapes(inputs)?.1;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (unpooled, out) = self.shapes(inputs)?;
        let xt = input(inputs, 0, OP)?;
        let ix = input(inputs, 1, OP)?.typed::<i64>(OP)?;
        let yt = output(outputs, 0, OP)?;
        if yt.dtype != xt.dtype || yt.shape != out {
            return Err(KernelError::Buffer { op: OP });
        }
        let total = unpooled.numel();
        let same = unpooled == out;
        let (ustr, ostr) = (unpooled.strides(), out.strides());
        let rank = out.rank();
        // Position in `Y` of flat index `i` of the unpooled tensor.
        let place = |i: usize| -> usize {
            if same {
                return i;
            }
            let (mut rem, mut o) = (i, 0);
            for a in 0..rank {
                o += rem / ustr[a] * ostr[a];
                rem %= ustr[a];
            }
            o
        };
        dispatch_size!(xt.dtype, OP, |T| {
            let x = raw::<T>(xt, OP)?;
            let y = raw_mut::<T>(yt, OP)?;
            if x.len() != ix.len() {
                return Err(KernelError::Buffer { op: OP });
            }
            y.fill(bytemuck::Zeroable::zeroed());
            for (&v, &i) in x.iter().zip(ix) {
                let i = usize::try_from(i)
                    .ok()
                    .filter(|&i| i < total)
                    .ok_or(KernelError::IndexOutOfRange { op: OP })?;
                y[place(i)] = v;
            }
            Ok(())
        })
    }
}
