//! NumPy broadcasting without allocation: the contiguous rows of a
//! broadcast output and the element-wise loops over them.
#![allow(clippy::needless_range_loop)]
use crate::error::KernelError;
use crate::shape::{MAX_RANK, Shape};

/// Iterates over the contiguous rows of a broadcast output.
///
/// The output shape and the (broadcast) input shapes are collapsed into as
/// few dims as possible; the last collapsed dim is the "row". For every row
/// the visitor gets the output offset, the row length, each input's offset
/// and each input's stride inside the row (0 when broadcast along it, else 1).
#[derive(Debug, Clone, Copy)]
pub struct Rows<const N: usize> {
    rank: usize,
    dims: [usize; MAX_RANK],
    strides: [[usize; MAX_RANK]; N],
}

impl<const N: usize> Rows<N> {
    /// Plans the iteration of `out`, each input broadcasting to it.
    pub fn new(ins: [&Shape; N], out: &Shape, op: &'static str) -> Result<Self, KernelError> {
        let r = out.rank();
        let mut aligned = [[0usize; MAX_RANK]; N];
        for (k, s) in ins.iter().enumerate() {
            if s.rank() > r {
                return Err(KernelError::Shape {
                    op,
                    msg: "input rank exceeds the output rank",
                });
            }
            let st = s.strides();
            let lead = r - s.rank();
            for i in 0..r {
                if i < lead {
                    continue;
                }
                let d = s.dims()[i - lead];
                if d == out.dims()[i] {
                    aligned[k][i] = if d == 1 { 0 } else { st[i - lead] };
                } else if d == 1 {
                    aligned[k][i] = 0;
                } else {
                    return Err(KernelError::Shape {
                        op,
                        msg: "shapes cannot be broadcast",
                    });
                }
            }
        }
        let mut plan = Rows {
            rank: 0,
            dims: [1; MAX_RANK],
            strides: [[0; MAX_RANK]; N],
        };
        for i in 0..r {
            let d = out.dims()[i];
            if d == 1 {
                continue;
            }
            if plan.rank > 0 {
                let p = plan.rank - 1;
                if (0..N).all(|k| plan.strides[k][p] == aligned[k][i] * d) {
                    plan.dims[p] *= d;
                    for k in 0..N {
                        plan.strides[k][p] = aligned[k][i];
                    }
                    continue;
                }
            }
            let p = plan.rank;
            plan.dims[p] = d;
            for k in 0..N {
                plan.strides[k][p] = aligned[k][i];
            }
            plan.rank += 1;
        }
        if plan.rank == 0 {
            plan.rank = 1;
        }
        Ok(plan)
    }

    /// Calls `f(out_offset, len, in_offsets, in_strides)` for every row.
    #[inline]
    pub fn for_each(&self, f: impl FnMut(usize, usize, [usize; N], [usize; N])) {
        self.for_each_in(0, usize::MAX, f)
    }

    /// Elements per row (the output's contiguous innermost run).
    pub fn row_len(&self) -> usize {
        self.dims[self.rank - 1]
    }

    /// Rows in all.
    pub fn rows(&self) -> usize {
        self.dims[..self.rank - 1].iter().product()
    }

    /// [`Rows::for_each`] over rows `first..first + count` only (output
    /// offsets still counted from the whole output's start).
    #[inline]
    pub fn for_each_in(
        &self,
        first: usize,
        count: usize,
        mut f: impl FnMut(usize, usize, [usize; N], [usize; N]),
    ) {
        let rank = self.rank;
        let inner = self.dims[rank - 1];
        let mut inner_st = [0usize; N];
        for (k, s) in inner_st.iter_mut().enumerate() {
            *s = self.strides[k][rank - 1];
        }
        self.walk(first, count, &mut |batch| {
            for &(o, offs) in batch {
                f(o, inner, offs, inner_st);
            }
        });
    }

    /// The walk behind [`Rows::for_each_in`]: hands the rows' output and
    /// input offsets to `visit` [`ROW_BATCH`] at a time. Not generic over
    /// the visitor, so the index arithmetic is compiled once per input
    /// count rather than once per element type and operation (it was a
    /// fifth of the crate's machine code), while the per-row loops the
    /// visitor runs stay inlined.
    fn walk(&self, first: usize, count: usize, visit: &mut dyn FnMut(&[RowStart<N>])) {
        let rank = self.rank;
        if self.dims[..rank].contains(&0) || count == 0 || first >= self.rows() {
            return;
        }
        let inner = self.dims[rank - 1];
        // The multi-index of row `first` and its input offsets.
        let mut idx = [0usize; MAX_RANK];
        let mut offs = [0usize; N];
        let mut rest = first;
        for d in (0..rank - 1).rev() {
            idx[d] = rest % self.dims[d];
            rest /= self.dims[d];
            for (k, off) in offs.iter_mut().enumerate() {
                *off += idx[d] * self.strides[k][d];
            }
        }
        let mut batch = [(0usize, [0usize; N]); ROW_BATCH];
        let mut filled = 0;
        let mut o = first * inner;
        let mut left = count;
        loop {
            batch[filled] = (o, offs);
            filled += 1;
            left -= 1;
            let mut done = left == 0;
            o += inner;
            if !done {
                let mut d = rank - 1;
                loop {
                    if d == 0 {
                        done = true;
                        break;
                    }
                    d -= 1;
                    idx[d] += 1;
                    for (k, off) in offs.iter_mut().enumerate() {
                        *off += self.strides[k][d];
                    }
                    if idx[d] < self.dims[d] {
                        break;
                    }
                    for (k, off) in offs.iter_mut().enumerate() {
                        *off -= self.strides[k][d] * self.dims[d];
                    }
                    idx[d] = 0;
                }
            }
            if done || filled == ROW_BATCH {
                visit(&batch[..filled]);
                filled = 0;
            }
            if done {
                return;
            }
        }
    }
}

/// Rows [`Rows::for_each_in`] hands its visitor at a time.
const ROW_BATCH: usize = 32;

/// Where a row starts: its output offset and each input's offset.
type RowStart<const N: usize> = (usize, [usize; N]);

/// Applies `f` elementwise over two broadcast inputs.
#[inline]
pub fn zip2<A: Copy, B: Copy, O: Copy>(
    rows: &Rows<2>,
    a: &[A],
    b: &[B],
    out: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    zip2_rows(rows, 0, usize::MAX, a, b, out, f)
}

/// [`zip2`] over rows `first..first + count` of the output only, `out`
/// holding those rows (it starts at row `first`).
#[inline]
pub fn zip2_rows<A: Copy, B: Copy, O: Copy>(
    rows: &Rows<2>,
    first: usize,
    count: usize,
    a: &[A],
    b: &[B],
    out: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    let start = first * rows.row_len();
    // Index loops over slices of one length: no iterator adapters to
    // instantiate per element type and operation, and no bounds checks
    // left once the slices are cut.
    rows.for_each_in(first, count, |o, n, [oa, ob], [sa, sb]| {
        let y = &mut out[o - start..o - start + n];
        match (sa, sb) {
            (1, 1) => {
                let (a, b) = (&a[oa..oa + n], &b[ob..ob + n]);
                for j in 0..n {
                    y[j] = f(a[j], b[j]);
                }
            }
            (0, 1) => {
                let (x, b) = (a[oa], &b[ob..ob + n]);
                for j in 0..n {
                    y[j] = f(x, b[j]);
                }
            }
            (1, 0) => {
                let (a, z) = (&a[oa..oa + n], b[ob]);
                for j in 0..n {
                    y[j] = f(a[j], z);
                }
            }
            // Both broadcast along the row (a row's inner strides are 0
            // or 1: it is the output's innermost contiguous run).
            _ => y.fill(f(a[oa], b[ob])),
        }
    });
}

/// Copies `src` broadcast to the shape planned by `rows` into `out`.
#[inline]
pub fn broadcast_copy<T: Copy>(rows: &Rows<1>, src: &[T], out: &mut [T]) {
    rows.for_each(|o, n, [oa], [sa]| {
        let y = &mut out[o..o + n];
        if sa == 1 {
            y.copy_from_slice(&src[oa..oa + n]);
        } else {
            y.fill(src[oa]);
        }
    });
}

/// The output shape of broadcasting all of `shapes` together.
pub fn broadcast_all<'a>(
    shapes: impl IntoIterator<Item = &'a Shape>,
    op: &'static str,
) -> Result<Shape, KernelError> {
    let mut out = Shape::SCALAR;
    for s in shapes {
        out = crate::shape::broadcast(&out, s, op)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn rows_collapse_and_visit() {
        let a = Shape::new(&[2, 1, 3]).unwrap();
        let b = Shape::new(&[4, 1]).unwrap();
        let out = crate::shape::broadcast(&a, &b, "t").unwrap();
        let rows = Rows::new([&a, &b], &out, "t").unwrap();
        let av: Vec<i64> = (0..6).collect();
        let bv: Vec<i64> = (0..4).map(|x| x * 100).collect();
        let mut o = alloc::vec![0i64; out.numel()];
        zip2(&rows, &av, &bv, &mut o, |x, y| x + y);
        // Reference by explicit indexing.
        let mut k = 0;
        for i in 0..2 {
            for j in 0..4 {
                for l in 0..3 {
                    assert_eq!(o[k], av[i * 3 + l] + bv[j]);
                    k += 1;
                }
            }
        }
        let same = Rows::new([&out, &out], &out, "t").unwrap();
        assert_eq!(same.rank, 1);
        assert!(
            Rows::new(
                [&Shape::new(&[3]).unwrap()],
                &Shape::new(&[4]).unwrap(),
                "t"
            )
            .is_err()
        );
    }
}
