//! AVX2+FMA register tile of the direct convolution.
use core::arch::x86_64::*;

use super::direct::{TILE_M, TILE_N};

/// `C += A·B` for one `R × TILE_N` (`R ≤ 6`, × 16) tile: `a` is a packed
/// weight panel (`k` steps of 6 floats, the first `R` used), row `p` of `B`
/// is the 16 floats at `x + offs[p]`,
/// and `C` starts at `c` with row stride `ldc`.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `a` holds `6·k` floats, `offs` holds `k`
/// offsets, `x + offs[p] .. + 16` is readable for every `p`, and the tile
/// (`R` rows of 16 floats at stride `ldc`) is writable.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile_avx2<const R: usize>(
    k: usize,
    a: *const f32,
    x: *const f32,
    offs: *const u32,
    c: *mut f32,
    ldc: usize,
) {
    let mut acc = [[_mm256_setzero_ps(); TILE_N / 8]; R];
    for p in 0..k {
        // SAFETY: p < k: the offset, the 16 inputs it points at and the 6
        // weights are inside the caller's buffers.
        unsafe {
            let b = x.add(*offs.add(p) as usize);
            let bv: [__m256; TILE_N / 8] = core::array::from_fn(|j| _mm256_loadu_ps(b.add(8 * j)));
            let ap = a.add(p * TILE_M);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*ap.add(i));
                for (r, &bj) in row.iter_mut().zip(&bv) {
                    *r = _mm256_fmadd_ps(av, bj, *r);
                }
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (h, &v) in row.iter().enumerate() {
            // SAFETY: element (i, 8h..8h + 8) of the caller's tile.
            unsafe {
                let p = c.add(i * ldc + 8 * h);
                _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), v));
            }
        }
    }
}
