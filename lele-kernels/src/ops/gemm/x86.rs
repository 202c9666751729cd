//! AVX2+FMA and AVX-512 micro-kernels.
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
