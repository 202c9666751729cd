//! The adversarial corpus: hostile models and tomls, generated here (no
//! committed binaries), each of which must give an error — never a panic,
//! an abort, a hang or gigabytes of memory — through the library and through
//! the `lele` binary. One case per class of issue 50 that concerns the
//! compiler, and per boundary where a limit has one.
use std::path::PathBuf;
use std::process::Command;

use lele_build::onnx::proto;

// The frontend tests' model builders (their other helpers go unused here).
#[allow(dead_code)]
#[path = "frontend/builders.rs"]
mod builders;
use builders::{i64_init, int_attr, model, node, s};
use lele_build::{BuildError, CompileOptions, ModelToml};
use prost::Message;

fn tensor_type(elem: i32, dims: &[i64]) -> proto::TypeProto {
    use proto::tensor_shape_proto::{Dimension, dimension};
    proto::TypeProto {
        value: Some(proto::type_proto::Value::TensorType(
            proto::type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(proto::TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(if d < 0 {
                                dimension::Value::DimParam("n".into())
                            } else {
                                dimension::Value::DimValue(d)
                            }),
                            ..Default::default()
                        })
                        .collect(),
                }),
            },
        )),
        ..Default::default()
    }
}

/// A value info; a negative dim is the dynamic dim `n`.
fn vi(name: &str, elem: i32, dims: &[i64]) -> proto::ValueInfoProto {
    proto::ValueInfoProto {
        name: s(name),
        r#type: Some(tensor_type(elem, dims)),
        ..Default::default()
    }
}

fn work_dir(case: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lele-hostile-{}-{case}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `bytes` as `m.onnx` beside a toml of `extra` lines and compiles it
/// through the library.
fn compile_bytes(case: &str, bytes: &[u8], extra: &str) -> lele_build::Result<usize> {
    let dir = work_dir(case);
    let path = dir.join("m.onnx");
    std::fs::write(&path, bytes).unwrap();
    let text = format!("[model]\npath = \"m.onnx\"\n{extra}\n");
    let toml = ModelToml::parse(&text)?;
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let r = lele_build::compile_model(&path, &toml, &text, &out, &CompileOptions::new("Model"))
        .map(|c| c.signature.arena_bytes as usize);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn compile(case: &str, m: &proto::ModelProto, extra: &str) -> lele_build::Result<usize> {
    compile_bytes(case, &m.encode_to_vec(), extra)
}

/// `lele gen` on the model: must exit 1 with a message (not 101, a panic,
/// nor a signal); returns its standard error.
fn cli_refuses(case: &str, bytes: &[u8], toml_extra: &str) -> String {
    let dir = work_dir(&format!("cli-{case}"));
    let path = dir.join("m.onnx");
    std::fs::write(&path, bytes).unwrap();
    let toml = dir.join("m.toml");
    std::fs::write(&toml, format!("[model]\npath = \"m.onnx\"\n{toml_extra}\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lele"))
        .arg("gen")
        .arg(&path)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--toml")
        .arg(&toml)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{case}: {stderr}");
    assert!(!stderr.contains("panicked"), "{case}: {stderr}");
    stderr
}

const F32: i32 = 1;
const I64: i32 = 7;
const HUGE: i64 = 1 << 32;

/// `ConstantOfShape([2^32, 2^32])` (2^64 elements: the count wraps to 0 in
/// unchecked arithmetic) read by `op`, optionally mixed with a model input so
/// that nothing folds and the sizing pass sees it.
fn huge_into(
    op: &str,
    extra_inputs: &[&str],
    inits: Vec<proto::TensorProto>,
    attrs: Vec<proto::AttributeProto>,
    with_input: bool,
) -> proto::ModelProto {
    let mut nodes = vec![node("ConstantOfShape", &["shape"], &["big"], vec![])];
    let mut first = "big";
    let mut inputs = vec![];
    if with_input {
        nodes.push(node("Add", &["big", "x"], &["mixed"], vec![]));
        first = "mixed";
        inputs.push(vi("x", F32, &[1]));
    }
    let mut ins = vec![first];
    ins.extend_from_slice(extra_inputs);
    nodes.push(node(op, &ins, &["y"], attrs));
    let mut all_inits = vec![i64_init("shape", &[HUGE, HUGE])];
    all_inits.extend(inits);
    model(nodes, all_inits, inputs, vec![vi("y", F32, &[])])
}

/// Class 1: element counts that wrap, through every op the issue names, both
/// folded at build time and sized with an input in the way.
#[test]
fn wrapped_element_counts_are_errors() {
    type Case<'a> = (
        &'a str,
        Vec<&'a str>,
        Vec<proto::TensorProto>,
        Vec<proto::AttributeProto>,
    );
    let cases: Vec<Case<'_>> = vec![
        ("CumSum", vec!["axis"], vec![i64_init("axis", &[0])], vec![]),
        ("Gather", vec!["idx"], vec![i64_init("idx", &[0])], vec![]),
        (
            "GatherElements",
            vec!["idx2"],
            vec![proto::TensorProto {
                dims: vec![1, 1],
                ..i64_init("idx2", &[0])
            }],
            vec![],
        ),
        ("ReduceSum", vec![], vec![], vec![]),
        ("ReduceMax", vec![], vec![], vec![]),
        ("ArgMax", vec![], vec![], vec![]),
        (
            "Slice",
            vec!["st", "en"],
            vec![i64_init("st", &[0]), i64_init("en", &[1])],
            vec![],
        ),
        ("TopK", vec!["k"], vec![i64_init("k", &[1])], vec![]),
        ("Expand", vec!["sh"], vec![i64_init("sh", &[1, 1])], vec![]),
        ("Softmax", vec![], vec![], vec![]),
        ("Tile", vec!["rep"], vec![i64_init("rep", &[1, 2])], vec![]),
        ("Relu", vec![], vec![], vec![]),
        ("Transpose", vec![], vec![], vec![]),
        ("Reshape", vec!["rs"], vec![i64_init("rs", &[-1])], vec![]),
        (
            "Pad",
            vec!["pads"],
            vec![i64_init("pads", &[0, 0, 1, 1])],
            vec![],
        ),
        ("Concat", vec!["big"], vec![], vec![int_attr("axis", 0)]),
        ("Flatten", vec![], vec![], vec![]),
        ("Shape", vec![], vec![], vec![]),
        ("Size", vec![], vec![], vec![]),
    ];
    for (op, extra, inits, attrs) in cases {
        for with_input in [false, true] {
            let m = huge_into(op, &extra, inits.clone(), attrs.clone(), with_input);
            // Shape and Size of a huge value are small and legitimate.
            match compile(op, &m, "") {
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!msg.is_empty(), "{op}");
                }
                Ok(_) if op == "Shape" || op == "Size" => {}
                Ok(arena) => {
                    panic!("{op} (input: {with_input}): compiled with a {arena}-byte arena")
                }
            }
        }
    }
}

/// An empty tensor may have a huge extent beside its zero (`[2^40, 3, 0]`
/// holds no element and is addressable). A fuzzing finding: folding
/// `CumSum` over one looped over the 2^40 outer rows of nothing for
/// seconds to hours. Each op here folds such a constant and must finish (with
/// a result or an error) well within the deadline; a kernel that loops over
/// the outer extent would take minutes or more.
#[test]
fn empty_tensors_with_a_huge_extent_finish_promptly() {
    type Case<'a> = (
        &'a str,
        Vec<&'a str>,
        Vec<proto::TensorProto>,
        Vec<proto::AttributeProto>,
    );
    let axis1 = || vec![int_attr("axis", 1)];
    let mut slow = vec![];
    let cases: Vec<Case<'_>> = vec![
        ("CumSum", vec!["one"], vec![i64_init("one", &[1])], vec![]),
        ("ArgMax", vec![], vec![], axis1()),
        ("ArgMin", vec![], vec![], vec![int_attr("axis", 2)]),
        ("TopK", vec!["k"], vec![i64_init("k", &[2])], axis1()),
        (
            "Compress",
            vec!["cond"],
            vec![proto::TensorProto {
                data_type: Some(9),
                int32_data: vec![1, 0, 1],
                int64_data: vec![],
                ..i64_init("cond", &[0, 0, 0])
            }],
            axis1(),
        ),
        ("Softmax", vec![], vec![], axis1()),
        ("LogSoftmax", vec![], vec![], vec![int_attr("axis", 0)]),
        ("Hardmax", vec![], vec![], axis1()),
        (
            "ReduceSum",
            vec!["one"],
            vec![i64_init("one", &[1])],
            vec![],
        ),
        ("ReduceMax", vec![], vec![], vec![]),
        ("Trilu", vec![], vec![], vec![]),
        ("Transpose", vec![], vec![], vec![]),
        ("Concat", vec!["big"], vec![], axis1()),
        ("Split", vec![], vec![], axis1()),
        (
            "Gather",
            vec!["idx"],
            vec![i64_init("idx", &[2, 0])],
            axis1(),
        ),
        (
            "Tile",
            vec!["rep"],
            vec![i64_init("rep", &[1, 2, 3])],
            vec![],
        ),
        (
            "Pad",
            vec!["pads"],
            vec![i64_init("pads", &[0, 1, 0, 0, 1, 0])],
            vec![],
        ),
        ("LpNormalization", vec![], vec![], axis1()),
        ("InstanceNormalization", vec!["sc", "sc"], vec![], vec![]),
        (
            "MeanVarianceNormalization",
            vec![],
            vec![],
            vec![proto::AttributeProto {
                name: s("axes"),
                ints: vec![0, 2],
                r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
                ..Default::default()
            }],
        ),
    ];
    for (op, extra, mut inits, attrs) in cases {
        let mut nodes = vec![node("ConstantOfShape", &["shape"], &["big"], vec![])];
        let mut ins = vec!["big"];
        ins.extend_from_slice(&extra);
        let outs: &[&str] = if op == "TopK" { &["y", "yi"] } else { &["y"] };
        nodes.push(node(op, &ins, outs, attrs));
        inits.push(i64_init("shape", &[1 << 40, 3, 0]));
        if op == "InstanceNormalization" {
            inits.push(proto::TensorProto {
                name: s("sc"),
                dims: vec![3],
                data_type: Some(F32),
                float_data: vec![1.0; 3],
                ..Default::default()
            });
        }
        let m = model(nodes, inits, vec![], vec![vi("y", F32, &[])]);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = compile(&format!("empty-huge-{op}"), &m, "").map_err(|e| e.to_string());
            let _ = tx.send(r);
        });
        // A panic drops the sender: the receiver says so at once.
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(_) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{op} panicked"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => slow.push(op),
        }
    }
    assert!(
        slow.is_empty(),
        "over an empty [2^40, 3, 0], no result in 60 s: {slow:?}"
    );
}

/// A fuzzing finding (onnx_loader, case 355630): an opset-11 `Softmax`
/// over a non-last axis with no outputs indexed its first output while
/// lowering. Such a node computes nothing anyone reads and is dropped as
/// dead (before the fix the compiler panicked on it).
#[test]
fn a_node_without_outputs_does_not_panic() {
    let mut softmax = node("Softmax", &["x"], &["y"], vec![int_attr("axis", 0)]);
    softmax.output.clear();
    let mut m = model(
        vec![softmax],
        vec![],
        vec![vi("x", F32, &[2, 3])],
        vec![vi("x", F32, &[2, 3])],
    );
    m.opset_import[0].version = Some(11);
    compile("softmax-no-outputs", &m, "").unwrap();
}

fn ints(name: &str, v: &[i64]) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        ints: v.to_vec(),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ..Default::default()
    }
}

/// Fuzzing findings of the compiler target (cases 2045094, 2831532,
/// 3271294, 2469167, 3045191, 2526883): products of hostile attributes
/// (pads of 2^40, strides of 2^62) in the convolutions' staging layout and
/// output size, and empty constants of non-addressable shape (`[0, 2^62]`)
/// folded into kernels that multiply their other dims. Each is an error
/// now (the padded input and every folded value must be addressable).
#[test]
fn hostile_geometry_is_an_error() {
    let x = builders::f32_ramp("x", &[1, 2, 4, 4], 0.5);
    let w = builders::f32_ramp("w", &[2, 2, 1, 1], 0.25);
    let conv = |attrs: Vec<proto::AttributeProto>| {
        model(
            vec![node("Conv", &["x", "w"], &["y"], attrs)],
            vec![x.clone(), w.clone()],
            vec![],
            vec![vi("y", F32, &[])],
        )
    };
    let big = 1i64 << 40;
    // Each case and the words its error must hold.
    for (case, m, says) in [
        (
            "conv-pads",
            conv(vec![ints("pads", &[big, big, big, big])]),
            "padded input is larger than this machine can address",
        ),
        (
            "conv-pads-w",
            conv(vec![ints("pads", &[0, big, 0, big])]),
            "max_arena_bytes",
        ),
        (
            "convtranspose-strides",
            model(
                vec![node(
                    "ConvTranspose",
                    &["x", "w"],
                    &["y"],
                    vec![ints("strides", &[1 << 62, 1 << 62])],
                )],
                vec![x.clone(), w.clone()],
                vec![],
                vec![vi("y", F32, &[])],
            ),
            "more bytes than this machine can address",
        ),
    ] {
        let e = compile(case, &m, "").unwrap_err();
        assert!(e.to_string().contains(says), "{case}: {e}");
    }
    for op in ["Trilu", "Softmax", "Relu"] {
        let m = model(
            vec![
                node("ConstantOfShape", &["shape"], &["big"], vec![]),
                node(op, &["big"], &["y"], vec![]),
            ],
            vec![i64_init("shape", &[3, 0, 1 << 62])],
            vec![],
            vec![vi("y", F32, &[])],
        );
        let e = compile(&format!("empty-wide-{op}"), &m, "").unwrap_err();
        assert!(
            e.to_string()
                .contains("too large to evaluate at build time"),
            "{op}: {e}"
        );
    }
}

/// Class 1: `Tile` by 2^62 and `Expand` to 2^62 wrap in the op's own
/// shape arithmetic.
#[test]
fn shape_arithmetic_past_usize_is_an_error() {
    let tile = model(
        vec![node("Tile", &["x", "rep"], &["y"], vec![])],
        vec![i64_init("rep", &[1 << 62])],
        vec![vi("x", F32, &[4])],
        vec![vi("y", F32, &[-1])],
    );
    assert!(compile("tile", &tile, "").is_err());
    let folded_tile = model(
        vec![
            node("ConstantOfShape", &["four"], &["c"], vec![]),
            node("Tile", &["c", "rep"], &["y"], vec![]),
        ],
        vec![i64_init("four", &[4]), i64_init("rep", &[1 << 62])],
        vec![],
        vec![vi("y", F32, &[-1])],
    );
    assert!(compile("tile-folded", &folded_tile, "").is_err());
    let range = model(
        vec![node("Range", &["a", "b", "d"], &["y"], vec![])],
        vec![
            proto::TensorProto {
                dims: vec![],
                ..i64_init("a", &[0])
            },
            proto::TensorProto {
                dims: vec![],
                ..i64_init("b", &[i64::MAX])
            },
            proto::TensorProto {
                dims: vec![],
                ..i64_init("d", &[1])
            },
        ],
        vec![],
        vec![vi("y", I64, &[-1])],
    );
    assert!(compile("range", &range, "").is_err());
}

/// Class 1 and 5: an input dim or a bound near 2^62 must not plan a tiny
/// arena.
#[test]
fn huge_input_dims_and_bounds_are_errors() {
    let relu = |dims: &[i64]| {
        model(
            vec![node("Relu", &["x"], &["y"], vec![])],
            vec![],
            vec![vi("x", F32, dims)],
            vec![vi("y", F32, dims)],
        )
    };
    let e = compile("declared", &relu(&[1 << 31, 1 << 31, 4]), "").unwrap_err();
    assert!(matches!(e, BuildError::Limit(_)), "{e}");
    let e = compile(
        "bound",
        &relu(&[-1]),
        "[inputs]\nx = [\"n <= 4611686018427387904\"]",
    )
    .unwrap_err();
    assert!(matches!(e, BuildError::Limit(_)), "{e}");
    // Within the default cap it compiles.
    compile("bound-ok", &relu(&[-1]), "[inputs]\nx = [\"n <= 1024\"]").unwrap();
    // A fuzzing finding: the shape reached the kernel's shape inference,
    // whose opset-7 Hardmax multiplies the dims from its axis on (4 · (2^64
    // - 1) overflowed). Shapes are now checked before any kernel sees them.
    let mut hardmax = model(
        vec![node("Hardmax", &["x"], &["y"], vec![])],
        vec![],
        vec![vi("x", F32, &[5, 4, -1])],
        vec![vi("y", F32, &[5, 4, -1])],
    );
    hardmax.opset_import[0].version = Some(7);
    let e = compile(
        "hardmax-bound",
        &hardmax,
        "[inputs]\nx = [5, 4, \"n <= 18446744073709551615\"]",
    )
    .unwrap_err();
    assert!(matches!(e, BuildError::Limit(_)), "{e}");
    // An empty tensor whose other dims multiply past usize.
    let e = compile(
        "empty-huge",
        &relu(&[-1, 1 << 40, 1 << 40]),
        "[inputs]\nx = [0, 1099511627776, 1099511627776]",
    )
    .unwrap_err();
    assert!(matches!(e, BuildError::Limit(_)), "{e}");
}

/// A fuzzing finding (compiler target, case 7652395): an empty initializer
/// whose other dims multiply past `usize` (`[0, 2^63 - 1, 3]`) reached a
/// kernel's shape inference while folding (`Hardmax` multiplied its dims).
/// Constants are now held to the same rule as every sized value.
#[test]
fn an_empty_initializer_with_huge_dims_is_an_error() {
    let huge = proto::TensorProto {
        name: s("w"),
        data_type: Some(1),
        dims: vec![0, i64::MAX, 3],
        ..Default::default()
    };
    let mut m = model(
        vec![
            node("Hardmax", &["w"], &["h"], vec![]),
            node("Relu", &["x"], &["y"], vec![]),
        ],
        vec![huge],
        vec![vi("x", F32, &[2])],
        vec![vi("y", F32, &[2])],
    );
    // Before opset 13, Hardmax flattens the dims from its axis (1) on.
    m.opset_import[0].version = Some(11);
    let e = compile("empty-huge-initializer", &m, "").unwrap_err();
    assert!(matches!(e, BuildError::Limit(_)), "{e}");
}

/// Class 5: the planned arena is capped, by default and by
/// `[codegen] max_arena_bytes`, exactly at the boundary.
#[test]
fn the_arena_is_capped() {
    let expand = |n: i64| {
        model(
            vec![node("Expand", &["x", "sh"], &["y"], vec![])],
            vec![i64_init("sh", &[n, n])],
            vec![vi("x", F32, &[1])],
            vec![vi("y", F32, &[n, n])],
        )
    };
    // 2^21 × 2^21 floats: 16 TiB, far past the default.
    let e = compile("expand-huge", &expand(1 << 21), "").unwrap_err();
    assert!(matches!(e, BuildError::Limit(_)), "{e}");
    assert!(e.to_string().contains("max_arena_bytes"), "{e}");
    let arena = compile("expand-ok", &expand(512), "").unwrap();
    assert!(arena >= 512 * 512 * 4, "{arena}");
    compile(
        "expand-at-cap",
        &expand(512),
        &format!("[codegen]\nmax_arena_bytes = {arena}"),
    )
    .unwrap();
    let e = compile(
        "expand-below-cap",
        &expand(512),
        &format!("[codegen]\nmax_arena_bytes = {}", arena - 1),
    )
    .unwrap_err();
    assert!(matches!(e, BuildError::Limit(_)), "{e}");
    // ConstantOfShape of a runtime-free shape into an input-fed Mul.
    let cos = model(
        vec![
            node("ConstantOfShape", &["sh"], &["c"], vec![]),
            node("Mul", &["c", "x"], &["y"], vec![]),
        ],
        vec![i64_init("sh", &[1 << 20, 1 << 20])],
        vec![vi("x", F32, &[1])],
        vec![vi("y", F32, &[])],
    );
    assert!(matches!(
        compile("cos", &cos, ""),
        Err(BuildError::Limit(_))
    ));
}

/// Class 4: millions of empty repeated messages are refused on the wire
/// format, before decoding (without the pre-pass, 32 MB of them decode to
/// gigabytes).
#[test]
fn empty_repeated_messages_are_refused_before_decoding() {
    // GraphProto field 1 (node), empty: 0x0a 0x00, repeated 16M times.
    let n = 16 << 20;
    let mut graph = Vec::with_capacity(2 * n);
    for _ in 0..n {
        graph.extend_from_slice(&[0x0a, 0x00]);
    }
    let mut bytes = vec![0x3a]; // ModelProto field 7 (graph)
    let mut len = graph.len() as u64;
    while len >= 0x80 {
        bytes.push((len as u8) | 0x80);
        len >>= 7;
    }
    bytes.push(len as u8);
    bytes.extend_from_slice(&graph);
    let e = compile_bytes("empty-nodes", &bytes, "").unwrap_err();
    assert!(matches!(e, BuildError::Limit(_)), "{e}");
    // The same with empty value infos (not nodes): refused by the size
    // estimate, not by the node count.
    let header = bytes.len() - graph.len();
    for b in bytes.iter_mut().skip(header).step_by(2) {
        if *b == 0x0a {
            *b = 0x5a; // field 11 (input)
        }
    }
    let e = compile_bytes("empty-inputs", &bytes, "").unwrap_err();
    assert!(e.to_string().contains("memory"), "{e}");
    let stderr = cli_refuses("empty-nodes", &bytes, "");
    assert!(stderr.contains("safety limit"), "{stderr}");
}

/// Class 4: a chain longer than the node limit is refused before decoding.
#[test]
fn node_limit_is_checked_first() {
    let limit = lele_build::onnx::Limits::default().max_nodes;
    let nodes: Vec<proto::NodeProto> = (0..=limit)
        .map(|i| {
            node(
                "Relu",
                &[&format!("v{i}")],
                &[&format!("v{}", i + 1)],
                vec![],
            )
        })
        .collect();
    let m = model(
        nodes,
        vec![],
        vec![vi("v0", F32, &[1])],
        vec![vi(&format!("v{}", limit + 1), F32, &[1])],
    );
    let e = compile("chain", &m, "").unwrap_err();
    assert!(e.to_string().contains("nodes"), "{e}");
}

/// The CLI gives the same errors as the library, as an exit code 1.
#[test]
fn the_cli_refuses_the_corpus() {
    let m = huge_into(
        "CumSum",
        &["axis"],
        vec![i64_init("axis", &[0])],
        vec![],
        false,
    );
    cli_refuses("cumsum", &m.encode_to_vec(), "");
    let relu = model(
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![],
        vec![vi("x", F32, &[-1])],
        vec![vi("y", F32, &[-1])],
    );
    let stderr = cli_refuses(
        "bound",
        &relu.encode_to_vec(),
        "[inputs]\nx = [\"n <= 4611686018427387904\"]",
    );
    assert!(
        stderr.contains("limit") || stderr.contains("bytes"),
        "{stderr}"
    );
}
