//! Letterboxing: scale the image to fit a square, keep the aspect ratio,
//! pad with grey.

/// Where the image went inside the letterboxed square.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Letterbox {
    /// Scale applied to the image.
    pub scale: f64,
    /// Padding columns on the left.
    pub left: usize,
    /// Padding rows on top.
    pub top: usize,
}

impl Letterbox {
    /// Maps a point of the square back to the original image.
    pub fn to_image(&self, x: f32, y: f32) -> (f64, f64) {
        (
            (f64::from(x) - self.left as f64) / self.scale,
            (f64::from(y) - self.top as f64) / self.scale,
        )
    }
}

/// Grey of the padding (the value YOLOv8 was trained with).
pub const PAD_VALUE: u8 = 114;

/// Source positions of a resized axis: `(i0, i1, weight of i1)` for each
/// output index, with half-pixel centres and edge clamping.
fn axis(n_out: usize, n_in: usize) -> Vec<(usize, usize, f32)> {
    let ratio = n_in as f32 / n_out as f32;
    let last = n_in.saturating_sub(1);
    (0..n_out)
        .map(|d| {
            let s = ((d as f32 + 0.5) * ratio - 0.5).clamp(0.0, last as f32);
            let i0 = s.floor() as usize;
            (i0, (i0 + 1).min(last), s - i0 as f32)
        })
        .collect()
}

/// Bilinear resize of interleaved RGB (`w*h*3`) to `nw×nh`, half-pixel
/// centres, no antialiasing, rounded to nearest. Empty sizes give an empty
/// image.
pub fn resize_bilinear(src: &[u8], w: usize, h: usize, nw: usize, nh: usize) -> Vec<u8> {
    if w == 0 || h == 0 || nw == 0 || nh == 0 || src.len() < w * h * 3 {
        return Vec::new();
    }
    let (xs, ys) = (axis(nw, w), axis(nh, h));
    let mut out = Vec::with_capacity(nw * nh * 3);
    let px = |y: usize, x: usize, c: usize| f32::from(src[(y * w + x) * 3 + c]);
    for &(y0, y1, fy) in &ys {
        for &(x0, x1, fx) in &xs {
            for c in 0..3 {
                let top = px(y0, x0, c) * (1.0 - fx) + px(y0, x1, c) * fx;
                let bot = px(y1, x0, c) * (1.0 - fx) + px(y1, x1, c) * fx;
                let v = top * (1.0 - fy) + bot * fy;
                out.push(v.round().min(255.0) as u8);
            }
        }
    }
    out
}

/// Letterboxes interleaved RGB (`w*h*3`) into a `size×size` square and
/// writes the model input (`[3, size, size]`, RGB, values / 255) to `chw`.
pub fn letterbox(src: &[u8], w: usize, h: usize, size: usize, chw: &mut Vec<f32>) -> Letterbox {
    let scale = (size as f64 / h.max(1) as f64).min(size as f64 / w.max(1) as f64);
    let nw = ((w as f64 * scale).round() as usize).clamp(1, size);
    let nh = ((h as f64 * scale).round() as usize).clamp(1, size);
    let resized = resize_bilinear(src, w, h, nw, nh);
    let (left, top) = ((size - nw) / 2, (size - nh) / 2);
    chw.clear();
    chw.resize(3 * size * size, f32::from(PAD_VALUE) / 255.0);
    let plane = size * size;
    for (y, row) in resized.chunks_exact(nw * 3).enumerate() {
        for (x, rgb) in row.chunks_exact(3).enumerate() {
            let at = (top + y) * size + left + x;
            for (c, &v) in rgb.iter().enumerate() {
                chw[c * plane + at] = f32::from(v) / 255.0;
            }
        }
    }
    Letterbox { scale, left, top }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_resize_keeps_pixels() {
        let src: Vec<u8> = (0..5 * 3 * 3).map(|i| (i * 7 % 256) as u8).collect();
        assert_eq!(resize_bilinear(&src, 5, 3, 5, 3), src);
    }

    #[test]
    fn halving_averages_pairs() {
        // one row of 4 grey pixels 0, 100, 200, 250 → 2 pixels at x = 0.5 and 2.5
        let src: Vec<u8> = [0u8, 100, 200, 250]
            .iter()
            .flat_map(|&v| [v, v, v])
            .collect();
        let out = resize_bilinear(&src, 4, 1, 2, 1);
        assert_eq!(out, [50, 50, 50, 225, 225, 225]);
    }

    #[test]
    fn letterbox_pads_the_short_side() {
        let src = vec![255u8; 8 * 4 * 3];
        let mut chw = Vec::new();
        let lb = letterbox(&src, 8, 4, 16, &mut chw);
        assert_eq!((lb.scale, lb.left, lb.top), (2.0, 0, 4));
        assert_eq!(chw[0], 114.0 / 255.0); // row 0 is padding
        assert_eq!(chw[4 * 16], 1.0); // row 4 is image
        assert_eq!(lb.to_image(16.0, 12.0), (8.0, 4.0));
    }
}
