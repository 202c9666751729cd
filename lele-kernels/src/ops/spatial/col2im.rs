//! `Col2Im`: sums sliding column blocks back into an N-D image (the adjoint
//! of im2col, like PyTorch's `fold`).
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out, raw, raw_mut, read_list};
use crate::ops::dtype_dispatch::dispatch_num;
use crate::ops::num::Num;
use crate::shape::{IntList, MAX_RANK, Shape};
use crate::tensor::{TensorMut, TensorRef};

use super::set_out;

const OP: &str = "Col2Im";
/// Most spatial dims: the output `(N, C, d1, …, dr)` must fit [`MAX_RANK`].
const MAX_SPATIAL: usize = MAX_RANK - 2;

/// ONNX `Col2Im`: inputs `input` `(N, C·∏block_shape, L)` (numeric),
/// `image_shape` and `block_shape` (int64, one entry per spatial dim).
/// Output `(N, C, *image_shape)`: every column entry is added at its image
/// position, `L` being the number of block positions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Col2Im {
    /// Strides per spatial dim (empty: all 1).
    pub strides: IntList,
    /// Pads `[begin…, end…]` (empty: all 0).
    pub pads: IntList,
    /// Dilations per spatial dim (empty: all 1).
    pub dilations: IntList,
}
crate::to_rust_struct!(ops::spatial::col2im::Col2Im {
    strides,
    pads,
    dilations
});

#[derive(Debug)]
struct Plan {
    out: Shape,
    r: usize,
    n: usize,
    c: usize,
    /// Kernel positions per channel (∏ block).
    k: usize,
    /// Block positions (∏ cols).
    l: usize,
    img: [usize; MAX_SPATIAL],
    blk: [usize; MAX_SPATIAL],
    cols: [usize; MAX_SPATIAL],
    stride: [usize; MAX_SPATIAL],
    pad: [usize; MAX_SPATIAL],
    dil: [usize; MAX_SPATIAL],
}

fn invalid(msg: &'static str) -> KernelError {
    KernelError::Invalid { op: OP, msg }
}

const ONES: [i64; MAX_SPATIAL] = [1; MAX_SPATIAL];
const ZEROS: [i64; 2 * MAX_SPATIAL] = [0; 2 * MAX_SPATIAL];

/// The attribute's entries, or `default` when it is empty.
fn attr<'a>(l: &'a IntList, default: &'a [i64]) -> &'a [i64] {
    if l.len == 0 { default } else { l.as_slice() }
}

fn to_usize(v: i64, min: i64, msg: &'static str) -> Result<usize, KernelError> {
    if v < min {
        return Err(invalid(msg));
    }
    usize::try_from(v).map_err(|_| invalid(msg))
}

fn plan(k: &Col2Im, inputs: &[Option<TensorRef<'_>>]) -> Result<Plan, KernelError> {
    let x = input(inputs, 0, OP)?;
    let (img, r) = read_list(input(inputs, 1, OP)?, OP)?;
    let (blk, rb) = read_list(input(inputs, 2, OP)?, OP)?;
    if r != rb || r == 0 {
        return Err(KernelError::Shape {
            op: OP,
            msg: "image_shape and block_shape must have the same non-zero length",
        });
    }
    if r > MAX_SPATIAL {
        return Err(KernelError::RankTooLarge(r + 2));
    }
    let &[n, ck, l] = x.shape.dims() else {
        return Err(KernelError::Shape {
            op: OP,
            msg: "input must have rank 3 (N, C·∏block_shape, L)",
        });
    };
    let strides = attr(&k.strides, &ONES[..r]);
    let dilations = attr(&k.dilations, &ONES[..r]);
    let pads = attr(&k.pads, &ZEROS[..2 * r]);
    if strides.len() != r || dilations.len() != r || pads.len() != 2 * r {
        return Err(invalid(
            "strides, dilations and pads must match the spatial rank",
        ));
    }
    let mut p = Plan {
        out: Shape::SCALAR,
        r,
        n,
        c: 0,
        k: 1,
        l: 1,
        img: [0; MAX_SPATIAL],
        blk: [0; MAX_SPATIAL],
        cols: [0; MAX_SPATIAL],
        stride: [0; MAX_SPATIAL],
        pad: [0; MAX_SPATIAL],
        dil: [0; MAX_SPATIAL],
    };
    let overflow = || invalid("sizes overflow");
    for i in 0..r {
        p.img[i] = to_usize(img[i], 0, "image_shape must not be negative")?;
        p.blk[i] = to_usize(blk[i], 1, "block_shape must be positive")?;
        p.stride[i] = to_usize(strides[i], 1, "strides must be positive")?;
        p.dil[i] = to_usize(dilations[i], 1, "dilations must be positive")?;
        p.pad[i] = to_usize(pads[i], 0, "pads must not be negative")?;
        let pad_end = to_usize(pads[i + r], 0, "pads must not be negative")?;
        let span = (p.blk[i] - 1)
            .checked_mul(p.dil[i])
            .and_then(|v| v.checked_add(1))
            .ok_or_else(overflow)?;
        let padded = p.img[i]
            .checked_add(p.pad[i])
            .and_then(|v| v.checked_add(pad_end))
            .ok_or_else(overflow)?;
        if padded < span {
            return Err(invalid("the block does not fit in the padded image"));
        }
        p.cols[i] = (padded - span) / p.stride[i] + 1;
        p.k = p.k.checked_mul(p.blk[i]).ok_or_else(overflow)?;
        p.l = p.l.checked_mul(p.cols[i]).ok_or_else(overflow)?;
    }
    if ck % p.k != 0 {
        return Err(KernelError::Shape {
            op: OP,
            msg: "input dim 1 must be divisible by the product of block_shape",
        });
    }
    if l != p.l {
        return Err(KernelError::Shape {
            op: OP,
            msg: "input dim 2 must equal the number of block positions",
        });
    }
    p.c = ck / p.k;
    let mut dims = [0usize; MAX_RANK];
    dims[0] = n;
    dims[1] = p.c;
    dims[2..2 + r].copy_from_slice(&p.img[..r]);
    p.out = Shape::new(&dims[..2 + r])?;
    Ok(p)
}

impl Kernel for Col2Im {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let p = plan(self, inputs)?;
        set_out(outputs, p.out, OP)
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
        check_out(out, x.dtype, &p.out, OP)?;
        dispatch_num!(x.dtype, OP, |T| {
            fold::<T>(raw(x, OP)?, raw_mut(out, OP)?, &p);
            Ok(())
        })
    }
}

/// Increments a multi-index over `dims`; false when it wraps around.
fn next(idx: &mut [usize], dims: &[usize]) -> bool {
    for a in (0..idx.len()).rev() {
        idx[a] += 1;
        if idx[a] < dims[a] {
            return true;
        }
        idx[a] = 0;
    }
    false
}

fn fold<T: Num>(src: &[T], dst: &mut [T], p: &Plan) {
    dst.fill(T::ZERO);
    let r = p.r;
    let img_size: usize = p.img[..r].iter().product();
    if dst.is_empty() || src.is_empty() || img_size == 0 {
        return;
    }
    let mut ist = [0usize; MAX_SPATIAL];
    let mut acc = 1;
    for i in (0..r).rev() {
        ist[i] = acc;
        acc *= p.img[i];
    }
    for plane in 0..p.n * p.c {
        let img = &mut dst[plane * img_size..(plane + 1) * img_size];
        let cols = &src[plane * p.k * p.l..(plane + 1) * p.k * p.l];
        let mut kidx = [0usize; MAX_SPATIAL];
        for kk in 0..p.k {
            let row = &cols[kk * p.l..(kk + 1) * p.l];
            let mut cidx = [0usize; MAX_SPATIAL];
            for &v in row {
                // Image offset of this (kernel, block) position, if inside.
                let mut off = Some(0usize);
                for i in 0..r {
                    let pos = cidx[i] * p.stride[i] + kidx[i] * p.dil[i];
                    off = match (off, pos.checked_sub(p.pad[i])) {
                        (Some(o), Some(q)) if q < p.img[i] => Some(o + q * ist[i]),
                        _ => None,
                    };
                }
                if let Some(o) = off {
                    img[o] = img[o].add(v);
                }
                next(&mut cidx[..r], &p.cols[..r]);
            }
            next(&mut kidx[..r], &p.blk[..r]);
        }
    }
}
