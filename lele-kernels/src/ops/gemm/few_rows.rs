//! A few rows against a weight packed ahead of time (AVX-512): each
//! 16-column panel of the weight streams through once per pass of up to
//! [`PASS_ROWS`] rows, every row's accumulator in a register.
//!
//! The blocked product runs such shapes (a sequence model's output layer,
//! 20 steps × 8210 classes × 1024) as 8-row tiles: the first tile over a
//! micro-panel waits for it to arrive from memory, the later ones compute
//! with nothing in flight, and 20 rows make three tiles of 24. Here the
//! panel's loads and all the rows' multiply-adds share one loop, so memory
//! and arithmetic overlap, and no row is padding.
use super::prepacked::{PANEL, Prepacked};
use super::{CPtr, Epilogue, MatRef};
use crate::ops::unary::{exp_shifted, exp_shifted_in_place, max_of, scale_in_place};

/// Most rows one pass keeps in registers (one 16-lane accumulator each,
/// plus the panel's row and a broadcast: 26 of the 32 registers).
const PASS_ROWS: usize = 24;

/// Most rows one pass over two panels keeps in registers (two
/// accumulators each).
const PAIR_PASS_ROWS: usize = 12;

/// Most rows this path takes (two passes over each panel, the second
/// finding it cached).
const FEW_ROWS_MAX: usize = 2 * PASS_ROWS;

#[cfg(all(test, feature = "std"))]
std::thread_local! {
    /// Products on this thread that took this path (tests check that
    /// their cases do).
    pub(super) static CALLS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// Panels computed before the epilogue runs over their columns: 256
/// columns, so the rows of them (at most 48 KiB) are still cached, where
/// one epilogue pass after all the panels read a large output back from
/// the last-level cache (a text recognizer's head, 40 × 18710 with its
/// bias, is 3 MB).
const EPILOGUE_PANELS: usize = 16;

/// Rows of `B` the kernel prefetches ahead of the one it reads: 8 KiB, far
/// enough to cover memory latency for a weight that streams from DRAM
/// (heads of several MB gained from 128 rows instead of 32; 256 rows were
/// no better).
const AHEAD: usize = 128;

/// Whether `c = alpha·a·B + beta·c` goes through [`few_rows`]: on a CPU
/// with AVX-512, from 2 to 24 rows, or up to [`FEW_ROWS_MAX`] over a depth
/// of at most 128 (a panel's rows then stay in L1 for the second pass),
/// with `scratch` floats to hold `A` (`m × k`) repacked.
///
/// Against the blocked product with weights packed ahead of time, this
/// path wins up to 24 rows (×4096×512 at 4 to 24 rows, a 20×8210×1024
/// head, an LSTM's 20×4096×512 input product, a 40×18710×120 head). Above
/// 24 rows the blocked product is ahead once the depth grows (32×4096×256,
/// 40×4096×512).
pub(super) fn takes(isa: super::Isa, m: usize, k: usize, scratch: usize) -> bool {
    isa == super::Isa::Avx512
        && m >= 2
        && (m <= 2 * PAIR_PASS_ROWS || (m <= FEW_ROWS_MAX && k <= 128))
        && m * k <= scratch
}

/// `c = alpha·a·B + beta·c` for `m` rows of `a` (any strides) and the
/// packed `b` (`k × n`), `c` at row stride `ldc`, `A` repacked into
/// `scratch` (at least `m·k` floats: [`takes`]); then `epilogue` on each
/// row's finished columns. Panels are split over the threads in
/// contiguous runs. With `softmax` (slots of 2 floats per row and group
/// of [`GROUP_COLUMNS`]), each row of `c` then becomes its softmax: every
/// group exponentiated after the epilogue (its largest element and sum in
/// its slot), and scaled by [`row_factors`] once all are done; the runs
/// then start on whole groups.
///
/// # Safety
/// The CPU supports AVX-512F; `a` holds `m × k` at its strides, `c`
/// holds `m` rows of `n` at stride `ldc` and `softmax` at least `2·m·⌈n /
/// GROUP_COLUMNS⌉` floats (the caller checked them).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn few_rows(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: Prepacked<'_>,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    scratch: &mut [f32],
    epilogue: Option<Epilogue<'_>>,
    softmax: Option<&mut [f32]>,
) {
    let panels = n.div_ceil(PANEL);
    let groups = n.div_ceil(GROUP_COLUMNS);
    // The slots: 2·m·groups floats (the caller's contract), each written
    // by the one call of the group's epilogue, read after every task.
    let softmax = softmax.map(|slots| CPtr(slots.as_mut_ptr()));
    // Two panels per pass up to 24 rows (one or two passes of at most 12),
    // one panel per pass above; passes as even as they go. Each pass's
    // rows of A are repacked column by column (`h` floats per step of the
    // depth, contiguous: rows of A a multiple of 4 KiB apart would all
    // fall in one set of L1 and evict each other).
    let v2 = m <= 2 * PAIR_PASS_ROWS;
    let pass_rows = if v2 { PAIR_PASS_ROWS } else { PASS_ROWS };
    let passes = m.div_ceil(pass_rows);
    let per = m.div_ceil(passes);
    let packed = &mut scratch[..m * k];
    for i0 in (0..m).step_by(per) {
        let h = per.min(m - i0);
        let dst = &mut packed[i0 * k..(i0 + h) * k];
        for (p, col) in dst.chunks_exact_mut(h).enumerate() {
            for (i, x) in col.iter_mut().enumerate() {
                *x = a.at(i0 + i, p);
            }
        }
    }
    let packed = &*packed;
    let cp = CPtr(c.as_mut_ptr());
    // Panels q0..q1 in groups of EPILOGUE_PANELS, each group's columns
    // handed to the epilogue as soon as they are finished, while they are
    // still cached.
    let run = |q0: usize, q1: usize| {
        let mut g0 = q0;
        while g0 < q1 {
            let g1 = (g0 + EPILOGUE_PANELS).min(q1);
            let mut q = g0;
            while q < g1 {
                let j = q * PANEL;
                let two = v2 && q + 1 < g1;
                let width = if two { 2 * PANEL } else { PANEL };
                let cols = width.min(n - j);
                let (panel, hi) = b.micro_panel(0, k, j, width);
                for i0 in (0..m).step_by(per) {
                    let h = per.min(m - i0);
                    let ap = packed[i0 * k..].as_ptr();
                    // SAFETY: the pass's packed rows (k·h floats), the
                    // panels (k rows of PANEL floats each) and rows
                    // i0..i0 + h of C (columns j..j + cols at stride ldc)
                    // are inside their buffers; task ranges of panels are
                    // disjoint columns.
                    unsafe {
                        let cq = cp.add(i0 * ldc + j).get();
                        if two {
                            pass_pair(h, k, ap, panel.as_ptr(), hi, cq, ldc, cols, alpha, beta);
                        } else {
                            pass_one(h, k, ap, panel.as_ptr(), hi, cq, ldc, cols, alpha, beta);
                        }
                    }
                }
                q += if two { 2 } else { 1 };
            }
            if epilogue.is_some() || softmax.is_some() {
                let (j0, j1) = (g0 * PANEL, (g1 * PANEL).min(n));
                for i in 0..m {
                    // SAFETY: row i's columns j0..j1: finished, and this
                    // task's alone.
                    let row =
                        unsafe { core::slice::from_raw_parts_mut(cp.add(i * ldc + j0).0, j1 - j0) };
                    if let Some(f) = epilogue {
                        f(row, i * ldc + j0);
                    }
                    if let Some(slots) = softmax {
                        // SAFETY: the group starts at a multiple of
                        // GROUP_COLUMNS (task ranges are aligned to it), so
                        // slot (i, group) is this call's alone.
                        let slot = unsafe {
                            core::slice::from_raw_parts_mut(
                                slots.add(2 * (i * groups + j0 / GROUP_COLUMNS)).0,
                                2,
                            )
                        };
                        let largest = max_of(row);
                        slot[0] = largest;
                        slot[1] = exp_shifted_in_place(row, numerator_shift(largest));
                    }
                }
            }
            g0 = g1;
        }
    };
    // Panels per task: one contiguous run per thread, or all of them. With
    // a softmax, runs start on whole groups, so the groups (and the
    // results) do not depend on the thread count.
    let per = {
        #[cfg(feature = "std")]
        {
            let threads = crate::threads::num_threads();
            if threads > 1 && m * n * k >= super::PARALLEL_MIN_MACS && panels >= 2 * threads {
                let per = panels.div_ceil(threads);
                match softmax {
                    Some(_) => per.next_multiple_of(EPILOGUE_PANELS),
                    None => per,
                }
            } else {
                panels
            }
        }
        #[cfg(not(feature = "std"))]
        {
            panels
        }
    };
    let on_tasks = |f: &(dyn Fn(usize, usize) + Sync)| {
        #[cfg(feature = "std")]
        if per < panels {
            let tasks = panels.div_ceil(per);
            crate::threads::run(tasks, &mut [], &|t, _| {
                f(t * per, ((t + 1) * per).min(panels))
            });
            return;
        }
        #[cfg(not(feature = "std"))]
        let _ = per;
        f(0, panels);
    };
    on_tasks(&run);
    let Some(slots) = softmax else { return };
    // Every row's group sums into one total and each group's factor, then
    // each task scales the groups it computed.
    for i in 0..m {
        // SAFETY: no task runs; row i's slots.
        row_factors(unsafe {
            core::slice::from_raw_parts_mut(slots.add(2 * i * groups).0, 2 * groups)
        });
    }
    on_tasks(&|q0: usize, q1: usize| {
        let (j0, j1) = (q0 * PANEL, (q1 * PANEL).min(n));
        for i in 0..m {
            for g0 in (j0..j1).step_by(GROUP_COLUMNS) {
                let g1 = (g0 + GROUP_COLUMNS).min(j1);
                // SAFETY: row i's columns g0..g1 belong to this task's
                // panels alone; its slot is only read.
                unsafe {
                    let row = core::slice::from_raw_parts_mut(cp.add(i * ldc + g0).0, g1 - g0);
                    scale_numerators(row, *slots.add(2 * (i * groups + g0 / GROUP_COLUMNS)).0);
                }
            }
        }
    });
}

/// `y *= factor` over a group's softmax numerators (each 0 or at least
/// e^-87, at most 1) where the product is a normal float, 0 where it would
/// be subnormal: such lanes are not multiplied (on Intel a multiply that
/// produces a subnormal takes a microcode assist), and the row's outputs
/// stay free of subnormals as the plain softmax's numerators are. A NaN
/// factor (a NaN or +∞ in the row) makes every output NaN.
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn scale_numerators(y: &mut [f32], factor: f32) {
    use core::arch::x86_64::*;
    if factor.is_nan() || factor >= 1.0 {
        scale_in_place(y, factor);
        return;
    }
    // e·factor is normal exactly when e >= MIN_POSITIVE / factor (+∞ for a
    // factor of 0: every lane 0).
    let (low, f) = (
        _mm512_set1_ps(f32::MIN_POSITIVE / factor),
        _mm512_set1_ps(factor),
    );
    let n = y.len();
    let mut at = 0;
    while at < n {
        let lanes: __mmask16 = if n - at >= 16 {
            !0
        } else {
            (1 << (n - at)) - 1
        };
        // SAFETY: lanes at..min(at + 16, n) of `y` (masked lanes are not
        // accessed).
        unsafe {
            let p = y.as_mut_ptr().add(at);
            let e = _mm512_maskz_loadu_ps(lanes, p);
            let normal = _mm512_mask_cmp_ps_mask::<_CMP_GE_OQ>(lanes, e, low);
            _mm512_mask_storeu_ps(p, lanes, _mm512_maskz_mul_ps(normal, e, f));
        }
        at += 16;
    }
}

/// Columns of a group the epilogue and the fused softmax get at a time
/// ([`EPILOGUE_PANELS`] panels).
pub(super) const GROUP_COLUMNS: usize = EPILOGUE_PANELS * PANEL;

/// The shift of a group's softmax numerators: its largest element, or 0
/// when that is −∞ (all of it −∞ or NaN), so that −∞ gives 0 and NaN
/// stays NaN as in the plain softmax.
fn numerator_shift(largest: f32) -> f32 {
    if largest == f32::NEG_INFINITY {
        0.0
    } else {
        largest
    }
}

/// A row's group slots `(largest, Σ e^(x − shift))` become each group's
/// factor `e^(shift − M) / S` in the first float of its slot, `M` the
/// row's largest element and `S = Σ e^(shift − M)·sum` over the groups
/// (one whose sum is 0, all −∞, gets factor 0; NaN when every group's
/// is), so that a group's numerators times its factor are the row's
/// softmax: with the plain kernel's special values, every output NaN when
/// any input is NaN or +∞ or all are −∞.
fn row_factors(slots: &mut [f32]) {
    let top = slots
        .chunks_exact(2)
        .fold(f32::NEG_INFINITY, |a, s| if s[0] > a { s[0] } else { a });
    let mut tmp = [0f32; 128];
    let mut scaled = [0f32; 128];
    let mut total = 0.0f32;
    for chunk in slots.chunks_mut(2 * tmp.len()) {
        let len = chunk.len() / 2;
        for (t, s) in tmp.iter_mut().zip(chunk.chunks_exact(2)) {
            *t = numerator_shift(s[0]);
        }
        exp_shifted(&tmp[..len], &mut scaled[..len], top);
        for (s, &e) in chunk.chunks_exact_mut(2).zip(&scaled[..len]) {
            if s[1] != 0.0 {
                total += s[1] * e;
            }
            // The group's e^(shift − M) until the total is known.
            s[0] = e;
        }
    }
    let inv = 1.0 / total;
    for s in slots.chunks_exact_mut(2) {
        s[0] = match (total == 0.0, s[1] == 0.0) {
            // Every element −∞: `x − max` is NaN in the plain softmax.
            (true, _) => f32::NAN,
            (false, true) => 0.0,
            (false, false) => s[0] * inv,
        };
    }
}

/// One pass of `h` rows of A: `pass_pair` over two panels (`1 ≤ h ≤
/// PAIR_PASS_ROWS`), `pass_one` over one (`1 ≤ h ≤ PASS_ROWS`); each
/// instantiates [`panel_rows`] only for the heights it can get.
///
/// # Safety
/// As [`panel_rows`].
macro_rules! pass_fn {
    ($name:ident, $v:literal, $max:expr; $($r:literal)*) => {
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            h: usize,
            k: usize,
            a: *const f32,
            panel: *const f32,
            hi: usize,
            c: *mut f32,
            ldc: usize,
            cols: usize,
            alpha: f32,
            beta: f32,
        ) {
            // SAFETY: the caller's contract, with h rows.
            unsafe {
                match h {
                    $($r => panel_rows::<$r, $v>(k, a, panel, hi, c, ldc, cols, alpha, beta),)*
                    _ => panel_rows::<{ $max }, $v>(k, a, panel, hi, c, ldc, cols, alpha, beta),
                }
            }
        }
    };
}
pass_fn!(pass_pair, 2, PAIR_PASS_ROWS; 1 2 3 4 5 6 7 8 9 10 11);
pass_fn!(pass_one, 1, PASS_ROWS; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23);

/// `C = alpha·A·P + beta·C` for an `R × cols` tile (`cols ≤ 16·V`): `A`
/// packed column by column (`R` floats per step of the depth `k`), `P`
/// `V` panels of `k` rows of 16 floats (contiguous), the second `hi`
/// floats after the first, `C` at row stride `ldc` (only its first `cols`
/// columns read or written).
///
/// # Safety
/// The CPU supports AVX-512F; the pointers address those extents.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn panel_rows<const R: usize, const V: usize>(
    k: usize,
    a: *const f32,
    panel: *const f32,
    hi: usize,
    c: *mut f32,
    ldc: usize,
    cols: usize,
    alpha: f32,
    beta: f32,
) {
    use core::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    for p in 0..k {
        // SAFETY: p < k: row p of the panels and step p of A are inside
        // the caller's extents (a prefetch never faults).
        unsafe {
            let mut bv = [_mm512_setzero_ps(); V];
            for (h, v) in bv.iter_mut().enumerate() {
                let row = panel.add(h * hi + p * PANEL);
                _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(AHEAD * PANEL) as *const i8);
                *v = _mm512_loadu_ps(row);
            }
            for (i, r) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*a.add(p * R + i));
                for (x, &b) in r.iter_mut().zip(&bv) {
                    *x = _mm512_fmadd_ps(av, b, *x);
                }
            }
        }
    }
    let (va, vb) = (_mm512_set1_ps(alpha), _mm512_set1_ps(beta));
    for (i, r) in acc.iter().enumerate() {
        for (h, &v) in r.iter().enumerate() {
            let left = cols.saturating_sub(16 * h);
            let mask: __mmask16 = if left >= 16 { !0 } else { (1u16 << left) - 1 };
            // SAFETY: row i of the tile, its first `cols` floats (masked).
            unsafe {
                let p = c.add(i * ldc + 16 * h);
                let r = if beta == 0.0 {
                    _mm512_mul_ps(va, v)
                } else {
                    _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, p), _mm512_mul_ps(va, v))
                };
                _mm512_mask_storeu_ps(p, mask, r);
            }
        }
    }
}
