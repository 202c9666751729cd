//! `MatMulInteger` and `QLinearMatMul`: NumPy `matmul` of 8-bit integer
//! matrices with zero points, accumulated in 32 bits (wrapping, as ONNX
//! allows).
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::shape::{MAX_RANK, Shape, broadcast};
use crate::tensor::{TensorMut, TensorRef};

use super::{QOut, Vals, qrange, rint, saturate, set_out};

/// An 8-bit integer element.
pub(crate) trait Int8: Copy {
    fn i32(self) -> i32;
}
impl Int8 for i8 {
    #[inline(always)]
    fn i32(self) -> i32 {
        self as i32
    }
}
impl Int8 for u8 {
    #[inline(always)]
    fn i32(self) -> i32 {
        self as i32
    }
}

/// Shapes of an integer matmul.
#[derive(Clone, Copy, Debug)]
struct Mm {
    /// Batch dims of `A` and `B` (after promoting 1-D operands) and of `Y`.
    batch_a: Shape,
    batch_b: Shape,
    batch_y: Shape,
    m: usize,
    n: usize,
    k: usize,
    /// The output shape.
    y: Shape,
}

fn mm(a: &Shape, b: &Shape, op: &'static str) -> Result<Mm, KernelError> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err(KernelError::Shape {
            op,
            msg: "matmul operands must have rank >= 1",
        });
    }
    let (m, ka, batch_a) = match a.rank() {
        1 => (1, a.dim(0), Shape::SCALAR),
        r => (a.dim(r - 2), a.dim(r - 1), Shape::new(&a.dims()[..r - 2])?),
    };
    let (kb, n, batch_b) = match b.rank() {
        1 => (b.dim(0), 1, Shape::SCALAR),
        r => (b.dim(r - 2), b.dim(r - 1), Shape::new(&b.dims()[..r - 2])?),
    };
    if ka != kb {
        return Err(KernelError::Shape {
            op,
            msg: "inner dimensions differ",
        });
    }
    let batch_y = broadcast(&batch_a, &batch_b, op)?;
    let mut y = batch_y;
    if a.rank() > 1 {
        y.push(m)?;
    }
    if b.rank() > 1 {
        y.push(n)?;
    }
    Ok(Mm {
        batch_a,
        batch_b,
        batch_y,
        m,
        n,
        k: ka,
        y,
    })
}

/// Row-major multi-index of flat index `idx` in `dims`.
fn unravel(mut idx: usize, dims: &[usize]) -> [usize; MAX_RANK] {
    let mut out = [0; MAX_RANK];
    for (o, &d) in out.iter_mut().zip(dims).rev() {
        if d > 0 {
            *o = idx % d;
            idx /= d;
        }
    }
    out
}

/// The index of an operand with batch dims `batch` used for output batch
/// multi-index `iy` (right-aligned, size-1 dims broadcast): its multi-index
/// and its flat index.
fn batch_of(batch: &Shape, batch_y: &Shape, iy: &[usize]) -> ([usize; MAX_RANK], usize) {
    let (rb, ry) = (batch.rank(), batch_y.rank());
    let mut idx = [0; MAX_RANK];
    let mut flat = 0;
    for d in 0..rb {
        let i = if batch.dim(d) == 1 {
            0
        } else {
            iy[d + ry - rb]
        };
        idx[d] = i;
        flat = flat * batch.dim(d) + i;
    }
    (idx, flat)
}

/// How a scale or zero point broadcasts onto a target shape
/// `[batch.., rows, cols]`: the element strides of each target dim.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bcast {
    strides: [usize; MAX_RANK],
    rank: usize,
}

impl Bcast {
    /// `p` right-aligned onto `target` (each dim 1 or equal).
    pub(crate) fn new(p: &Shape, target: &[usize], op: &'static str) -> Result<Bcast, KernelError> {
        let bad = KernelError::Shape {
            op,
            msg: "scale or zero point does not broadcast to its operand",
        };
        let (rp, rt) = (p.rank(), target.len());
        if p.numel() == 1 {
            return Ok(Bcast {
                strides: [0; MAX_RANK],
                rank: rt,
            });
        }
        if rp > rt {
            return Err(bad);
        }
        let mut strides = [0; MAX_RANK];
        let mut s = 1;
        for d in (0..rp).rev() {
            let (pd, td) = (p.dim(d), target[d + rt - rp]);
            if pd == td {
                if pd != 1 {
                    strides[d + rt - rp] = s;
                }
            } else if pd != 1 {
                return Err(bad);
            }
            s *= pd;
        }
        Ok(Bcast { strides, rank: rt })
    }

    /// Per-row parameters of `A` (`[rows]` 1-D vectors are per row; else
    /// broadcast onto `[batch.., rows, 1]`).
    fn rows(p: &Shape, batch: &Shape, rows: usize, op: &'static str) -> Result<Bcast, KernelError> {
        let mut t = *batch;
        t.push(rows)?;
        t.push(1)?;
        if p.rank() == 1 && p.dim(0) == rows && rows != 1 {
            let mut b = Bcast {
                strides: [0; MAX_RANK],
                rank: t.rank(),
            };
            b.strides[t.rank() - 2] = 1;
            return Ok(b);
        }
        Bcast::new(p, t.dims(), op)
    }

    /// Per-column parameters of `B` or `Y` (broadcast onto
    /// `[batch.., rows, cols]`).
    fn cols(
        p: &Shape,
        batch: &Shape,
        rows: usize,
        cols: usize,
        op: &'static str,
    ) -> Result<Bcast, KernelError> {
        let mut t = *batch;
        t.push(rows)?;
        t.push(cols)?;
        Bcast::new(p, t.dims(), op)
    }

    /// Offset of `(batch.., row, col)`.
    #[inline]
    fn at(&self, batch: &[usize], row: usize, col: usize) -> usize {
        let r = self.rank;
        let mut off = row * self.strides[r - 2] + col * self.strides[r - 1];
        for (i, s) in batch.iter().zip(&self.strides[..r - 2]) {
            off += i * s;
        }
        off
    }

    /// Stride along the last (column) dim.
    #[inline]
    fn col_stride(&self) -> usize {
        self.strides[self.rank - 1]
    }
}

/// A scale or zero point with its broadcast.
#[derive(Clone, Copy)]
struct Param<'a> {
    vals: Vals<'a>,
    map: Bcast,
}

/// Everything the integer matmul loop needs.
struct IntMm<'a> {
    dims: Mm,
    a_zp: Option<Param<'a>>,
    b_zp: Option<Param<'a>>,
}

impl IntMm<'_> {
    /// Computes each output row into `acc` (`n` values) and hands it to
    /// `emit(batch multi-index of Y, batch flat index, row, acc)`.
    fn run<A: Int8, B: Int8>(
        &self,
        a: &[A],
        b: &[B],
        scratch: &mut [i32],
        mut emit: impl FnMut(&[usize], usize, usize, &[i32]),
    ) -> Result<(), KernelError> {
        let Mm { m, n, k, .. } = self.dims;
        let (acc, zb) = scratch.split_at_mut(n.min(scratch.len()));
        let zb = zb.get_mut(..n).ok_or(KernelError::Buffer {
            op: "MatMulInteger",
        })?;
        if acc.len() != n {
            return Err(KernelError::Buffer {
                op: "MatMulInteger",
            });
        }
        let by = self.dims.batch_y;
        let nb = by.numel();
        for bi in 0..nb {
            let iy = unravel(bi, by.dims());
            let iy = &iy[..by.rank()];
            let (ia, fa) = batch_of(&self.dims.batch_a, &by, iy);
            let (ib, fb) = batch_of(&self.dims.batch_b, &by, iy);
            let ia = &ia[..self.dims.batch_a.rank()];
            let ib = &ib[..self.dims.batch_b.rank()];
            let am = a
                .get(fa * m * k..(fa + 1) * m * k)
                .ok_or(KernelError::Buffer {
                    op: "MatMulInteger",
                })?;
            let bm = b
                .get(fb * k * n..(fb + 1) * k * n)
                .ok_or(KernelError::Buffer {
                    op: "MatMulInteger",
                })?;
            match &self.b_zp {
                Some(p) => {
                    let (base, cs) = (p.map.at(ib, 0, 0), p.map.col_stride());
                    for (j, z) in zb.iter_mut().enumerate() {
                        *z = p.vals.get(base + j * cs) as i32;
                    }
                }
                None => zb.fill(0),
            }
            for i in 0..m {
                let za = self
                    .a_zp
                    .as_ref()
                    .map_or(0, |p| p.vals.get(p.map.at(ia, i, 0)) as i32);
                acc.fill(0);
                let arow = &am[i * k..(i + 1) * k];
                for (kk, &av) in arow.iter().enumerate() {
                    let av = av.i32() - za;
                    if av == 0 {
                        continue;
                    }
                    let brow = &bm[kk * n..(kk + 1) * n];
                    for ((c, &bv), &z) in acc.iter_mut().zip(brow).zip(zb.iter()) {
                        *c = c.wrapping_add(av * (bv.i32() - z));
                    }
                }
                emit(iy, bi, i, acc);
            }
        }
        Ok(())
    }
}

/// Calls `f::<A, B>()` for the 8-bit dtypes of `a` and `b`.
macro_rules! dispatch_int8 {
    ($op:expr, $da:expr, $db:expr, $f:ident ( $($arg:expr),* )) => {
        match ($da, $db) {
            (DType::U8, DType::U8) => $f::<u8, u8>($($arg),*),
            (DType::U8, DType::I8) => $f::<u8, i8>($($arg),*),
            (DType::I8, DType::U8) => $f::<i8, u8>($($arg),*),
            (DType::I8, DType::I8) => $f::<i8, i8>($($arg),*),
            (DType::U8 | DType::I8, dtype) | (dtype, _) => {
                Err(KernelError::UnsupportedDType { op: $op, dtype })
            }
        }
    };
}
pub(crate) use dispatch_int8;

fn param<'a>(
    t: Option<&TensorRef<'a>>,
    map: impl FnOnce(&Shape) -> Result<Bcast, KernelError>,
    op: &'static str,
) -> Result<Option<Param<'a>>, KernelError> {
    t.map(|t| {
        Ok(Param {
            vals: Vals::new(t, op)?,
            map: map(&t.shape)?,
        })
    })
    .transpose()
}

fn check_zp_dtype(
    zp: Option<&TensorRef<'_>>,
    x: &TensorRef<'_>,
    op: &'static str,
) -> Result<(), KernelError> {
    match zp {
        Some(z) if z.dtype != x.dtype => Err(KernelError::DTypeMismatch {
            op,
            expected: x.dtype,
            found: z.dtype,
        }),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------
// MatMulInteger.

/// ONNX `MatMulInteger`: `Y = (A - a_zero_point) @ (B - b_zero_point)` in
/// int32.
///
/// Inputs: `A`, `B` (int8 or uint8), optional `a_zero_point` (dtype of `A`;
/// scalar, per row `[M]`, or `[.., M, 1]`), optional `b_zero_point` (dtype
/// of `B`; scalar, per column `[N]`, or `[.., 1, N]`). Output: int32.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMulInteger;
crate::to_rust_struct!(ops::quant::MatMulInteger {});

const MMI: &str = "MatMulInteger";

fn int_mm<'a>(
    inputs: &[Option<TensorRef<'a>>],
    ia: usize,
    ib: usize,
    iza: Option<usize>,
    izb: Option<usize>,
    op: &'static str,
) -> Result<IntMm<'a>, KernelError> {
    let a = input(inputs, ia, op)?;
    let b = input(inputs, ib, op)?;
    let dims = mm(&a.shape, &b.shape, op)?;
    let za = iza.and_then(|i| opt_input(inputs, i));
    let zb = izb.and_then(|i| opt_input(inputs, i));
    check_zp_dtype(za, a, op)?;
    check_zp_dtype(zb, b, op)?;
    Ok(IntMm {
        a_zp: param(za, |s| Bcast::rows(s, &dims.batch_a, dims.m, op), op)?,
        b_zp: param(zb, |s| Bcast::cols(s, &dims.batch_b, 1, dims.n, op), op)?,
        dims,
    })
}

/// Shape-only check of the parameters (values may be unknown at build time).
fn check_shapes(
    inputs: &[Option<TensorRef<'_>>],
    ia: usize,
    ib: usize,
    rows: &[usize],
    cols: &[usize],
    out_cols: &[usize],
    op: &'static str,
) -> Result<Mm, KernelError> {
    let a = input(inputs, ia, op)?;
    let b = input(inputs, ib, op)?;
    let d = mm(&a.shape, &b.shape, op)?;
    for &i in rows {
        if let Some(t) = opt_input(inputs, i) {
            Bcast::rows(&t.shape, &d.batch_a, d.m, op)?;
        }
    }
    for &i in cols {
        if let Some(t) = opt_input(inputs, i) {
            Bcast::cols(&t.shape, &d.batch_b, 1, d.n, op)?;
        }
    }
    for &i in out_cols {
        if let Some(t) = opt_input(inputs, i) {
            Bcast::cols(&t.shape, &d.batch_y, d.m, d.n, op)?;
        }
    }
    Ok(d)
}

impl Kernel for MatMulInteger {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let d = check_shapes(inputs, 0, 1, &[2], &[3], &[], MMI)?;
        set_out(outputs, 0, d.y, MMI)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        match check_shapes(inputs, 0, 1, &[], &[], &[], MMI) {
            Ok(d) => 8 * d.n,
            Err(_) => 0,
        }
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> u64 {
        // Each output sums A's last dim of products.
        let out = outputs.first().map_or(0, |s| s.numel());
        crate::kernel::product_flops(out, crate::kernel::last_dim(inputs, 0))
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let mmi = int_mm(inputs, 0, 1, Some(2), Some(3), MMI)?;
        let a = input(inputs, 0, MMI)?;
        let b = input(inputs, 1, MMI)?;
        let y = output(outputs, 0, MMI)?.typed::<i32>(MMI)?;
        let (m, n) = (mmi.dims.m, mmi.dims.n);
        if y.len() != mmi.dims.batch_y.numel() * m * n {
            return Err(KernelError::Buffer { op: MMI });
        }
        let scratch = i32_scratch(scratch, 2 * n, MMI)?;
        fn go<A: Int8 + crate::dtype::Elem, B: Int8 + crate::dtype::Elem>(
            mmi: &IntMm<'_>,
            a: &TensorRef<'_>,
            b: &TensorRef<'_>,
            y: &mut [i32],
            scratch: &mut [i32],
        ) -> Result<(), KernelError> {
            let (m, n) = (mmi.dims.m, mmi.dims.n);
            mmi.run(
                a.typed::<A>(MMI)?,
                b.typed::<B>(MMI)?,
                scratch,
                |_, bi, i, acc| {
                    let o = (bi * m + i) * n;
                    if let Some(dst) = y.get_mut(o..o + n) {
                        dst.copy_from_slice(acc);
                    }
                },
            )
        }
        dispatch_int8!(MMI, a.dtype, b.dtype, go(&mmi, a, b, y, scratch))
    }
}

/// The first `len` `i32`s of the scratch buffer.
pub(crate) fn i32_scratch<'a>(
    scratch: &'a mut [u8],
    len: usize,
    op: &'static str,
) -> Result<&'a mut [i32], KernelError> {
    if len == 0 {
        return Ok(&mut []);
    }
    let bytes = scratch
        .get_mut(..4 * len)
        .ok_or(KernelError::Buffer { op })?;
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| KernelError::Buffer { op })
}

// ---------------------------------------------------------------------------
// QLinearMatMul.

/// ONNX `QLinearMatMul`: an integer matmul of two quantized tensors,
/// requantized as `y = saturate(round(acc * a_scale * b_scale / y_scale) +
/// y_zero_point)`.
///
/// Inputs: `a`, `a_scale`, `a_zero_point`, `b`, `b_scale`, `b_zero_point`,
/// `y_scale`, `y_zero_point`. `a`/`b`/`y` are int8 or uint8 (each with its
/// zero point's dtype); scales are float32, float16 or bfloat16. `a`'s
/// parameters are scalars or per row (`[M]` or `[.., M, 1]`), `b`'s and
/// `y`'s scalars or per column (`[N]` or `[.., 1, N]`). The combined scale
/// is computed in float32 and the product in float64, as in the ONNX
/// reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QLinearMatMul;
crate::to_rust_struct!(ops::quant::QLinearMatMul {});

const QLM: &str = "QLinearMatMul";

impl Kernel for QLinearMatMul {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let d = check_shapes(inputs, 0, 3, &[1, 2], &[4, 5], &[6, 7], QLM)?;
        set_out(outputs, 0, d.y, QLM)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        match check_shapes(inputs, 0, 3, &[], &[], &[], QLM) {
            Ok(d) => 8 * d.n,
            Err(_) => 0,
        }
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> u64 {
        // Each output sums A's last dim of products.
        let out = outputs.first().map_or(0, |s| s.numel());
        crate::kernel::product_flops(out, crate::kernel::last_dim(inputs, 0))
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let mmi = int_mm(inputs, 0, 3, Some(2), Some(5), QLM)?;
        let d = mmi.dims;
        let (a, b) = (input(inputs, 0, QLM)?, input(inputs, 3, QLM)?);
        let scale = |i: usize| -> Result<&TensorRef<'_>, KernelError> {
            let t = input(inputs, i, QLM)?;
            if !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16) {
                return Err(KernelError::UnsupportedDType {
                    op: QLM,
                    dtype: t.dtype,
                });
            }
            Ok(t)
        };
        let sa = param(
            Some(scale(1)?),
            |s| Bcast::rows(s, &d.batch_a, d.m, QLM),
            QLM,
        )?;
        let sb = param(
            Some(scale(4)?),
            |s| Bcast::cols(s, &d.batch_b, 1, d.n, QLM),
            QLM,
        )?;
        let sy = param(
            Some(scale(6)?),
            |s| Bcast::cols(s, &d.batch_y, d.m, d.n, QLM),
            QLM,
        )?;
        let zyt = opt_input(inputs, 7);
        let zy = param(zyt, |s| Bcast::cols(s, &d.batch_y, d.m, d.n, QLM), QLM)?;
        let (Some(sa), Some(sb), Some(sy)) = (sa, sb, sy) else {
            return Err(KernelError::MissingInput { op: QLM, index: 1 });
        };
        let y = output(outputs, 0, QLM)?;
        let out_dtype = zyt.map_or(a.dtype, |z| z.dtype);
        if y.dtype != out_dtype {
            return Err(KernelError::DTypeMismatch {
                op: QLM,
                expected: out_dtype,
                found: y.dtype,
            });
        }
        let range = qrange(y.dtype, QLM)?;
        let mut y = QOut::new(y, QLM)?;
        if y.len() != d.batch_y.numel() * d.m * d.n {
            return Err(KernelError::Buffer { op: QLM });
        }
        let scratch = i32_scratch(scratch, 2 * d.n, QLM)?;
        let ctx = Requant {
            d,
            sa,
            sb,
            sy,
            zy,
            range,
        };
        fn go<A: Int8 + crate::dtype::Elem, B: Int8 + crate::dtype::Elem>(
            mmi: &IntMm<'_>,
            ctx: &Requant<'_>,
            a: &TensorRef<'_>,
            b: &TensorRef<'_>,
            y: &mut QOut<'_>,
            scratch: &mut [i32],
        ) -> Result<(), KernelError> {
            mmi.run(
                a.typed::<A>(QLM)?,
                b.typed::<B>(QLM)?,
                scratch,
                |iy, bi, i, acc| ctx.row(iy, bi, i, acc, y),
            )
        }
        dispatch_int8!(QLM, a.dtype, b.dtype, go(&mmi, &ctx, a, b, &mut y, scratch))
    }
}

/// Requantization of QLinearMatMul output rows.
struct Requant<'a> {
    d: Mm,
    sa: Param<'a>,
    sb: Param<'a>,
    sy: Param<'a>,
    zy: Option<Param<'a>>,
    range: (f64, f64),
}

impl Requant<'_> {
    fn row(&self, iy: &[usize], bi: usize, i: usize, acc: &[i32], y: &mut QOut<'_>) {
        let Mm { m, n, .. } = self.d;
        let (ia, _) = batch_of(&self.d.batch_a, &self.d.batch_y, iy);
        let (ib, _) = batch_of(&self.d.batch_b, &self.d.batch_y, iy);
        let ia = &ia[..self.d.batch_a.rank()];
        let ib = &ib[..self.d.batch_b.rank()];
        let sa = self.sa.vals.get(self.sa.map.at(ia, i, 0)) as f32;
        let (bb, bs) = (self.sb.map.at(ib, 0, 0), self.sb.map.col_stride());
        let (yb, ys) = (self.sy.map.at(iy, i, 0), self.sy.map.col_stride());
        let o = (bi * m + i) * n;
        for (j, &c) in acc.iter().enumerate() {
            let sb = self.sb.vals.get(bb + j * bs) as f32;
            let sy = self.sy.vals.get(yb + j * ys) as f32;
            let zy = self
                .zy
                .as_ref()
                .map_or(0.0, |p| p.vals.get(p.map.at(iy, i, j)));
            let f = (sa * sb / sy) as f64;
            y.set(o + j, saturate(rint(c as f64 * f) + zy, self.range));
        }
    }
}
