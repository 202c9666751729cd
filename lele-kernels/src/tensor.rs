//! Borrowed tensors: untyped views used by kernels and typed views used by
//! the generated API.
use crate::dtype::{DType, Elem};
use crate::error::KernelError;
use crate::shape::Shape;

/// A read-only tensor: dtype, shape and little-endian bytes.
///
/// At build time the compiler may pass a `TensorRef` whose `data` is empty
/// while its shape is not: the values are then unknown and only shape
/// inference may use the tensor.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Shape,
    /// Raw element bytes, `numel * dtype.size()` long when known.
    pub data: &'a [u8],
}

/// A writable tensor: the output buffer of a kernel.
#[derive(Debug)]
pub struct TensorMut<'a> {
    /// Element type.
    pub dtype: DType,
    /// Shape (already inferred by the caller).
    pub shape: Shape,
    /// Raw element bytes, exactly `numel * dtype.size()` long.
    pub data: &'a mut [u8],
}

fn cast<'a, T: Elem>(bytes: &'a [u8], op: &'static str) -> Result<&'a [T], KernelError> {
    // An empty tensor may sit at any address (an empty arena slice); it has
    // no elements to misalign.
    if bytes.is_empty() {
        return Ok(&[]);
    }
    bytemuck::try_cast_slice(bytes).map_err(|_| KernelError::Buffer { op })
}

fn cast_mut<'a, T: Elem>(
    bytes: &'a mut [u8],
    op: &'static str,
) -> Result<&'a mut [T], KernelError> {
    if bytes.is_empty() {
        return Ok(&mut []);
    }
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| KernelError::Buffer { op })
}

impl<'a> TensorRef<'a> {
    /// Builds a tensor reference, checking the byte length.
    pub fn new(dtype: DType, shape: Shape, data: &'a [u8]) -> Result<Self, KernelError> {
        if data.len() != shape.numel() * dtype.size() {
            return Err(KernelError::Buffer { op: "tensor" });
        }
        Ok(TensorRef { dtype, shape, data })
    }

    /// A tensor whose values are unknown (build-time shape inference only).
    pub fn shape_only(dtype: DType, shape: Shape) -> Self {
        TensorRef {
            dtype,
            shape,
            data: &[],
        }
    }

    /// Whether the element values are present.
    pub fn has_data(&self) -> bool {
        self.shape.checked_bytes(self.dtype.size()) == Some(self.data.len())
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The elements as `T`, checking the dtype.
    pub fn typed<T: Elem>(&self, op: &'static str) -> Result<&'a [T], KernelError> {
        if self.dtype != T::DTYPE && !(self.dtype == DType::Bool && T::DTYPE == DType::U8) {
            return Err(KernelError::DTypeMismatch {
                op,
                expected: T::DTYPE,
                found: self.dtype,
            });
        }
        if !self.has_data() {
            return Err(KernelError::NeedsData { op });
        }
        cast(self.data, op)
    }

    /// Boolean elements as bytes (0 or 1).
    pub fn as_bool(&self, op: &'static str) -> Result<&'a [u8], KernelError> {
        if self.dtype != DType::Bool {
            return Err(KernelError::DTypeMismatch {
                op,
                expected: DType::Bool,
                found: self.dtype,
            });
        }
        if !self.has_data() {
            return Err(KernelError::NeedsData { op });
        }
        Ok(self.data)
    }

    /// Reads an integer tensor (any integer dtype) as `i64` values into `out`,
    /// returning how many were read. Used for shape-like inputs.
    pub fn read_i64s(&self, op: &'static str, out: &mut [i64]) -> Result<usize, KernelError> {
        let n = self.numel();
        if n > out.len() {
            return Err(KernelError::Invalid {
                op,
                msg: "too many values in a shape-like input",
            });
        }
        match self.dtype {
            DType::I64 => {
                for (o, v) in out.iter_mut().zip(self.typed::<i64>(op)?) {
                    *o = *v;
                }
            }
            DType::I32 => {
                for (o, v) in out.iter_mut().zip(self.typed::<i32>(op)?) {
                    *o = *v as i64;
                }
            }
            dtype => return Err(KernelError::UnsupportedDType { op, dtype }),
        }
        Ok(n)
    }

    /// Reads the single value of a scalar-like integer tensor.
    pub fn scalar_i64(&self, op: &'static str) -> Result<i64, KernelError> {
        let mut v = [0i64; 1];
        if self.numel() != 1 {
            return Err(KernelError::Shape {
                op,
                msg: "expected a single value",
            });
        }
        self.read_i64s(op, &mut v)?;
        Ok(v[0])
    }

    /// Reads the single value of a scalar-like float tensor as `f64`.
    pub fn scalar_f64(&self, op: &'static str) -> Result<f64, KernelError> {
        if self.numel() != 1 {
            return Err(KernelError::Shape {
                op,
                msg: "expected a single value",
            });
        }
        Ok(match self.dtype {
            DType::F32 => self.typed::<f32>(op)?[0] as f64,
            DType::F64 => self.typed::<f64>(op)?[0],
            DType::F16 => self.typed::<half::f16>(op)?[0].to_f64(),
            DType::I64 => self.typed::<i64>(op)?[0] as f64,
            DType::I32 => self.typed::<i32>(op)?[0] as f64,
            dtype => return Err(KernelError::UnsupportedDType { op, dtype }),
        })
    }
}

impl<'a> TensorMut<'a> {
    /// Builds an output tensor, checking that `data` holds at least the
    /// shape's bytes; the buffer is trimmed to exactly that length.
    pub fn new(dtype: DType, shape: Shape, data: &'a mut [u8]) -> Result<Self, KernelError> {
        let n = shape.numel() * dtype.size();
        if data.len() < n {
            return Err(KernelError::Buffer { op: "tensor" });
        }
        Ok(TensorMut {
            dtype,
            shape,
            data: &mut data[..n],
        })
    }

    /// The elements as `T`, checking the dtype.
    pub fn typed<T: Elem>(&mut self, op: &'static str) -> Result<&mut [T], KernelError> {
        if self.dtype != T::DTYPE && !(self.dtype == DType::Bool && T::DTYPE == DType::U8) {
            return Err(KernelError::DTypeMismatch {
                op,
                expected: T::DTYPE,
                found: self.dtype,
            });
        }
        cast_mut(self.data, op)
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// A read-only view of this tensor.
    pub fn as_ref(&self) -> TensorRef<'_> {
        TensorRef {
            dtype: self.dtype,
            shape: self.shape,
            data: self.data,
        }
    }
}

/// A typed, read-only tensor: the argument and result type of a generated
/// `forward`.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a, T> {
    data: &'a [T],
    shape: Shape,
}

impl<'a, T: Elem> TensorView<'a, T> {
    /// Wraps `data` with `dims`, checking that the element count matches.
    pub fn new(data: &'a [T], dims: &[usize]) -> Result<Self, KernelError> {
        let shape = Shape::new(dims)?;
        if shape.numel() != data.len() {
            return Err(KernelError::Shape {
                op: "TensorView",
                msg: "data length does not match the shape",
            });
        }
        Ok(TensorView { data, shape })
    }

    /// Wraps `data` with an already built shape.
    pub fn from_shape(data: &'a [T], shape: Shape) -> Result<Self, KernelError> {
        if shape.numel() != data.len() {
            return Err(KernelError::Shape {
                op: "TensorView",
                msg: "data length does not match the shape",
            });
        }
        Ok(TensorView { data, shape })
    }

    /// The elements in row-major order.
    pub fn data(&self) -> &'a [T] {
        self.data
    }

    /// The dims.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// The shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Copies the elements into a new vector.
    pub fn to_vec(&self) -> alloc::vec::Vec<T> {
        self.data.to_vec()
    }

    /// The untyped view of this tensor.
    pub fn as_untyped(&self) -> TensorRef<'a> {
        TensorRef {
            dtype: T::DTYPE,
            shape: self.shape,
            data: bytemuck::cast_slice(self.data),
        }
    }

    /// A typed view of an untyped tensor (dtype checked).
    pub fn from_untyped(t: TensorRef<'a>) -> Result<Self, KernelError> {
        Ok(TensorView {
            data: t.typed::<T>("TensorView")?,
            shape: t.shape,
        })
    }
}

impl<'a> TensorView<'a, u8> {
    /// A boolean tensor view (stored as bytes).
    pub fn as_untyped_bool(&self) -> TensorRef<'a> {
        TensorRef {
            dtype: DType::Bool,
            shape: self.shape,
            data: self.data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_tensors_at_any_address_have_typed_views() {
        // Three of these four offsets are misaligned for f32.
        let mut bytes = [0u8; 8];
        for off in 0..4 {
            let shape = Shape::new(&[2, 0, 4]).unwrap();
            let t = TensorRef::new(DType::F32, shape, &bytes[off..off]).unwrap();
            assert!(t.typed::<f32>("t").unwrap().is_empty());
            let mut m = TensorMut::new(DType::F32, shape, &mut bytes[off..off]).unwrap();
            assert!(m.typed::<f32>("t").unwrap().is_empty());
        }
    }
}
