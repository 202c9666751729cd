//! Shape-only operators: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
//! Identity. The compiler usually turns the view ops into zero-copy aliases;
//! their `run` copies the bytes.
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input, output, set_out};
use crate::ops::access::{check_data, check_out, read_list};
use crate::shape::{MAX_RANK, Shape, normalize_axis};
use crate::tensor::{TensorMut, TensorRef};

/// Copies input 0 into output 0 after checking the element count.
fn copy_run(
    inputs: &[Option<TensorRef<'_>>],
    outputs: &mut [TensorMut<'_>],
    op: &'static str,
    shape: &Shape,
) -> Result<(), KernelError> {
    let x = input(inputs, 0, op)?;
    check_data(x, op)?;
    let out = output(outputs, 0, op)?;
    check_out(out, x.dtype, shape, op)?;
    if out.data.len() != x.data.len() {
        return Err(KernelError::Buffer { op });
    }
    out.data.copy_from_slice(x.data);
    Ok(())
}

/// Writes i64 values into an output.
fn write_i64s(out: &mut TensorMut<'_>, vals: &[i64], op: &'static str) -> Result<(), KernelError> {
    let y = out.typed::<i64>(op)?;
    if y.len() != vals.len() {
        return Err(KernelError::Buffer { op });
    }
    y.copy_from_slice(vals);
    Ok(())
}

/// ONNX `Shape` (named `ShapeOf` to avoid clashing with [`Shape`]): the
/// dims of input `data` from `start` to `end` as a 1-D i64 tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapeOf {
    /// First dim (negative counts from the end; clamped).
    pub start: i64,
    /// One past the last dim (`None` = rank; clamped).
    pub end: Option<i64>,
}
crate::to_rust_struct!(ops::layout::ShapeOf { start, end });

impl ShapeOf {
    fn range(&self, rank: usize) -> (usize, usize) {
        let r = rank as i64;
        let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let s = clamp(self.start);
        let e = clamp(self.end.unwrap_or(r));
        (s, e.max(s))
    }
}

impl Kernel for ShapeOf {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "Shape")?;
        let (s, e) = self.range(x.shape.rank());
        set_out(outputs, Shape::new(&[e - s])?, "Shape")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "Shape")?;
        let (s, e) = self.range(x.shape.rank());
        let mut v = [0i64; MAX_RANK];
        for (o, &d) in v.iter_mut().zip(&x.shape.dims()[s..e]) {
            *o = d as i64;
        }
        let out = output(outputs, 0, "Shape")?;
        check_out(out, DType::I64, &Shape::new(&[e - s])?, "Shape")?;
        write_i64s(out, &v[..e - s], "Shape")
    }
}

/// ONNX `Size`: the element count of input `data` as an i64 scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size;
crate::to_rust_struct!(ops::layout::Size {});

impl Kernel for Size {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        input(inputs, 0, "Size")?;
        set_out(outputs, Shape::SCALAR, "Size")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let n = input(inputs, 0, "Size")?.numel() as i64;
        let out = output(outputs, 0, "Size")?;
        check_out(out, DType::I64, &Shape::SCALAR, "Size")?;
        write_i64s(out, &[n], "Size")
    }
}

/// ONNX `Reshape`: inputs `data` and `shape` (i64; 0 copies the input dim
/// unless `allowzero`, -1 is inferred).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reshape {
    /// ONNX `allowzero`: a 0 in `shape` means an empty dim.
    pub allowzero: bool,
}
crate::to_rust_struct!(ops::layout::Reshape { allowzero });

impl Reshape {
    fn shape(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Shape, KernelError> {
        const OP: &str = "Reshape";
        let x = input(inputs, 0, OP)?;
        let s = input(inputs, 1, OP)?;
        let (vals, n) = read_list(s, OP)?;
        if n > MAX_RANK {
            return Err(KernelError::RankTooLarge(n));
        }
        let mut out = Shape::new(&[0; MAX_RANK][..n])?;
        let mut infer_at = None;
        let mut known = 1usize;
        for (i, &v) in vals[..n].iter().enumerate() {
            let d = match v {
                -1 => {
                    if infer_at.replace(i).is_some() {
                        return Err(KernelError::Invalid {
                            op: OP,
                            msg: "more than one -1 in shape",
                        });
                    }
                    1
                }
                0 if !self.allowzero => *x.shape.dims().get(i).ok_or(KernelError::Shape {
                    op: OP,
                    msg: "0 refers to a dim beyond the input rank",
                })?,
                v if v < 0 => {
                    return Err(KernelError::Invalid {
                        op: OP,
                        msg: "negative dim in shape",
                    });
                }
                v => v as usize,
            };
            out.dims_mut()[i] = d;
            known = known.checked_mul(d).ok_or(KernelError::Invalid {
                op: OP,
                msg: "shape overflows",
            })?;
        }
        let total = x.shape.numel();
        if let Some(i) = infer_at {
            if known == 0 || total % known != 0 {
                return Err(KernelError::Shape {
                    op: OP,
                    msg: "cannot infer the -1 dim",
                });
            }
            out.dims_mut()[i] = total / known;
        } else if known != total {
            return Err(KernelError::Shape {
                op: OP,
                msg: "element count changes",
            });
        }
        Ok(out)
    }
}

impl Kernel for Reshape {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        set_out(outputs, s, "Reshape")
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // The element count never changes.
        crate::kernel::bound_outputs(outputs, input(inputs, 0, "Reshape")?.numel())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        copy_run(inputs, outputs, "Reshape", &s)
    }
}

/// ONNX `Flatten`: 2-D `[prod(dims[..axis]), prod(dims[axis..])]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flatten {
    /// Split point in `-rank..=rank` (default 1).
    pub axis: i64,
}
crate::to_rust_struct!(ops::layout::Flatten { axis });

impl Flatten {
    fn shape(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Shape, KernelError> {
        let x = input(inputs, 0, "Flatten")?;
        let r = x.shape.rank() as i64;
        let a = if self.axis < 0 {
            self.axis + r
        } else {
            self.axis
        };
        if !(0..=r).contains(&a) {
            return Err(KernelError::Invalid {
                op: "Flatten",
                msg: "axis out of range",
            });
        }
        let dims = x.shape.dims();
        let a = a as usize;
        // A zero dim keeps the count small while one side overflows.
        let product = |d: &[usize]| {
            d.iter()
                .try_fold(1usize, |p, &x| p.checked_mul(x))
                .ok_or(KernelError::Invalid {
                    op: "Flatten",
                    msg: "element count overflows",
                })
        };
        Shape::new(&[product(&dims[..a])?, product(&dims[a..])?])
    }
}

impl Kernel for Flatten {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        set_out(outputs, s, "Flatten")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        copy_run(inputs, outputs, "Flatten", &s)
    }
}

/// Marks the axes listed in an axes input (normalized against `rank`).
fn axes_mask(
    t: &TensorRef<'_>,
    rank: usize,
    op: &'static str,
) -> Result<[bool; MAX_RANK], KernelError> {
    let (vals, n) = read_list(t, op)?;
    let mut mask = [false; MAX_RANK];
    for &a in &vals[..n] {
        let a = normalize_axis(a, rank, op)?;
        if mask[a] {
            return Err(KernelError::Invalid {
                op,
                msg: "repeated axis",
            });
        }
        mask[a] = true;
    }
    Ok(mask)
}

/// ONNX `Squeeze`: inputs `data`, optional `axes` (i64). Without axes every
/// dim of size 1 is removed; listed axes must have size 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Squeeze;
crate::to_rust_struct!(ops::layout::Squeeze {});

impl Squeeze {
    fn shape(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Shape, KernelError> {
        const OP: &str = "Squeeze";
        let x = input(inputs, 0, OP)?;
        let dims = x.shape.dims();
        let mask = match opt_input(inputs, 1) {
            Some(t) => axes_mask(t, dims.len(), OP)?,
            None => {
                let mut m = [false; MAX_RANK];
                for (m, &d) in m.iter_mut().zip(dims) {
                    *m = d == 1;
                }
                m
            }
        };
        let mut out = Shape::SCALAR;
        for (i, &d) in dims.iter().enumerate() {
            if mask[i] {
                if d != 1 {
                    return Err(KernelError::Shape {
                        op: OP,
                        msg: "squeezed dim is not 1",
                    });
                }
            } else {
                out.push(d)?;
            }
        }
        Ok(out)
    }
}

impl Kernel for Squeeze {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        set_out(outputs, s, "Squeeze")
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // The element count never changes.
        crate::kernel::bound_outputs(outputs, input(inputs, 0, "Squeeze")?.numel())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        copy_run(inputs, outputs, "Squeeze", &s)
    }
}

/// ONNX `Unsqueeze`: inputs `data`, `axes` (i64, normalized against the
/// output rank).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unsqueeze;
crate::to_rust_struct!(ops::layout::Unsqueeze {});

impl Unsqueeze {
    fn shape(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Shape, KernelError> {
        const OP: &str = "Unsqueeze";
        let x = input(inputs, 0, OP)?;
        let axes = input(inputs, 1, OP)?;
        let rank = x.shape.rank() + axes.numel();
        if rank > MAX_RANK {
            return Err(KernelError::RankTooLarge(rank));
        }
        let mask = axes_mask(axes, rank, OP)?;
        let mut out = Shape::SCALAR;
        let mut src = x.shape.dims().iter();
        for &m in &mask[..rank] {
            let d = if m {
                1
            } else {
                *src.next().ok_or(KernelError::Invalid {
                    op: OP,
                    msg: "bad axes",
                })?
            };
            out.push(d)?;
        }
        Ok(out)
    }
}

impl Kernel for Unsqueeze {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        set_out(outputs, s, "Unsqueeze")
    }

    fn max_output_elems(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [usize],
    ) -> Result<bool, KernelError> {
        // The element count never changes.
        crate::kernel::bound_outputs(outputs, input(inputs, 0, "Unsqueeze")?.numel())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let s = self.shape(inputs)?;
        copy_run(inputs, outputs, "Unsqueeze", &s)
    }
}

/// ONNX `Identity`: copies `input`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Identity;
crate::to_rust_struct!(ops::layout::Identity {});

impl Kernel for Identity {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let x = input(inputs, 0, "Identity")?;
        set_out(outputs, x.shape, "Identity")
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let s = input(inputs, 0, "Identity")?.shape;
        copy_run(inputs, outputs, "Identity", &s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{Owned, run1};
    use alloc::vec::Vec;

    #[test]
    fn shape_and_size() {
        let x = Owned::new(&[2, 3, 4], &[0f32; 24]);
        let run = |start, end| {
            run1(&ShapeOf { start, end }, &[Some(&x)], DType::I64)
                .unwrap()
                .to::<i64>()
        };
        assert_eq!(run(0, None), [2, 3, 4]);
        assert_eq!(run(-2, None), [3, 4]);
        assert_eq!(run(1, Some(-1)), [3]);
        assert_eq!(run(-10, Some(10)), [2, 3, 4]);
        assert_eq!(run(2, Some(1)), Vec::<i64>::new());
        // Shape inference without data works.
        let mut out = [Shape::SCALAR];
        ShapeOf {
            start: 0,
            end: None,
        }
        .infer(
            &[Some(TensorRef::shape_only(DType::F32, x.shape))],
            &mut out,
        )
        .unwrap();
        assert_eq!(out[0].dims(), &[3]);
        let s = run1(&Size, &[Some(&x)], DType::I64).unwrap();
        assert_eq!((s.dims().len(), s.to::<i64>()), (0, [24].to_vec()));
    }

    #[test]
    fn reshape_rules() {
        let data: Vec<i32> = (0..24).collect();
        let x = Owned::new(&[2, 3, 4], &data);
        let r = |shape: &[i64], allowzero| {
            let s = Owned::new(&[shape.len()], shape);
            run1(&Reshape { allowzero }, &[Some(&x), Some(&s)], DType::I32)
        };
        assert_eq!(r(&[4, -1], false).unwrap().dims(), &[4, 6]);
        assert_eq!(r(&[0, -1], false).unwrap().dims(), &[2, 12]);
        assert_eq!(r(&[0, 0, -1], false).unwrap().to::<i32>(), data);
        assert!(r(&[5, -1], false).is_err());
        assert!(r(&[-1, -1], false).is_err());
        assert!(r(&[0, 24], true).is_err());
        let e = Owned::new(&[0, 3], &[0i32; 0]);
        let s = Owned::new(&[2], &[3i64, 0]);
        let y = run1(
            &Reshape { allowzero: true },
            &[Some(&e), Some(&s)],
            DType::I32,
        )
        .unwrap();
        assert_eq!(y.dims(), &[3, 0]);
        // Values of the shape input are needed.
        let mut out = [Shape::SCALAR];
        let blind = [
            Some(x.r()),
            Some(TensorRef::shape_only(DType::I64, Shape::new(&[2]).unwrap())),
        ];
        assert!(matches!(
            Reshape { allowzero: false }.infer(&blind, &mut out),
            Err(KernelError::NeedsData { .. })
        ));
    }

    #[test]
    fn flatten_squeeze_unsqueeze() {
        let x = Owned::new(&[2, 1, 3, 1], &[1u8; 6]);
        let f = |axis| run1(&Flatten { axis }, &[Some(&x)], DType::U8).unwrap();
        assert_eq!(f(0).dims(), &[1, 6]);
        assert_eq!(f(2).dims(), &[2, 3]);
        assert_eq!(f(-1).dims(), &[6, 1]);
        assert_eq!(f(4).dims(), &[6, 1]);
        assert!(run1(&Flatten { axis: 5 }, &[Some(&x)], DType::U8).is_err());
        let sq = run1(&Squeeze, &[Some(&x), None], DType::U8).unwrap();
        assert_eq!(sq.dims(), &[2, 3]);
        let ax = Owned::new(&[1], &[-1i64]);
        assert_eq!(
            run1(&Squeeze, &[Some(&x), Some(&ax)], DType::U8)
                .unwrap()
                .dims(),
            &[2, 1, 3]
        );
        let bad = Owned::new(&[1], &[0i64]);
        assert!(run1(&Squeeze, &[Some(&x), Some(&bad)], DType::U8).is_err());
        let ax = Owned::new(&[2], &[0i64, -1]);
        let un = run1(&Unsqueeze, &[Some(&x), Some(&ax)], DType::U8).unwrap();
        assert_eq!(un.dims(), &[1, 2, 1, 3, 1, 1]);
        let s = Owned::new(&[], &[7i64]);
        let ax = Owned::new(&[1], &[0i64]);
        let un = run1(&Unsqueeze, &[Some(&s), Some(&ax)], DType::I64).unwrap();
        assert_eq!((un.dims(), un.to::<i64>()), (&[1usize][..], [7].to_vec()));
        let id = run1(&Identity, &[Some(&x)], DType::U8).unwrap();
        assert_eq!(id.to::<u8>(), [1; 6]);
    }
}
