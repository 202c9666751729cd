//! Seeded, structure-aware fuzzing on stable Rust: five targets (the ONNX
//! loader, the `.npy` reader, the `model.toml` parser, the compiler from
//! bytes to generated tokens and the GGUF reader). Each runs `LELE_FUZZ_CASES` cases (default
//! 5000, the same on every machine) or `LELE_FUZZ_SECS` seconds from
//! `LELE_FUZZ_SEED`; any panic, hang, giant allocation or runaway
//! memory is a finding, written minimized to `target/fuzz-findings/<target>/`
//! and failing the test. `LELE_FUZZ_CASE=<index>` replays one case.
//! `cargo xtask fuzz --secs N [--target T]` runs them long; see
//! `docs/fuzzing.md`.
mod gguf_gen;
mod graphs;
mod harness;
mod mutate;
mod npy_gen;
mod toml_gen;

use std::path::{Path, PathBuf};

use lele_build::onnx::{Limits, proto};
use lele_build::{CompileOptions, ModelToml};
use prost::Message;

use graphs::{attr_i, attr_ints, attr_s, f32_tensor, fixed, i64_tensor, param, s, vi};
use harness::{Rng, Target, label, save_as};

#[global_allocator]
static ALLOC: harness::Counting = harness::Counting;

// ---------------------------------------------------------------- onnx_loader

/// Hand-built seeds covering what random graphs do not: subgraphs, every
/// attribute kind, external and sparse data, metadata, functions.
fn loader_seeds() -> Vec<Vec<u8>> {
    let branch = |name: &str, v: f32| proto::GraphProto {
        name: s(name),
        node: vec![proto::NodeProto {
            op_type: s("Constant"),
            output: vec![format!("{name}_out")],
            attribute: vec![proto::AttributeProto {
                name: s("value"),
                t: Some(f32_tensor("", vec![1], vec![v])),
                r#type: Some(4),
                ..Default::default()
            }],
            ..Default::default()
        }],
        output: vec![vi(&format!("{name}_out"), graphs::F32, Some(&[fixed(1)]))],
        ..Default::default()
    };
    let if_node = proto::NodeProto {
        op_type: s("If"),
        name: s("if"),
        input: vec!["cond".into()],
        output: vec!["y".into()],
        attribute: vec![
            proto::AttributeProto {
                name: s("then_branch"),
                g: Some(branch("then", 1.0)),
                r#type: Some(5),
                ..Default::default()
            },
            proto::AttributeProto {
                name: s("else_branch"),
                g: Some(branch("else", 2.0)),
                r#type: Some(5),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let external = proto::TensorProto {
        name: s("ext"),
        data_type: Some(graphs::F32),
        dims: vec![2, 2],
        data_location: Some(1),
        external_data: vec![
            proto::StringStringEntryProto {
                key: s("location"),
                value: s("w.bin"),
            },
            proto::StringStringEntryProto {
                key: s("offset"),
                value: s("16"),
            },
            proto::StringStringEntryProto {
                key: s("length"),
                value: s("16"),
            },
        ],
        ..Default::default()
    };
    let sparse = proto::SparseTensorProto {
        values: Some(f32_tensor("sp", vec![2], vec![1.0, 2.0])),
        indices: Some(i64_tensor("", vec![2], vec![0, 3])),
        dims: vec![4],
    };
    let all_attrs = proto::NodeProto {
        op_type: s("Custom"),
        domain: s("com.example"),
        input: vec!["x".into(), "ext".into(), "".into()],
        output: vec!["z".into()],
        attribute: vec![
            attr_i("i", 3),
            graphs::attr_f("f", 0.5),
            attr_s("s", "text"),
            attr_ints("ints", vec![1, -1, 1 << 40]),
            proto::AttributeProto {
                name: s("floats"),
                floats: vec![1.0, f32::NAN],
                r#type: Some(6),
                ..Default::default()
            },
            proto::AttributeProto {
                name: s("strings"),
                strings: vec![b"a".to_vec(), vec![0xff, 0]],
                r#type: Some(8),
                ..Default::default()
            },
            proto::AttributeProto {
                name: s("tensors"),
                tensors: vec![i64_tensor("", vec![1], vec![7])],
                r#type: Some(9),
                ..Default::default()
            },
            proto::AttributeProto {
                name: s("ref"),
                ref_attr_name: s("outer"),
                r#type: Some(2),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let model = |nodes: Vec<proto::NodeProto>, extra: &dyn Fn(&mut proto::GraphProto)| {
        let mut g = proto::GraphProto {
            name: s("g"),
            node: nodes,
            input: vec![
                vi("x", graphs::F32, Some(&[param("n"), fixed(2)])),
                vi("cond", graphs::BOOL, Some(&[])),
            ],
            output: vec![vi("y", graphs::F32, None)],
            value_info: vec![vi("mid", graphs::F16, Some(&[fixed(3)]))],
            metadata_props: vec![proto::StringStringEntryProto {
                key: s("k"),
                value: s("v"),
            }],
            ..Default::default()
        };
        extra(&mut g);
        proto::ModelProto {
            ir_version: Some(9),
            producer_name: s("fuzz"),
            opset_import: vec![
                proto::OperatorSetIdProto {
                    domain: s(""),
                    version: Some(17),
                },
                proto::OperatorSetIdProto {
                    domain: s("com.microsoft"),
                    version: Some(1),
                },
            ],
            graph: Some(g),
            functions: vec![proto::FunctionProto {
                name: s("F"),
                domain: s("local"),
                input: vec!["a".into()],
                output: vec!["b".into()],
                node: vec![proto::NodeProto {
                    op_type: s("Relu"),
                    input: vec!["a".into()],
                    output: vec!["b".into()],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec()
    };
    vec![
        model(vec![if_node], &|_| {}),
        model(vec![all_attrs], &|g| {
            g.initializer.push(external.clone());
            g.sparse_initializer.push(sparse.clone());
        }),
        model(
            vec![proto::NodeProto {
                op_type: s("Relu"),
                input: vec!["x".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            &|g| {
                g.initializer.push(proto::TensorProto {
                    name: s("many"),
                    data_type: Some(graphs::F64),
                    dims: vec![3],
                    double_data: vec![1.0, -0.0, f64::INFINITY],
                    ..Default::default()
                });
                g.initializer.push(proto::TensorProto {
                    name: s("strs"),
                    data_type: Some(8),
                    dims: vec![1],
                    string_data: vec![b"x".to_vec()],
                    ..Default::default()
                });
            },
        ),
    ]
}

fn loader_generate(rng: &mut Rng) -> Vec<u8> {
    let seeds = loader_seeds();
    let seed = if rng.chance(1, 3) {
        rng.pick(&seeds).clone()
    } else {
        graphs::generate(rng).model.encode_to_vec()
    };
    if rng.chance(1, 20) {
        return seed;
    }
    mutate::mutate_proto(rng, &seed, &seeds)
}

// The harness passes `&I` with `I = Vec<u8>`.
#[allow(clippy::ptr_arg)]
fn loader_exec(bytes: &Vec<u8>, dir: &Path) -> String {
    let ext = dir.join("w.bin");
    if !ext.exists() {
        std::fs::write(&ext, [0x3fu8; 64]).unwrap();
    }
    let limits = Limits::default();
    let decoded = lele_build::onnx::decode_model_proto(bytes, &limits);
    let Ok(m) = decoded else {
        return label("decode", &decoded);
    };
    label("load", &lele_build::onnx::from_proto(&m, dir, &limits))
}

#[test]
fn onnx_loader() {
    harness::run(Target {
        name: "onnx_loader",
        generate: loader_generate,
        exec: loader_exec,
        save: |b, stem| vec![save_as(stem, "onnx", b)],
        shrink: |b| harness::shrink_bytes(b),
    });
}

// ---------------------------------------------------------------- npy_reader

#[allow(clippy::ptr_arg)]
fn npy_exec(bytes: &Vec<u8>, _dir: &Path) -> String {
    let r = lele_build::npy::parse(bytes);
    if let Ok(t) = &r {
        let _ = t.to_f64s();
        let _ = t.to_i64s();
        let _ = t.view();
        let _ = t.numel();
    }
    label("parse", &r)
}

#[test]
fn npy_reader() {
    harness::run(Target {
        name: "npy_reader",
        generate: npy_gen::generate,
        exec: npy_exec,
        save: |b, stem| vec![save_as(stem, "npy", b)],
        shrink: |b| harness::shrink_bytes(b),
    });
}

// ---------------------------------------------------------------- gguf_reader

/// Parses the header; on success dequantizes every tensor whose type lele
/// reads from the byte range the table gives it.
#[allow(clippy::ptr_arg)]
fn gguf_exec(bytes: &Vec<u8>, _dir: &Path) -> String {
    let r = lele_build::gguf::parse(bytes, bytes.len() as u64, &Default::default());
    if let Ok(g) = &r {
        for t in &g.tensors {
            let (Some((block, size)), Ok(at), Ok(len)) = (
                t.ggml_type.block(),
                usize::try_from(t.offset),
                usize::try_from(t.bytes),
            ) else {
                continue;
            };
            let raw = &bytes[at..at + len];
            let mut out = vec![0f32; len / size * block];
            let _ = lele_kernels::ops::ggml::dequantize(t.ggml_type, raw, &mut out);
        }
    }
    label("parse", &r)
}

#[test]
fn gguf_reader() {
    harness::run(Target {
        name: "gguf_reader",
        generate: gguf_gen::generate,
        exec: gguf_exec,
        save: |b, stem| vec![save_as(stem, "gguf", b)],
        shrink: |b| harness::shrink_bytes(b),
    });
}

// ---------------------------------------------------------------- toml_parser

#[test]
fn toml_parser() {
    harness::run(Target {
        name: "toml_parser",
        generate: toml_gen::generate,
        exec: toml_gen::exec,
        save: |t, stem| vec![save_as(stem, "toml", t.as_bytes())],
        shrink: |t| harness::shrink_text(t),
    });
}

// ---------------------------------------------------------------- compiler

fn compiler_exec(c: &graphs::Case, dir: &Path) -> String {
    let path = dir.join("m.onnx");
    std::fs::write(&path, c.model.encode_to_vec()).unwrap();
    let parsed = ModelToml::parse(&c.toml);
    let Ok(toml) = &parsed else {
        return label("toml", &parsed);
    };
    let out = dir.join("out");
    let r = lele_build::compile_model(&path, toml, &c.toml, &out, &CompileOptions::new("Model"));
    // What lele accepts must be Rust: a rustc error dump on a model is a
    // finding too.
    if let Ok(compiled) = &r
        && let Err(e) = syn::parse2::<syn::File>(compiled.tokens.clone())
    {
        panic!("the generated tokens do not parse as Rust: {e}");
    }
    label("compile", &r)
}

fn compiler_save(c: &graphs::Case, stem: &Path) -> Vec<PathBuf> {
    vec![
        save_as(stem, "onnx", &c.model.encode_to_vec()),
        save_as(stem, "toml", c.toml.as_bytes()),
        save_as(stem, "txt", format!("{:#?}", c.model).as_bytes()),
    ]
}

#[test]
fn compiler() {
    harness::run(Target {
        name: "compiler",
        generate: graphs::generate,
        exec: compiler_exec,
        save: compiler_save,
        shrink: graphs::shrink,
    });
}
