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
    /// A zero-filled tensor; `None` when its byte size exceeds `usize`.
    /// Callers bound the size before asking (dims come from model files).
    pub fn zeros(dtype: DType, dims: &[usize]) -> Option<Tensor> {
        let len = dims
            .iter()
            .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))?;
        Some(Tensor {
            dtype,
            dims: dims.to_vec(),
            words: vec![0; len.div_ceil(8)],
            len,
        })
    }

    /// A tensor from little-endian bytes; `None` when the length is wrong.
    pub fn from_bytes(dtype: DType, dims: &[usize], bytes: &[u8]) -> Option<Tensor> {
        let expected = dims
            .iter()
            .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))?;
        if expected != bytes.len() {
            return None;
        }
        let mut t = Tensor::zeros(dtype, dims)?;
        if t.len != bytes.len() {
            return None;
        }
        t.bytes_mut().copy_from_slice(bytes);
        Some(t)
    }

    /// A rank-1 i64 tensor holding `v`.
    pub fn i64_vector(v: &[i64]) -> Tensor {
        Tensor::from_le_words(
            DType::I64,
            &[v.len()],
            v.iter().map(|&x| x as u64).collect(),
        )
    }

    /// A rank-0 f32 tensor.
    pub fn f32_scalar(v: f32) -> Tensor {
        Tensor::from_le_words(DType::F32, &[], vec![u64::from(v.to_bits())])
    }

    /// A tensor whose bytes are these words' little-endian bytes, trimmed to
    /// the dims' byte size (which `words` must cover).
    fn from_le_words(dtype: DType, dims: &[usize], mut words: Vec<u64>) -> Tensor {
        let len = (dims.iter().product::<usize>() * dtype.size()).min(words.len() * 8);
        for w in &mut words {
            *w = w.to_le();
        }
        Tensor {
            dtype,
            dims: dims.to_vec(),
            words,
            len,
        }
    }

    /// A tensor of `T` values.
    pub fn from_values<T: lele_kernels::Elem>(dims: &[usize], vals: &[T]) -> Option<Tensor> {
        Tensor::from_bytes(T::DTYPE, dims, bytemuck::cast_slice(vals))
    }

    /// Number of elements (saturating: see [`Shape::numel`]).
    pub fn numel(&self) -> usize {
        self.dims
            .iter()
            .fold(1usize, |acc, &d| acc.saturating_mul(d))
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

    /// The values of an f32 tensor (`None` for other dtypes).
    pub fn to_f32s(&self) -> Option<Vec<f32>> {
        (self.dtype == DType::F32).then(|| {
            self.bytes()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
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
