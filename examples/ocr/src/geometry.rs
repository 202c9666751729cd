//! Geometry for the OCR pipeline: DB post-processing of the detector's probability map,
//! convex hull / minimum-area rectangle, corner ordering and perspective cropping.
//!
//! Coordinates are continuous pixel units (x right, y down): pixel `(i, j)` covers the square
//! `[i, i + 1) x [j, j + 1)` and its centre is `(i + 0.5, j + 0.5)`. With this convention a box
//! found on a map resized from the image by factors `(sx, sy)` maps back by plain scaling
//! ([`scale_corners`]), and cropping an axis-aligned integer box reproduces pixels exactly.

/// A point (x right, y down).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Horizontal coordinate.
    pub x: f32,
    /// Vertical coordinate (grows downwards).
    pub y: f32,
}

/// Parameters of DB post-processing.
#[derive(Clone, Debug, PartialEq)]
pub struct DbParams {
    /// Binarization threshold on the probability map (pixel is text if `prob > thresh`).
    pub thresh: f32,
    /// Minimum box score (mean probability inside the box) to keep a box.
    pub box_thresh: f32,
    /// Unclip ratio: boxes grow by `area * unclip_ratio / perimeter` on every side (≤ 0: none).
    pub unclip_ratio: f32,
    /// Minimum shorter side of a box before unclipping (after unclipping: `min_size + 2`).
    pub min_size: f32,
    /// Maximum number of connected components examined (in raster-scan discovery order).
    pub max_candidates: usize,
    /// Dilate the bitmap with a 2x2 kernel before finding components.
    pub dilate: bool,
}

impl Default for DbParams {
    /// PP-OCR defaults: thresh 0.3, box_thresh 0.5, unclip 1.6, min_size 3, 1000 candidates.
    fn default() -> Self {
        Self {
            thresh: 0.3,
            box_thresh: 0.5,
            unclip_ratio: 1.6,
            min_size: 3.0,
            max_candidates: 1000,
            dilate: false,
        }
    }
}

/// One detected text region: four corners clockwise from top-left, in probability-map pixels,
/// and its score.
#[derive(Clone, Debug, PartialEq)]
pub struct TextBox {
    /// Corners: top-left, top-right, bottom-right, bottom-left.
    pub corners: [Point; 4],
    /// Mean probability inside the (pre-unclip) minimum-area rectangle.
    pub score: f32,
}

fn pt(x: f32, y: f32) -> Point {
    Point { x, y }
}

/// Boxes whose top-left corners differ by less than this many pixels vertically share a row.
const ROW_TOLERANCE: f32 = 10.0;

/// Oriented rectangle: centre, unit direction `u` of its first side, and full side lengths.
/// The second side runs along `v = (-u.y, u.x)` (u turned 90° clockwise on screen).
#[derive(Clone, Copy, Debug)]
struct RotRect {
    cx: f64,
    cy: f64,
    ux: f64,
    uy: f64,
    len_u: f64,
    len_v: f64,
}

impl RotRect {
    /// Corners in clockwise (screen) order.
    fn corners(&self) -> [Point; 4] {
        let (a, b) = (self.len_u / 2.0, self.len_v / 2.0);
        let (vx, vy) = (-self.uy, self.ux);
        [(-a, -b), (a, -b), (a, b), (-a, b)].map(|(s, t)| {
            let (x, y) = (s * self.ux + t * vx, s * self.uy + t * vy);
            pt((self.cx + x) as f32, (self.cy + y) as f32)
        })
    }

    fn short_side(&self) -> f64 {
        self.len_u.min(self.len_v)
    }
}

fn cross(o: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

/// Andrew's monotone chain on f64 pairs; strictly convex output (collinear points removed).
fn hull_f64(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = points.to_vec();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    pts.dedup();
    if pts.len() < 3 {
        return pts;
    }
    let rev: Vec<(f64, f64)> = pts.iter().rev().copied().collect();
    let mut hull: Vec<(f64, f64)> = Vec::with_capacity(pts.len() + 1);
    // Lower chain left to right, then upper chain right to left.
    for chain in [&pts, &rev] {
        let start = hull.len();
        for &p in chain {
            while hull.len() >= start + 2
                && cross(hull[hull.len() - 2], hull[hull.len() - 1], p) <= 0.0
            {
                hull.pop();
            }
            hull.push(p);
        }
        hull.pop(); // last point of each chain is the first of the other
    }
    hull
}

/// Convex hull by Andrew's monotone chain. Collinear and duplicate points are removed; the hull
/// runs counter-clockwise in math orientation (clockwise on screen, since y points down).
/// Fewer than three distinct points are returned as they are (sorted, deduplicated).
pub fn convex_hull(points: &[Point]) -> Vec<Point> {
    let pts: Vec<(f64, f64)> = points.iter().map(|p| (p.x as f64, p.y as f64)).collect();
    hull_f64(&pts)
        .into_iter()
        .map(|(x, y)| pt(x as f32, y as f32))
        .collect()
}

/// Minimum-area rectangle of a strictly convex hull (or 1-2 distinct points) by rotating calipers:
/// one side of the optimum lies on a hull edge, and the extreme points along the edge, along its
/// normal and against the edge advance monotonically around the hull.
fn rect_of_hull(h: &[(f64, f64)]) -> Option<RotRect> {
    let n = h.len();
    let next = |i: usize| (i + 1) % n;
    let (mut j, mut k, mut l) = (0, 0, 0);
    let mut best: Option<(f64, RotRect)> = None;
    for i in 0..n {
        let a = h[i];
        let (dx, dy) = (h[next(i)].0 - a.0, h[next(i)].1 - a.1);
        let len = dx.hypot(dy);
        // Only a single point has a zero-length "edge" (the hull is deduplicated).
        let (ux, uy) = if len > 0.0 {
            (dx / len, dy / len)
        } else {
            (1.0, 0.0)
        };
        // Along the edge, and along its normal pointing into the hull.
        let du = |p: (f64, f64)| (p.0 - a.0) * ux + (p.1 - a.1) * uy;
        let dn = |p: (f64, f64)| (p.1 - a.1) * ux - (p.0 - a.0) * uy;
        // Walk a pointer forward while `f` grows (unimodal on a strictly convex hull).
        let climb = |mut q: usize, f: &dyn Fn((f64, f64)) -> f64| {
            for _ in 0..n {
                if f(h[next(q)]) <= f(h[q]) {
                    break;
                }
                q = next(q);
            }
            q
        };
        // Farthest along the edge, then along the normal, then backwards along the edge.
        let first = best.is_none();
        j = climb(if first { next(i) } else { j }, &du);
        k = climb(if first { j } else { k }, &dn);
        l = climb(if first { k } else { l }, &|q| -du(q));
        let (lo, hi, height) = (du(h[l]), du(h[j]), dn(h[k]));
        let area = (hi - lo) * height;
        if best.as_ref().is_none_or(|(b, _)| area < *b) {
            let (mu, mn) = ((lo + hi) / 2.0, height / 2.0);
            // The inward normal (-uy, ux) is RotRect's second axis.
            let rect = RotRect {
                cx: a.0 + mu * ux - mn * uy,
                cy: a.1 + mu * uy + mn * ux,
                ux,
                uy,
                len_u: hi - lo,
                len_v: height,
            };
            best = Some((area, rect));
        }
    }
    best.map(|(_, r)| r)
}

/// Min-area enclosing rectangle of a point set (≥ 1 point), corners ordered by [`order_corners`].
/// Returns `None` for an empty set or non-finite coordinates. Degenerate sets give a zero-width
/// (collinear points) or zero-size (single point) rectangle.
pub fn min_area_rect(points: &[Point]) -> Option<[Point; 4]> {
    if points.iter().any(|p| !p.x.is_finite() || !p.y.is_finite()) {
        return None;
    }
    let pts: Vec<(f64, f64)> = points.iter().map(|p| (p.x as f64, p.y as f64)).collect();
    rect_of_hull(&hull_f64(&pts)).map(|r| order_corners(r.corners()))
}

/// Orders four corners of a convex quadrilateral clockwise on screen (by angle around their
/// centroid), starting at the top-left one: the corner with the smallest `x + y` (ties: smallest
/// `y`). This is correct for rectangles rotated by less than 45° either way.
pub fn order_corners(c: [Point; 4]) -> [Point; 4] {
    let cx = c.iter().map(|p| p.x).sum::<f32>() / 4.0;
    let cy = c.iter().map(|p| p.y).sum::<f32>() / 4.0;
    let mut s = c;
    // With y down, increasing atan2 angle is clockwise on screen.
    s.sort_by(|a, b| {
        (a.y - cy)
            .atan2(a.x - cx)
            .total_cmp(&(b.y - cy).atan2(b.x - cx))
    });
    let key = |p: &Point| (p.x + p.y, p.y);
    let start = (0..4)
        .min_by(|&a, &b| {
            let (ka, kb) = (key(&s[a]), key(&s[b]));
            ka.0.total_cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
        })
        .unwrap_or(0);
    s.rotate_left(start);
    s
}

/// Maps corners from probability-map coordinates back to the original image: `x * sx`, `y * sy`.
pub fn scale_corners(c: &[Point; 4], sx: f32, sy: f32) -> [Point; 4] {
    c.map(|p| pt(p.x * sx, p.y * sy))
}

/// Whether `(x, y)` lies inside (or on) the convex polygon `c` given in cyclic order.
fn inside_convex(c: &[Point; 4], x: f32, y: f32) -> bool {
    let mut sign = 0.0f32;
    for (i, a) in c.iter().enumerate() {
        let b = c[(i + 1) % 4];
        let z = (b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x);
        if z.abs() <= 1e-4 {
            continue;
        }
        if sign == 0.0 {
            sign = z.signum();
        } else if z.signum() != sign {
            return false;
        }
    }
    true
}

/// Mean of `prob` over all map pixels whose centre lies inside the quadrilateral `c` (only the
/// quad's clamped bounding box is scanned). Background pixels inside the box count too, so loose
/// boxes score lower. Returns 0 when no pixel centre is inside.
fn box_score(prob: &[f32], w: usize, h: usize, c: &[Point; 4]) -> f32 {
    let fold =
        |f: fn(f32, f32) -> f32, init: f32, get: fn(&Point) -> f32| c.iter().map(get).fold(init, f);
    let clamp = |v: f32, hi: usize| (v.max(0.0) as usize).min(hi);
    let x0 = clamp(fold(f32::min, f32::INFINITY, |p| p.x).floor(), w);
    let x1 = clamp(fold(f32::max, f32::NEG_INFINITY, |p| p.x).ceil(), w);
    let y0 = clamp(fold(f32::min, f32::INFINITY, |p| p.y).floor(), h);
    let y1 = clamp(fold(f32::max, f32::NEG_INFINITY, |p| p.y).ceil(), h);
    let (mut sum, mut count) = (0.0f64, 0usize);
    for y in y0..y1 {
        let row = &prob[y * w..(y + 1) * w];
        for (x, &v) in row.iter().enumerate().take(x1).skip(x0) {
            if inside_convex(c, x as f32 + 0.5, y as f32 + 0.5) {
                sum += v as f64;
                count += 1;
            }
        }
    }
    (sum / count.max(1) as f64) as f32 // 0 when no pixel centre is inside
}

/// Binarized (optionally 2x2-dilated) map; `true` = text pixel.
fn bitmap(prob: &[f32], w: usize, thresh: f32, dilate: bool) -> Vec<bool> {
    let bits: Vec<bool> = prob.iter().map(|&v| v > thresh).collect();
    if !dilate {
        return bits;
    }
    // 2x2 kernel anchored at its bottom-right cell: a pixel is set if it or its left, upper or
    // upper-left neighbour is set.
    (0..bits.len())
        .map(|i| {
            let (x, y) = (i % w, i / w);
            bits[i]
                || (x > 0 && bits[i - 1])
                || (y > 0 && (bits[i - w] || (x > 0 && bits[i - w - 1])))
        })
        .collect()
}

/// DB post-processing of a probability map `prob` (`h * w`, values in 0..1).
///
/// Steps: binarize at `thresh` (optionally dilate); find 8-connected components in raster order
/// (at most `max_candidates`); take the minimum-area rectangle of each component's pixel squares
/// (convex hull of the outer corners of each horizontal run's end pixels, which is the hull of
/// the whole component, then rotating calipers); drop it if its shorter side is
/// below `min_size`; score it as the mean of `prob` over every pixel whose centre lies inside the
/// rectangle (component or not, like PaddleOCR's fast box score) and drop it below `box_thresh`;
/// unclip by pushing every side out by `d = area * unclip_ratio / perimeter` (the min-area rect
/// of the round-joined offset polygon, which for a rectangle is exactly this); drop it if the
/// shorter side is below `min_size + 2`; clamp to `[0, w] x [0, h]` and order the corners.
///
/// Boxes come sorted in reading order: by top-left y, rows formed greedily from the topmost box
/// of each row (top-left y within 10 px of it), each row sorted by top-left x. A `prob` shorter
/// than `w * h` gives no boxes.
pub fn db_boxes(prob: &[f32], w: usize, h: usize, p: &DbParams) -> Vec<TextBox> {
    let Some(n) = w.checked_mul(h) else {
        return Vec::new();
    };
    if n == 0 || prob.len() < n {
        return Vec::new();
    }
    let prob = &prob[..n];
    let mut bits = bitmap(prob, w, p.thresh, p.dilate);
    let set = bits.clone(); // `bits` is cleared as components are consumed
    let (mut boxes, mut candidates) = (Vec::new(), 0usize);
    let (mut stack, mut ends) = (Vec::new(), Vec::new());
    for seed in 0..n {
        if !bits[seed] {
            continue;
        }
        if candidates >= p.max_candidates {
            break;
        }
        candidates += 1;
        bits[seed] = false;
        stack.push(seed);
        ends.clear();
        while let Some(i) = stack.pop() {
            let (x, y) = (i % w, i / w);
            // Left/right neighbours of a set pixel are 8-adjacent, so a set neighbour is in this
            // component: a pixel without one ends a horizontal run.
            let (fx, fy) = (x as f64, y as f64);
            if x == 0 || !set[i - 1] {
                ends.extend([(fx, fy), (fx, fy + 1.0)]);
            }
            if x + 1 == w || !set[i + 1] {
                ends.extend([(fx + 1.0, fy), (fx + 1.0, fy + 1.0)]);
            }
            for ny in y.saturating_sub(1)..(y + 2).min(h) {
                for nx in x.saturating_sub(1)..(x + 2).min(w) {
                    let j = ny * w + nx;
                    if bits[j] {
                        bits[j] = false;
                        stack.push(j);
                    }
                }
            }
        }
        if let Some(b) = component_box(prob, w, h, &ends, p) {
            boxes.push(b);
        }
    }
    reading_order(boxes)
}

/// Rectangle, filters, score and unclip for one component (see [`db_boxes`]).
fn component_box(
    prob: &[f32],
    w: usize,
    h: usize,
    ends: &[(f64, f64)],
    p: &DbParams,
) -> Option<TextBox> {
    let rect = rect_of_hull(&hull_f64(ends))?;
    if rect.short_side() < p.min_size as f64 {
        return None;
    }
    let score = box_score(prob, w, h, &rect.corners());
    if score.is_nan() || score < p.box_thresh {
        return None;
    }
    let perimeter = 2.0 * (rect.len_u + rect.len_v);
    // NaN (zero perimeter) or a negative ratio give no growth.
    let d = (rect.len_u * rect.len_v * p.unclip_ratio as f64 / perimeter).max(0.0);
    // The min-area rect of the offset rectangle is the rectangle itself, grown by 2d per axis.
    let mut grown = rect;
    grown.len_u += 2.0 * d;
    grown.len_v += 2.0 * d;
    if grown.short_side() < p.min_size as f64 + 2.0 {
        return None;
    }
    let clamped = grown
        .corners()
        .map(|c| pt(c.x.clamp(0.0, w as f32), c.y.clamp(0.0, h as f32)));
    let corners = order_corners(clamped);
    Some(TextBox { corners, score })
}

/// Sorts boxes top-to-bottom, grouping rows within [`ROW_TOLERANCE`], left-to-right in a row.
fn reading_order(mut boxes: Vec<TextBox>) -> Vec<TextBox> {
    let top = |b: &TextBox| b.corners[0];
    boxes.sort_by(|a, b| top(a).y.total_cmp(&top(b).y));
    let (mut anchor, mut row) = (f32::NEG_INFINITY, 0usize);
    let mut keyed: Vec<(usize, TextBox)> = Vec::with_capacity(boxes.len());
    for b in boxes {
        if top(&b).y - anchor >= ROW_TOLERANCE {
            (anchor, row) = (top(&b).y, row + 1);
        }
        keyed.push((row, b));
    }
    keyed.sort_by(|(ra, a), (rb, b)| ra.cmp(rb).then(top(a).x.total_cmp(&top(b).x)));
    keyed.into_iter().map(|(_, b)| b).collect()
}

/// Solves `a x = b` (8x8) by Gaussian elimination with partial pivoting; `None` if singular.
fn solve8(mut a: [[f64; 8]; 8], mut b: [f64; 8]) -> Option<[f64; 8]> {
    for col in 0..8 {
        let piv = (col..8).max_by(|&r, &s| a[r][col].abs().total_cmp(&a[s][col].abs()))?;
        if a[piv][col].is_nan() || a[piv][col].abs() <= 1e-10 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        let pivot_row = a[col];
        for r in col + 1..8 {
            let f = a[r][col] / pivot_row[col];
            for (dst, src) in a[r].iter_mut().zip(&pivot_row).skip(col) {
                *dst -= f * src;
            }
            b[r] -= f * b[col];
        }
    }
    let mut x = [0.0; 8];
    for row in (0..8).rev() {
        let tail: f64 = (row + 1..8).map(|c| a[row][c] * x[c]).sum();
        x[row] = (b[row] - tail) / a[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// Homography `[h0..h7]` taking `dst[i]` to `src[i]`: `u = (h0 x + h1 y + h2) / (h6 x + h7 y + 1)`,
/// `v = (h3 x + h4 y + h5) / (h6 x + h7 y + 1)`. `None` if singular or if it folds the
/// destination rectangle (denominator not positive at some corner, e.g. a non-convex quad).
fn homography(dst: &[(f64, f64); 4], src: &[(f64, f64); 4]) -> Option<[f64; 8]> {
    let mut a = [[0.0; 8]; 8];
    let mut b = [0.0; 8];
    for (i, (&(x, y), &(u, v))) in dst.iter().zip(src).enumerate() {
        a[2 * i] = [x, y, 1.0, 0.0, 0.0, 0.0, -x * u, -y * u];
        a[2 * i + 1] = [0.0, 0.0, 0.0, x, y, 1.0, -x * v, -y * v];
        b[2 * i] = u;
        b[2 * i + 1] = v;
    }
    let m = solve8(a, b)?;
    dst.iter()
        .all(|&(x, y)| m[6] * x + m[7] * y + 1.0 > 1e-9)
        .then_some(m)
}

/// Bilinear sample of an RGB image at continuous coordinates (pixel centres at `i + 0.5`),
/// replicating edge pixels outside the image.
fn sample(src: &[u8], w: usize, h: usize, x: f64, y: f64) -> [f64; 3] {
    let (fx, fy) = (x - 0.5, y - 0.5);
    let (x0, y0) = (fx.floor(), fy.floor());
    let (tx, ty) = (fx - x0, fy - y0);
    let clampi = |v: f64, n: usize| (v.max(0.0) as usize).min(n - 1);
    let (xa, xb) = (clampi(x0, w), clampi(x0 + 1.0, w));
    let (ya, yb) = (clampi(y0, h), clampi(y0 + 1.0, h));
    let px = |x: usize, y: usize, c: usize| src[(y * w + x) * 3 + c] as f64;
    std::array::from_fn(|c| {
        let top = px(xa, ya, c) * (1.0 - tx) + px(xb, ya, c) * tx;
        let bot = px(xa, yb, c) * (1.0 - tx) + px(xb, yb, c) * tx;
        top * (1.0 - ty) + bot * ty
    })
}

/// Crops the quadrilateral `corners` (ordered top-left, top-right, bottom-right, bottom-left, in
/// `src` continuous pixel coordinates) out of an interleaved RGB u8 image (`w * h * 3`) into an
/// upright image of width `round(max(|c0c1|, |c3c2|))` and height `round(max(|c0c3|, |c1c2|))`
/// (each at least 1 and at most the source diagonal), using a perspective transform and bilinear
/// sampling (edge pixels replicate outside the image). If the result's height is at least 1.5
/// times its width it is rotated 90° counter-clockwise (vertical text). Returns
/// `(rgb, width, height)`; an empty or too short source buffer, non-finite corners or a
/// degenerate/non-convex quad (no valid homography) give `(vec![], 0, 0)`.
pub fn crop_quad(src: &[u8], w: usize, h: usize, corners: &[Point; 4]) -> (Vec<u8>, usize, usize) {
    let valid = w
        .checked_mul(h)
        .and_then(|n| n.checked_mul(3))
        .is_some_and(|n| n > 0 && src.len() >= n);
    if !valid || corners.iter().any(|p| !p.x.is_finite() || !p.y.is_finite()) {
        return (Vec::new(), 0, 0);
    }
    let c = corners.map(|p| (p.x as f64, p.y as f64));
    let dist = |a: (f64, f64), b: (f64, f64)| (a.0 - b.0).hypot(a.1 - b.1);
    let limit = (w as f64).hypot(h as f64).ceil();
    let size = |a: f64, b: f64| a.max(b).round().clamp(1.0, limit) as usize;
    let cw = size(dist(c[0], c[1]), dist(c[3], c[2]));
    let ch = size(dist(c[0], c[3]), dist(c[1], c[2]));
    let (fw, fh) = (cw as f64, ch as f64);
    let dst = [(0.0, 0.0), (fw, 0.0), (fw, fh), (0.0, fh)];
    let Some(m) = homography(&dst, &c) else {
        return (Vec::new(), 0, 0);
    };
    let mut out = Vec::with_capacity(cw * ch * 3);
    for j in 0..ch {
        for i in 0..cw {
            let (x, y) = (i as f64 + 0.5, j as f64 + 0.5);
            let d = m[6] * x + m[7] * y + 1.0;
            let (u, v) = (
                (m[0] * x + m[1] * y + m[2]) / d,
                (m[3] * x + m[4] * y + m[5]) / d,
            );
            out.extend(sample(src, w, h, u, v).map(|s| s.round().clamp(0.0, 255.0) as u8));
        }
    }
    if (ch as f64) < 1.5 * fw {
        return (out, cw, ch);
    }
    // Rotate 90° counter-clockwise: new (row r, col c) = old (row c, col cw - 1 - r).
    let mut rot = Vec::with_capacity(out.len());
    for r in 0..cw {
        for col in 0..ch {
            let o = (col * cw + (cw - 1 - r)) * 3;
            rot.extend_from_slice(&out[o..o + 3]);
        }
    }
    (rot, ch, cw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(a: Point, b: Point) -> f32 {
        (a.x - b.x).hypot(a.y - b.y)
    }

    /// Side lengths (|c0c1|, |c1c2|) of an ordered box.
    fn sides(c: &[Point; 4]) -> (f32, f32) {
        (dist(c[0], c[1]), dist(c[1], c[2]))
    }

    /// Point at offset (a, b) in a frame centred at (cx, cy) rotated by `deg` clockwise on screen.
    fn at(cx: f32, cy: f32, deg: f32, a: f32, b: f32) -> Point {
        let (s, c) = deg.to_radians().sin_cos();
        pt(cx + a * c - b * s, cy + a * s + b * c)
    }

    /// Corners (TL, TR, BR, BL) of a `lu` x `lv` rectangle centred at (cx, cy), rotated by `deg`.
    fn rot_rect(cx: f32, cy: f32, lu: f32, lv: f32, deg: f32) -> [Point; 4] {
        [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)]
            .map(|(a, b)| at(cx, cy, deg, a * lu / 2.0, b * lv / 2.0))
    }

    fn quad(x0: f32, y0: f32, x1: f32, y1: f32) -> [Point; 4] {
        [pt(x0, y0), pt(x1, y0), pt(x1, y1), pt(x0, y1)]
    }

    #[test]
    fn hull_of_square_with_interior_points() {
        let mut pts = quad(0.0, 0.0, 4.0, 4.0).to_vec();
        // Interior points, points on edges and a duplicate corner.
        pts.extend([pt(1.0, 1.0), pt(2.0, 3.0), pt(2.0, 0.0), pt(4.0, 2.0)]);
        pts.push(pts[0]);
        let hull = convex_hull(&pts);
        assert_eq!(hull.len(), 4, "{hull:?}");
        assert!(pts[..4].iter().all(|c| hull.contains(c)), "{hull:?}");
        let single = convex_hull(&[pt(1.0, 1.0); 2]);
        assert_eq!(single, vec![pt(1.0, 1.0)]);
    }

    #[test]
    fn min_area_rect_recovers_rotated_rectangle() {
        // Corners, edge points and interior points of a 30x12 rectangle rotated by 27°.
        let grid = (0..=10).flat_map(|a| (0..=4).map(move |b| (a as f32 * 3.0, b as f32 * 3.0)));
        let pts: Vec<Point> = grid
            .map(|(a, b)| at(50.0, 40.0, 27.0, a - 15.0, b - 6.0))
            .collect();
        let r = min_area_rect(&pts).expect("rect");
        let (a, b) = sides(&r);
        let rel = |v: f32, e: f32| ((v - e) / e).abs();
        assert!(rel(a * b, 360.0) < 1e-3, "area {}", a * b);
        assert!(rel(a, 30.0) < 1e-3 && rel(b, 12.0) < 1e-3, "{a} x {b}");
        let top_left = at(50.0, 40.0, 27.0, -15.0, -6.0);
        assert!(dist(r[0], top_left) < 1e-3, "{r:?}");
        assert_eq!(min_area_rect(&[pt(2.0, 3.0)]), Some([pt(2.0, 3.0); 4]));
        let seg = min_area_rect(&[pt(0.0, 0.0), pt(3.0, 4.0), pt(1.5, 2.0)]).expect("segment");
        let (a, b) = sides(&seg);
        assert!((a.max(b) - 5.0).abs() < 1e-4 && a.min(b) < 1e-4, "{seg:?}");
        assert_eq!(min_area_rect(&[]), None);
        assert_eq!(min_area_rect(&[pt(f32::NAN, 0.0)]), None);
    }

    #[test]
    fn calipers_match_brute_force() {
        let mut state = 42u64;
        let mut rng = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 * 100.0
        };
        for _ in 0..50 {
            let pts: Vec<(f64, f64)> = (0..25).map(|_| (rng(), rng() * 0.6)).collect();
            let hull = hull_f64(&pts);
            let r = rect_of_hull(&hull).expect("rect");
            // Every point inside the rectangle, and no hull edge gives a smaller box.
            for p in &pts {
                let (dx, dy) = (p.0 - r.cx, p.1 - r.cy);
                let (a, b) = (dx * r.ux + dy * r.uy, dy * r.ux - dx * r.uy);
                assert!(a.abs() <= r.len_u / 2.0 + 1e-9 && b.abs() <= r.len_v / 2.0 + 1e-9);
            }
            for (i, a) in hull.iter().enumerate() {
                let b = hull[(i + 1) % hull.len()];
                let (ux, uy) = (b.0 - a.0, b.1 - a.1);
                let span = |f: &dyn Fn(&(f64, f64)) -> f64| {
                    let v = hull.iter().map(f);
                    v.clone().fold(f64::MIN, f64::max) - v.fold(f64::MAX, f64::min)
                };
                let area = span(&|p| p.0 * ux + p.1 * uy) * span(&|p| p.1 * ux - p.0 * uy);
                let area = area / (ux * ux + uy * uy);
                assert!(r.len_u * r.len_v <= area * (1.0 + 1e-9), "{r:?} vs {area}");
            }
        }
    }

    #[test]
    fn order_corners_from_shuffled() {
        for deg in [-30.0, -15.0, 0.0, 15.0, 40.0] {
            let c = rot_rect(20.0, 20.0, 16.0, 6.0, deg);
            let perms = [[2, 0, 3, 1], [3, 2, 1, 0], [1, 3, 0, 2], [0, 2, 1, 3]];
            for perm in perms {
                assert_eq!(order_corners(perm.map(|k| c[k])), c, "{deg}° {perm:?}");
            }
        }
    }

    /// Sets `prob` to `v` on every pixel whose centre is inside the convex quad `c`.
    fn fill(prob: &mut [f32], w: usize, c: &[Point; 4], v: f32) {
        for (i, p) in prob.iter_mut().enumerate() {
            if inside_convex(c, (i % w) as f32 + 0.5, (i / w) as f32 + 0.5) {
                *p = v;
            }
        }
    }

    #[test]
    fn db_boxes_two_rectangles() {
        let (w, h) = (200, 120);
        let mut prob = vec![0.02f32; w * h];
        fill(&mut prob, w, &rot_rect(130.0, 75.0, 60.0, 14.0, 20.0), 0.8);
        fill(&mut prob, w, &quad(20.0, 20.0, 60.0, 30.0), 0.9);
        fill(&mut prob, w, &quad(5.0, 100.0, 7.0, 102.0), 0.9); // 2x2: too small
        let boxes = db_boxes(&prob, w, h, &DbParams::default());
        assert_eq!(boxes.len(), 2, "{boxes:?}");
        // Axis-aligned 40x10: d = 400 * 1.6 / 100 = 6.4, exact on the pixel grid.
        let a = &boxes[0];
        let want = quad(13.6, 13.6, 66.4, 36.4);
        let close = a
            .corners
            .iter()
            .zip(&want)
            .all(|(g, e)| dist(*g, *e) < 1e-3);
        assert!(close, "{a:?}");
        assert!((a.score - 0.9).abs() < 1e-5, "score {}", a.score);
        // Rotated 60x14: the squares of the pixels whose centres are inside reach out by up to
        // e = (cos 20° + sin 20°) / 2 past each side, so the rect before unclip is (60+2e)x(14+2e).
        let b = &boxes[1];
        let (s, c) = 20f32.to_radians().sin_cos();
        let (rw, rh) = (60.0 + s + c, 14.0 + s + c);
        let d = rw * rh * 1.6 / (2.0 * (rw + rh));
        let (bw, bh) = sides(&b.corners);
        assert!((bw - rw - 2.0 * d).abs() < 0.5, "{bw}");
        assert!((bh - rh - 2.0 * d).abs() < 0.5, "{bh}");
        let [c0, c1, c2, _] = b.corners;
        let angle = (c1.y - c0.y).atan2(c1.x - c0.x).to_degrees();
        assert!((angle - 20.0).abs() < 1.5, "angle {angle}");
        let mid = pt((c0.x + c2.x) / 2.0, (c0.y + c2.y) / 2.0);
        assert!(dist(mid, pt(130.0, 75.0)) < 0.75, "{mid:?}");
        assert!(b.score > 0.7, "score {}", b.score);
    }

    #[test]
    fn db_boxes_reading_order_and_filters() {
        let (w, h) = (160, 80);
        let mut prob = vec![0.0f32; w * h];
        fill(&mut prob, w, &quad(90.0, 10.0, 130.0, 20.0), 0.9); // row 1, right, slightly higher
        fill(&mut prob, w, &quad(10.0, 14.0, 50.0, 24.0), 0.9); // row 1, left
        fill(&mut prob, w, &quad(10.0, 50.0, 50.0, 60.0), 0.9); // row 2
        fill(&mut prob, w, &quad(90.0, 50.0, 130.0, 60.0), 0.4); // above thresh, below box_thresh
        let boxes = db_boxes(&prob, w, h, &DbParams::default());
        let tl: Vec<Point> = boxes.iter().map(|b| b.corners[0]).collect();
        assert_eq!(tl, vec![pt(3.6, 7.6), pt(83.6, 3.6), pt(3.6, 43.6)]);
        let few = DbParams {
            max_candidates: 1,
            ..DbParams::default()
        };
        assert_eq!(db_boxes(&prob, w, h, &few).len(), 1);
    }

    #[test]
    fn db_boxes_tiny_empty_and_bad_input() {
        let (w, h) = (30, 20);
        let mut prob = vec![0.0f32; w * h];
        assert!(db_boxes(&prob, w, h, &DbParams::default()).is_empty());
        fill(&mut prob, w, &quad(10.0, 10.0, 12.0, 12.0), 1.0);
        assert!(db_boxes(&prob, w, h, &DbParams::default()).is_empty());
        // A 2-pixel-high line is too thin, unless dilated to 3 pixels.
        fill(&mut prob, w, &quad(2.0, 2.0, 28.0, 4.0), 1.0);
        assert!(db_boxes(&prob, w, h, &DbParams::default()).is_empty());
        let dilated = DbParams {
            dilate: true,
            ..DbParams::default()
        };
        assert_eq!(db_boxes(&prob, w, h, &dilated).len(), 1);
        assert!(db_boxes(&prob[..10], w, h, &DbParams::default()).is_empty());
        assert!(db_boxes(&[], 0, 0, &DbParams::default()).is_empty());
    }

    fn test_image(w: usize, h: usize) -> Vec<u8> {
        (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect()
    }

    #[test]
    fn crop_axis_aligned_is_exact() {
        let (w, h) = (40, 30);
        let img = test_image(w, h);
        let (out, cw, ch) = crop_quad(&img, w, h, &quad(5.0, 3.0, 25.0, 13.0));
        assert_eq!((cw, ch), (20, 10));
        for (j, row) in out.chunks(cw * 3).enumerate() {
            let s = ((3 + j) * w + 5) * 3;
            assert_eq!(row, &img[s..s + cw * 3], "row {j}");
        }
        assert_eq!(crop_quad(&img[..5], w, h, &quad(5.0, 3.0, 25.0, 13.0)).1, 0);
        let bowtie = [pt(5.0, 3.0), pt(25.0, 3.0), pt(5.0, 13.0), pt(25.0, 13.0)];
        assert_eq!(crop_quad(&img, w, h, &bowtie), (Vec::new(), 0, 0));
    }

    #[test]
    fn crop_tall_quad_rotates() {
        let (w, h) = (40, 50);
        let img = test_image(w, h);
        let (out, cw, ch) = crop_quad(&img, w, h, &quad(8.0, 4.0, 18.0, 34.0));
        assert_eq!((cw, ch), (30, 10));
        // Counter-clockwise: output (row r, col c) = crop (row c, col 9 - r)
        // = source pixel (x 17 - r, y 4 + c).
        for (k, px) in out.chunks(3).enumerate() {
            let (r, c) = (k / cw, k % cw);
            let s = ((4 + c) * w + 17 - r) * 3;
            assert_eq!(px, &img[s..s + 3], "pixel ({c}, {r})");
        }
    }

    #[test]
    fn crop_rotated_quad_follows_linear_gradient() {
        let (w, h) = (80, 60);
        let img: Vec<u8> = (0..w * h)
            .flat_map(|i| [(i % w * 2) as u8, (i / w * 3) as u8, 7])
            .collect();
        let q = rot_rect(40.0, 30.0, 40.0, 16.0, 25.0);
        let (out, cw, ch) = crop_quad(&img, w, h, &q);
        assert_eq!((cw, ch), (40, 16));
        for (k, px) in out.chunks(3).enumerate() {
            let (i, j) = ((k % cw) as f32, (k / cw) as f32);
            let p = at(40.0, 30.0, 25.0, i - 19.5, j - 7.5);
            assert!((px[0] as f32 - 2.0 * (p.x - 0.5)).abs() <= 1.0, "x at {k}");
            assert!((px[1] as f32 - 3.0 * (p.y - 0.5)).abs() <= 1.0, "y at {k}");
        }
        let scaled = scale_corners(&quad(1.0, 2.0, 3.0, 4.0), 2.0, 0.5);
        assert_eq!(scaled, quad(2.0, 1.0, 6.0, 2.0));
    }
}
