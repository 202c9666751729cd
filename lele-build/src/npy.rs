//! Reading and writing NumPy `.npy` files for the CLI and the tests: the
//! files and the compiler's tensors around `lele_kernels::npy`.
use std::path::Path;

use lele_kernels::DType;

use crate::error::{BuildError, Result};
use crate::ir::Tensor;

pub use lele_kernels::npy::{MAX_DATA_BYTES, MAX_HEADER_BYTES, MAX_RANK, checked_bytes, to_bytes};

/// Parses `.npy` bytes (see [`lele_kernels::npy::parse`]).
pub fn parse(bytes: &[u8]) -> Result<Tensor> {
    let a = lele_kernels::npy::parse(bytes).map_err(|e| BuildError::Other(e.to_string()))?;
    Tensor::from_bytes(a.dtype, &a.dims, a.bytes()).ok_or_else(|| {
        BuildError::Other("invalid .npy: data length does not match the shape".into())
    })
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
    if meta.len() > lele_kernels::npy::MAX_FILE_BYTES as u64 {
        return Err(BuildError::Other(format!(
            "{}: {} bytes is larger than an input may be ({MAX_DATA_BYTES} bytes of data)",
            shown(),
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    parse(&bytes).map_err(|e| BuildError::Other(format!("{}: {e}", shown())))
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
