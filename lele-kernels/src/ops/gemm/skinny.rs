//! Products too thin to pack: a few rows against a B whose columns are
//! contiguous, or a few columns of B copied contiguously (`dot_columns`),
//! and one row (`gemv_row`). `sgemm` picks them before the blocked product.
#[cfg(target_arch = "x86_64")]
use super::best_isa;
use super::dot_lanes::DotColumns;
use super::{CPtr, Isa, MatRef};
/// Products with at most this many columns pack B's columns contiguously
/// and run [`dot_columns`] on them (a wider register tile would be mostly
/// padding: an STFT of 258 filters over 5 frames left most lanes of the
/// 32-wide AVX-512 micro-kernel idle).
pub(super) const NARROW_N: usize = 8;

/// Products with at most this many rows and a B whose columns are
/// contiguous use [`dot_columns`] (measured with `kernel_bench`: below this
/// packing B costs more than it saves).
pub(super) const DOT_M_MAX: usize = 96;

/// Few rows against columns of B that are contiguous in memory (`B[p, j]`
/// at `bt[j·ldb + p]`, e.g. a transposed weight): dot products straight
/// from B with no packing; each group of columns stays in L1 while the rows
/// of A pass over it. The kernel written once over the SIMD layer
/// ([`super::dot_lanes`]) on every vector ISA, split by columns over
/// threads when large; the portable loop otherwise.
#[allow(clippy::too_many_arguments)]
pub(super) fn dot_columns(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    bt: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    let whole = DotColumns {
        m,
        n,
        k,
        alpha,
        a: a.data,
        lda: a.rs,
        bt,
        ldb,
        beta,
        c: c.as_mut_ptr(),
        c_len: c.len(),
        ldc,
    };
    if n > 0 && crate::simd::vector_lanes(isa).is_some() && whole.fits() {
        let (c_ptr, c_len) = (CPtr(whole.c), whole.c_len);
        // Columns j0..j0 + w (j0 < n: B's slice from column j0 on holds
        // them, and C's tile from element j0 on).
        let part = |j0: usize, w: usize| {
            let kernel = DotColumns {
                n: w,
                bt: &bt[j0 * ldb..],
                // SAFETY: j0 < n <= ldc, inside C (`fits`); tasks write
                // disjoint columns.
                c: unsafe { c_ptr.add(j0) }.0,
                c_len: c_len - j0,
                ..whole
            };
            // `isa` runs here (checked above), so the kernel runs.
            let _ = crate::simd::dispatch_on(isa, kernel);
        };
        #[cfg(feature = "std")]
        {
            let threads = crate::threads::num_threads();
            if threads > 1 && m * n * k >= super::PARALLEL_MIN_MACS && n >= 16 {
                // Column ranges, a few per thread; `run` returns after all
                // of them.
                let width = n.div_ceil(2 * threads).next_multiple_of(4);
                let tasks = n.div_ceil(width);
                crate::threads::run(tasks, &mut [], &|t, _| {
                    let j0 = t * width;
                    part(j0, width.min(n - j0));
                });
                return;
            }
        }
        part(0, n);
        return;
    }
    dot_columns_body(m, n, k, alpha, a, bt, ldb, beta, c, ldc)
}

/// The portable [`dot_columns`]: four columns at a time through
/// [`narrow_n`].
#[allow(clippy::too_many_arguments)]
fn dot_columns_body(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    bt: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    let mut j = 0;
    while j + 4 <= n {
        narrow_n::<4>(m, k, alpha, a, &bt[j * ldb..], ldb, beta, &mut c[j..], ldc);
        j += 4;
    }
    // Column `n` may start past the end of `bt` (its last column is only
    // `k` long, not `ldb`): slice only when columns are left.
    if j == n {
        return;
    }
    let (bt, c) = (&bt[j * ldb..], &mut c[j..]);
    match n - j {
        1 => narrow_n::<1>(m, k, alpha, a, bt, ldb, beta, c, ldc),
        2 => narrow_n::<2>(m, k, alpha, a, bt, ldb, beta, c, ldc),
        3 => narrow_n::<3>(m, k, alpha, a, bt, ldb, beta, c, ldc),
        _ => {}
    }
}

/// `N` columns of C (column `j` of B at `bt[j·ldb..][..k]`): each row of
/// A is read once, eight lanes at a time, against all `N` columns.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn narrow_n<const N: usize>(
    m: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    bt: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    let cols: [&[f32]; N] = core::array::from_fn(|j| &bt[j * ldb..j * ldb + k]);
    let full = k - k % 8;
    for i in 0..m {
        let row = &a.data[i * a.rs..i * a.rs + k];
        let mut acc = [[0f32; 8]; N];
        for p in (0..full).step_by(8) {
            let r8: &[f32; 8] = row[p..p + 8].try_into().expect("8 floats");
            for (acc_j, col) in acc.iter_mut().zip(&cols) {
                let c8: &[f32; 8] = col[p..p + 8].try_into().expect("8 floats");
                for l in 0..8 {
                    acc_j[l] += r8[l] * c8[l];
                }
            }
        }
        for (j, (acc_j, col)) in acc.iter().zip(&cols).enumerate() {
            let mut dot = ((acc_j[0] + acc_j[4]) + (acc_j[1] + acc_j[5]))
                + ((acc_j[2] + acc_j[6]) + (acc_j[3] + acc_j[7]));
            for p in full..k {
                dot += row[p] * col[p];
            }
            let out = &mut c[i * ldc + j];
            *out = if beta == 0.0 {
                alpha * dot
            } else {
                alpha * dot + beta * *out
            };
        }
    }
}

/// `c = alpha·a·B + beta·c` for a single row `a` (no packing). The loops
/// are compiled twice, for the baseline target and with AVX2+FMA (chosen at
/// run time), so they vectorize eight wide where the CPU allows.
pub(super) fn gemv_row(
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if matches!(best_isa(), Isa::Avx2 | Isa::Avx512) {
        // SAFETY: AVX2 and FMA were detected.
        return unsafe { gemv_row_avx2(n, k, alpha, a, b, beta, c) };
    }
    gemv_row_body(n, k, alpha, a, b, beta, c)
}

/// [`gemv_row_body`] compiled with AVX2+FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_row_avx2(
    n: usize,
    k: usize,
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: &mut [f32],
) {
    gemv_row_body(n, k, alpha, a, b, beta, c)
}

#[inline(always)]
fn gemv_row_body(
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
        // Four rows of B per pass over c (a quarter of the c traffic).
        let mut p = 0;
        while p + 4 <= k {
            let s = [0, 1, 2, 3].map(|i| alpha * a.at(0, p + i));
            let r = [0, 1, 2, 3].map(|i| &b.data[(p + i) * b.rs..(p + i) * b.rs + n]);
            for ((((x, &b0), &b1), &b2), &b3) in
                c.iter_mut().zip(r[0]).zip(r[1]).zip(r[2]).zip(r[3])
            {
                *x += s[0] * b0 + s[1] * b1 + s[2] * b2 + s[3] * b3;
            }
            p += 4;
        }
        for p in p..k {
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
