//! Reading and writing NumPy `.npy` files (version 1/2/3, little endian,
//! C order) for the CLI and the tests.
use std::path::Path;

use lele_kernels::DType;

use crate::error::{BuildError, Result};
use crate::ir::Tensor;

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

/// Longest header accepted (NumPy itself writes a few hundred bytes).
pub const MAX_HEADER_BYTES: usize = 1 << 16;
/// Most dims accepted.
pub const MAX_RANK: usize = 32;
/// Largest tensor data accepted (2 GiB): a file or a `--shape` asking for
/// more is an error, not an allocation.
pub const MAX_DATA_BYTES: usize = 1 << 31;

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
pub fn checked_bytes(dims: &[usize], elem_size: usize) -> std::result::Result<usize, String> {
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
pub fn parse(bytes: &[u8]) -> Result<Tensor> {
    let bad = |m: &str| BuildError::Other(format!("invalid .npy: {m}"));
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
    let header = std::str::from_utf8(
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
    let dtype = dtype_of_descr(descr).ok_or_else(|| {
        bad(&format!(
            "unsupported dtype {}",
            crate::error::escape_controls(descr)
        ))
    })?;
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
        .collect::<Result<_>>()?;
    let expected = checked_bytes(&dims, dtype.size()).map_err(|m| bad(&m))?;
    let data = &bytes[hend..];
    if data.len() != expected {
        return Err(bad(&format!(
            "{} data bytes but the shape {dims:?} needs {expected}",
            data.len()
        )));
    }
    Tensor::from_bytes(dtype, &dims, data)
        .ok_or_else(|| bad("data length does not match the shape"))
}

/// Reads a `.npy` file (a regular file of at most [`MAX_DATA_BYTES`] plus
/// its header).
pub fn read(path: &Path) -> Result<Tensor> {
    let io = |source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    };
    let shown = || crate::error::escape_controls(&path.display().to_string()).into_owned();
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(BuildError::Other(format!(
            "{}: not a regular file",
            shown()
        )));
    }
    if meta.len() > (MAX_DATA_BYTES + MAX_HEADER_BYTES + 12) as u64 {
        return Err(BuildError::Other(format!(
            "{}: {} bytes is larger than an input may be ({MAX_DATA_BYTES} bytes of data)",
            shown(),
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    parse(&bytes).map_err(|e| BuildError::Other(format!("{}: {e}", shown())))
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

/// Writes a `.npy` file.
pub fn write(path: &Path, dtype: DType, dims: &[usize], data: &[u8]) -> Result<()> {
    std::fs::write(path, to_bytes(dtype, dims, data)).map_err(|source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let vals = [1.5f32, -2.0, 3.25, 0.0, 7.0, 8.0];
        let b = to_bytes(DType::F32, &[2, 3], bytemuck::cast_slice(&vals));
        let t = parse(&b).unwrap();
        assert_eq!(t.dims, vec![2, 3]);
        assert_eq!(t.to_f64s().unwrap()[2], 3.25);
        let s = to_bytes(DType::I64, &[], bytemuck::cast_slice(&[16000i64]));
        assert_eq!(parse(&s).unwrap().to_i64s().unwrap(), vec![16000]);
        let v = to_bytes(DType::U8, &[3], &[1, 2, 3]);
        assert_eq!(parse(&v).unwrap().dims, vec![3]);
        let z = to_bytes(DType::F32, &[0, 5], &[]);
        assert_eq!(parse(&z).unwrap().dims, vec![0, 5]);
    }

    /// A version-1 file with this header text (no padding) and data.
    fn with_header(header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn err(bytes: &[u8]) -> String {
        match parse(bytes) {
            Ok(t) => panic!("parsed {:?}", t.dims),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn hostile_headers_are_errors_not_panics() {
        let h =
            |shape: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        // `)` before `(` used to slice backwards and panic.
        assert!(err(&with_header(&h(")2, 3("), &[])).contains("bad shape"));
        assert!(err(&with_header(&h("2, 3)"), &[])).contains("bad shape"));
        assert!(err(&with_header(&h("(2, 3"), &[])).contains("bad shape"));
        assert!(err(&with_header(&h("(-1,)"), &[])).contains("bad dim"));
        assert!(err(&with_header(&h("(2,,3)"), &[])).contains("bad dim"));
        // Element counts that wrap, or that exceed the cap.
        let wraps = h("(4294967296, 4294967296, 0)");
        assert!(
            err(&with_header(&wraps, &[])).contains("exceeds"),
            "{}",
            err(&with_header(&wraps, &[]))
        );
        assert!(err(&with_header(&h("(99999999999999999999,)"), &[])).contains("dim too large"));
        assert!(err(&with_header(&h("(1073741824, 4)"), &[])).contains("exceeds"));
        // Data length must match exactly.
        assert!(err(&with_header(&h("(2,)"), &[0; 4])).contains("needs 8"));
        assert!(err(&with_header(&h("(2,)"), &[0; 12])).contains("needs 8"));
        // Bad descr, fortran_order, dict shape, version and lengths.
        assert!(
            err(&with_header(
                "{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }",
                &[]
            ))
            .contains("unsupported dtype")
        );
        assert!(
            err(&with_header(
                "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }",
                &[0; 4]
            ))
            .contains("fortran_order")
        );
        assert!(
            err(&with_header(
                "'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
                &[0; 4]
            ))
            .contains("dict")
        );
        let mut v9 = with_header(&h("(1,)"), &[0; 4]);
        v9[6] = 9;
        assert!(err(&v9).contains("version"));
        let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
        v2.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&v2).contains("header of"));
        assert!(err(&b"\x93NUMPY\x02\x00\x01\x00"[..]).contains("truncated"));
        assert!(err(&b"\x93NUMPY\x01\x00\xff\xff{}"[..]).contains("truncated"));
        let deep = format!("({})", vec!["1"; 40].join(", "));
        assert!(err(&with_header(&h(&deep), &[0; 4])).contains("dims"));
    }

    #[test]
    fn checked_bytes_bounds_every_order_of_products() {
        assert_eq!(checked_bytes(&[2, 3], 4), Ok(24));
        assert_eq!(checked_bytes(&[0, 7], 4), Ok(0));
        assert!(checked_bytes(&[usize::MAX, 2, 0], 1).is_err());
        assert!(checked_bytes(&[0, usize::MAX], 8).is_err());
        assert!(checked_bytes(&[MAX_DATA_BYTES / 4 + 1], 4).is_err());
        assert_eq!(checked_bytes(&[MAX_DATA_BYTES / 4], 4), Ok(MAX_DATA_BYTES));
    }
}
