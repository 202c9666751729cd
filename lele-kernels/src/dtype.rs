//! Element types of tensors.
use bytemuck::Pod;
use half::{bf16, f16};

/// The element type of a tensor, named as in ONNX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16.
    BF16,
    /// 64-bit float.
    F64,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean, stored as one byte (0 or 1).
    Bool,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// The ONNX `TensorProto.DataType` code.
    pub const fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
        }
    }

    /// The dtype of an ONNX `TensorProto.DataType` code, if supported.
    pub const fn from_onnx_code(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::BF16,
            _ => return None,
        })
    }

    /// Whether the dtype is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// The NumPy `descr` string of the dtype (little endian).
    pub const fn numpy_descr(self) -> &'static str {
        match self {
            DType::F32 => "<f4",
            DType::F16 => "<f2",
            DType::BF16 => "<V2",
            DType::F64 => "<f8",
            DType::I8 => "|i1",
            DType::U8 => "|u1",
            DType::I16 => "<i2",
            DType::U16 => "<u2",
            DType::I32 => "<i4",
            DType::U32 => "<u4",
            DType::I64 => "<i8",
            DType::U64 => "<u8",
            DType::Bool => "|b1",
        }
    }

    /// Every dtype.
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::Bool,
    ];

    /// The dtype called `name` (the inverse of [`DType::name`]).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Lower-case short name (`f32`, `i64`, `bool`…).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::Bool => "bool",
        }
    }
}

/// A Rust type that stores elements of one [`DType`].
///
/// `bool` tensors are stored as `u8`, so `Elem` for `u8` is [`DType::U8`] and
/// boolean tensors are read through [`crate::TensorRef::as_bool`].
pub trait Elem: Pod + Default + PartialOrd + Send + Sync + 'static {
    /// The dtype this type stores.
    const DTYPE: DType;
}

macro_rules! impl_elem {
    ($($t:ty => $d:ident),*) => { $(impl Elem for $t { const DTYPE: DType = DType::$d; })* };
}
impl_elem!(f32 => F32, f64 => F64, f16 => F16, bf16 => BF16, i8 => I8, u8 => U8, i16 => I16,
    u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64);
