//! Shapes and window arithmetic shared by the convolutions and pools:
//! `auto_pad`, the `N, C, (H,) W` view of an input, output sizes.
use crate::error::KernelError;
use crate::shape::Shape;

/// ONNX `auto_pad`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoPad {
    /// Use the explicit `pads`.
    NotSet,
    /// Output size `ceil(in / stride)`, extra padding at the end.
    SameUpper,
    /// Output size `ceil(in / stride)`, extra padding at the beginning.
    SameLower,
    /// No padding.
    Valid,
}
crate::to_rust_enum!(ops::conv::AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid
});

/// `N, C, H, W` of a rank-3 (`H = 1`) or rank-4 tensor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Nchw {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub one_d: bool,
}

pub(crate) fn nchw(s: &Shape, op: &'static str) -> Result<Nchw, KernelError> {
    match *s.dims() {
        [n, c, w] => Ok(Nchw {
            n,
            c,
            h: 1,
            w,
            one_d: true,
        }),
        [n, c, h, w] => Ok(Nchw {
            n,
            c,
            h,
            w,
            one_d: false,
        }),
        _ => Err(KernelError::Shape {
            op,
            msg: "expected a rank-3 (N,C,W) or rank-4 (N,C,H,W) input",
        }),
    }
}

/// The output shape `[N, C, (H,) W]` matching `x`'s rank.
pub(crate) fn out_shape(x: Nchw, c: usize, h: usize, w: usize) -> Result<Shape, KernelError> {
    if x.one_d {
        Shape::new(&[x.n, c, w])
    } else {
        Shape::new(&[x.n, c, h, w])
    }
}

/// Output size and `(begin, end)` padding of one spatial axis of a
/// convolution or pooling window. `ceil` selects pooling's `ceil_mode`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn window_out(
    len: usize,
    k: usize,
    s: usize,
    d: usize,
    pad_begin: usize,
    pad_end: usize,
    auto_pad: AutoPad,
    ceil: bool,
    op: &'static str,
) -> Result<(usize, usize, usize), KernelError> {
    if k == 0 || s == 0 || d == 0 {
        return Err(KernelError::Invalid {
            op,
            msg: "kernel, strides and dilations must be positive",
        });
    }
    let big = || KernelError::Invalid {
        op,
        msg: "window arithmetic overflows",
    };
    let eff = (k - 1)
        .checked_mul(d)
        .and_then(|e| e.checked_add(1))
        .ok_or_else(big)?;
    let too_small = KernelError::Shape {
        op,
        msg: "input smaller than the kernel window",
    };
    match auto_pad {
        AutoPad::SameUpper | AutoPad::SameLower => {
            let out = len.div_ceil(s);
            let total = (out.max(1) - 1)
                .checked_mul(s)
                .and_then(|e| e.checked_add(eff))
                .ok_or_else(big)?
                .saturating_sub(len);
            let begin = if auto_pad == AutoPad::SameUpper {
                total / 2
            } else {
                total - total / 2
            };
            Ok((out, begin, total - begin))
        }
        AutoPad::Valid => {
            if len < eff {
                return Err(too_small);
            }
            Ok(((len - eff) / s + 1, 0, 0))
        }
        AutoPad::NotSet => {
            let padded = len
                .checked_add(pad_begin)
                .and_then(|p| p.checked_add(pad_end))
                .ok_or_else(big)?;
            if padded < eff {
                return Err(too_small);
            }
            let span = padded - eff;
            let mut out = if ceil { span.div_ceil(s) } else { span / s } + 1;
            // The last window must start inside the input or the begin padding.
            // (`len + pad_begin <= padded` fits; a product past usize is
            // past it.)
            if ceil
                && (out - 1)
                    .checked_mul(s)
                    .is_none_or(|v| v >= len + pad_begin)
            {
                out -= 1;
            }
            Ok((out, pad_begin, pad_end))
        }
    }
}
