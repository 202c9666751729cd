//! NumPy `.npy` files (versions 1–3, little endian, C order) as bytes: the
//! one parser and writer behind `lele run`'s inputs and outputs, the
//! compiler's tests and the runners it builds for other targets. File I/O
//! stays with the caller, so this works without `std`.
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::KernelError;
use crate::shape::Shape;
use crate::tensor::TensorRef;

/// Longest header accepted (NumPy itself writes a few hundred bytes).
pub const MAX_HEADER_BYTES: usize = 1 << 16;
/// Most dims accepted.
pub const MAX_RANK: usize = 32;
/// Largest tensor data accepted (2 GiB): a file or a shape asking for more
/// is an error, not an allocation.
pub const MAX_DATA_BYTES: usize = 1 << 31;
/// Largest `.npy` file that can hold an accepted tensor.
pub const MAX_FILE_BYTES: usize = MAX_DATA_BYTES + MAX_HEADER_BYTES + 12;

/// Why bytes are not an accepted `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyError(pub String);

impl core::fmt::Display for NpyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "invalid .npy: {}", self.0)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for NpyError {}

/// A parsed array: its data copied into 8-byte-aligned storage, so that a
/// typed view of any dtype is possible.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    /// Element type.
    pub dtype: DType,
    /// Dims, outermost first.
    pub dims: Vec<usize>,
    words: Vec<u64>,
    len: usize,
}

impl NpyArray {
    /// The data bytes.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// A kernel-level view of the array.
    pub fn view(&self) -> Result<TensorRef<'_>, KernelError> {
        TensorRef::new(self.dtype, Shape::new(&self.dims)?, self.bytes())
    }
}

fn dtype_of_descr(d: &str) -> Option<DType> {
    Some(match d {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<f2" => DType::F16,
        "|i1" => DType::I8,
        "|u1" => DType::U8,
        "<i2" => DType::I16,
        "<u2" => DType::U16,
        "<i4" => DType::I32,
        "<u4" => DType::U32,
        "<i8" => DType::I64,
        "<u8" => DType::U64,
        "|b1" => DType::Bool,
        _ => return None,
    })
}

/// The text after `'key':` in a header dict.
fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k = format!("'{key}':");
    let start = header.find(&k)? + k.len();
    header.get(start..).map(str::trim_start)
}

/// Bytes of a tensor of `dims` and elements of `elem_size` bytes, if every
/// partial product fits (zero dims counted as one, so no order of
/// multiplying them overflows) and the total is at most
/// [`MAX_DATA_BYTES`]; the error says why not.
pub fn checked_bytes(dims: &[usize], elem_size: usize) -> Result<usize, String> {
    if dims.len() > MAX_RANK {
        return Err(format!("{} dims (at most {MAX_RANK})", dims.len()));
    }
    let too_big =
        || format!("shape {dims:?} of {elem_size}-byte elements exceeds {MAX_DATA_BYTES} bytes");
    let mut bound = elem_size;
    let mut bytes = elem_size;
    for &d in dims {
        bound = bound.checked_mul(d.max(1)).ok_or_else(too_big)?;
        bytes = bytes.checked_mul(d).ok_or_else(too_big)?;
    }
    if bound > MAX_DATA_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
}

/// Parses `.npy` bytes.
pub fn parse(bytes: &[u8]) -> Result<NpyArray, NpyError> {
    let bad = |m: &str| NpyError(m.to_string());
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing magic"));
    }
    let (hlen, hstart) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => match bytes.get(8..12) {
            Some(&[a, b, c, d]) => (u32::from_le_bytes([a, b, c, d]) as usize, 12),
            _ => return Err(bad("truncated header")),
        },
        v => return Err(bad(&format!("unsupported version {v}"))),
    };
    if hlen > MAX_HEADER_BYTES {
        return Err(bad(&format!(
            "header of {hlen} bytes (at most {MAX_HEADER_BYTES})"
        )));
    }
    let hend = hstart + hlen;
    let header = core::str::from_utf8(
        bytes
            .get(hstart..hend)
            .ok_or_else(|| bad("truncated header"))?,
    )
    .map_err(|_| bad("header is not UTF-8"))?;
    let header = header.trim_end();
    if !header.starts_with('{') || !header.ends_with('}') {
        return Err(bad("header is not a dict"));
    }
    let descr = header_value(header, "descr").ok_or_else(|| bad("no descr"))?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split_once('\''))
        .map(|(d, _)| d)
        .ok_or_else(|| bad("bad descr"))?;
    // `{:?}` escapes control and bidi characters: the descr comes from a
    // file and ends up on a terminal.
    let dtype =
        dtype_of_descr(descr).ok_or_else(|| bad(&format!("unsupported dtype {descr:?}")))?;
    let fortran = header_value(header, "fortran_order").ok_or_else(|| bad("no fortran_order"))?;
    if fortran.starts_with("True") {
        return Err(bad("Fortran order is not supported"));
    }
    if !fortran.starts_with("False") {
        return Err(bad("bad fortran_order"));
    }
    let shape = header_value(header, "shape").ok_or_else(|| bad("no shape"))?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split_once(')'))
        .map(|(inner, _)| inner)
        .ok_or_else(|| bad("bad shape"))?;
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    // `()`, `(n,)` or `(a, b, …)` with an optional trailing comma.
    let parts = match parts.split_last() {
        Some((&"", rest)) => rest,
        _ => &parts[..],
    };
    if parts.len() > MAX_RANK {
        return Err(bad(&format!("more than {MAX_RANK} dims")));
    }
    let dims: Vec<usize> = parts
        .iter()
        .map(|s| {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad("bad dim"));
            }
            s.parse::<usize>().map_err(|_| bad("dim too large"))
        })
        .collect::<Result<_, _>>()?;
    let expected = checked_bytes(&dims, dtype.size()).map_err(|m| bad(&m))?;
    let data = &bytes[hend..];
    if data.len() != expected {
        return Err(bad(&format!(
            "{} data bytes but the shape {dims:?} needs {expected}",
            data.len()
        )));
    }
    let mut words = vec![0u64; expected.div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..expected].copy_from_slice(data);
    Ok(NpyArray {
        dtype,
        dims,
        words,
        len: expected,
    })
}

/// Serializes a tensor as `.npy` (version 1).
pub fn to_bytes(dtype: DType, dims: &[usize], data: &[u8]) -> Vec<u8> {
    let shape = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        dtype.numpy_descr()
    );
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat(total.next_multiple_of(64) - total));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}
