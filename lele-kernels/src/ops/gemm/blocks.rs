//! The blocked product: packed panels of `A` and `B` (or panels packed
//! ahead of time, read in place) through the register micro-kernel, over
//! cache blocks of `MC × KC` and `KC × NC`.
use super::micro::{MicroFn, NextAFn, micro_for};
use super::pack_a::{pack_a_rows, pack_a_strided, repack_panels};
use super::{A_PANEL, Epilogue, KC, LeftOp, MAX_TILE, MC, MR_LCM, NC, NR_LCM, PackB, prepacked};
use crate::simd::Isa;

/// The output matrix as a raw pointer: column ranges of it are written by
/// different threads, so no `&mut` slice may span it while they run.
#[derive(Clone, Copy)]
pub(super) struct CPtr(pub(super) *mut f32);
// SAFETY: only used for disjoint column ranges (see `sgemm_isa`).
unsafe impl Send for CPtr {}
// SAFETY: as above.
unsafe impl Sync for CPtr {}

impl CPtr {
    /// The pointer (a method, so closures capture the `Sync` wrapper).
    #[cfg(target_arch = "x86_64")]
    pub(super) fn get(self) -> *mut f32 {
        self.0
    }

    /// # Safety
    /// `off` stays inside the allocation.
    pub(super) unsafe fn add(self, off: usize) -> CPtr {
        // SAFETY: the caller keeps `off` inside C.
        CPtr(unsafe { self.0.add(off) })
    }
}

/// The blocked product for columns `j_off..j_off + n` of `B`, written to
/// the `m × n` block of C at `c` (row stride `ldc`), which is element
/// `c_off` of the caller's C (the epilogue is told offsets in that C).
///
/// # Safety
/// `c` addresses `m` rows of `n` writable floats at stride `ldc` that no
/// one else reads or writes meanwhile; `a` holds `m × k`, `b` has columns
/// up to `j_off + n`, `scratch` holds [`sgemm_scratch_len`](super::sgemm_scratch_len)`(m, n, k)`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_blocks<B: PackB>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: LeftOp<'_>,
    b: &B,
    j_off: usize,
    beta: f32,
    c: CPtr,
    c_off: usize,
    ldc: usize,
    scratch: &mut [f32],
    epilogue: Option<Epilogue<'_>>,
) {
    let c = c.0;
    let micro = micro_for(isa);
    let (mr, nr) = (micro.mr, micro.nr);
    let ready = b.prepacked();
    // A row-major B whose rows spread over L1's sets is read in place: the
    // micro-kernel steps through its rows at their own stride, and only a
    // last, partial panel of each block is packed (packing B was a
    // measurable share of the small 1×1 convolutions of sequence models).
    let direct = match ready {
        None => b.as_mat().filter(|mat| reads_in_place(mat, nr, k.min(KC))),
        Some(_) => None,
    };
    #[cfg(all(test, feature = "std"))]
    if direct.is_some() {
        IN_PLACE_CALLS.with(|c| c.set(c.get() + 1));
    }
    let kc_max = k.min(KC);
    let (pack_a, rest) = scratch.split_at_mut(m.min(MC).next_multiple_of(MR_LCM) * kc_max);
    let pack_b = &mut rest[..n.min(NC).next_multiple_of(NR_LCM) * kc_max];
    let mut tile = [0f32; MAX_TILE];

    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            let beta_eff = if pc == 0 { beta } else { 1.0 };
            let full = nc / nr * nr;
            if direct.is_some() {
                if full < nc {
                    b.pack(pc, kc, j_off + jc + full, nc - full, nr, pack_b);
                }
            } else if ready.is_none() {
                // Pack B[pc.., jc..] into NR-wide panels, zero padded.
                b.pack(pc, kc, j_off + jc, nc, nr, pack_b);
            }
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                // A packed ahead of time in the kernel's own panels is
                // read in place.
                let in_place = match a {
                    LeftOp::Panels(d) if mr == A_PANEL => Some(d),
                    _ => None,
                };
                // Else pack A[ic.., pc..] into MR-tall panels, zero padded.
                for (pi, panel) in pack_a
                    .chunks_exact_mut(mr * kc)
                    .take(if in_place.is_some() {
                        0
                    } else {
                        mc.div_ceil(mr)
                    })
                    .enumerate()
                {
                    let i0 = ic + pi * mr;
                    let h = mr.min(ic + mc - i0);
                    let a = match a {
                        LeftOp::Strided(a) => a,
                        LeftOp::Panels(d) => {
                            repack_panels(d, k, i0, pc, h, mr, kc, panel);
                            continue;
                        }
                    };
                    if a.rs == 1 {
                        for (p, dst) in panel.chunks_exact_mut(mr).enumerate() {
                            let s = (pc + p) * a.cs + i0;
                            dst[..h].copy_from_slice(&a.data[s..s + h]);
                            dst[h..].fill(0.0);
                        }
                    } else if a.cs == 1 && h == mr {
                        // Whole panels of a row-major A (the usual case).
                        let start = i0 * a.rs + pc;
                        match mr {
                            8 => pack_a_rows::<8>(&a.data[start..], a.rs, kc, panel),
                            6 => pack_a_rows::<6>(&a.data[start..], a.rs, kc, panel),
                            4 => pack_a_rows::<4>(&a.data[start..], a.rs, kc, panel),
                            _ => pack_a_strided(a, i0, pc, h, mr, kc, panel),
                        }
                    } else {
                        pack_a_strided(a, i0, pc, h, mr, kc, panel);
                    }
                }
                for jr in (0..nc).step_by(nr) {
                    let w = nr.min(nc - jr);
                    // An edge panel of at most nr/2 columns takes the
                    // half-width kernel where there is one.
                    let (kernel, first, in_l1, reads) = match micro.half {
                        Some(half) if 2 * w <= nr => (half, half, half, nr / 2),
                        _ => (micro.f, micro.first, micro.in_l1, nr),
                    };
                    // The micro-panel, its row stride and where a row's
                    // columns 16.. start: in place in a weight packed ahead
                    // of time (column j_off + jc + jr, a multiple of nr),
                    // else in this block's packing.
                    let (bp, ldb, b_hi) = match (ready, direct) {
                        (Some(r), _) => {
                            let (bp, hi) = r.micro_panel(pc, kc, j_off + jc + jr, reads);
                            (bp, prepacked::PANEL, hi)
                        }
                        (None, Some(mat)) if jr < full => {
                            (&mat.data[pc * mat.rs + j_off + jc + jr..], mat.rs, 16)
                        }
                        (None, Some(_)) => (&pack_b[..nr * kc], nr, 16),
                        (None, None) => (&pack_b[(jr / nr) * nr * kc..][..nr * kc], nr, 16),
                    };
                    for ir in (0..mc).step_by(mr) {
                        let h = mr.min(mc - ir);
                        let ap = match in_place {
                            // Panel (ic + ir) / 8 (ic and ir are multiples
                            // of 8), depth pc.. of it.
                            Some(d) => &d[(ic + ir) * k + pc * A_PANEL..][..mr * kc],
                            None => &pack_a[(ir / mr) * mr * kc..][..mr * kc],
                        };
                        let c0 = (ic + ir) * ldc + jc + jr;
                        // A weight packed ahead of time comes from memory:
                        // the first row tile over its micro-panel streams it
                        // (prefetching far ahead), and the last one fetches
                        // the start of the next micro-panel, which the
                        // hardware cannot guess (it is a panel further on).
                        // Later row tiles find the micro-panel in L1.
                        let kernel = match ready {
                            _ if ir > 0 => in_l1,
                            Some(_) => first,
                            None => kernel,
                        };
                        if let Some(r) = ready
                            && ir + mr >= mc
                            && jr + nr < nc
                        {
                            // The next tile's columns (whole panels past the
                            // first, as `micro_panel` takes them).
                            let left = (nc - jr - nr).min(nr);
                            let width = match left > prepacked::PANEL {
                                true => left.next_multiple_of(prepacked::PANEL),
                                false => left,
                            };
                            let (bp, hi) = r.micro_panel(pc, kc, j_off + jc + jr + nr, width);
                            prefetch_rows(bp, hi, width.div_ceil(prepacked::PANEL), kc);
                        }
                        // A weight packed ahead of time (a convolution's)
                        // comes from the last-level cache on the block's
                        // first column pass: fetch the next row tile's
                        // panel into L2 while this tile computes, so that
                        // pass does not wait for it (convolution-heavy
                        // models gain on one thread and on two).
                        let next_a = match in_place {
                            Some(d) if jr == 0 && ir + mr < mc => {
                                let next = (ic + ir + mr) * k + pc * A_PANEL;
                                d.get(next..next + mr * kc)
                            }
                            _ => None,
                        };
                        // The first row tile of the first row block over a
                        // micro-panel of a B read in place fetches the next
                        // micro-panel into L2 as it runs (`Micro::next_b`),
                        // if that one is read in place too: the input was
                        // just written, half of it by the other core with
                        // two threads. Later row blocks find it in L2.
                        let next_b = micro.next_b.filter(|_| {
                            direct.is_some() && ic == 0 && ir == 0 && h == mr && jr + 2 * nr <= full
                        });
                        let kernel = next_b.unwrap_or(kernel);
                        // The micro-kernel fetches the next A panel as it
                        // runs where it can (tiles of every row through the
                        // full-width kernel), else it is fetched here first.
                        let fetching = next_a.and_then(|panel| {
                            match micro.next_a.filter(|_| h == mr && reads == nr) {
                                Some(_) if let (Some(f), Some(_)) = (micro.next_ab, next_b) => {
                                    Some((f, panel.as_ptr()))
                                }
                                Some((f, _)) if ir == 0 => Some((f, panel.as_ptr())),
                                Some((_, f)) => Some((f, panel.as_ptr())),
                                None => {
                                    prefetch_l2(panel);
                                    None
                                }
                            }
                        });
                        if h == mr && w == nr {
                            // SAFETY: the full tile (rows c0 + i·ldc, nr
                            // columns each) lies in this call's block of C
                            // (the caller's contract); `ap` holds mr·kc
                            // floats, `bp` kc rows of nr at stride ldb
                            // (columns 16.. at b_hi); `isa` was detected
                            // (or is scalar).
                            unsafe {
                                run_tile(
                                    kernel,
                                    fetching,
                                    kc,
                                    ap.as_ptr(),
                                    bp.as_ptr(),
                                    ldb,
                                    b_hi,
                                    c.add(c0),
                                    ldc,
                                    alpha,
                                    beta_eff,
                                );
                            }
                        } else if let (Some(short), true) = (micro.short, w == nr) {
                            // SAFETY: as above, for the h × nr tile (rows
                            // c0 + i·ldc, i < h, nr columns each).
                            unsafe {
                                short(
                                    h,
                                    kc,
                                    ap.as_ptr(),
                                    bp.as_ptr(),
                                    ldb,
                                    b_hi,
                                    c.add(c0),
                                    ldc,
                                    alpha,
                                    beta_eff,
                                );
                            }
                        } else {
                            // SAFETY: as above, with the stack tile of
                            // MAX_TILE >= mr*nr floats and row stride nr
                            // (the half kernel reads and writes its first
                            // nr/2 columns, all that is read back).
                            unsafe {
                                run_tile(
                                    kernel,
                                    fetching,
                                    kc,
                                    ap.as_ptr(),
                                    bp.as_ptr(),
                                    ldb,
                                    b_hi,
                                    tile.as_mut_ptr(),
                                    nr,
                                    alpha,
                                    0.0,
                                );
                            }
                            for i in 0..h {
                                // SAFETY: row i of the edge tile, w floats
                                // inside this call's block of C.
                                let dst = unsafe {
                                    core::slice::from_raw_parts_mut(c.add(c0 + i * ldc), w)
                                };
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
                if pc + kc == k
                    && let Some(f) = epilogue
                {
                    for i in 0..mc {
                        // SAFETY: row ic + i of this call's block of C,
                        // columns jc..jc + nc: finished (last depth block).
                        let row = unsafe {
                            core::slice::from_raw_parts_mut(c.add((ic + i) * ldc + jc), nc)
                        };
                        f(row, c_off + (ic + i) * ldc + jc);
                    }
                }
            }
        }
    }
}

/// Whether the micro-kernel reads `mat` (as B) in place: rows contiguous,
/// starting on cache lines (the data 64-byte aligned, the row stride whole
/// lines; column offsets are multiples of `nr`), and a micro-panel of `kc`
/// rows × `nr` columns spread over L1's sets (64 sets of 64-byte lines) so
/// that it stays cached while the row tiles pass over it: at most 8 of its
/// lines per set, two thirds of a 48 KiB, 12-way L1 (a row stride of a
/// multiple of 4 KiB would put every row in the same sets).
pub(super) fn reads_in_place(mat: &super::MatRef<'_>, nr: usize, kc: usize) -> bool {
    const SETS: usize = 64;
    if mat.cs != 1
        || mat.rs == 0
        || !mat.rs.is_multiple_of(16)
        || !nr.is_multiple_of(16)
        || !(mat.data.as_ptr() as usize).is_multiple_of(64)
    {
        return false;
    }
    // Row p starts at line p·stride: those starts cycle through the
    // SETS / g sets that are multiples of g = gcd(stride, SETS), and a
    // row's `lines` lines fall in one residue class mod g unless they
    // outnumber g.
    let (lines, stride) = (nr / 16, mat.rs / 16);
    let g = gcd(stride, SETS);
    kc.div_ceil(SETS / g) * lines.div_ceil(g) <= 8
}

#[cfg(all(test, feature = "std"))]
std::thread_local! {
    /// Blocked products on this thread that read B in place (tests check
    /// that their cases take the path).
    pub(super) static IN_PLACE_CALLS: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// Greatest common divisor.
fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// One tile through `kernel`, or through `fetching`'s micro-kernel, which
/// also fetches the panel at its pointer as it runs.
///
/// # Safety
/// As the micro-kernels: `a`, `b` and the tile at `c` as [`MicroFn`]
/// describes them (the fetched pointer is only prefetched).
#[allow(clippy::too_many_arguments)]
unsafe fn run_tile(
    kernel: MicroFn,
    fetching: Option<(NextAFn, *const f32)>,
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    b_hi: usize,
    c: *mut f32,
    ldc: usize,
    alpha: f32,
    beta: f32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        match fetching {
            Some((fetch, next)) => fetch(kc, a, b, ldb, b_hi, c, ldc, alpha, beta, next),
            None => kernel(kc, a, b, ldb, b_hi, c, ldc, alpha, beta),
        }
    }
}

/// Prefetches every cache line of `data` into L2 (a hint, no effect off
/// x86_64).
fn prefetch_l2(data: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in data.chunks(16) {
        // SAFETY: a prefetch is only a hint; it never faults, and the
        // address is inside `data`.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T1 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Rows of a micro-panel [`prefetch_rows`] fetches: as far ahead as the
/// streaming micro-kernel prefetches, so that it finds its first rows
/// cached and its own prefetches cover the rest.
#[cfg(target_arch = "x86_64")]
const STREAM_AHEAD_ROWS: usize = 48;

/// Prefetches the first rows (up to `kc`) of a micro-panel of a weight
/// packed ahead of time: `halves` runs of `PANEL` floats per row, the
/// second `hi` floats after the first.
fn prefetch_rows(panel: &[f32], hi: usize, halves: usize, kc: usize) {
    #[cfg(target_arch = "x86_64")]
    for row in 0..STREAM_AHEAD_ROWS.min(kc) {
        for h in 0..halves {
            let line = panel.as_ptr().wrapping_add(row * prepacked::PANEL + h * hi);
            // SAFETY: a prefetch is only a hint; it never faults, whatever
            // the address.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(line.cast())
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (panel, hi, halves, kc);
}
