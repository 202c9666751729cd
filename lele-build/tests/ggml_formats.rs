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
        let want = want.to_f32s().unwrap();
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
    let x = x.to_f32s().unwrap();
    let mut got = vec![0u8; want.bytes().len()];
    quantize_q8_0(&x, &mut got).unwrap();
    for (b, (g, w)) in got.chunks(34).zip(want.bytes().chunks(34)).enumerate() {
        assert_eq!(g, w, "block {b}");
    }
}

/// Gemma 3 270M Q4_K_M from the zoo: the header as llama.cpp writes it,
/// every tensor of a type lele dequantizes, and for the first tensor of
/// each quantized type, the quantized dot product of its first rows with
/// quantized activations against the f64 dot of the dequantized rows.
#[test]
fn gemma_3_270m_header_and_rows() {
    use lele_build::gguf::{Limits, Value, read_header};
    use lele_kernels::ops::ggml::{activation_type, quantize_q8_k, vec_dot};
    use std::io::{Read, Seek, SeekFrom};
    let path = lele_build::config::zoo_dir().join("gemma-3-270m-q4_k_m.gguf");
    let g = read_header(&path, &Limits::default())
        .unwrap_or_else(|e| panic!("{e} (run `cargo xtask models`)"));
    assert_eq!(g.architecture(), Some("gemma3"));
    assert_eq!(g.get("gemma3.block_count"), Some(&Value::U32(18)));
    assert_eq!(g.get("gemma3.embedding_length"), Some(&Value::U32(640)));
    assert_eq!(g.tensors.len(), 236);
    let mut file = std::fs::File::open(&path).unwrap();
    let mut seen = Vec::new();
    for t in &g.tensors {
        let (block, size) = t.ggml_type.block().unwrap();
        let row = t.dims[0] as usize;
        let rows = (t.elements() as usize / row).min(2);
        let mut raw = vec![0u8; rows * row / block * size];
        file.seek(SeekFrom::Start(t.offset)).unwrap();
        file.read_exact(&mut raw).unwrap();
        let mut w = vec![0f32; rows * row];
        dequantize(t.ggml_type, &raw, &mut w).unwrap_or_else(|e| panic!("{}: {e}", t.name));
        assert!(w.iter().all(|v| v.is_finite()), "{}", t.name);
        let Some(aty) = activation_type(t.ggml_type) else {
            continue;
        };
        if seen.contains(&t.ggml_type) {
            continue;
        }
        seen.push(t.ggml_type);
        let (ablock, asize) = aty.block().unwrap();
        let x: Vec<f32> = (0..row)
            .map(|i| ((i * 7919) % 113) as f32 / 29.0 - 1.9)
            .collect();
        let mut a = vec![0u8; row / ablock * asize];
        if aty == GgmlType::Q8_0 {
            quantize_q8_0(&x, &mut a).unwrap();
        } else {
            quantize_q8_k(&x, &mut a).unwrap();
        }
        let mut af = vec![0f32; row];
        dequantize(aty, &a, &mut af).unwrap();
        for r in 0..rows {
            let wrow = &raw[r * row / block * size..(r + 1) * row / block * size];
            let got = vec_dot(t.ggml_type, wrow, &a).unwrap() as f64;
            let terms = w[r * row..(r + 1) * row]
                .iter()
                .zip(&af)
                .map(|(&p, &q)| p as f64 * q as f64);
            let (exact, scale) = terms.fold((0.0, 0.0), |(s, m), v| (s + v, m + v.abs()));
            assert!(
                (got - exact).abs() <= 1e-5 * scale + 1e-9,
                "{} row {r}: {got} vs {exact}",
                t.name
            );
        }
    }
    seen.sort_by_key(|t| format!("{t:?}"));
    assert_eq!(
        seen,
        [GgmlType::Q4K, GgmlType::Q5_0, GgmlType::Q6K, GgmlType::Q8_0]
    );
}

/// Gemma 3 270M's decoder configuration from its metadata, every weight
/// present with the dimensions it implies.
#[test]
fn gemma_3_270m_decoder_config() {
    use lele_build::gguf::{Arch, Limits, decoder_config, read_header};
    let path = lele_build::config::zoo_dir().join("gemma-3-270m-q4_k_m.gguf");
    let g = read_header(&path, &Limits::default())
        .unwrap_or_else(|e| panic!("{e} (run `cargo xtask models`)"));
    let c = decoder_config(&g).unwrap();
    assert_eq!(c.arch, Arch::Gemma3);
    assert_eq!(
        (
            c.layers,
            c.width,
            c.heads,
            c.kv_heads,
            c.head_dim,
            c.value_dim,
            c.ffn
        ),
        (18, 640, 4, 1, 256, 256, 2048)
    );
    assert_eq!(
        (c.vocab, c.context, c.sliding_window),
        (262_144, 32_768, 512)
    );
    assert_eq!((c.eps, c.rope_base, c.rope_base_local), (1e-6, 1e6, 1e4));
    assert!(c.tied_embeddings);
    let global: Vec<usize> = (0..c.layers).filter(|&l| !c.is_local(l)).collect();
    assert_eq!(global, [5, 11, 17]);
}
