//! Fixed-capacity tensor shapes (no allocation).
use core::fmt;

use crate::error::KernelError;

/// The largest rank a tensor may have.
pub const MAX_RANK: usize = 8;

/// A tensor shape of rank at most [`MAX_RANK`], stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; MAX_RANK],
    rank: usize,
}

impl Default for Shape {
    fn default() -> Self {
        Shape::SCALAR
    }
}

impl Shape {
    /// The shape of a scalar (rank 0).
    pub const SCALAR: Shape = Shape {
        dims: [0; MAX_RANK],
        rank: 0,
    };

    /// Builds a shape from dims; errors when the rank is too large.
    pub fn new(dims: &[usize]) -> Result<Shape, KernelError> {
        if dims.len() > MAX_RANK {
            return Err(KernelError::RankTooLarge(dims.len()));
        }
        let mut s = Shape::SCALAR;
        s.dims[..dims.len()].copy_from_slice(dims);
        s.rank = dims.len();
        Ok(s)
    }

    /// Builds a shape in a `const` context (used by generated code).
    ///
    /// Ranks above [`MAX_RANK`] are truncated; the compiler never emits them.
    pub const fn from_const<const N: usize>(dims: [usize; N]) -> Shape {
        let mut s = Shape::SCALAR;
        let mut i = 0;
        while i < N && i < MAX_RANK {
            s.dims[i] = dims[i];
            i += 1;
        }
        s.rank = if N < MAX_RANK { N } else { MAX_RANK };
        s
    }

    /// Number of dimensions.
    pub const fn rank(&self) -> usize {
        self.rank
    }

    /// The dims as a slice.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank]
    }

    /// Mutable access to the dims.
    pub fn dims_mut(&mut self) -> &mut [usize] {
        &mut self.dims[..self.rank]
    }

    /// Product of the dims (1 for a scalar), saturating at `usize::MAX`.
    ///
    /// Dims come from model files and inputs, so their product can exceed
    /// `usize`: saturating keeps a too-large count too large (a capacity
    /// check then refuses it) where wrapping could make it look small.
    pub fn numel(&self) -> usize {
        self.dims()
            .iter()
            .fold(1usize, |acc, &d| acc.saturating_mul(d))
    }

    /// The element count when it fits `usize`, else `None`.
    pub fn checked_numel(&self) -> Option<usize> {
        self.dims()
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Bytes of a tensor of this shape with `elem_size`-byte elements, when
    /// that fits `usize`.
    pub fn checked_bytes(&self, elem_size: usize) -> Option<usize> {
        self.checked_numel()?.checked_mul(elem_size)
    }

    /// Dim `i`; panics only on a compiler bug (index beyond rank).
    pub fn dim(&self, i: usize) -> usize {
        self.dims()[i]
    }

    /// Appends a dim.
    pub fn push(&mut self, d: usize) -> Result<(), KernelError> {
        if self.rank == MAX_RANK {
            return Err(KernelError::RankTooLarge(MAX_RANK + 1));
        }
        self.dims[self.rank] = d;
        self.rank += 1;
        Ok(())
    }

    /// Normalizes a possibly negative axis against this rank.
    pub fn axis(&self, axis: i64, op: &'static str) -> Result<usize, KernelError> {
        normalize_axis(axis, self.rank, op)
    }

    /// Row-major strides (in elements) of this shape.
    pub fn strides(&self) -> [usize; MAX_RANK] {
        let mut st = [0usize; MAX_RANK];
        let mut acc = 1;
        for i in (0..self.rank).rev() {
            st[i] = acc;
            acc = acc.saturating_mul(self.dims[i]);
        }
        st
    }
}

/// Normalizes a possibly negative axis into `0..rank`.
pub fn normalize_axis(axis: i64, rank: usize, op: &'static str) -> Result<usize, KernelError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(KernelError::Invalid {
            op,
            msg: "axis out of range",
        });
    }
    Ok(a as usize)
}

/// NumPy-style broadcast of two shapes.
pub fn broadcast(a: &Shape, b: &Shape, op: &'static str) -> Result<Shape, KernelError> {
    let rank = a.rank().max(b.rank());
    let mut out = Shape::new(&[0; MAX_RANK][..rank])?;
    for i in 0..rank {
        let da = if i + a.rank() >= rank {
            a.dims()[i + a.rank() - rank]
        } else {
            1
        };
        let db = if i + b.rank() >= rank {
            b.dims()[i + b.rank() - rank]
        } else {
            1
        };
        out.dims_mut()[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(KernelError::Shape {
                op,
                msg: "shapes cannot be broadcast",
            });
        };
    }
    Ok(out)
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.dims()).finish()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_rules() {
        let a = Shape::new(&[2, 1, 4]).unwrap();
        let b = Shape::new(&[3, 1]).unwrap();
        assert_eq!(broadcast(&a, &b, "t").unwrap().dims(), &[2, 3, 4]);
        let c = Shape::new(&[5]).unwrap();
        assert!(broadcast(&a, &c, "t").is_err());
        assert_eq!(broadcast(&Shape::SCALAR, &c, "t").unwrap().dims(), &[5]);
    }

    #[test]
    fn axes() {
        assert_eq!(normalize_axis(-1, 3, "t").unwrap(), 2);
        assert!(normalize_axis(3, 3, "t").is_err());
        assert!(normalize_axis(-4, 3, "t").is_err());
    }
}

/// A short list of integers (axes, pads, strides…) stored inline so that
/// kernel parameters stay `Copy` and `const`-constructible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntList {
    /// Storage; only the first `len` entries are meaningful.
    pub vals: [i64; 2 * MAX_RANK],
    /// Number of entries.
    pub len: usize,
}

impl IntList {
    /// The empty list.
    pub const EMPTY: IntList = IntList {
        vals: [0; 2 * MAX_RANK],
        len: 0,
    };

    /// Builds a list; errors when longer than `2 * MAX_RANK`.
    pub fn new(vals: &[i64]) -> Result<IntList, KernelError> {
        if vals.len() > 2 * MAX_RANK {
            return Err(KernelError::RankTooLarge(vals.len()));
        }
        let mut l = IntList::EMPTY;
        l.vals[..vals.len()].copy_from_slice(vals);
        l.len = vals.len();
        Ok(l)
    }

    /// The entries.
    pub fn as_slice(&self) -> &[i64] {
        &self.vals[..self.len]
    }
}
crate::to_rust_struct!(shape::IntList { vals, len });
