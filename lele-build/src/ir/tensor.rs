//! Owned tensors of any dtype: initializers and folded constants.
use lele_kernels::{DType, KernelError, Shape, TensorMut, TensorRef};

/// An owned tensor whose bytes are 8-byte aligned (enough for every dtype).
#[derive(Clone, PartialEq)]
pub struct Tensor {
    /// Element type.
    pub dtype: DType,
    /// Dims.
    pub dims: Vec<usize>,
    words: Vec<u64>,
    len: usize,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({:?}, {:?})", self.dtype, self.dims)
    }
}

impl Tensor {
    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, dims: &[usize]) -> Tensor {
        let len = dims.iter().product::<usize>() * dtype.size();
        Tensor {
            dtype,
            dims: dims.to_vec(),
            words: vec![0; len.div_ceil(8)],
            len,
        }
    }

    /// A tensor from little-endian bytes; errors when the length is wrong.
    pub fn from_bytes(dtype: DType, dims: &[usize], bytes: &[u8]) -> Option<Tensor> {
        let mut t = Tensor::zeros(dtype, dims);
        if t.len != bytes.len() {
            return None;
        }
        t.bytes_mut().copy_from_slice(bytes);
        Some(t)
    }

    /// A tensor of `T` values.
    pub fn from_values<T: lele_kernels::Elem>(dims: &[usize], vals: &[T]) -> Option<Tensor> {
        Tensor::from_bytes(T::DTYPE, dims, bytemuck::cast_slice(vals))
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// Raw bytes.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// Raw bytes, mutable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    /// The kernel-level shape.
    pub fn shape(&self) -> Result<Shape, KernelError> {
        Shape::new(&self.dims)
    }

    /// A kernel input view.
    pub fn view(&self) -> Result<TensorRef<'_>, KernelError> {
        Ok(TensorRef {
            dtype: self.dtype,
            shape: self.shape()?,
            data: self.bytes(),
        })
    }

    /// A kernel output view.
    pub fn view_mut(&mut self) -> Result<TensorMut<'_>, KernelError> {
        let shape = self.shape()?;
        let dtype = self.dtype;
        Ok(TensorMut {
            dtype,
            shape,
            data: self.bytes_mut(),
        })
    }

    /// Values of an integer tensor as i64 (None for other dtypes).
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        let b = self.bytes();
        Some(match self.dtype {
            DType::I64 => bytemuck::cast_slice::<u8, i64>(b).to_vec(),
            DType::I32 => bytemuck::cast_slice::<u8, i32>(b)
                .iter()
                .map(|&v| v as i64)
                .collect(),
            DType::U8 | DType::Bool => b.iter().map(|&v| v as i64).collect(),
            DType::I8 => b.iter().map(|&v| v as i8 as i64).collect(),
            _ => return None,
        })
    }

    /// Values as f64 for numeric dtypes (used in diagnostics and tests).
    pub fn to_f64s(&self) -> Option<Vec<f64>> {
        let b = self.bytes();
        Some(match self.dtype {
            DType::F32 => bytemuck::cast_slice::<u8, f32>(b)
                .iter()
                .map(|&v| v as f64)
                .collect(),
            DType::F64 => bytemuck::cast_slice::<u8, f64>(b).to_vec(),
            DType::F16 => bytemuck::cast_slice::<u8, half::f16>(b)
                .iter()
                .map(|v| v.to_f64())
                .collect(),
            DType::BF16 => bytemuck::cast_slice::<u8, half::bf16>(b)
                .iter()
                .map(|v| v.to_f64())
                .collect(),
            _ => self.to_i64s()?.into_iter().map(|v| v as f64).collect(),
        })
    }
}
