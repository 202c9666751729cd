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

fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k = format!("'{key}':");
    let start = header.find(&k)? + k.len();
    Some(header[start..].trim_start())
}

/// Parses `.npy` bytes.
pub fn parse(bytes: &[u8]) -> Result<Tensor> {
    let bad = |m: &str| BuildError::Other(format!("invalid .npy: {m}"));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing magic"));
    }
    let major = bytes[6];
    let (hlen, hstart) = if major == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        if bytes.len() < 12 {
            return Err(bad("truncated header"));
        }
        (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(
        bytes
            .get(hstart..hstart + hlen)
            .ok_or_else(|| bad("truncated header"))?,
    )
    .map_err(|_| bad("header is not UTF-8"))?;
    let descr = header_value(header, "descr").ok_or_else(|| bad("no descr"))?;
    let descr = descr.trim_start_matches('\'');
    let descr = &descr[..descr.find('\'').ok_or_else(|| bad("bad descr"))?];
    let dtype = dtype_of_descr(descr).ok_or_else(|| bad(&format!("unsupported dtype {descr}")))?;
    let fortran = header_value(header, "fortran_order").ok_or_else(|| bad("no fortran_order"))?;
    if fortran.starts_with("True") {
        return Err(bad("Fortran order is not supported"));
    }
    let shape = header_value(header, "shape").ok_or_else(|| bad("no shape"))?;
    let shape = &shape[shape.find('(').ok_or_else(|| bad("bad shape"))? + 1
        ..shape.find(')').ok_or_else(|| bad("bad shape"))?];
    let dims: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad("bad dim")))
        .collect::<Result<_>>()?;
    let data = &bytes[hstart + hlen..];
    Tensor::from_bytes(dtype, &dims, data)
        .ok_or_else(|| bad("data length does not match the shape"))
}

/// Reads a `.npy` file.
pub fn read(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).map_err(|source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&bytes).map_err(|e| BuildError::Other(format!("{}: {e}", path.display())))
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
    }
}
