//! Depthwise convolution a channel plane at a time, several output rows
//! per pass, for the common kernels: 3×3, 5×5 and 7×7 at stride 1 (AVX-512
//! and AVX2), 3×3 and 5×5 at strides 2×2, 2×1 and 1×2 (AVX-512), no
//! dilation.
//!
//! The output is computed in bands of [`ROWS`] rows, [`COLS`] columns at a
//! time, straight from the input plane into the output plane. Consecutive
//! output rows read the same input rows one kernel row apart (two at
//! stride 2), so each input vector is loaded once per band and feeds every
//! output row that uses it: a 3×3 layer loads 4.5 vectors per output
//! vector instead of 9, a 7×7 one 17.5 instead of 49. At stride 2 the 64
//! input columns under 32 outputs are loaded once per even kernel column
//! and split into their even and odd columns by permutes. The padding is
//! never materialized: rows above and below the image read a zero row,
//! columns outside it are masked off the loads. Nothing is transposed,
//! where the channel-interleaved kernel ([`super::depthwise_interleaved`],
//! which keeps the other shapes and the small planes) transposes its input
//! and its output (for a 3×3 layer about as many shuffles as
//! multiply-adds).
//!
//! The fused tail (activation, scalar affine, residual) runs on each band
//! of rows right after it is written, while it is in L1. Stores are
//! masked only in a row's last, partial step (masked stores are slow on
//! AMD: plain ones made the AVX-512 3×3 layers markedly faster, and turned
//! the AVX2 kernel from slower than the interleaved one to faster).
//!
//! Against the interleaved kernel, this one is faster with AVX-512 on the
//! 3×3, 5×5 and 7×7 layers at stride 1 and the 3×3 ones at stride 2, from
//! 48 to 240 channels, and with AVX2 on 3×3 and 5×5 (7×7 is unchanged).

use super::{Conv, ConvGeom};

/// Output rows computed together (a band).
#[cfg(target_arch = "x86_64")]
const ROWS: usize = 4;
/// Output columns per step: two vectors of sixteen.
#[cfg(target_arch = "x86_64")]
const COLS: usize = 32;
#[cfg(all(test, feature = "std"))]
std::thread_local! {
    /// Set by tests to run the interleaved kernel on shapes this path
    /// would take.
    pub(super) static OFF: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    /// Set by tests to run the AVX2 kernels on an AVX-512 CPU.
    pub(super) static AVX2: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Narrowest output row this path takes: narrower rows leave most of a
/// 32-column step empty, where the interleaved kernel fills its vectors
/// with channels.
#[cfg(target_arch = "x86_64")]
const MIN_OW: usize = 24;
/// Fewest output rows this path takes. A band of four over three rows
/// computes a row for nothing, yet a text recognizer's depthwise layers at
/// 6×80 and 3×80 run faster here in the model on two threads (and no
/// slower on one), though `kernel_bench` has the interleaved kernel ahead
/// on them with warm caches.
#[cfg(target_arch = "x86_64")]
const MIN_OH: usize = 3;

/// The kernel for one plane (see [`plane_rows`]).
type PlaneFn = unsafe fn(
    &PlaneGeom,
    *const f32,
    *const f32,
    f32,
    &mut [f32],
    *const f32,
    &dyn Fn(&mut [f32], usize),
);

/// The shapes of one plane as [`plane_rows`] reads it (only the x86
/// kernels exist to read them).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Clone, Copy)]
pub(super) struct PlaneGeom {
    /// Input rows and columns.
    ih: usize,
    iw: usize,
    /// Top and left padding.
    pt: usize,
    pl: usize,
    /// Output rows and columns.
    oh: usize,
    ow: usize,
}

/// How this convolution runs here: the kernel for its shape.
pub(super) struct Plan {
    kernel: PlaneFn,
    /// Floats of scratch one plane needs ([`scratch_len`]).
    pub(super) len: usize,
}

/// Floats of scratch one plane needs (a zero row as wide as the input),
/// on any machine (the scratch is planned on the build machine), for the
/// shapes this path may take.
pub(super) fn scratch_len(conv: &Conv, g: &ConvGeom) -> Option<usize> {
    let supported = match conv.strides {
        [1, 1] => matches!((g.kh, g.kw), (3, 3) | (5, 5) | (7, 7)),
        [2, 2] | [2, 1] | [1, 2] => matches!((g.kh, g.kw), (3, 3) | (5, 5)),
        _ => false,
    };
    (supported && conv.dilations == [1, 1] && g.ohw() > 0 && g.x.w <= crate::ops::gemm::MAX_SCRATCH)
        .then_some(g.x.w)
}

/// The plan when this path runs these shapes here: a kernel [`scratch_len`]
/// takes, the CPU's instruction set has it (strides 2×2, 2×1 and 1×2 only
/// with AVX-512),
/// output planes of at least [`MIN_OH`] × [`MIN_OW`].
pub(super) fn plan(conv: &Conv, g: &ConvGeom) -> Option<Plan> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::gemm::{Isa, best_isa};
        #[cfg(all(test, feature = "std"))]
        if OFF.with(|f| f.get()) {
            return None;
        }
        #[cfg(all(test, feature = "std"))]
        let best_isa = || match AVX2.with(|f| f.get()) {
            true if best_isa() != Isa::Scalar => Isa::Avx2,
            _ => best_isa(),
        };
        if g.ow < MIN_OW || g.oh < MIN_OH {
            return None;
        }
        let len = scratch_len(conv, g)?;
        let kernel: PlaneFn = match (best_isa(), g.kh, g.kw, conv.strides) {
            (Isa::Avx512, 3, 3, [1, 1]) => plane_rows::<3, 3, 1>,
            (Isa::Avx512, 5, 5, [1, 1]) => plane_rows::<5, 5, 1>,
            (Isa::Avx512, 7, 7, [1, 1]) => plane_rows::<7, 7, 1>,
            (Isa::Avx512, 3, 3, [2, 1]) => plane_rows::<3, 3, 2>,
            (Isa::Avx512, 5, 5, [2, 1]) => plane_rows::<5, 5, 2>,
            (Isa::Avx512, 3, 3, [2, 2]) => plane_rows_s2::<3, 3, 2>,
            (Isa::Avx512, 5, 5, [2, 2]) => plane_rows_s2::<5, 5, 2>,
            (Isa::Avx512, 3, 3, [1, 2]) => plane_rows_s2::<3, 3, 1>,
            (Isa::Avx512, 5, 5, [1, 2]) => plane_rows_s2::<5, 5, 1>,
            (Isa::Avx2, 3, 3, [1, 1]) => plane_rows_avx2::<3, 3>,
            (Isa::Avx2, 5, 5, [1, 1]) => plane_rows_avx2::<5, 5>,
            (Isa::Avx2, 7, 7, [1, 1]) => plane_rows_avx2::<7, 7>,
            _ => return None,
        };
        Some(Plan { kernel, len })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (conv, g);
        None
    }
}

/// One channel: `xp` (its input plane) convolved with `wk` (its `kh · kw`
/// taps) plus `bias` into `out` (its output plane, only written), `tail`
/// run on each finished band of rows (with the band's offset in the
/// plane). `buf` holds at least [`scratch_len`] floats. Returns `false`,
/// leaving `out` untouched, when a buffer is too small.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_plane(
    plan: &Plan,
    g: &ConvGeom,
    xp: &[f32],
    wk: &[f32],
    bias: f32,
    out: &mut [f32],
    buf: &mut [f32],
    tail: &dyn Fn(&mut [f32], usize),
) -> bool {
    let (Some(zero), Some(xp), Some(wk), Some(out)) = (
        buf.get_mut(..g.x.w),
        xp.get(..g.x.h * g.x.w),
        wk.get(..g.kh * g.kw),
        out.get_mut(..g.ohw()),
    ) else {
        return false;
    };
    zero.fill(0.0);
    let pg = PlaneGeom {
        ih: g.x.h,
        iw: g.x.w,
        pt: g.pt,
        pl: g.pl,
        oh: g.oh,
        ow: g.ow,
    };
    // SAFETY: the plan exists, so the CPU has the kernel's instruction
    // set (`plan` picked it); `xp` holds the
    // `ih × iw` plane, `zero` an input row of zeros, `wk` the kernel's
    // taps, `out` the `oh × ow` plane.
    unsafe {
        (plan.kernel)(
            &pg,
            xp.as_ptr(),
            zero.as_ptr(),
            bias,
            out,
            wk.as_ptr(),
            tail,
        )
    };
    true
}

/// Most input rows a band reads: the tallest kernel's rows plus the
/// band's other rows, one each at stride 1 (7 + 3 for 7×7), two at stride
/// 2 (5 + 6 for 5×5).
#[cfg(target_arch = "x86_64")]
const MAX_BAND_INPUTS: usize = 2 * (ROWS - 1) + 5;

/// The input row of each of a band's first `inputs` input rows: row
/// `first + q − pt` of the plane at `x` (`first` is the band's first
/// output row times the stride), the zero row where that lies outside.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn band_inputs(
    pg: &PlaneGeom,
    x: *const f32,
    zero: *const f32,
    first: usize,
    inputs: usize,
) -> [*const f32; MAX_BAND_INPUTS] {
    let mut src = [zero; MAX_BAND_INPUTS];
    for (q, p) in src.iter_mut().enumerate().take(inputs) {
        let r = (first + q).wrapping_sub(pg.pt);
        if r < pg.ih {
            *p = x.wrapping_add(r * pg.iw);
        }
    }
    src
}

/// Lanes `first..end` (both at most 64) as a mask.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lanes(first: u32, end: u32) -> u64 {
    let below = |n: u32| if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
    below(end) & !below(first)
}

/// Lanes `0..count` (at most 64) whose input column `start + lane` lies
/// inside a row of `iw` columns, as a mask.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn inside_row(start: isize, iw: usize, count: u32) -> u64 {
    let count = count as isize;
    lanes(
        (-start).clamp(0, count) as u32,
        (iw as isize - start).clamp(0, count) as u32,
    )
}

/// The first `n` (at most 32) of the 32 outputs in `acc` stored at `d`:
/// plain stores for all 32 (masked stores are slow on AMD), else masked.
///
/// # Safety
/// The CPU supports AVX-512F; `d..d + n` is writable.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store32(d: *mut f32, n: usize, acc: [core::arch::x86_64::__m512; 2]) {
    use core::arch::x86_64::*;
    // SAFETY: the caller's contract; masked-off lanes are not written.
    unsafe {
        if n == COLS {
            _mm512_storeu_ps(d, acc[0]);
            _mm512_storeu_ps(d.add(16), acc[1]);
        } else {
            let valid = lanes(0, n as u32);
            _mm512_mask_storeu_ps(d, valid as u16, acc[0]);
            _mm512_mask_storeu_ps(d.wrapping_add(16), (valid >> 16) as u16, acc[1]);
        }
    }
}

/// The output plane `out` (`oh × ow`, only written) from the input plane
/// at `x` (`ih × iw`) for a `KH × KW` kernel `w` at vertical stride `SH`
/// (1 or 2) and horizontal stride 1, bands of [`ROWS`] rows and [`COLS`]
/// columns at a time. Output row `o + i`, column `c + l` reads input row
/// `SH·(o + i) + ki − pt`, column `c + l + kj − pl`: for each kernel column
/// `kj` and input row `q` of the band, one load of 32 columns feeds every
/// output row `i` with `ki = q − SH·i` in the kernel. Rows outside the
/// image read `zero`, columns outside it are masked off (zero). (Strides
/// 2×1 halve a text line's height, keeping its width: PP-OCR cls.)
///
/// # Safety
/// The CPU supports AVX-512F; `x` holds `ih · iw` floats, `zero` `iw`
/// zeros, `w` `KH · KW` floats; `out` holds `oh · ow` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn plane_rows<const KH: usize, const KW: usize, const SH: usize>(
    pg: &PlaneGeom,
    x: *const f32,
    zero: *const f32,
    bias: f32,
    out: &mut [f32],
    w: *const f32,
    tail: &dyn Fn(&mut [f32], usize),
) {
    use core::arch::x86_64::*;
    let PlaneGeom { iw, pl, oh, ow, .. } = *pg;
    let inputs = SH * (ROWS - 1) + KH;
    debug_assert!(inputs <= MAX_BAND_INPUTS && out.len() >= oh * ow);
    let b = _mm512_set1_ps(bias);
    for o in (0..oh).step_by(ROWS) {
        let rows = ROWS.min(oh - o);
        // Input row of the band's row q (the zero row outside the image).
        let src = band_inputs(pg, x, zero, SH * o, inputs);
        for c in (0..ow).step_by(COLS) {
            let mut acc = [[b; 2]; ROWS];
            for kj in 0..KW {
                // Input column of lane 0 (negative in the left padding)
                // and the lanes inside the image.
                let start = (c + kj) as isize - pl as isize;
                let valid = inside_row(start, iw, COLS as u32);
                let (m0, m1) = (valid as u16, (valid >> 16) as u16);
                // Plain loads where all 32 lanes are inside: they gain on
                // the wider kernels, while masked ones everywhere suit 3×3
                // better than the branch does.
                let whole = KW > 3 && valid == (1u64 << COLS) - 1;
                for (q, &row) in src.iter().enumerate().take(inputs) {
                    let p = row.wrapping_offset(start);
                    // SAFETY: whole, the 32 columns lie inside the row;
                    // else only the lanes inside the row's `iw` columns
                    // are read (masked loads touch no other memory); `row`
                    // is an input row or the zero row.
                    let (x0, x1) = unsafe {
                        if whole {
                            (_mm512_loadu_ps(p), _mm512_loadu_ps(p.wrapping_add(16)))
                        } else {
                            (
                                _mm512_maskz_loadu_ps(m0, p),
                                _mm512_maskz_loadu_ps(m1, p.wrapping_add(16)),
                            )
                        }
                    };
                    for (i, acc) in acc.iter_mut().enumerate() {
                        if q < SH * i || q - SH * i >= KH {
                            continue;
                        }
                        // SAFETY: (q − SH·i)·KW + kj < KH · KW.
                        let wv = _mm512_set1_ps(unsafe { *w.add((q - SH * i) * KW + kj) });
                        acc[0] = _mm512_fmadd_ps(wv, x0, acc[0]);
                        acc[1] = _mm512_fmadd_ps(wv, x1, acc[1]);
                    }
                }
            }
            let n = COLS.min(ow - c);
            for (i, acc) in acc.iter().enumerate().take(rows) {
                // SAFETY: columns c..c + n of output row o + i < oh lie
                // inside `out` (oh · ow floats).
                unsafe { store32(out.as_mut_ptr().add((o + i) * ow + c), n, *acc) };
            }
        }
        tail(&mut out[o * ow..(o + rows) * ow], o * ow);
    }
}

/// [`plane_rows`] at horizontal stride 2 and vertical stride `SH` (1 or
/// 2; `KH`, `KW` ≤ 5): output row `o + i`, column `c + l` reads input row
/// `SH·(o + i) + ki − pt`, column `2(c + l) + kj − pl`. For each even
/// shift `2t` and input row `q` of the band, the 64 input columns from
/// `2c + 2t − pl` are loaded once and split by two permutes each into
/// their even columns (tap `kj = 2t`) and odd ones (tap `2t + 1`), which
/// feed every output row `i` with `ki = q − SH·i` in the kernel.
///
/// # Safety
/// As [`plane_rows`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn plane_rows_s2<const KH: usize, const KW: usize, const SH: usize>(
    pg: &PlaneGeom,
    x: *const f32,
    zero: *const f32,
    bias: f32,
    out: &mut [f32],
    w: *const f32,
    tail: &dyn Fn(&mut [f32], usize),
) {
    use core::arch::x86_64::*;
    let PlaneGeom { iw, pl, oh, ow, .. } = *pg;
    let inputs = SH * (ROWS - 1) + KH;
    debug_assert!(inputs <= MAX_BAND_INPUTS && out.len() >= oh * ow);
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    let b = _mm512_set1_ps(bias);
    for o in (0..oh).step_by(ROWS) {
        let rows = ROWS.min(oh - o);
        let src = band_inputs(pg, x, zero, SH * o, inputs);
        for c in (0..ow).step_by(COLS) {
            let mut acc = [[b; 2]; ROWS];
            for t in 0..KW.div_ceil(2) {
                // Input column of loaded lane 0 and the 64 lanes' validity.
                let start = (2 * (c + t)) as isize - pl as isize;
                let valid = inside_row(start, iw, 64);
                let m = [
                    valid as u16,
                    (valid >> 16) as u16,
                    (valid >> 32) as u16,
                    (valid >> 48) as u16,
                ];
                for (q, &row) in src.iter().enumerate().take(inputs) {
                    let p = row.wrapping_offset(start);
                    // SAFETY: only the lanes inside the row's `iw` columns
                    // are read (masked loads touch no other memory); `row`
                    // is an input row or the zero row.
                    let v = unsafe {
                        [
                            _mm512_maskz_loadu_ps(m[0], p),
                            _mm512_maskz_loadu_ps(m[1], p.wrapping_add(16)),
                            _mm512_maskz_loadu_ps(m[2], p.wrapping_add(32)),
                            _mm512_maskz_loadu_ps(m[3], p.wrapping_add(48)),
                        ]
                    };
                    let e0 = _mm512_permutex2var_ps(v[0], even, v[1]);
                    let e1 = _mm512_permutex2var_ps(v[2], even, v[3]);
                    let has_odd = 2 * t + 1 < KW;
                    let (o0, o1) = if has_odd {
                        (
                            _mm512_permutex2var_ps(v[0], odd, v[1]),
                            _mm512_permutex2var_ps(v[2], odd, v[3]),
                        )
                    } else {
                        (e0, e1)
                    };
                    for (i, acc) in acc.iter_mut().enumerate() {
                        if q < SH * i || q - SH * i >= KH {
                            continue;
                        }
                        let tap = (q - SH * i) * KW + 2 * t;
                        // SAFETY: tap (+ 1 when it exists) < KH · KW.
                        let we = _mm512_set1_ps(unsafe { *w.add(tap) });
                        acc[0] = _mm512_fmadd_ps(we, e0, acc[0]);
                        acc[1] = _mm512_fmadd_ps(we, e1, acc[1]);
                        if has_odd {
                            // SAFETY: as above.
                            let wo = _mm512_set1_ps(unsafe { *w.add(tap + 1) });
                            acc[0] = _mm512_fmadd_ps(wo, o0, acc[0]);
                            acc[1] = _mm512_fmadd_ps(wo, o1, acc[1]);
                        }
                    }
                }
            }
            let n = COLS.min(ow - c);
            for (i, acc) in acc.iter().enumerate().take(rows) {
                // SAFETY: columns c..c + n of output row o + i < oh lie
                // inside `out` (oh · ow floats).
                unsafe { store32(out.as_mut_ptr().add((o + i) * ow + c), n, *acc) };
            }
        }
        tail(&mut out[o * ow..(o + rows) * ow], o * ow);
    }
}

/// [`plane_rows`] with AVX2 (stride 1): bands of [`ROWS`] rows and 16
/// columns (two vectors of eight; sixteen registers hold the eight
/// accumulators, the two loaded vectors and their masks), the same sums in
/// the same order.
///
/// # Safety
/// The CPU supports AVX2 and FMA; otherwise as [`plane_rows`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn plane_rows_avx2<const KH: usize, const KW: usize>(
    pg: &PlaneGeom,
    x: *const f32,
    zero: *const f32,
    bias: f32,
    out: &mut [f32],
    w: *const f32,
    tail: &dyn Fn(&mut [f32], usize),
) {
    use core::arch::x86_64::*;
    const STEP: usize = 16;
    let PlaneGeom { iw, pl, oh, ow, .. } = *pg;
    let inputs = KH + ROWS - 1;
    debug_assert!(inputs <= MAX_BAND_INPUTS && out.len() >= oh * ow);
    let b = _mm256_set1_ps(bias);
    let lane_index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let width = _mm256_set1_epi32(iw as i32);
    // Lanes `start + l` inside 0..limit: all bits set (maskload's sign).
    let inside = |start: isize, limit: __m256i| {
        let at = _mm256_add_epi32(lane_index, _mm256_set1_epi32(start as i32));
        _mm256_and_si256(
            _mm256_cmpgt_epi32(at, _mm256_set1_epi32(-1)),
            _mm256_cmpgt_epi32(limit, at),
        )
    };
    for o in (0..oh).step_by(ROWS) {
        let rows = ROWS.min(oh - o);
        let src = band_inputs(pg, x, zero, o, inputs);
        for c in (0..ow).step_by(STEP) {
            let mut acc = [[b; 2]; ROWS];
            for kj in 0..KW {
                let start = (c + kj) as isize - pl as isize;
                // Masked loads only at the edges: AVX2's are slower.
                let whole = start >= 0 && start + STEP as isize <= iw as isize;
                let (m0, m1) = (inside(start, width), inside(start + 8, width));
                for (q, &row) in src.iter().enumerate().take(inputs) {
                    let p = row.wrapping_offset(start);
                    // SAFETY: whole, the 16 columns lie inside the row;
                    // else only the lanes inside the row's `iw` columns
                    // are read (masked-off lanes of a masked load touch no
                    // memory); `row` is an input row or the zero row.
                    let (x0, x1) = unsafe {
                        if whole {
                            (_mm256_loadu_ps(p), _mm256_loadu_ps(p.wrapping_add(8)))
                        } else {
                            (
                                _mm256_maskload_ps(p, m0),
                                _mm256_maskload_ps(p.wrapping_add(8), m1),
                            )
                        }
                    };
                    for (i, acc) in acc.iter_mut().enumerate() {
                        if q < i || q - i >= KH {
                            continue;
                        }
                        // SAFETY: (q − i)·KW + kj < KH · KW.
                        let wv = _mm256_set1_ps(unsafe { *w.add((q - i) * KW + kj) });
                        acc[0] = _mm256_fmadd_ps(wv, x0, acc[0]);
                        acc[1] = _mm256_fmadd_ps(wv, x1, acc[1]);
                    }
                }
            }
            let n = STEP.min(ow - c) as isize;
            let count = _mm256_set1_epi32(n as i32);
            let (m0, m1) = (inside(0, count), inside(8, count));
            for (i, acc) in acc.iter().enumerate().take(rows) {
                // SAFETY: the stores write columns c..c + n of output row
                // o + i < oh, inside `out` (oh · ow floats): all 16 when
                // n is 16, else the masked lanes (masked stores are slow
                // on AMD, so only the last step of a row uses them).
                unsafe {
                    let d = out.as_mut_ptr().add((o + i) * ow + c);
                    if n == STEP as isize {
                        _mm256_storeu_ps(d, acc[0]);
                        _mm256_storeu_ps(d.add(8), acc[1]);
                    } else {
                        _mm256_maskstore_ps(d, m0, acc[0]);
                        _mm256_maskstore_ps(d.wrapping_add(8), m1, acc[1]);
                    }
                }
            }
        }
        tail(&mut out[o * ow..(o + rows) * ow], o * ow);
    }
}
