//! YOLOv8 output → detections: best class per anchor, confidence filter,
//! class-wise non-maximum suppression.

/// A box in letterbox or image pixels, `[x1, y1, x2, y2]`.
pub type BoxXyxy = [f32; 4];

/// A candidate before mapping back to the image.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Index into the class names.
    pub class_id: usize,
    /// Class score.
    pub score: f32,
    /// Box in letterbox pixels.
    pub bbox: BoxXyxy,
}

/// Intersection over union (0 for empty unions).
pub fn iou(a: &BoxXyxy, b: &BoxXyxy) -> f32 {
    let ix = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let iy = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = ix * iy;
    let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    if union <= 0.0 { 0.0 } else { inter / union }
}

/// Decodes `out` (`[4 + classes, anchors]`, rows cx, cy, w, h, then class
/// scores) into candidates whose best class score is at least `conf`,
/// sorted by score (stable), then suppresses every box overlapping a
/// higher-scoring kept box of the same class by more than `iou_max`.
pub fn decode(out: &[f32], anchors: usize, conf: f32, iou_max: f32) -> Vec<Candidate> {
    let rows = out.len().checked_div(anchors).unwrap_or(0);
    if rows <= 4 {
        return Vec::new();
    }
    let at = |r: usize, j: usize| out[r * anchors + j];
    let mut cands: Vec<Candidate> = (0..anchors)
        .filter_map(|j| {
            let (mut class_id, mut score) = (0, at(4, j));
            for c in 1..rows - 4 {
                if at(4 + c, j) > score {
                    (class_id, score) = (c, at(4 + c, j));
                }
            }
            if score < conf {
                return None;
            }
            let (cx, cy, hw, hh) = (at(0, j), at(1, j), at(2, j) / 2.0, at(3, j) / 2.0);
            Some(Candidate {
                class_id,
                score,
                bbox: [cx - hw, cy - hh, cx + hw, cy + hh],
            })
        })
        .collect();
    cands.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Candidate> = Vec::new();
    for c in cands {
        if kept
            .iter()
            .all(|k| k.class_id != c.class_id || iou(&k.bbox, &c.bbox) <= iou_max)
        {
            kept.push(c);
        }
    }
    kept
}

/// Class names from an Ultralytics `names` metadata value
/// (`{0: 'person', 1: 'bicycle'}`), by index; `None` if it does not parse.
pub fn parse_names(meta: &str) -> Option<Vec<String>> {
    let body = meta.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut names: Vec<(usize, String)> = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once(':')?;
        let index: usize = key.trim().parse().ok()?;
        let after = after.trim_start();
        let quote = after.chars().next().filter(|q| *q == '\'' || *q == '"')?;
        let after = &after[1..];
        let end = after.find(quote)?;
        names.push((index, after[..end].to_owned()));
        rest = after[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    names.sort_by_key(|(i, _)| *i);
    names
        .iter()
        .enumerate()
        .all(|(k, (i, _))| k == *i)
        .then(|| names.into_iter().map(|(_, n)| n).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_in_index_order() {
        let n = parse_names("{1: 'FACE', 0: \"person\", 2: 'a, b'}").unwrap();
        assert_eq!(n, ["person", "FACE", "a, b"]);
        assert!(parse_names("{0: 'a', 2: 'c'}").is_none());
        assert!(parse_names("[a]").is_none());
    }

    #[test]
    fn nms_is_per_class() {
        // 3 anchors, 2 classes: anchors 0 and 1 overlap (class 0), anchor 2 same box, class 1.
        let out = [
            10.0, 11.0, 10.0, // cx
            10.0, 10.0, 10.0, // cy
            8.0, 8.0, 8.0, // w
            8.0, 8.0, 8.0, // h
            0.9, 0.8, 0.1, // class 0
            0.0, 0.0, 0.7, // class 1
        ];
        let d = decode(&out, 3, 0.25, 0.45);
        let got: Vec<(usize, f32)> = d.iter().map(|c| (c.class_id, c.score)).collect();
        assert_eq!(got, [(0, 0.9), (1, 0.7)]);
        assert_eq!(d[0].bbox, [6.0, 6.0, 14.0, 14.0]);
    }

    #[test]
    fn iou_of_disjoint_and_equal_boxes() {
        let a = [0.0, 0.0, 2.0, 2.0];
        assert_eq!(iou(&a, &a), 1.0);
        assert_eq!(iou(&a, &[3.0, 3.0, 4.0, 4.0]), 0.0);
        assert_eq!(iou(&a, &[1.0, 0.0, 3.0, 2.0]), 2.0 / 6.0);
    }
}
