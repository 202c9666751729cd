//! `Pad` (constant, reflect, edge, wrap; negative pads crop).
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::access::{check_data, check_out, raw, raw_mut, read_list};
use crate::ops::dtype_dispatch::dispatch_size;
use crate::shape::{MAX_RANK, Shape, normalize_axis};
use crate::tensor::{TensorMut, TensorRef};

/// How [`Pad`] fills the border.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    /// A constant (input `constant_value`, default 0).
    Constant,
    /// Mirror without repeating the edge (NumPy `reflect`).
    Reflect,
    /// Repeat the edge value.
    Edge,
    /// Wrap around (torus).
    Wrap,
}
crate::to_rust_enum!(ops::pad::PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap
});

/// ONNX `Pad`: inputs `data`, `pads` (i64, `[begins…, ends…]` for the
/// listed axes), optional scalar `constant_value`, optional `axes`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pad {
    /// The padding mode.
    pub mode: PadMode,
}
crate::to_rust_struct!(ops::pad::Pad { mode });

const OP: &str = "Pad";

struct Plan {
    shape: Shape,
    begin: [i64; MAX_RANK],
}

fn plan(inputs: &[Option<TensorRef<'_>>]) -> Result<Plan, KernelError> {
    let x = input(inputs, 0, OP)?;
    let rank = x.shape.rank();
    let (pads, np) = read_list(input(inputs, 1, OP)?, OP)?;
    let mut axes = [0usize; MAX_RANK];
    let naxes = match opt_input(inputs, 3) {
        Some(t) => {
            let (a, n) = read_list(t, OP)?;
            if n > MAX_RANK {
                return Err(KernelError::RankTooLarge(n));
            }
            for (dst, &v) in axes.iter_mut().zip(&a[..n]) {
                *dst = normalize_axis(v, rank, OP)?;
            }
            n
        }
        None => {
            for (i, a) in axes[..rank].iter_mut().enumerate() {
                *a = i;
            }
            rank
        }
    };
    if np != 2 * naxes {
        return Err(KernelError::Invalid {
            op: OP,
            msg: "pads must have two entries per axis",
        });
    }
    let mut p = Plan {
        shape: x.shape,
        begin: [0; MAX_RANK],
    };
    for (i, &a) in axes[..naxes].iter().enumerate() {
        let (b, e) = (pads[i], pads[i + naxes]);
        // Each side crops at most the dim (so `source`'s `o - begin` fits).
        let dim = i64::try_from(x.shape.dims()[a]).unwrap_or(i64::MAX);
        if b < -dim || e < -dim {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "pads crop more than the dim",
            });
        }
        // Hostile pads (i64::MAX, i64::MIN) must not wrap the sum.
        let d = i64::try_from(x.shape.dims()[a])
            .ok()
            .and_then(|d| d.checked_add(b)?.checked_add(e))
            .ok_or(KernelError::Invalid {
                op: OP,
                msg: "padded dim overflows",
            })?;
        if d < 0 {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "pads crop more than the dim",
            });
        }
        p.shape.dims_mut()[a] = d as usize;
        p.begin[a] = b;
    }
    Ok(p)
}

impl Kernel for Pad {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let p = plan(inputs)?;
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = p.shape;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, OP)?;
        check_data(x, OP)?;
        let p = plan(inputs)?;
        let out = output(outputs, 0, OP)?;
        check_out(out, x.dtype, &p.shape, OP)?;
        let es = x.dtype.size();
        let mut cval = [0u8; 8];
        if let Some(c) = opt_input(inputs, 2).filter(|t| t.numel() > 0) {
            check_data(c, OP)?;
            if c.dtype != x.dtype || c.numel() != 1 {
                return Err(KernelError::Invalid {
                    op: OP,
                    msg: "constant_value must be a scalar of the data dtype",
                });
            }
            cval[..es].copy_from_slice(c.data);
        }
        if p.shape.numel() == 0 {
            return Ok(());
        }
        if self.mode != PadMode::Constant
            && x.numel() == 0
            && p.shape
                .dims()
                .iter()
                .zip(x.shape.dims())
                .any(|(o, i)| o != i)
        {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "cannot reflect/edge/wrap-pad an empty dim",
            });
        }
        let mode = self.mode;
        dispatch_size!(x.dtype, OP, |T| {
            let src = raw::<T>(x, OP)?;
            let dst = raw_mut::<T>(out, OP)?;
            let c: T = bytemuck::pod_read_unaligned(&cval[..es]);
            pad(mode, src, &x.shape, dst, &p, c);
            Ok(())
        })
    }
}

/// Source coordinate of output coordinate `o` along a dim of size `d`, or
/// `None` for a constant cell.
#[inline]
fn source(mode: PadMode, o: usize, begin: i64, d: usize) -> Option<usize> {
    let c = o as i64 - begin;
    let di = d as i64;
    if (0..di).contains(&c) {
        return Some(c as usize);
    }
    match mode {
        PadMode::Constant => None,
        PadMode::Edge => Some(c.clamp(0, di - 1) as usize),
        PadMode::Wrap => Some(c.rem_euclid(di) as usize),
        PadMode::Reflect => {
            if di == 1 {
                return Some(0);
            }
            let period = 2 * (di - 1);
            let m = c.rem_euclid(period);
            Some(if m >= di { period - m } else { m } as usize)
        }
    }
}

fn pad<T: Copy>(mode: PadMode, src: &[T], in_shape: &Shape, dst: &mut [T], p: &Plan, c: T) {
    let r = p.shape.rank();
    if r == 0 {
        dst[0] = src[0];
        return;
    }
    let od = p.shape.dims();
    let id = in_shape.dims();
    let st = in_shape.strides();
    let n = od[r - 1];
    let (d_last, b_last) = (id[r - 1], p.begin[r - 1]);
    // Interior of the last dim: output columns copying a contiguous run.
    let lo = b_last.clamp(0, n as i64) as usize;
    let hi = (b_last + d_last as i64).clamp(0, n as i64) as usize;
    let mut idx = [0usize; MAX_RANK];
    let mut o = 0;
    loop {
        // Source row offset, or None if this row is constant padding.
        let mut off = Some(0usize);
        for a in 0..r - 1 {
            off = match (off, source(mode, idx[a], p.begin[a], id[a])) {
                (Some(acc), Some(s)) => Some(acc + s * st[a]),
                _ => None,
            };
        }
        let row = &mut dst[o..o + n];
        match off {
            None => row.fill(c),
            Some(base) => {
                for (j, v) in row[..lo].iter_mut().enumerate() {
                    *v = source(mode, j, b_last, d_last).map_or(c, |s| src[base + s]);
                }
                if hi > lo {
                    let s0 = (lo as i64 - b_last) as usize;
                    row[lo..hi].copy_from_slice(&src[base + s0..base + s0 + hi - lo]);
                }
                for (j, v) in row[hi..].iter_mut().enumerate() {
                    *v = source(mode, hi + j, b_last, d_last).map_or(c, |s| src[base + s]);
                }
            }
        }
        o += n;
        let mut a = r - 1;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < od[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::test_util::{Owned, run1};
    use alloc::vec::Vec;

    fn pad(x: &Owned, mode: PadMode, pads: &[i64], cv: Option<f32>, axes: Option<&[i64]>) -> Owned {
        let p = Owned::new(&[pads.len()], pads);
        let c = cv.map(|v| Owned::new(&[], &[v]));
        let a = axes.map(|a| Owned::new(&[a.len()], a));
        run1(
            &Pad { mode },
            &[Some(x), Some(&p), c.as_ref(), a.as_ref()],
            x.dtype,
        )
        .unwrap()
    }

    /// Pads of i64::MAX overflowed `dim + begin + end` (a panic with
    /// overflow checks, as in a proc macro; a wrapped dim without).
    #[test]
    fn pads_that_overflow_are_errors() {
        let x = Owned::new(&[4], &[1.0f32, 2.0, 3.0, 4.0]);
        for pads in [[i64::MAX, i64::MAX], [i64::MAX, 1], [i64::MIN, -1]] {
            let p = Owned::new(&[2], &pads);
            let mut out = [x.shape];
            let r = Pad {
                mode: PadMode::Constant,
            }
            .infer(&[Some(x.r()), Some(p.r())], &mut out);
            assert!(
                matches!(r, Err(KernelError::Invalid { .. })),
                "{pads:?}: {r:?}"
            );
        }
    }

    #[test]
    fn onnx_doc_examples() {
        let x = Owned::new(&[3, 2], &[1.0f32, 1.2, 2.3, 3.4, 4.5, 5.7]);
        let y = pad(&x, PadMode::Constant, &[0, 2, 0, 0], Some(0.0), None);
        assert_eq!(
            y.to::<f32>(),
            [0., 0., 1.0, 1.2, 0., 0., 2.3, 3.4, 0., 0., 4.5, 5.7]
        );
        let y = pad(&x, PadMode::Reflect, &[0, 2, 0, 0], None, None);
        assert_eq!(
            y.to::<f32>(),
            [1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]
        );
        let y = pad(&x, PadMode::Edge, &[0, 2, 0, 0], None, None);
        assert_eq!(
            y.to::<f32>(),
            [1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7]
        );
        let y = pad(&x, PadMode::Wrap, &[2, 1, 1, 1], None, None);
        assert_eq!(y.dims(), &[6, 4]);
        assert_eq!(
            y.to::<f32>(),
            [
                3.4, 2.3, 3.4, 2.3, 5.7, 4.5, 5.7, 4.5, 1.2, 1.0, 1.2, 1.0, 3.4, 2.3, 3.4, 2.3,
                5.7, 4.5, 5.7, 4.5, 1.2, 1.0, 1.2, 1.0
            ]
        );
    }

    #[test]
    fn reflect_wide_crop_and_axes() {
        // np.pad(np.arange(4), (5, 6), mode='reflect')
        let x = Owned::new(&[4], &[0i64, 1, 2, 3]);
        let p = Owned::new(&[2], &[5i64, 6]);
        let y = run1(
            &Pad {
                mode: PadMode::Reflect,
            },
            &[Some(&x), Some(&p)],
            DType::I64,
        )
        .unwrap();
        assert_eq!(y.to::<i64>(), [1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2, 3]);
        // Negative pads crop; axes select the padded dims.
        let data: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let x = Owned::new(&[3, 4], &data);
        let y = pad(&x, PadMode::Constant, &[-1, 1], Some(9.0), Some(&[-1]));
        assert_eq!(y.dims(), &[3, 4]);
        assert_eq!(
            y.to::<f32>(),
            [1., 2., 3., 9., 5., 6., 7., 9., 9., 10., 11., 9.]
        );
        let y = pad(&x, PadMode::Constant, &[1, 0], Some(-1.0), Some(&[0]));
        assert_eq!(&y.to::<f32>()[..5], &[-1., -1., -1., -1., 0.]);
        let y = pad(&x, PadMode::Edge, &[1, 1, 1, 1], None, None);
        assert_eq!(y.dims(), &[5, 6]);
        assert_eq!(&y.to::<f32>()[..7], &[0., 0., 1., 2., 3., 3., 0.]);
    }
}
