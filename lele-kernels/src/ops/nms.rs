//! ONNX `NonMaxSuppression`: greedy per-class box selection.
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output};
use crate::ops::access::check_data;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "NonMaxSuppression";
/// Most boxes per image (the per-class bookkeeping is a bitset on the stack).
pub const MAX_BOXES: usize = 1 << 16;

/// Inputs: `boxes` `[batch, boxes, 4]` (f32), `scores` `[batch, classes,
/// boxes]` (f32), optional `max_output_boxes_per_class` (int64, default 0),
/// `iou_threshold` (f32, default 0), `score_threshold` (f32, only boxes
/// scoring above it are candidates). Output `selected_indices`
/// `[n, 3]` int64 rows `(batch, class, box)`, per batch and class in
/// selection order: repeatedly the best remaining box (lowest index on
/// ties), dropping every box whose IoU with it exceeds the threshold.
/// Arithmetic is f32, like the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonMaxSuppression {
    /// Boxes are `[x_center, y_center, width, height]` (else two corners
    /// `[y1, x1, y2, x2]` in any order).
    pub center_point_box: bool,
}
crate::to_rust_struct!(ops::nms::NonMaxSuppression { center_point_box });

/// The parsed inputs.
struct Problem<'a> {
    boxes: &'a [f32],
    scores: &'a [f32],
    batch: usize,
    classes: usize,
    n: usize,
    max_out: usize,
    iou: f32,
    score: Option<f32>,
}

/// `(min, max)` of a box's extent along one axis.
fn extent(a: f32, b: f32) -> (f32, f32) {
    if a >= b { (b, a) } else { (a, b) }
}

impl NonMaxSuppression {
    fn problem<'a>(&self, inputs: &[Option<TensorRef<'a>>]) -> Result<Problem<'a>, KernelError> {
        let (b, s) = (input(inputs, 0, OP)?, input(inputs, 1, OP)?);
        let (&[batch, n, 4], &[sb, classes, sn]) = (b.shape.dims(), s.shape.dims()) else {
            return Err(KernelError::Shape {
                op: OP,
                msg: "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]",
            });
        };
        if sb != batch || sn != n {
            return Err(KernelError::Shape {
                op: OP,
                msg: "boxes and scores disagree",
            });
        }
        if n > MAX_BOXES {
            return Err(KernelError::Invalid {
                op: OP,
                msg: "more than 65536 boxes per image",
            });
        }
        let scalar_f32 = |i| -> Result<Option<f32>, KernelError> {
            opt_input(inputs, i)
                .filter(|t| t.numel() > 0)
                .map(|t| t.typed::<f32>(OP).map(|v| v[0]))
                .transpose()
        };
        let max_out = match opt_input(inputs, 2).filter(|t| t.numel() > 0) {
            Some(t) => t.scalar_i64(OP)?.max(0) as usize,
            None => 0,
        };
        Ok(Problem {
            boxes: b.typed::<f32>(OP)?,
            scores: s.typed::<f32>(OP)?,
            batch,
            classes,
            n,
            max_out,
            iou: scalar_f32(3)?.unwrap_or(0.0),
            score: scalar_f32(4)?,
        })
    }

    /// Whether box `j` is suppressed by the selected box `i`.
    fn suppressed(&self, bx: &[f32], i: usize, j: usize, threshold: f32) -> bool {
        let (a, b) = (&bx[i * 4..i * 4 + 4], &bx[j * 4..j * 4 + 4]);
        let corners = |v: &[f32]| -> [(f32, f32); 2] {
            if self.center_point_box {
                let (hw, hh) = (v[2] / 2.0, v[3] / 2.0);
                [(v[0] - hw, v[0] + hw), (v[1] - hh, v[1] + hh)]
            } else {
                [extent(v[1], v[3]), extent(v[0], v[2])]
            }
        };
        let ([ax, ay], [bx2, by]) = (corners(a), corners(b));
        let (ix0, ix1) = (ax.0.max(bx2.0), ax.1.min(bx2.1));
        let (iy0, iy1) = (ay.0.max(by.0), ay.1.min(by.1));
        if ix1 <= ix0 || iy1 <= iy0 {
            return false;
        }
        let inter = (ix1 - ix0) * (iy1 - iy0);
        let area_a = (ax.1 - ax.0) * (ay.1 - ay.0);
        let area_b = (bx2.1 - bx2.0) * (by.1 - by.0);
        let union = area_a + area_b - inter;
        if inter <= 0.0 || area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
            return false;
        }
        inter / union > threshold
    }

    /// Runs the selection, calling `emit(batch, class, box)` per pick.
    fn select(&self, p: &Problem<'_>, mut emit: impl FnMut(usize, usize, usize)) {
        let mut done = [0u64; MAX_BOXES / 64];
        let words = p.n.div_ceil(64);
        for b in 0..p.batch {
            let bx = &p.boxes[b * p.n * 4..(b + 1) * p.n * 4];
            for c in 0..p.classes {
                let sc = &p.scores[(b * p.classes + c) * p.n..][..p.n];
                done[..words].fill(0);
                let mut picked = 0;
                while picked < p.max_out {
                    let mut best: Option<usize> = None;
                    for (i, &s) in sc.iter().enumerate() {
                        let open = done[i / 64] & (1 << (i % 64)) == 0;
                        let candidate = p.score.is_none_or(|t| s > t);
                        if open && candidate && best.is_none_or(|k| s > sc[k]) {
                            best = Some(i);
                        }
                    }
                    let Some(i) = best else { break };
                    emit(b, c, i);
                    picked += 1;
                    done[i / 64] |= 1 << (i % 64);
                    for j in 0..p.n {
                        if done[j / 64] & (1 << (j % 64)) == 0 && self.suppressed(bx, i, j, p.iou) {
                            done[j / 64] |= 1 << (j % 64);
                        }
                    }
                }
            }
        }
    }
}

impl Kernel for NonMaxSuppression {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        for t in inputs.iter().flatten() {
            if !t.has_data() {
                return Err(KernelError::NeedsData { op: OP });
            }
        }
        let p = self.problem(inputs)?;
        let mut count = 0;
        self.select(&p, |_, _, _| count += 1);
        *outputs
            .first_mut()
            .ok_or(KernelError::MissingInput { op: OP, index: 0 })? = Shape::new(&[count, 3])?;
        Ok(())
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // At most every box of every class of every image.
        let s = input(inputs, 1, OP)?;
        crate::kernel::bound_outputs(outputs, 3 * s.numel())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        for t in inputs.iter().flatten() {
            check_data(t, OP)?;
        }
        let p = self.problem(inputs)?;
        let out = output(outputs, 0, OP)?;
        if out.dtype != DType::I64 {
            return Err(KernelError::Buffer { op: OP });
        }
        let y = out.typed::<i64>(OP)?;
        let mut k = 0;
        let mut overflow = false;
        self.select(&p, |b, c, i| match y.get_mut(k..k + 3) {
            Some(row) => {
                row.copy_from_slice(&[b as i64, c as i64, i as i64]);
                k += 3;
            }
            None => overflow = true,
        });
        if overflow || k != y.len() {
            return Err(KernelError::Buffer { op: OP });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{Owned, run_kernel};

    /// The ONNX `suppress_by_IOU` example: six boxes, one class.
    #[test]
    fn onnx_suppress_by_iou_example() {
        let boxes = Owned::new(
            &[1, 6, 4],
            &[
                0.0f32, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, -0.1, 1.0, 0.9, 0.0, 10.0, 1.0,
                11.0, 0.0, 10.1, 1.0, 11.1, 0.0, 100.0, 1.0, 101.0,
            ],
        );
        let scores = Owned::new(&[1, 1, 6], &[0.9f32, 0.75, 0.6, 0.95, 0.5, 0.3]);
        let max = Owned::new(&[1], &[3i64]);
        let iou = Owned::new(&[1], &[0.5f32]);
        let thr = Owned::new(&[1], &[0.0f32]);
        let k = NonMaxSuppression {
            center_point_box: false,
        };
        let y = run_kernel(
            &k,
            &[
                Some(&boxes),
                Some(&scores),
                Some(&max),
                Some(&iou),
                Some(&thr),
            ],
            &[DType::I64],
        )
        .unwrap();
        assert_eq!(y[0].dims(), &[3, 3]);
        assert_eq!(y[0].to::<i64>(), [0, 0, 3, 0, 0, 0, 0, 0, 5]);
        // Without max_output_boxes_per_class nothing is selected.
        let y = run_kernel(&k, &[Some(&boxes), Some(&scores)], &[DType::I64]).unwrap();
        assert_eq!(y[0].dims(), &[0, 3]);
    }
}
