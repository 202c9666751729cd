//! A two-input f32 `Einsum` as a loop of matrix products.
//!
//! Every label of `A, B -> C` is one of four kinds: in C and both inputs
//! (a batch label), in C and A only (a row of the product), in C and B only
//! (a column), or absent from C (summed: a label of A only or B only sums
//! against a stride of 0 in the other input). Rows, columns and summed
//! labels each merge into one dimension of the product where their strides
//! line up (`b t g i, g i h -> b t g h` is a product of `(b·t) × i` by
//! `i × h` per `g`); the labels that do not merge, and the batch labels,
//! become an outer loop, summed ones accumulating into C. Grouped linear
//! layers written as Einsum then run at the speed of the GEMM.
use super::{MAX_LABELS, Plan};
use crate::error::KernelError;
use crate::ops::gemm::{MatRef, sgemm, sgemm_scratch_len};
use crate::shape::MAX_RANK;

/// A product dimension: its size and its element stride in each operand
/// (A, B, C; 0 where the operand does not have it).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Dim {
    size: usize,
    stride: [usize; 3],
}

/// The loop of products an equation becomes.
#[derive(Debug)]
pub(super) struct Products {
    /// Rows of each product (M), columns (N) and the summed length (K).
    m: Dim,
    n: Dim,
    k: Dim,
    /// Labels looped over outside the products, the summed ones last.
    outer: [Dim; MAX_LABELS],
    n_outer: usize,
    /// How many of the last `outer` entries are summed labels.
    n_summed_outer: usize,
    /// Whether C is written transposed (`Cᵀ = Bᵀ·Aᵀ`, when the columns'
    /// stride in C is not 1 but the rows' is).
    transposed: bool,
}

impl Products {
    /// The products for a two-input plan whose operands have these element
    /// strides per label (`strides[k][label]`; C's from the output shape);
    /// `None` when C's innermost stride belongs to neither the rows nor the
    /// columns (the direct loop handles that).
    pub(super) fn new(p: &Plan, strides: &[[usize; MAX_LABELS]; 3]) -> Option<Products> {
        if p.n_inputs != 2 {
            return None;
        }
        let has = |k: usize, l: usize| p.inputs[k][..p.ranks[k]].contains(&l);
        let in_out = |l: usize| p.out[..p.out_rank].contains(&l);
        let mut groups: [[usize; MAX_LABELS]; 4] = [[0; MAX_LABELS]; 4];
        let mut lens = [0usize; 4];
        for l in 0..p.n_labels {
            // Labels of size 1 (or unused) contribute nothing; empty ones are
            // left to the direct loop.
            match p.size[l] {
                0 => return None,
                1 | usize::MAX => continue,
                _ => {}
            }
            let g = match (has(0, l), has(1, l), in_out(l)) {
                (true, true, true) => 0,  // batch
                (true, false, true) => 1, // rows
                (false, true, true) => 2, // columns
                (_, _, false) => 3,       // summed
                (false, false, true) => return None,
            };
            groups[g][lens[g]] = l;
            lens[g] += 1;
        }
        let dim = |l: usize| Dim {
            size: p.size[l],
            stride: [strides[0][l], strides[1][l], strides[2][l]],
        };
        let mut outer = [Dim {
            size: 1,
            stride: [0; 3],
        }; MAX_LABELS];
        let mut n_outer = 0;
        let mut push_outer = |d: Dim, outer: &mut [Dim; MAX_LABELS]| {
            outer[n_outer] = d;
            n_outer += 1;
        };
        for &l in &groups[0][..lens[0]] {
            push_outer(dim(l), &mut outer);
        }
        // Rows merge along A's order, columns along B's, sums along A's
        // (B's when A lacks them).
        let mut picked = [Dim {
            size: 1,
            stride: [0; 3],
        }; 3];
        let mut summed_outer = [Dim {
            size: 1,
            stride: [0; 3],
        }; MAX_LABELS];
        let mut n_summed = 0;
        for (slot, g) in [1usize, 2, 3].into_iter().enumerate() {
            let labels = &groups[g][..lens[g]];
            let order_by = if g == 2 { 1 } else { 0 };
            let (merged, rest) = merge(labels, &dim, order_by);
            picked[slot] = merged;
            for d in rest.iter().take_while(|d| d.size > 0) {
                if g == 3 {
                    summed_outer[n_summed] = *d;
                    n_summed += 1;
                } else {
                    push_outer(*d, &mut outer);
                }
            }
        }
        for d in &summed_outer[..n_summed] {
            push_outer(*d, &mut outer);
        }
        let [m, n, k] = picked;
        // The GEMM writes C rows of unit column stride: the columns' stride
        // in C must be 1 (or there is one column), else the rows' stride for
        // the transposed product.
        let transposed = if n.stride[2] == 1 || n.size == 1 {
            false
        } else if m.stride[2] == 1 || m.size == 1 {
            true
        } else {
            return None;
        };
        Some(Products {
            m,
            n,
            k,
            outer,
            n_outer,
            n_summed_outer: n_summed,
            transposed,
        })
    }

    /// Floats of scratch one product needs.
    pub(super) fn scratch_len(&self) -> usize {
        let (m, n) = if self.transposed {
            (self.n.size, self.m.size)
        } else {
            (self.m.size, self.n.size)
        };
        sgemm_scratch_len(m, n, self.k.size)
    }

    /// Runs every product: `C = Σ A·B` over the outer loop.
    pub(super) fn run(
        &self,
        a: &[f32],
        b: &[f32],
        c: &mut [f32],
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let (m, n, k) = (self.m, self.n, self.k);
        let kept = self.n_outer - self.n_summed_outer;
        let kept_count: usize = self.outer[..kept].iter().map(|d| d.size).product();
        let summed_count: usize = self.outer[kept..self.n_outer]
            .iter()
            .map(|d| d.size)
            .product();
        if kept_count == 0 || m.size == 0 || n.size == 0 {
            return Ok(());
        }
        if summed_count == 0 || k.size == 0 {
            c.fill(0.0);
            return Ok(());
        }
        let bad = KernelError::Buffer { op: "Einsum" };
        for i in 0..kept_count {
            let base = offsets(&self.outer[..kept], i);
            for s in 0..summed_count {
                let off = offsets(&self.outer[kept..self.n_outer], s);
                let (oa, ob) = (base[0] + off[0], base[1] + off[1]);
                let oc = base[2];
                let beta = if s == 0 { 0.0 } else { 1.0 };
                let a = a.get(oa..).ok_or(bad.clone())?;
                let b = b.get(ob..).ok_or(bad.clone())?;
                let c = c.get_mut(oc..).ok_or(bad.clone())?;
                let a_rows = MatRef {
                    data: a,
                    rs: m.stride[0],
                    cs: k.stride[0],
                };
                let b_cols = MatRef {
                    data: b,
                    rs: k.stride[1],
                    cs: n.stride[1],
                };
                if self.transposed {
                    // Cᵀ (n × m, row stride = the columns' stride in C) = Bᵀ·Aᵀ.
                    let bt = MatRef {
                        data: b_cols.data,
                        rs: n.stride[1],
                        cs: k.stride[1],
                    };
                    let at = MatRef {
                        data: a_rows.data,
                        rs: k.stride[0],
                        cs: m.stride[0],
                    };
                    sgemm(
                        n.size,
                        m.size,
                        k.size,
                        1.0,
                        bt,
                        at,
                        beta,
                        c,
                        row_stride(n, m),
                        scratch,
                    )?;
                } else {
                    sgemm(
                        m.size,
                        n.size,
                        k.size,
                        1.0,
                        a_rows,
                        b_cols,
                        beta,
                        c,
                        row_stride(m, n),
                        scratch,
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// C's row stride for a product whose rows are `rows` and columns `cols`:
/// a single row has no stride of its own (0 in the plan), the GEMM wants at
/// least the row's length.
fn row_stride(rows: Dim, cols: Dim) -> usize {
    if rows.size == 1 {
        cols.size
    } else {
        rows.stride[2]
    }
}

/// The element offsets in A, B and C of the `i`-th index of an odometer
/// over `dims` (the last fastest).
fn offsets(dims: &[Dim], mut i: usize) -> [usize; 3] {
    let mut off = [0usize; 3];
    for d in dims.iter().rev() {
        let x = i % d.size;
        i /= d.size;
        for (o, s) in off.iter_mut().zip(d.stride) {
            *o += x * s;
        }
    }
    off
}

/// Merges `labels` into one dimension where their strides line up in every
/// operand, walking them in decreasing stride of operand `order_by`: the
/// innermost run that merges becomes the product's dimension, the rest (up
/// to [`MAX_RANK`] entries, terminated by a size-0 entry) loop outside.
fn merge(labels: &[usize], dim: &dyn Fn(usize) -> Dim, order_by: usize) -> (Dim, [Dim; MAX_RANK]) {
    let mut rest = [Dim {
        size: 0,
        stride: [0; 3],
    }; MAX_RANK];
    let mut ds = [Dim {
        size: 1,
        stride: [0; 3],
    }; MAX_LABELS];
    for (d, &l) in ds.iter_mut().zip(labels) {
        *d = dim(l);
    }
    let ds = &mut ds[..labels.len()];
    ds.sort_by(|x, y| y.stride[order_by].cmp(&x.stride[order_by]));
    let Some((&last, init)) = ds.split_last() else {
        return (
            Dim {
                size: 1,
                stride: [0; 3],
            },
            rest,
        );
    };
    let mut merged = last;
    let mut n_rest = 0;
    // Walk outward from the innermost: a label merges when, in every
    // operand, its stride is the merged dimension's extent.
    let mut open = true;
    for d in init.iter().rev() {
        let lines_up = (0..3).all(|o| d.stride[o] == merged.stride[o] * merged.size);
        if open && lines_up {
            merged.size *= d.size;
        } else {
            open = false;
            if n_rest < MAX_RANK {
                rest[n_rest] = *d;
                n_rest += 1;
            }
        }
    }
    (merged, rest)
}

#[cfg(test)]
mod tests {
    use super::super::Einsum;
    use crate::DType;
    use crate::kernel::Kernel;
    use crate::ops::test_util::{Owned, run_kernel};
    use alloc::vec::Vec;

    /// A direct f64 evaluation of a two-input equation over row-major
    /// inputs (labels as ids, sizes per label).
    fn reference(
        a: &[f32],
        la: &[usize],
        b: &[f32],
        lb: &[usize],
        out: &[usize],
        size: &[usize],
    ) -> Vec<f32> {
        let strides = |ls: &[usize]| {
            let mut st = alloc::vec![0usize; ls.len()];
            let mut acc = 1;
            for i in (0..ls.len()).rev() {
                st[i] = acc;
                acc *= size[ls[i]];
            }
            st
        };
        let (sa, sb) = (strides(la), strides(lb));
        let n_labels = size.len();
        let total: usize = size.iter().product();
        let out_len: usize = out.iter().map(|&l| size[l]).product();
        let so = strides(out);
        let mut acc = alloc::vec![0f64; out_len];
        for flat in 0..total {
            let mut idx = alloc::vec![0usize; n_labels];
            let mut r = flat;
            for l in (0..n_labels).rev() {
                idx[l] = r % size[l];
                r /= size[l];
            }
            let off = |ls: &[usize], st: &[usize]| -> usize {
                ls.iter().zip(st).map(|(&l, &s)| idx[l] * s).sum()
            };
            acc[off(out, &so)] += f64::from(a[off(la, &sa)]) * f64::from(b[off(lb, &sb)]);
        }
        acc.into_iter().map(|v| v as f32).collect()
    }

    fn check(la: &[usize], lb: &[usize], out: &[usize], size: &[usize]) {
        let dims = |ls: &[usize]| ls.iter().map(|&l| size[l]).collect::<Vec<_>>();
        let (da, db) = (dims(la), dims(lb));
        let na: usize = da.iter().product();
        let nb: usize = db.iter().product();
        let a: Vec<f32> = (0..na)
            .map(|i| ((i * 7 + 3) % 23) as f32 * 0.25 - 2.0)
            .collect();
        let b: Vec<f32> = (0..nb)
            .map(|i| ((i * 5 + 1) % 19) as f32 * 0.5 - 4.0)
            .collect();
        let k = Einsum::new(&[la, lb], out).unwrap();
        let (xa, xb) = (Owned::new(&da, &a), Owned::new(&db, &b));
        let inputs = [Some(xa.r()), Some(xb.r())];
        assert!(
            k.products(&k.plan(&inputs).unwrap(), &inputs)
                .unwrap()
                .is_some(),
            "{la:?},{lb:?}->{out:?} should run as products"
        );
        let y = run_kernel(&k, &[Some(&xa), Some(&xb)], &[DType::F32]).unwrap();
        let want = reference(&a, la, &b, lb, out, size);
        let got = y[0].to::<f32>();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 + 1e-5 * w.abs(),
                "{la:?},{lb:?}->{out:?} [{i}]: {g} vs {w}"
            );
        }
    }

    #[test]
    fn products_match_a_direct_sum() {
        // Grouped linear: b t g i, g i h -> b t g h (labels 0..5).
        check(&[0, 1, 2, 3], &[2, 3, 4], &[0, 1, 2, 4], &[2, 7, 3, 17, 9]);
        // The same with the output's columns not innermost (transposed C).
        check(&[0, 1, 2, 3], &[2, 3, 4], &[2, 4, 0, 1], &[2, 7, 3, 17, 9]);
        // Batched matmul with odd sizes.
        check(&[0, 1, 2], &[0, 2, 3], &[0, 1, 3], &[3, 13, 33, 5]);
        // Transposed B: i k, j k -> i j.
        check(&[0, 2], &[1, 2], &[0, 1], &[19, 21, 40]);
        // One output column whose rows are not innermost: b i k, k -> i b.
        check(&[0, 1, 2], &[2], &[1, 0], &[3, 5, 8]);
        // Outer product: i, j -> i j (no summed label).
        check(&[0], &[1], &[0, 1], &[11, 6]);
        // Dot product: i, i -> (scalar).
        check(&[0], &[0], &[], &[37]);
        // A label summed in A only, and one the rows do not merge over.
        check(&[0, 1, 2], &[2, 3], &[1, 3], &[4, 6, 5, 7]);
        check(&[1, 0, 2], &[2, 3], &[0, 1, 3], &[4, 6, 5, 7]);
        // Summed labels that do not merge: accumulation over an outer loop.
        check(&[0, 1, 2], &[2, 3, 1], &[0, 3], &[5, 3, 4, 6]);
    }

    #[test]
    fn scratch_covers_every_product() {
        let k = Einsum::new(&[&[0, 1, 2, 3], &[2, 3, 4]], &[0, 1, 2, 4]).unwrap();
        let xa = Owned::new(&[1, 100, 4, 64], &alloc::vec![0f32; 25600]);
        let xb = Owned::new(&[4, 64, 64], &alloc::vec![0f32; 16384]);
        let inputs = [Some(xa.r()), Some(xb.r())];
        let out = [crate::shape::Shape::new(&[1, 100, 4, 64]).unwrap()];
        assert!(
            k.scratch_bytes(&inputs, &out) >= 4 * crate::ops::gemm::sgemm_scratch_len(100, 64, 64)
        );
    }
}
