//! How the direct convolution's tiles walk the output: 32 columns at a
//! time with the wide AVX-512 tile, and the flat walk over staged rows
//! back to back ([`super::Layout::flat`]).
use super::{Job, TILE_M, TILE_N, WIDE_M, tile};

/// Taps per pass of the wide tiles over a column of output tiles: 256
/// taps of 32 inputs (32 KiB) stay in L1 while every row tile reads them.
const TAPS_PER_PASS: usize = 256;

impl Job<'_> {
    /// Whether the tiles are the wide AVX-512 ones (8 rows × 32 columns,
    /// 8 × 16 where fewer columns are left).
    pub(super) fn wide(&self) -> bool {
        self.tm == WIDE_M
    }

    /// Every panel of weights over one flat block of positions at `b`
    /// into `y` (row stride `ldc`): 32 columns with the wide tile, else 16.
    ///
    /// # Safety
    /// As [`Job::wide_tiles`] (16 columns and any CPU with AVX2 and FMA
    /// when not `wide`), with row stride `ldc`.
    pub(super) unsafe fn flat_block(&self, wide: bool, b: *const f32, y: *mut f32, ldc: usize) {
        for t in 0..self.g.mg.div_ceil(self.tm) {
            // SAFETY: the caller's contract; panel t's rows start at row
            // t·tm of the block.
            unsafe { self.flat_panel(wide, t, b, y.add(t * self.tm * ldc), ldc) };
        }
    }

    /// Panel `t` of weights (rows `t·tm..`) over the block of 32 (`wide`)
    /// or 16 positions at `b`, into `c` (row stride `ldc`).
    ///
    /// # Safety
    /// As [`Job::flat_block`], for this panel's rows at `c`.
    pub(super) unsafe fn flat_panel(
        &self,
        wide: bool,
        t: usize,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
    ) {
        let (k, mg, tm) = (self.g.k(), self.g.mg, self.tm);
        let ap = &self.a[t * k * tm..][..k * tm];
        let h = tm.min(mg - t * tm);
        if !wide {
            // SAFETY: the caller's contract.
            return unsafe {
                tile(
                    tm,
                    h,
                    k,
                    ap.as_ptr(),
                    b,
                    self.taps.as_ptr(),
                    c,
                    ldc,
                    self.init(t),
                    self.relu,
                    t == 0,
                )
            };
        }
        for half in 0..tm / WIDE_M {
            let r0 = half * WIDE_M;
            if r0 >= h {
                break;
            }
            // SAFETY: the caller's contract; the half's rows start
            // `r0` floats into each step of the panel.
            unsafe {
                crate::ops::gemm::rows::tile_wide(
                    WIDE_M.min(h - r0),
                    k,
                    ap.as_ptr().add(r0),
                    1,
                    tm,
                    b,
                    self.taps.as_ptr(),
                    c.add(r0 * ldc),
                    ldc,
                    self.init(t).add(r0),
                    self.relu,
                    t == 0 && half == 0,
                )
            };
        }
    }

    /// The output rows of panels `tiles` (of `tm` rows each; all of them
    /// for the whole output) over 32 columns: the wide tile on each panel
    /// of weights, its inputs at `b` (plus the tap offsets), its outputs at
    /// `y` (row stride `ohw`). The tile of the first rows prefetches.
    ///
    /// # Safety
    /// The CPU supports AVX-512F (`tm` is [`WIDE_M`]); every tap plus 32
    /// floats from `b` is readable; the `mg × 32` block at `y` is inside
    /// the output and no one else touches it meanwhile.
    pub(super) unsafe fn wide_tiles(
        &self,
        b: *const f32,
        y: *mut f32,
        tiles: core::ops::Range<usize>,
    ) {
        let (g, tm) = (self.g, self.tm);
        let (k, mg, ohw) = (g.k(), g.mg, g.ohw());
        for p0 in (0..k).step_by(TAPS_PER_PASS) {
            let kc = TAPS_PER_PASS.min(k - p0);
            for t in tiles.clone() {
                let ap = &self.a[t * k * tm + p0 * tm..][..kc * tm];
                for half in 0..tm / WIDE_M {
                    let r0 = t * tm + half * WIDE_M;
                    if r0 >= mg {
                        break;
                    }
                    // Later passes add to what the first one stored.
                    let init = match p0 {
                        0 => self.init(t).wrapping_add(half * WIDE_M),
                        _ => core::ptr::null(),
                    };
                    // SAFETY: the caller's contract; rows r0.. of the panel
                    // start `half · WIDE_M` floats into each of its steps,
                    // taps p0.. are kc of the k offsets, and `init(t)`
                    // holds tm floats.
                    unsafe {
                        crate::ops::gemm::rows::tile_wide(
                            WIDE_M.min(mg - r0),
                            kc,
                            ap.as_ptr().add(half * WIDE_M),
                            1,
                            tm,
                            b,
                            self.taps.as_ptr().add(p0),
                            y.add(r0 * ohw),
                            ohw,
                            init,
                            // Only once every tap is in.
                            self.relu && p0 + kc == k,
                            r0 == 0,
                        )
                    };
                }
            }
        }
    }
}

impl Job<'_> {
    /// [`Job::segments`] with flat tiles ([`super::Layout::flat`]): output rows
    /// `range` are staged `phase_w` apart from row `first` on, so the
    /// tiles walk that span 16 positions at a time. A tile inside one
    /// row's output columns is stored straight into `y`; any other goes
    /// through a local tile whose runs of output columns are copied to their
    /// rows. The epilogue runs once the range is done.
    ///
    /// # Safety
    /// As [`Job::segments`] (the panel is not used: the input is staged).
    pub(super) unsafe fn flat_segments(
        &self,
        src: &[f32],
        first: usize,
        range: core::ops::Range<usize>,
        y: *mut f32,
    ) {
        let (g, l, tm) = (self.g, self.l, self.tm);
        let (mg, ohw, ow, rs) = (g.mg, g.ohw(), g.ow, l.phase_w);
        if range.is_empty() {
            return;
        }
        let start = (range.start - first) * rs;
        let end = (range.end - 1 - first) * rs + ow;
        // 32 positions per tile with the wide AVX-512 tile, else 16.
        let wide = self.wide();
        let step = if wide { 2 * TILE_N } else { TILE_N };
        for q0 in (start..end).step_by(step) {
            let w = step.min(end - q0);
            let (row, col) = (first + q0 / rs, q0 % rs);
            // SAFETY: every tap plus q0 + step stays inside the staged
            // band and its slack (a lane's reads end within its channel's
            // plane; lanes past `end` read the slack, [`STAGE_SLACK`]).
            let b = unsafe { src.as_ptr().add(q0) };
            if w == step && col + step <= ow {
                // SAFETY: the mg × step block at (0, row·ow + col) is
                // inside `y`, in this task's rows; reads as above.
                unsafe { self.flat_block(wide, b, y.add(row * ow + col), ohw) };
                continue;
            }
            // Runs of lanes that are output columns: (lane, len, column of y).
            let mut runs = [(0usize, 0usize, 0usize); 2 * TILE_N];
            let mut n_runs = 0;
            let mut j = 0;
            while j < w {
                let q = q0 + j;
                let c = q % rs;
                if c >= ow {
                    j += rs - c;
                    continue;
                }
                let len = (ow - c).min(w - j);
                runs[n_runs] = (j, len, (first + q / rs) * ow + c);
                n_runs += 1;
                j += len;
            }
            for t in 0..mg.div_ceil(tm) {
                let h = tm.min(mg - t * tm);
                let mut part = [0f32; TILE_M * 2 * TILE_N];
                // SAFETY: into the local block (tm rows of `step` floats);
                // reads as above.
                unsafe { self.flat_panel(wide, t, b, part.as_mut_ptr(), step) };
                for i in 0..h {
                    for &(lane, len, at) in &runs[..n_runs] {
                        // SAFETY: row t·tm + i, columns at..at + len of an
                        // output row in this task's range: inside `y`.
                        let dst = unsafe {
                            core::slice::from_raw_parts_mut(y.add((t * tm + i) * ohw + at), len)
                        };
                        for (d, &v) in dst.iter_mut().zip(&part[i * step + lane..]) {
                            *d = v;
                        }
                    }
                }
            }
        }
        // SAFETY: this range's output rows of every channel: finished,
        // ours.
        unsafe { self.finish(y, range.start * ow, range.len() * ow) };
    }
}
