//! Single-precision matrix multiply (`C = alpha·A·B + beta·C`), BLIS style.
//!
//! `A` and `B` are read through arbitrary row/column strides ([`MatRef`]), so
//! transposed operands cost nothing extra. Blocks of `A` and `B` are packed
//! into a caller-provided scratch slice (no allocation) and multiplied by an
//! `MR×NR` register micro-kernel: scalar everywhere, AVX2+FMA and AVX-512 on
//! x86_64 (chosen once at run time and cached).
use core::sync::atomic::{AtomicU8, Ordering};

use crate::DType;
use crate::error::KernelError;
use crate::tensor::{TensorMut, TensorRef};

/// Rows of `A` packed per block.
const MC: usize = 96;
/// Depth of one packed block.
const KC: usize = 256;
/// Columns of `B` packed per block.
const NC: usize = 512;
/// A multiple of every micro-kernel's `MR`.
const MR_LCM: usize = 24;
/// A multiple of every micro-kernel's `NR`.
const NR_LCM: usize = 32;
/// Largest `MR × NR` of any micro-kernel (edge tiles go through a stack tile).
const MAX_TILE: usize = 8 * 32;

/// A read-only strided matrix: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Row stride in elements.
    pub rs: usize,
    /// Column stride in elements.
    pub cs: usize,
}

impl<'a> MatRef<'a> {
    /// A row-major matrix with leading dimension `ld`.
    pub fn row_major(data: &'a [f32], ld: usize) -> Self {
        MatRef {
            data,
            rs: ld,
            cs: 1,
        }
    }

    /// The transpose of a row-major matrix with leading dimension `ld`.
    pub fn transposed(data: &'a [f32], ld: usize) -> Self {
        MatRef {
            data,
            rs: 1,
            cs: ld,
        }
    }

    /// Whether a `rows × cols` matrix fits in `data`.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        if rows == 0 || cols == 0 {
            return true;
        }
        (rows - 1)
            .checked_mul(self.rs)
            .and_then(|r| {
                (cols - 1)
                    .checked_mul(self.cs)
                    .and_then(|c| r.checked_add(c))
            })
            .is_some_and(|last| last < self.data.len())
    }

    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }
}

/// Number of `f32`s of scratch [`sgemm`] needs for an `m × n × k` product.
pub fn sgemm_scratch_len(m: usize, n: usize, k: usize) -> usize {
    if m == 0 || n == 0 || k == 0 {
        return 0;
    }
    let kc = k.min(KC);
    m.min(MC).next_multiple_of(MR_LCM) * kc + n.min(NC).next_multiple_of(NR_LCM) * kc
}

/// Instruction set of the micro-kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Scalar,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
}

static ISA: AtomicU8 = AtomicU8::new(0);

fn detect_isa() -> Isa {
    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
    }
    #[cfg(all(
        target_arch = "x86_64",
        not(feature = "std"),
        target_feature = "avx2",
        target_feature = "fma"
    ))]
    {
        return Isa::Avx2;
    }
    #[allow(unreachable_code)]
    Isa::Scalar
}

/// The micro-kernel chosen for this CPU (detected once, then cached).
pub(crate) fn best_isa() -> Isa {
    match ISA.load(Ordering::Relaxed) {
        1 => Isa::Scalar,
        2 => Isa::Avx2,
        3 => Isa::Avx512,
        _ => {
            let isa = detect_isa();
            let code = match isa {
                Isa::Scalar => 1,
                Isa::Avx2 => 2,
                Isa::Avx512 => 3,
            };
            ISA.store(code, Ordering::Relaxed);
            isa
        }
    }
}

/// Whether `isa` can run on this CPU.
#[cfg(test)]
pub(crate) fn isa_available(isa: Isa) -> bool {
    match isa {
        Isa::Scalar => true,
        Isa::Avx2 => matches!(best_isa(), Isa::Avx2 | Isa::Avx512),
        Isa::Avx512 => best_isa() == Isa::Avx512,
    }
}

/// A micro-kernel: multiplies a packed `MR × kc` panel of `A` by a packed
/// `kc × NR` panel of `B` and stores `alpha·AB + beta·C` into the full tile at
/// `c` (row stride `ldc`); `beta == 0` never reads `C`.
type MicroFn = unsafe fn(usize, *const f32, *const f32, *mut f32, usize, f32, f32);

#[derive(Clone, Copy)]
struct Micro {
    mr: usize,
    nr: usize,
    f: MicroFn,
}

fn micro_for(isa: Isa) -> Micro {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Micro {
            mr: x86::AVX2_MR,
            nr: x86::AVX2_NR,
            f: x86::kernel_avx2,
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => Micro {
            mr: x86::AVX512_MR,
            nr: x86::AVX512_NR,
            f: x86::kernel_avx512,
        },
        _ => Micro {
            mr: SCALAR_MR,
            nr: SCALAR_NR,
            f: kernel_scalar,
        },
    }
}

const SCALAR_MR: usize = 4;
const SCALAR_NR: usize = 8;

/// Portable micro-kernel.
///
/// # Safety
/// `a` holds `kc * 4` floats, `b` holds `kc * 8`, and the `4 × 8` tile at
/// `c` with row stride `ldc` is writable (and readable when `beta != 0`).
unsafe fn kernel_scalar(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller guarantees the packed panel lengths.
    let (a, b) = unsafe {
        (
            core::slice::from_raw_parts(a, kc * SCALAR_MR),
            core::slice::from_raw_parts(b, kc * SCALAR_NR),
        )
    };
    let mut acc = [[0f32; SCALAR_NR]; SCALAR_MR];
    for (ap, bp) in a.chunks_exact(SCALAR_MR).zip(b.chunks_exact(SCALAR_NR)) {
        for (row, &av) in acc.iter_mut().zip(ap) {
            for (x, &bv) in row.iter_mut().zip(bp) {
                *x += av * bv;
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            // SAFETY: (i, j) is inside the tile the caller vouched for.
            unsafe {
                let p = c.add(i * ldc + j);
                *p = if beta == 0.0 {
                    alpha * v
                } else {
                    alpha * v + beta * *p
                };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    pub const AVX2_MR: usize = 6;
    pub const AVX2_NR: usize = 16;
    pub const AVX512_MR: usize = 8;
    pub const AVX512_NR: usize = 32;

    /// AVX2+FMA `6 × 16` micro-kernel.
    ///
    /// # Safety
    /// The CPU supports AVX2 and FMA; `a` holds `kc * 6` floats, `b` holds
    /// `kc * 16`, and the `6 × 16` tile at `c` (row stride `ldc`) is valid.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn kernel_avx2(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        alpha: f32,
        beta: f32,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 2]; AVX2_MR];
        for p in 0..kc {
            // SAFETY: p < kc, so these reads stay inside the packed panels.
            unsafe {
                let b0 = _mm256_loadu_ps(b.add(p * AVX2_NR));
                let b1 = _mm256_loadu_ps(b.add(p * AVX2_NR + 8));
                let ap = a.add(p * AVX2_MR);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm256_set1_ps(*ap.add(i));
                    row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm256_fmadd_ps(av, b1, row[1]);
                }
            }
        }
        let va = _mm256_set1_ps(alpha);
        let vb = _mm256_set1_ps(beta);
        for (i, row) in acc.iter().enumerate() {
            for (h, &v) in row.iter().enumerate() {
                // SAFETY: the tile (i, 8h..8h+8) is inside the caller's tile.
                unsafe {
                    let p = c.add(i * ldc + 8 * h);
                    let r = if beta == 0.0 {
                        _mm256_mul_ps(va, v)
                    } else {
                        _mm256_fmadd_ps(vb, _mm256_loadu_ps(p), _mm256_mul_ps(va, v))
                    };
                    _mm256_storeu_ps(p, r);
                }
            }
        }
    }

    /// AVX-512 `8 × 32` micro-kernel.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `a` holds `kc * 8` floats, `b` holds
    /// `kc * 32`, and the `8 × 32` tile at `c` (row stride `ldc`) is valid.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn kernel_avx512(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        alpha: f32,
        beta: f32,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; AVX512_MR];
        for p in 0..kc {
            // SAFETY: p < kc, so these reads stay inside the packed panels.
            unsafe {
                let b0 = _mm512_loadu_ps(b.add(p * AVX512_NR));
                let b1 = _mm512_loadu_ps(b.add(p * AVX512_NR + 16));
                let ap = a.add(p * AVX512_MR);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*ap.add(i));
                    row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                    row[1] = _mm512_fmadd_ps(av, b1, row[1]);
                }
            }
        }
        let va = _mm512_set1_ps(alpha);
        let vb = _mm512_set1_ps(beta);
        for (i, row) in acc.iter().enumerate() {
            for (h, &v) in row.iter().enumerate() {
                // SAFETY: the tile (i, 16h..16h+16) is inside the caller's tile.
                unsafe {
                    let p = c.add(i * ldc + 16 * h);
                    let r = if beta == 0.0 {
                        _mm512_mul_ps(va, v)
                    } else {
                        _mm512_fmadd_ps(vb, _mm512_loadu_ps(p), _mm512_mul_ps(va, v))
                    };
                    _mm512_storeu_ps(p, r);
                }
            }
        }
    }
}

/// `C = alpha·A·B + beta·C` where `A` is `m × k`, `B` is `k × n` and `C` is
/// row-major `m × n` with row stride `ldc`. When `beta == 0`, `C` is only
/// written (NaNs in it do not propagate). `scratch` must hold at least
/// [`sgemm_scratch_len`]`(m, n, k)` floats.
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    sgemm_isa(best_isa(), m, n, k, alpha, a, b, beta, c, ldc, scratch)
}

/// [`sgemm`] with an explicit micro-kernel (tests compare them).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_isa(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    const OP: &str = "sgemm";
    if m == 0 || n == 0 {
        return Ok(());
    }
    let c_fits = ldc >= n
        && (m - 1)
            .checked_mul(ldc)
            .and_then(|x| x.checked_add(n))
            .is_some_and(|end| end <= c.len());
    if !c_fits || !a.fits(m, k) || !b.fits(k, n) {
        return Err(KernelError::Buffer { op: OP });
    }
    if k == 0 || alpha == 0.0 {
        for i in 0..m {
            let row = &mut c[i * ldc..i * ldc + n];
            if beta == 0.0 {
                row.fill(0.0);
            } else if beta != 1.0 {
                row.iter_mut().for_each(|x| *x *= beta);
            }
        }
        return Ok(());
    }
    if m == 1 {
        gemv_row(n, k, alpha, a, b, beta, &mut c[..n]);
        return Ok(());
    }
    if scratch.len() < sgemm_scratch_len(m, n, k) {
        return Err(KernelError::Buffer { op: OP });
    }
    let micro = micro_for(isa);
    let (mr, nr) = (micro.mr, micro.nr);
    let kc_max = k.min(KC);
    let (pack_a, rest) = scratch.split_at_mut(m.min(MC).next_multiple_of(MR_LCM) * kc_max);
    let pack_b = &mut rest[..n.min(NC).next_multiple_of(NR_LCM) * kc_max];
    let mut tile = [0f32; MAX_TILE];

    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            let beta_eff = if pc == 0 { beta } else { 1.0 };
            // Pack B[pc.., jc..] into NR-wide panels, zero padded.
            for (pj, panel) in pack_b
                .chunks_exact_mut(nr * kc)
                .take(nc.div_ceil(nr))
                .enumerate()
            {
                let j0 = jc + pj * nr;
                let w = nr.min(jc + nc - j0);
                for (p, dst) in panel.chunks_exact_mut(nr).enumerate() {
                    if b.cs == 1 {
                        let s = (pc + p) * b.rs + j0;
                        dst[..w].copy_from_slice(&b.data[s..s + w]);
                    } else {
                        for (jj, d) in dst[..w].iter_mut().enumerate() {
                            *d = b.at(pc + p, j0 + jj);
                        }
                    }
                    dst[w..].fill(0.0);
                }
            }
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                // Pack A[ic.., pc..] into MR-tall panels, zero padded.
                for (pi, panel) in pack_a
                    .chunks_exact_mut(mr * kc)
                    .take(mc.div_ceil(mr))
                    .enumerate()
                {
                    let i0 = ic + pi * mr;
                    let h = mr.min(ic + mc - i0);
                    if a.rs == 1 {
                        for (p, dst) in panel.chunks_exact_mut(mr).enumerate() {
                            let s = (pc + p) * a.cs + i0;
                            dst[..h].copy_from_slice(&a.data[s..s + h]);
                            dst[h..].fill(0.0);
                        }
                    } else {
                        for ii in 0..mr {
                            if ii < h {
                                let row = (i0 + ii) * a.rs + pc * a.cs;
                                for p in 0..kc {
                                    panel[p * mr + ii] = a.data[row + p * a.cs];
                                }
                            } else {
                                for p in 0..kc {
                                    panel[p * mr + ii] = 0.0;
                                }
                            }
                        }
                    }
                }
                for jr in (0..nc).step_by(nr) {
                    let w = nr.min(nc - jr);
                    let bp = &pack_b[(jr / nr) * nr * kc..][..nr * kc];
                    for ir in (0..mc).step_by(mr) {
                        let h = mr.min(mc - ir);
                        let ap = &pack_a[(ir / mr) * mr * kc..][..mr * kc];
                        let c0 = (ic + ir) * ldc + jc + jr;
                        if h == mr && w == nr {
                            // Full tile: rows c0 + i*ldc .. + nr are all in C
                            // (checked above: (m-1)*ldc + n <= c.len()).
                            let c_tile = &mut c[c0..c0 + (mr - 1) * ldc + nr];
                            // SAFETY: `ap`/`bp` hold mr*kc / nr*kc floats, the
                            // tile lies inside `c_tile`, and `isa` was detected
                            // (or is scalar).
                            unsafe {
                                (micro.f)(
                                    kc,
                                    ap.as_ptr(),
                                    bp.as_ptr(),
                                    c_tile.as_mut_ptr(),
                                    ldc,
                                    alpha,
                                    beta_eff,
                                );
                            }
                        } else {
                            // SAFETY: as above, with the stack tile of
                            // MAX_TILE >= mr*nr floats and row stride nr.
                            unsafe {
                                (micro.f)(
                                    kc,
                                    ap.as_ptr(),
                                    bp.as_ptr(),
                                    tile.as_mut_ptr(),
                                    nr,
                                    alpha,
                                    0.0,
                                );
                            }
                            for i in 0..h {
                                let dst = &mut c[c0 + i * ldc..c0 + i * ldc + w];
                                let src = &tile[i * nr..i * nr + w];
                                if beta_eff == 0.0 {
                                    dst.copy_from_slice(src);
                                } else {
                                    for (d, &s) in dst.iter_mut().zip(src) {
                                        *d = s + beta_eff * *d;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// `c = alpha·a·B + beta·c` for a single row `a` (no packing).
fn gemv_row(
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: &mut [f32],
) {
    if b.cs == 1 {
        if beta == 0.0 {
            c.fill(0.0);
        } else if beta != 1.0 {
            c.iter_mut().for_each(|x| *x *= beta);
        }
        for p in 0..k {
            let s = alpha * a.at(0, p);
            let row = &b.data[p * b.rs..p * b.rs + n];
            for (x, &bv) in c.iter_mut().zip(row) {
                *x += s * bv;
            }
        }
    } else {
        for (j, x) in c.iter_mut().enumerate() {
            let mut acc = [0f32; 8];
            let mut p = 0;
            if b.rs == 1 && a.cs == 1 {
                let col = &b.data[j * b.cs..j * b.cs + k];
                let row = &a.data[..k];
                let mut cc = col.chunks_exact(8);
                let mut rc = row.chunks_exact(8);
                for (cv, rv) in (&mut cc).zip(&mut rc) {
                    for l in 0..8 {
                        acc[l] += cv[l] * rv[l];
                    }
                }
                p = k - cc.remainder().len();
            }
            let mut s: f32 = acc.iter().sum();
            while p < k {
                s += a.at(0, p) * b.at(p, j);
                p += 1;
            }
            *x = if beta == 0.0 {
                alpha * s
            } else {
                alpha * s + beta * *x
            };
        }
    }
}

/// The `f32` elements of an input (other dtypes are unsupported).
pub(crate) fn f32_in<'a>(t: &TensorRef<'a>, op: &'static str) -> Result<&'a [f32], KernelError> {
    if t.dtype != DType::F32 {
        return Err(KernelError::UnsupportedDType { op, dtype: t.dtype });
    }
    t.typed::<f32>(op)
}

/// Checks that an input is `f32` (shape inference).
pub(crate) fn check_f32(t: &TensorRef<'_>, op: &'static str) -> Result<(), KernelError> {
    if t.dtype != DType::F32 {
        return Err(KernelError::UnsupportedDType { op, dtype: t.dtype });
    }
    Ok(())
}

/// The `f32` elements of an output.
pub(crate) fn f32_out<'a, 'b>(
    t: &'b mut TensorMut<'a>,
    op: &'static str,
) -> Result<&'b mut [f32], KernelError> {
    t.typed::<f32>(op)
}

/// The first `n` floats of the scratch buffer.
pub(crate) fn scratch_f32<'a>(
    scratch: &'a mut [u8],
    n: usize,
    op: &'static str,
) -> Result<&'a mut [f32], KernelError> {
    let bytes = scratch.get_mut(..n * 4).ok_or(KernelError::Buffer { op })?;
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| KernelError::Buffer { op })
}

#[cfg(test)]
pub(crate) mod testutil {
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
        k: &impl Kernel,
        inputs: &[Option<TensorRef<'_>>],
        n_out: usize,
    ) -> Result<Outputs, KernelError> {
        let mut shapes = vec![Shape::SCALAR; n_out];
        k.infer(inputs, &mut shapes)?;
        let mut bufs: Vec<Vec<f32>> = shapes.iter().map(|s| vec![f32::NAN; s.numel()]).collect();
        let sb = k.scratch_bytes(inputs, &shapes);
        let mut scratch = vec![0u64; sb.div_ceil(8) + 8];
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
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::testutil::*;
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    #[allow(clippy::too_many_arguments)]
    fn naive(
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        a: MatRef<'_>,
        b: MatRef<'_>,
        beta: f32,
        c: &mut [f32],
        ldc: usize,
    ) {
        for i in 0..m {
            for j in 0..n {
                let mut s = 0f64;
                for p in 0..k {
                    s += a.at(i, p) as f64 * b.at(p, j) as f64;
                }
                let old = if beta == 0.0 {
                    0.0
                } else {
                    beta * c[i * ldc + j]
                };
                c[i * ldc + j] = alpha * s as f32 + old;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check(isa: Isa, m: usize, n: usize, k: usize, ta: bool, tb: bool, alpha: f32, beta: f32) {
        let av = rand_vec(m * k + 3, (m * 31 + k) as u64);
        let bv = rand_vec(k * n + 3, (n * 17 + k * 5) as u64);
        let a = if ta {
            MatRef::transposed(&av, m)
        } else {
            MatRef::row_major(&av, k)
        };
        let b = if tb {
            MatRef::transposed(&bv, k)
        } else {
            MatRef::row_major(&bv, n)
        };
        let ldc = n + 2;
        let c0 = rand_vec(m * ldc, 99);
        let mut want = c0.clone();
        naive(m, n, k, alpha, a, b, beta, &mut want, ldc);
        let mut got = c0.clone();
        let mut scratch = vec![0f32; sgemm_scratch_len(m, n, k)];
        sgemm_isa(isa, m, n, k, alpha, a, b, beta, &mut got, ldc, &mut scratch).unwrap();
        for i in 0..m {
            for j in 0..ldc {
                let (g, w) = (got[i * ldc + j], want[i * ldc + j]);
                if j >= n {
                    assert_eq!(g, c0[i * ldc + j], "wrote outside C");
                } else {
                    assert!(
                        (g - w).abs() <= 1e-4 * (1.0 + k as f32).sqrt(),
                        "{isa:?} m={m} n={n} k={k} ta={ta} tb={tb}: ({i},{j}) {g} vs {w}"
                    );
                }
            }
        }
    }

    fn isas() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|&i| isa_available(i))
            .collect()
    }

    #[test]
    fn small_sizes_all_isas() {
        for isa in isas() {
            for m in 1..=37 {
                for n in [1, 2, 7, 8, 15, 16, 17, 31, 33, 37] {
                    for k in [1, 3, 8, 37] {
                        check(isa, m, n, k, false, false, 1.0, 0.0);
                    }
                }
            }
            for n in 1..=37 {
                check(isa, 9, n, 5, false, false, 1.0, 0.0);
                check(isa, 13, n, 29, true, true, 0.5, 1.5);
            }
            for k in 1..=37 {
                check(isa, 7, 19, k, true, false, -1.0, 0.25);
                check(isa, 1, 19, k, false, true, 2.0, 1.0);
            }
        }
    }

    #[test]
    fn block_tails_all_isas() {
        for isa in isas() {
            check(isa, 97, 513, 259, false, false, 1.0, 0.0);
            check(isa, 101, 35, 300, true, true, 1.0, 1.0);
            check(isa, 200, 600, 17, false, true, 0.7, -0.3);
        }
    }

    #[test]
    fn simd_matches_scalar() {
        for isa in isas() {
            for (m, n, k) in [(37, 37, 37), (6, 16, 1), (23, 45, 67), (2, 100, 9)] {
                let av = rand_vec(m * k, 1);
                let bv = rand_vec(k * n, 2);
                let mut s = vec![0f32; sgemm_scratch_len(m, n, k)];
                let mut c1 = vec![0f32; m * n];
                let mut c2 = vec![0f32; m * n];
                let (a, b) = (MatRef::row_major(&av, k), MatRef::row_major(&bv, n));
                sgemm_isa(Isa::Scalar, m, n, k, 1.0, a, b, 0.0, &mut c1, n, &mut s).unwrap();
                sgemm_isa(isa, m, n, k, 1.0, a, b, 0.0, &mut c2, n, &mut s).unwrap();
                assert_close(&c2, &c1, 1e-5);
            }
        }
    }

    #[test]
    fn beta_zero_ignores_nan_and_k_zero() {
        let a = [1.0f32; 4];
        let b = [2.0f32; 4];
        let mut c = [f32::NAN; 4];
        let mut s = vec![0f32; sgemm_scratch_len(2, 2, 2)];
        sgemm(
            2,
            2,
            2,
            1.0,
            MatRef::row_major(&a, 2),
            MatRef::row_major(&b, 2),
            0.0,
            &mut c,
            2,
            &mut s,
        )
        .unwrap();
        assert_eq!(c, [4.0; 4]);
        sgemm(
            2,
            2,
            0,
            1.0,
            MatRef::row_major(&a, 2),
            MatRef::row_major(&b, 2),
            0.5,
            &mut c,
            2,
            &mut s,
        )
        .unwrap();
        assert_eq!(c, [2.0; 4]);
        // Too small buffers are errors, not panics.
        assert!(
            sgemm(
                3,
                2,
                2,
                1.0,
                MatRef::row_major(&a, 2),
                MatRef::row_major(&b, 2),
                0.0,
                &mut c,
                2,
                &mut s
            )
            .is_err()
        );
        assert!(
            sgemm(
                2,
                2,
                2,
                1.0,
                MatRef::row_major(&a, 2),
                MatRef::row_major(&b, 2),
                0.0,
                &mut c,
                2,
                &mut []
            )
            .is_err()
        );
    }
}
