//! lele's dequantization of ggml blocks (`lele_kernels::ops::ggml`)
//! against llama.cpp's Python package (`gguf`, pinned), on the random
//! blocks `cargo xtask fixtures` wrote (`xtask/python/ggml_reference.py`):
//! every element equal bit for bit, NaN where the reference has NaN; and
//! the Q8_0 quantization of activations byte for byte.
use std::path::{Path, PathBuf};

use lele_kernels::ops::ggml::{GgmlType, dequantize, quantize_q8_0};

fn fixtures_dir() -> PathBuf {
    std::env::var_os("LELE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fixtures"))
        .join("ggml")
}

#[test]
fn dequantization_matches_llama_cpp_reference() {
    let types = [
        ("Q4_0", GgmlType::Q4_0),
        ("Q4_1", GgmlType::Q4_1),
        ("Q5_0", GgmlType::Q5_0),
        ("Q5_1", GgmlType::Q5_1),
        ("Q8_0", GgmlType::Q8_0),
        ("Q4_K", GgmlType::Q4K),
        ("Q5_K", GgmlType::Q5K),
        ("Q6_K", GgmlType::Q6K),
    ];
    let dir = fixtures_dir();
    for (name, ty) in types {
        let raw = lele_build::npy::read(&dir.join(format!("{name}.raw.npy")))
            .unwrap_or_else(|e| panic!("{name}: {e} (run `cargo xtask fixtures`)"));
        let want = lele_build::npy::read(&dir.join(format!("{name}.f32.npy"))).unwrap();
        let want: Vec<f32> = want
            .bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let (block, bytes) = ty.block().unwrap();
        assert_eq!(raw.dims[1], bytes, "{name}");
        assert_eq!(want.len(), raw.dims[0] * block, "{name}");
        let mut got = vec![0f32; want.len()];
        dequantize(ty, raw.bytes(), &mut got).unwrap();
        let mut finite = 0;
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{name} element {i} (block {}): {g} vs {w}",
                i / block
            );
            finite += usize::from(w.is_finite() && w != 0.0);
        }
        // Most elements are real values, not NaN or zero.
        assert!(
            finite > want.len() / 2,
            "{name}: {finite} of {}",
            want.len()
        );
    }
}

#[test]
fn q8_0_quantization_matches_llama_cpp_reference() {
    let dir = fixtures_dir();
    let x = lele_build::npy::read(&dir.join("q8_0.in.npy"))
        .unwrap_or_else(|e| panic!("{e} (run `cargo xtask fixtures`)"));
    let want = lele_build::npy::read(&dir.join("q8_0.out.npy")).unwrap();
    let x: Vec<f32> = x
        .bytes()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let mut got = vec![0u8; want.bytes().len()];
    quantize_q8_0(&x, &mut got).unwrap();
    for (b, (g, w)) in got.chunks(34).zip(want.bytes().chunks(34)).enumerate() {
        assert_eq!(g, w, "block {b}");
    }
}
