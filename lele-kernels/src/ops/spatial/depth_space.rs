//! `DepthToSpace` and `SpaceToDepth`: moving `blocksize × blocksize` blocks
//! between the channel dim and the two spatial dims of an NCHW tensor.
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output};
use crate::ops::access::{check_data, check_out, raw, raw_mut};
use crate::ops::dtype_dispatch::dispatch_size;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

use super::set_out;

/// Order of the block entries along the channel dim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockMode {
    /// Depth-column-row: channel `(i * blocksize + j) * C + c` (the default).
    Dcr,
    /// Column-row-depth: channel `(c * blocksize + i) * blocksize + j`.
    Crd,
}
crate::to_rust_enum!(ops::spatial::depth_space::BlockMode { Dcr, Crd });

/// ONNX `DepthToSpace`: `(N, C·b², H, W)` → `(N, C, H·b, W·b)`, any dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DepthToSpace {
    /// Block size `b` (≥ 1).
    pub blocksize: usize,
    /// Channel order of the blocks.
    pub mode: BlockMode,
}
crate::to_rust_struct!(ops::spatial::depth_space::DepthToSpace { blocksize, mode });

/// ONNX `SpaceToDepth`: `(N, C, H, W)` → `(N, C·b², H/b, W/b)`, any dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpaceToDepth {
    /// Block size `b` (≥ 1).
    pub blocksize: usize,
    /// Channel order of the blocks.
    pub mode: BlockMode,
}
crate::to_rust_struct!(ops::spatial::depth_space::SpaceToDepth { blocksize, mode });

const D2S: &str = "DepthToSpace";
const S2D: &str = "SpaceToDepth";

/// Dims `[n, c, h, w]` of the depth-side tensor from the space-side one or
/// back, checking divisibility.
fn nchw(x: &TensorRef<'_>, op: &'static str) -> Result<[usize; 4], KernelError> {
    match *x.shape.dims() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(KernelError::Shape {
            op,
            msg: "input must have rank 4 (NCHW)",
        }),
    }
}

fn check_bs(bs: usize, op: &'static str) -> Result<usize, KernelError> {
    if bs == 0 {
        return Err(KernelError::Invalid {
            op,
            msg: "blocksize must be positive",
        });
    }
    bs.checked_mul(bs).ok_or(KernelError::Invalid {
        op,
        msg: "blocksize too large",
    })
}

/// `[n, c, h, w]` of the space-side tensor (`c` channels, spatial `h·b × w·b`)
/// for a depth-side tensor of dims `d`.
fn d2s_shape(d: [usize; 4], bs: usize, op: &'static str) -> Result<Shape, KernelError> {
    let bb = check_bs(bs, op)?;
    let [n, c, h, w] = d;
    if c % bb != 0 {
        return Err(KernelError::Shape {
            op,
            msg: "channels must be divisible by blocksize²",
        });
    }
    let too_big = KernelError::Shape {
        op,
        msg: "output dims overflow",
    };
    let hh = h.checked_mul(bs).ok_or(too_big.clone())?;
    let ww = w.checked_mul(bs).ok_or(too_big)?;
    Shape::new(&[n, c / bb, hh, ww])
}

fn s2d_shape(s: [usize; 4], bs: usize, op: &'static str) -> Result<Shape, KernelError> {
    let bb = check_bs(bs, op)?;
    let [n, c, h, w] = s;
    if h % bs != 0 || w % bs != 0 {
        return Err(KernelError::Shape {
            op,
            msg: "height and width must be divisible by blocksize",
        });
    }
    let cc = c.checked_mul(bb).ok_or(KernelError::Shape {
        op,
        msg: "output dims overflow",
    })?;
    Shape::new(&[n, cc, h / bs, w / bs])
}

/// Copies between the space-side tensor (dims `[n, c, h·b, w·b]`) and the
/// depth-side tensor (dims `[n, c·b², h, w]`); `to_space` picks the
/// direction.
fn rearrange<T: Copy>(
    space: [usize; 4],
    bs: usize,
    mode: BlockMode,
    to_space: bool,
    src: &[T],
    dst: &mut [T],
) {
    let [n, c, sh, sw] = space;
    let (h, w) = (sh / bs, sw / bs);
    let cd = c * bs * bs;
    for b in 0..n {
        for ch in 0..c {
            for y in 0..sh {
                let (i, hh) = (y % bs, y / bs);
                let s_row = ((b * c + ch) * sh + y) * sw;
                for j in 0..bs {
                    let dc = match mode {
                        BlockMode::Dcr => (i * bs + j) * c + ch,
                        BlockMode::Crd => (ch * bs + i) * bs + j,
                    };
                    let d_row = ((b * cd + dc) * h + hh) * w;
                    for wx in 0..w {
                        let (so, d) = (s_row + wx * bs + j, d_row + wx);
                        if to_space {
                            dst[so] = src[d];
                        } else {
                            dst[d] = src[so];
                        }
                    }
                }
            }
        }
    }
}

impl Kernel for DepthToSpace {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, D2S)?;
        let s = d2s_shape(nchw(x, D2S)?, self.blocksize, D2S)?;
        set_out(outputs, s, D2S)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, D2S)?;
        check_data(x, D2S)?;
        let s = d2s_shape(nchw(x, D2S)?, self.blocksize, D2S)?;
        let out = output(outputs, 0, D2S)?;
        check_out(out, x.dtype, &s, D2S)?;
        let space = [s.dim(0), s.dim(1), s.dim(2), s.dim(3)];
        let (bs, mode) = (self.blocksize, self.mode);
        dispatch_size!(x.dtype, D2S, |T| {
            rearrange::<T>(space, bs, mode, true, raw(x, D2S)?, raw_mut(out, D2S)?);
            Ok(())
        })
    }
}

impl Kernel for SpaceToDepth {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, S2D)?;
        let s = s2d_shape(nchw(x, S2D)?, self.blocksize, S2D)?;
        set_out(outputs, s, S2D)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, S2D)?;
        check_data(x, S2D)?;
        let space = nchw(x, S2D)?;
        let s = s2d_shape(space, self.blocksize, S2D)?;
        let out = output(outputs, 0, S2D)?;
        check_out(out, x.dtype, &s, S2D)?;
        let (bs, mode) = (self.blocksize, self.mode);
        dispatch_size!(x.dtype, S2D, |T| {
            rearrange::<T>(space, bs, mode, false, raw(x, S2D)?, raw_mut(out, S2D)?);
            Ok(())
        })
    }
}
