use super::*;

/// Builds GGUF bytes (version 3) the way llama.cpp's writer lays them out.
#[derive(Default)]
struct Writer {
    meta: Vec<(String, Vec<u8>)>,
    tensors: Vec<(String, Vec<u64>, u32, u64)>,
    alignment: Option<u32>,
    data_len: u64,
    /// Data bytes written, when not up to the last tensor's end.
    data_end: Option<u64>,
}

fn string(s: &str) -> Vec<u8> {
    let mut out = (s.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

impl Writer {
    fn meta(&mut self, key: &str, code: u32, value: Vec<u8>) -> &mut Self {
        let mut v = code.to_le_bytes().to_vec();
        v.extend(value);
        self.meta.push((key.into(), v));
        self
    }

    fn tensor(&mut self, name: &str, dims: &[u64], code: u32) -> &mut Self {
        let align = u64::from(self.alignment.unwrap_or(32));
        let bytes = data_bytes(dims, GgmlType::from_code(code)).unwrap();
        let offset = self.data_len;
        self.data_len = (offset + bytes).next_multiple_of(align);
        self.tensors
            .push((name.into(), dims.to_vec(), code, offset));
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.meta.len() as u64).to_le_bytes());
        for (k, v) in &self.meta {
            out.extend(string(k));
            out.extend(v);
        }
        for (name, dims, code, offset) in &self.tensors {
            out.extend(string(name));
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(code.to_le_bytes());
            out.extend(offset.to_le_bytes());
        }
        let align = self.alignment.unwrap_or(32) as usize;
        out.resize(out.len().next_multiple_of(align), 0);
        // Data up to the last tensor's end (no padding after it), each
        // byte its offset's low bits, so ranges are told apart.
        let end = self
            .tensors
            .iter()
            .map(|(_, dims, code, offset)| {
                offset.saturating_add(data_bytes(dims, GgmlType::from_code(*code)).unwrap_or(0))
            })
            .max()
            .unwrap_or(0);
        out.extend((0..self.data_end.unwrap_or(end)).map(|i| i as u8));
        out
    }
}

/// A small model-like file: metadata of every value type (an array of
/// strings, a nested array) and tensors of plain and quantized types.
fn sample() -> Writer {
    let mut w = Writer::default();
    w.meta("general.architecture", 8, string("gemma3"))
        .meta("gemma3.block_count", 4, 18u32.to_le_bytes().to_vec())
        .meta("gemma3.rope.freq_base", 6, 1e6f32.to_le_bytes().to_vec())
        .meta("u8", 0, vec![7])
        .meta("i8", 1, vec![0xff])
        .meta("u16", 2, 513u16.to_le_bytes().to_vec())
        .meta("i16", 3, (-2i16).to_le_bytes().to_vec())
        .meta("i32", 5, (-3i32).to_le_bytes().to_vec())
        .meta("bool", 7, vec![1])
        .meta("u64", 10, (1u64 << 40).to_le_bytes().to_vec())
        .meta("i64", 11, (-5i64).to_le_bytes().to_vec())
        .meta("f64", 12, 0.25f64.to_le_bytes().to_vec());
    let mut tokens = 8u32.to_le_bytes().to_vec();
    tokens.extend(3u64.to_le_bytes());
    for t in ["<pad>", "▁the", "é"] {
        tokens.extend(string(t));
    }
    w.meta("tokenizer.ggml.tokens", 9, tokens);
    let mut nested = 9u32.to_le_bytes().to_vec();
    nested.extend(2u64.to_le_bytes());
    for n in [1u64, 2] {
        nested.extend(4u32.to_le_bytes());
        nested.extend(n.to_le_bytes());
        for i in 0..n {
            nested.extend((i as u32).to_le_bytes());
        }
    }
    w.meta("nested", 9, nested);
    w.tensor("token_embd.weight", &[256, 3], 12) // Q4_K
        .tensor("blk.0.attn_q.weight", &[64, 2], 8) // Q8_0
        .tensor("blk.0.ffn_down.weight", &[32, 1], 6) // Q5_0
        .tensor("blk.0.attn_norm.weight", &[5], 0) // F32
        .tensor("output.weight", &[256, 1], 14); // Q6_K
    w
}

#[test]
fn reads_metadata_and_tensor_table() {
    let bytes = sample().bytes();
    let g = parse(&bytes, bytes.len() as u64, &Limits::default()).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(g.architecture(), Some("gemma3"));
    assert_eq!(g.get("gemma3.block_count"), Some(&Value::U32(18)));
    assert_eq!(g.get("gemma3.rope.freq_base"), Some(&Value::F32(1e6)));
    assert_eq!(g.get("i8"), Some(&Value::I8(-1)));
    assert_eq!(g.get("u16"), Some(&Value::U16(513)));
    assert_eq!(g.get("bool"), Some(&Value::Bool(true)));
    assert_eq!(g.get("u64").and_then(Value::as_u64), Some(1 << 40));
    assert_eq!(g.get("i64").and_then(Value::as_u64), None);
    assert_eq!(g.get("f64"), Some(&Value::F64(0.25)));
    assert_eq!(
        g.get("tokenizer.ggml.tokens"),
        Some(&Value::Array(
            8,
            vec![
                Value::String("<pad>".into()),
                Value::String("▁the".into()),
                Value::String("é".into())
            ]
        ))
    );
    assert_eq!(
        g.get("nested"),
        Some(&Value::Array(
            9,
            vec![
                Value::Array(4, vec![Value::U32(0)]),
                Value::Array(4, vec![Value::U32(0), Value::U32(1)])
            ]
        ))
    );
    assert_eq!(g.alignment, 32);
    assert_eq!(g.data_start % 32, 0);
    let t = &g.tensors;
    assert_eq!(t.len(), 5);
    assert_eq!(t[0].name, "token_embd.weight");
    assert_eq!(t[0].ggml_type, GgmlType::Q4K);
    assert_eq!(t[0].dims, [256, 3]);
    assert_eq!(t[0].elements(), 768);
    assert_eq!(t[0].bytes, 3 * 144);
    assert_eq!(t[0].offset, g.data_start);
    // Q8_0: 2 rows of 2 blocks of 34 bytes; Q5_0: one block of 22; F32:
    // 5 floats; Q6_K: one super-block of 210. Each starts aligned.
    assert_eq!((t[1].ggml_type, t[1].bytes), (GgmlType::Q8_0, 4 * 34));
    assert_eq!((t[2].ggml_type, t[2].bytes), (GgmlType::Q5_0, 22));
    assert_eq!((t[3].ggml_type, t[3].bytes), (GgmlType::F32, 20));
    assert_eq!((t[4].ggml_type, t[4].bytes), (GgmlType::Q6K, 210));
    for w in t.windows(2) {
        assert_eq!(w[1].offset, (w[0].offset + w[0].bytes).next_multiple_of(32));
    }
    // The data are where the table says: the writer filled each byte with
    // its data offset's low bits.
    let first = t[1].offset as usize;
    assert_eq!(bytes[first], (first - g.data_start as usize) as u8);
}

#[test]
fn a_custom_alignment_moves_the_data() {
    let mut w = sample();
    w.alignment = Some(64);
    w.meta.push(("general.alignment".into(), {
        let mut v = 4u32.to_le_bytes().to_vec();
        v.extend(64u32.to_le_bytes());
        v
    }));
    // Offsets were computed at 32 by `sample`: lay the tensors out again.
    let tensors = std::mem::take(&mut w.tensors);
    w.data_len = 0;
    for (name, dims, code, _) in tensors {
        w.tensor(&name, &dims, code);
    }
    let bytes = w.bytes();
    let g = parse(&bytes, bytes.len() as u64, &Limits::default()).unwrap();
    assert_eq!(g.alignment, 64);
    assert_eq!(g.data_start % 64, 0);
    assert!(
        g.tensors
            .iter()
            .all(|t| (t.offset - g.data_start).is_multiple_of(64))
    );
}

/// Every prefix of a valid file is an error (not a panic), and one that
/// stops inside the header says it ran out of bytes.
#[test]
fn every_truncation_is_an_error() {
    let bytes = sample().bytes();
    let g = parse(&bytes, bytes.len() as u64, &Limits::default()).unwrap();
    for len in 0..bytes.len() {
        let cut = &bytes[..len];
        assert!(parse(cut, len as u64, &Limits::default()).is_err(), "{len}");
        // The same bytes as the start of the longer file.
        let (r, ran_out) = parse_prefix(cut, bytes.len() as u64, &Limits::default());
        if len < g.data_start as usize - 32 {
            assert!(r.is_err() && ran_out, "{len}");
        }
    }
}

/// Flipped bytes anywhere in a valid file: an error or a header, never a
/// panic, and never a tensor whose data fall outside the file.
#[test]
fn corrupted_files_never_panic() {
    let bytes = sample().bytes();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..4000 {
        let mut b = bytes.clone();
        for _ in 0..1 + rand() % 4 {
            let at = (rand() % b.len() as u64) as usize;
            b[at] = match rand() % 3 {
                0 => rand() as u8,
                1 => 0xff,
                _ => 0,
            };
        }
        if let Ok(g) = parse(&b, b.len() as u64, &Limits::default()) {
            for t in &g.tensors {
                assert!(t.offset + t.bytes <= b.len() as u64);
            }
        }
    }
}

fn err_of(bytes: &[u8]) -> String {
    parse(bytes, bytes.len() as u64, &Limits::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn hostile_headers_are_refused_with_a_reason() {
    let header = |version: u32, tensors: u64, meta: u64| {
        let mut b = b"GGUF".to_vec();
        b.extend(version.to_le_bytes());
        b.extend(tensors.to_le_bytes());
        b.extend(meta.to_le_bytes());
        b
    };
    assert!(err_of(b"GGML\x03\0\0\0").contains("magic"));
    assert!(err_of(&header(1, 0, 0)).contains("version 1"));
    assert!(err_of(&header(3, u64::MAX, 0)).contains("limit"));
    assert!(err_of(&header(3, 1000, 1000)).contains("more than the file holds"));
    // A string claiming more bytes than the file has.
    let mut b = header(3, 0, 1);
    b.extend((1u64 << 19).to_le_bytes());
    b.extend(b"key");
    b.extend([0; 16]);
    assert!(err_of(&b).contains("needs 524288 bytes"));
    // An array claiming 2^60 elements.
    let mut b = header(3, 0, 1);
    b.extend(string("a"));
    b.extend(9u32.to_le_bytes());
    b.extend(4u32.to_le_bytes());
    b.extend((1u64 << 60).to_le_bytes());
    assert!(err_of(&b).contains("more than the file holds"));
    // Arrays nested past the limit.
    let mut b = header(3, 0, 1);
    b.extend(string("deep"));
    b.extend(9u32.to_le_bytes());
    for _ in 0..6 {
        b.extend(9u32.to_le_bytes());
        b.extend(1u64.to_le_bytes());
    }
    b.extend(vec![0; 64]);
    assert!(err_of(&b).contains("nested"));
    // A bool that is neither 0 nor 1, an unknown value type, invalid UTF-8.
    for (code, value, says) in [
        (7u32, vec![2u8], "bool"),
        (13, vec![0; 8], "unknown value type 13"),
        (
            8,
            [2u64.to_le_bytes().to_vec(), vec![0xc3, 0x28]].concat(),
            "UTF-8",
        ),
    ] {
        let mut b = header(3, 0, 1);
        b.extend(string("k"));
        b.extend(code.to_le_bytes());
        b.extend(value);
        b.extend(vec![0; 16]);
        assert!(err_of(&b).contains(says), "{says}: {}", err_of(&b));
    }
}

#[test]
fn hostile_tensor_tables_are_refused_with_a_reason() {
    let with = |f: &dyn Fn(&mut Writer)| {
        let mut w = sample();
        f(&mut w);
        err_of(&w.bytes())
    };
    assert!(with(&|w| w.tensors[1].0 = w.tensors[0].0.clone()).contains("appears twice"));
    assert!(with(&|w| w.meta[1].0 = w.meta[0].0.clone()).contains("appears twice"));
    assert!(with(&|w| w.tensors[0].1 = vec![]).contains("0 dimensions"));
    assert!(with(&|w| w.tensors[0].1 = vec![256, 1, 1, 1, 1]).contains("5 dimensions"));
    assert!(with(&|w| w.tensors[3].1 = vec![1 << 40, 1 << 40]).contains("overflows"));
    assert!(with(&|w| w.tensors[0].1 = vec![100, 3]).contains("multiple of Q4K's block"));
    assert!(with(&|w| w.tensors[1].3 += 4).contains("not a multiple of the alignment"));
    assert!(
        with(&|w| {
            w.data_end = Some(2000);
            w.tensors[4].3 += 1 << 20;
        })
        .contains("past the file")
    );
    assert!(
        with(&|w| {
            w.data_end = Some(2000);
            w.tensors[4].3 = u64::MAX - 31;
        })
        .contains("past the file")
    );
    assert!(with(&|w| w.tensors[2].3 = w.tensors[1].3).contains("overlap"));
    assert!(with(&|w| w.tensors[2].2 = 23).contains("no known block size"));
    let bad_alignment = with(&|w| {
        w.meta.push(("general.alignment".into(), {
            let mut v = 4u32.to_le_bytes().to_vec();
            v.extend(48u32.to_le_bytes());
            v
        }));
    });
    assert!(
        bad_alignment.contains("general.alignment"),
        "{bad_alignment}"
    );
}

/// `read_header` over a file whose header is longer than its first read
/// (a large vocabulary), and on a file that is not GGUF.
#[test]
fn read_header_reads_past_its_first_megabyte() {
    let mut w = sample();
    let mut tokens = 8u32.to_le_bytes().to_vec();
    let n = 200_000u64;
    tokens.extend(n.to_le_bytes());
    for i in 0..n {
        tokens.extend(string(&format!("tok{i}")));
    }
    w.meta("tokenizer.ggml.big", 9, tokens);
    let bytes = w.bytes();
    assert!(bytes.len() > 2 << 20);
    let dir = std::env::temp_dir().join(format!("lele-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let g = read_header(&path, &Limits::default()).unwrap();
    assert_eq!(
        g,
        parse(&bytes, bytes.len() as u64, &Limits::default()).unwrap()
    );
    match g.get("tokenizer.ggml.big") {
        Some(Value::Array(8, items)) => assert_eq!(items.len(), n as usize),
        v => panic!("{v:?}"),
    }
    std::fs::write(&path, b"not a model").unwrap();
    let e = read_header(&path, &Limits::default()).unwrap_err();
    assert!(e.to_string().contains("magic"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file that says `gemma3` but lacks most of a decoder: one error that
/// lists every missing key and tensor, and one for a tensor of the wrong
/// shape and heads that do not group.
#[test]
fn a_broken_decoder_reports_every_problem_at_once() {
    let bytes = sample().bytes();
    let g = parse(&bytes, bytes.len() as u64, &Limits::default()).unwrap();
    let e = decoder_config(&g).unwrap_err().to_string();
    for says in [
        "no `gemma3.embedding_length`",
        "no `gemma3.attention.head_count`",
        "no `gemma3.attention.layer_norm_rms_epsilon`",
        "no tensor `output_norm.weight`",
        "no tensor `blk.17.ffn_down.weight`",
        "tensor `token_embd.weight` is [256, 3]",
    ] {
        assert!(e.contains(says), "{says} not in: {e}");
    }
    let mut w = Writer::default();
    w.meta("general.architecture", 8, string("llama"));
    let bytes = w.bytes();
    let g = parse(&bytes, bytes.len() as u64, &Limits::default()).unwrap();
    let e = decoder_config(&g).unwrap_err().to_string();
    assert!(e.contains("architecture `llama` is not supported"), "{e}");
}
