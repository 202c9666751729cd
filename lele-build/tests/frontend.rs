//! Front end and passes on small models built in code.
use std::path::Path;

use lele_build::compile::{optimize, resolve_input_dims};
use lele_build::config::ModelToml;
use lele_build::onnx::{Limits, from_proto, proto};
use lele_build::{BuildError, ir::Graph};

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn value_info(name: &str, elem: i32, dims: &[i64]) -> proto::ValueInfoProto {
    use proto::tensor_shape_proto::{Dimension, dimension};
    proto::ValueInfoProto {
        name: s(name),
        r#type: Some(proto::TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: Some(elem),
                    shape: Some(proto::TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| Dimension {
                                value: Some(dimension::Value::DimValue(d)),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(
    op: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<proto::AttributeProto>,
) -> proto::NodeProto {
    proto::NodeProto {
        op_type: s(op),
        name: s(&format!("{op}_{}", outputs[0])),
        input: inputs.iter().map(|x| x.to_string()).collect(),
        output: outputs.iter().map(|x| x.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn int_attr(name: &str, v: i64) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        i: Some(v),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    }
}

fn i64_init(name: &str, vals: &[i64]) -> proto::TensorProto {
    proto::TensorProto {
        name: s(name),
        data_type: Some(7),
        dims: vec![vals.len() as i64],
        int64_data: vals.to_vec(),
        ..Default::default()
    }
}

/// A scalar f32 initializer.
fn f32_init(name: &str, v: f32) -> proto::TensorProto {
    proto::TensorProto {
        name: s(name),
        data_type: Some(1),
        dims: vec![],
        float_data: vec![v],
        ..Default::default()
    }
}

fn model(
    nodes: Vec<proto::NodeProto>,
    inits: Vec<proto::TensorProto>,
    inputs: Vec<proto::ValueInfoProto>,
    outputs: Vec<proto::ValueInfoProto>,
) -> proto::ModelProto {
    proto::ModelProto {
        ir_version: Some(8),
        opset_import: vec![proto::OperatorSetIdProto {
            domain: s(""),
            version: Some(17),
        }],
        graph: Some(proto::GraphProto {
            node: nodes,
            initializer: inits,
            input: inputs,
            output: outputs,
            name: s("g"),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn load(m: &proto::ModelProto) -> lele_build::Result<Graph> {
    from_proto(m, Path::new("."), &Limits::default())
}

/// Loads a test model (no `[inputs]` needed) and runs the compiler's passes.
fn optimized(m: &proto::ModelProto) -> Graph {
    let mut g = load(m).unwrap();
    let toml = ModelToml::parse("[model]\npath = \"m.onnx\"\n").unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    optimize(&mut g, &dims, true, &Default::default()).unwrap();
    g
}

fn op_types(g: &Graph) -> Vec<String> {
    let mut v = Vec::new();
    g.for_each_node(&mut |n| v.push(n.op_type.clone()));
    v
}

#[test]
fn cast_and_unsqueeze_of_a_graph_input_are_never_folded() {
    // x (i64 [3]) -> Cast(f32) -> Unsqueeze(axes=[0]) -> y; plus a constant
    // chain c -> Cast -> Add(…) that must fold away.
    let m = model(
        vec![
            node("Cast", &["x"], &["xc"], vec![int_attr("to", 1)]),
            node("Unsqueeze", &["xc", "axes"], &["y"], vec![]),
            node("Cast", &["c"], &["cc"], vec![int_attr("to", 1)]),
            node("Add", &["cc", "cc"], &["c2"], vec![]),
            node("Add", &["xc", "c2"], &["z"], vec![]),
        ],
        vec![i64_init("axes", &[0]), i64_init("c", &[1, 2, 3])],
        vec![value_info("x", 7, &[3])],
        vec![value_info("y", 1, &[1, 3]), value_info("z", 1, &[3])],
    );
    let mut g = load(&m).unwrap();
    let toml = ModelToml::parse("[model]\npath = \"m.onnx\"\n").unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    optimize(&mut g, &dims, true, &Default::default()).unwrap();
    let ops = op_types(&g);
    assert_eq!(
        ops,
        vec!["Cast", "Unsqueeze", "Add"],
        "graph after folding: {ops:?}"
    );
    // The folded constant feeding the last Add is 2 * [1, 2, 3].
    let add = &g.main.nodes[2];
    let c = g.values[add.inputs[1].unwrap()]
        .constant
        .as_ref()
        .expect("folded constant");
    assert_eq!(c.to_f64s().unwrap(), vec![2.0, 4.0, 6.0]);
}

#[test]
fn every_unsupported_op_is_listed_at_once() {
    let m = model(
        vec![
            node("FancyOp", &["x"], &["a"], vec![]),
            node("Relu", &["a"], &["b"], vec![]),
            node("OtherOp", &["b"], &["y"], vec![]),
        ],
        vec![],
        vec![value_info("x", 1, &[4])],
        vec![value_info("y", 1, &[4])],
    );
    let mut g = load(&m).unwrap();
    let toml = ModelToml::parse("[model]\npath = \"m.onnx\"\n").unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    match optimize(&mut g, &dims, true, &Default::default()) {
        Err(BuildError::Unsupported(list)) => {
            let names: Vec<_> = list
                .iter()
                .map(|u| (u.op.as_str(), u.node.as_str()))
                .collect();
            assert_eq!(
                names,
                vec![("FancyOp", "FancyOp_a"), ("OtherOp", "OtherOp_y")]
            );
        }
        other => panic!("expected an unsupported-op error, got {other:?}"),
    }
}

#[test]
fn dynamic_inputs_need_bounds() {
    use proto::tensor_shape_proto::{Dimension, dimension};
    let mut x = value_info("x", 1, &[1]);
    if let Some(proto::type_proto::Value::TensorType(t)) =
        x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.shape.as_mut().unwrap().dim.push(Dimension {
            value: Some(dimension::Value::DimParam("n".into())),
            ..Default::default()
        });
    }
    let m = model(
        vec![node("Relu", &["x"], &["y"], vec![])],
        vec![],
        vec![x],
        vec![value_info("y", 1, &[])],
    );
    let g = load(&m).unwrap();
    let toml = ModelToml::parse("[model]\npath = \"m.onnx\"\n").unwrap();
    let err = resolve_input_dims(&g, &toml).unwrap_err().to_string();
    assert!(err.contains("dynamic dims [1, n]"), "{err}");
    let toml =
        ModelToml::parse("[model]\npath = \"m.onnx\"\n[inputs]\nx = [1, \"n <= 64\"]\n").unwrap();
    assert!(resolve_input_dims(&g, &toml).is_ok());
}

#[test]
fn external_data_must_stay_in_the_model_directory() {
    let dir = std::env::temp_dir().join(format!("lele-ext-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w.bin"), [0u8; 16]).unwrap();
    let ext = |loc: &str| proto::TensorProto {
        name: s("w"),
        data_type: Some(1),
        dims: vec![4],
        data_location: Some(proto::tensor_proto::DataLocation::External as i32),
        external_data: vec![proto::StringStringEntryProto {
            key: s("location"),
            value: s(loc),
        }],
        ..Default::default()
    };
    let limits = Limits::default();
    assert!(lele_build::onnx::tensor_from_proto(&ext("w.bin"), &dir, &limits).is_ok());
    for bad in ["../w.bin", "/etc/passwd", "sub/../../w.bin"] {
        let e = lele_build::onnx::tensor_from_proto(&ext(bad), &dir, &limits).unwrap_err();
        assert!(matches!(e, BuildError::ExternalData { .. }), "{bad}: {e}");
    }
    // Length running past the end of the file is an error, not a panic.
    let mut t = ext("w.bin");
    t.dims = vec![1000];
    assert!(lele_build::onnx::tensor_from_proto(&t, &dir, &limits).is_err());
}

#[test]
fn hostile_bytes_give_errors_not_panics() {
    use prost::Message;
    for bytes in [&b"\xff\xff\xff\xff"[..], b"\x0a\xff\xff\xff\xff\x0f", b""] {
        if let Ok(m) = proto::ModelProto::decode(bytes) {
            let _ = load(&m);
        }
    }
    // A tensor claiming 2^62 elements is refused before allocating.
    let t = proto::TensorProto {
        name: s("huge"),
        data_type: Some(1),
        dims: vec![1 << 31, 1 << 31],
        ..Default::default()
    };
    assert!(matches!(
        lele_build::onnx::tensor_from_proto(&t, Path::new("."), &Limits::default()),
        Err(BuildError::Limit(_))
    ));
}

#[test]
fn second_compilation_is_served_from_the_artifact_cache() {
    let cache = std::env::temp_dir().join(format!("lele-cache-test-{}", std::process::id()));
    let toml = cache.join("m.toml");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(
        &toml,
        format!(
            "[model]\npath = {:?}\n[inputs]\nx = [1, 3, 48, 192]\n",
            lele_build::config::zoo_dir()
                .join("ppocr_cls.onnx")
                .display()
                .to_string()
        ),
    )
    .unwrap();
    let mut opts = lele_build::CompileOptions::new("Cls");
    opts.offline = false;
    opts.cache_root = Some(cache.clone());
    let first = lele_build::compile_toml(&toml, &opts).unwrap();
    assert!(!first.from_cache);
    let second = lele_build::compile_toml(&toml, &opts).unwrap();
    assert!(second.from_cache);
    assert_eq!(first.tokens.to_string(), second.tokens.to_string());
    // A changed toml is a different artifact.
    let original = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        format!("{original}\n[codegen]\nweights = \"mmap\"\n"),
    )
    .unwrap();
    assert!(!lele_build::compile_toml(&toml, &opts).unwrap().from_cache);
    // A truncated weights file is a miss, never a poisoned hit.
    std::fs::write(&toml, &original).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(second.weights_path.as_ref().unwrap())
        .unwrap();
    f.set_len(10).unwrap();
    let third = lele_build::compile_toml(&toml, &opts).unwrap();
    assert!(!third.from_cache);
    assert_eq!(
        std::fs::metadata(third.weights_path.as_ref().unwrap())
            .unwrap()
            .len(),
        std::fs::metadata(first.weights_path.as_ref().unwrap())
            .unwrap()
            .len()
    );
    let _ = std::fs::remove_dir_all(&cache);
}

/// Sizes a graph at its declared input dims (all fixed here).
fn size_declared(g: &Graph) -> lele_build::Result<lele_build::passes::Sizes> {
    let toml = ModelToml::parse("[model]\npath = \"m.onnx\"\n").unwrap();
    let dims = resolve_input_dims(g, &toml).unwrap();
    let points = lele_build::compile::sizing_points(&dims);
    lele_build::passes::size_graph(g, &points)
}

#[test]
fn data_dependent_outputs_are_sized_from_bounds_or_declarations() {
    // ReduceSum with `axes` fed by the caller: at most as many elements as
    // the input (the output shape is unknown until run time), and a Relu
    // after it keeps that bound.
    let m = model(
        vec![
            node("ReduceSum", &["x", "axes"], &["r"], vec![]),
            node("Relu", &["r"], &["y"], vec![]),
        ],
        vec![],
        vec![value_info("x", 1, &[3, 4, 5]), value_info("axes", 7, &[1])],
        vec![value_info("y", 1, &[])],
    );
    let g = load(&m).unwrap();
    let sizes = size_declared(&g).unwrap();
    let y = g.outputs[0];
    assert_eq!(sizes.max_bytes[&y], 3 * 4 * 5 * 4);
    assert!(!sizes.shapes.contains_key(&y));

    // Expand by a caller-given shape: no bound from the kernel; the model's
    // fixed output declaration sizes it, and without one it is an error
    // that says why.
    let expand = |out_dims: Option<&[i64]>| {
        let mut out = value_info("y", 1, out_dims.unwrap_or(&[]));
        if out_dims.is_none() {
            out.r#type = None;
        }
        model(
            vec![node("Expand", &["x", "shape"], &["y"], vec![])],
            vec![],
            vec![value_info("x", 1, &[3, 1]), value_info("shape", 7, &[2])],
            vec![out],
        )
    };
    let g = load(&expand(Some(&[3, 7]))).unwrap();
    let sizes = size_declared(&g).unwrap();
    assert_eq!(sizes.max_bytes[&g.outputs[0]], 3 * 7 * 4);
    let g = load(&expand(None)).unwrap();
    let err = size_declared(&g).unwrap_err().to_string();
    assert!(err.contains("no bound"), "{err}");
}

#[test]
fn silu_is_fused_only_when_the_sigmoid_has_no_other_reader() {
    let build = |extra_reader: bool| {
        let mut nodes = vec![
            node("Sigmoid", &["x"], &["s"], vec![]),
            node("Mul", &["s", "x"], &["y"], vec![]),
        ];
        let mut outputs = vec![value_info("y", 1, &[4])];
        if extra_reader {
            nodes.push(node("Neg", &["s"], &["z"], vec![]));
            outputs.push(value_info("z", 1, &[4]));
        }
        let m = model(nodes, vec![], vec![value_info("x", 1, &[4])], outputs);
        op_types(&optimized(&m))
    };
    assert_eq!(build(false), vec!["Swish"]);
    assert_eq!(build(true), vec!["Sigmoid", "Mul", "Neg"]);
}

#[test]
fn hardswish_is_fused_from_its_decomposed_form() {
    // y = Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6), as Paddle exports it.
    let build = |add_const: f32, extra_reader: bool| {
        let mut nodes = vec![
            node("Add", &["x", "three"], &["a"], vec![]),
            node("Clip", &["a", "zero", "six"], &["c"], vec![]),
            node("Mul", &["x", "c"], &["m"], vec![]),
            node("Div", &["m", "six"], &["y"], vec![]),
        ];
        let mut outputs = vec![value_info("y", 1, &[4])];
        if extra_reader {
            nodes.push(node("Neg", &["c"], &["z"], vec![]));
            outputs.push(value_info("z", 1, &[4]));
        }
        let inits = vec![
            f32_init("three", add_const),
            f32_init("zero", 0.0),
            f32_init("six", 6.0),
        ];
        let m = model(nodes, inits, vec![value_info("x", 1, &[4])], outputs);
        op_types(&optimized(&m))
    };
    assert_eq!(build(3.0, false), vec!["HardSwish"]);
    // Another constant is another function; an extra reader keeps the chain.
    assert_eq!(build(2.0, false), vec!["Add", "Clip", "Mul", "Div"]);
    assert_eq!(build(3.0, true), vec!["Add", "Clip", "Mul", "Div", "Neg"]);
}

#[test]
fn per_channel_affine_after_a_conv_folds_into_its_weights() {
    // y = Add(Mul(Conv(x, W, B), s[1,2,1,1]), t[2,1,1]).
    let w = proto::TensorProto {
        name: s("w"),
        data_type: Some(1),
        dims: vec![2, 1, 1, 1],
        float_data: vec![2.0, 3.0],
        ..Default::default()
    };
    let per_channel = |name: &str, dims: Vec<i64>, v: [f32; 2]| proto::TensorProto {
        name: s(name),
        data_type: Some(1),
        dims,
        float_data: v.to_vec(),
        ..Default::default()
    };
    let build = |extra_reader: bool| {
        let mut nodes = vec![
            node("Conv", &["x", "w", "b"], &["c"], vec![]),
            node("Mul", &["c", "s"], &["m"], vec![]),
            node("Add", &["t", "m"], &["y"], vec![]),
        ];
        let mut outputs = vec![value_info("y", 1, &[1, 2, 2, 2])];
        if extra_reader {
            nodes.push(node("Neg", &["m"], &["z"], vec![]));
            outputs.push(value_info("z", 1, &[1, 2, 2, 2]));
        }
        let inits = vec![
            w.clone(),
            per_channel("b", vec![2], [1.0, -1.0]),
            per_channel("s", vec![1, 2, 1, 1], [0.5, 4.0]),
            per_channel("t", vec![2, 1, 1], [10.0, 20.0]),
        ];
        let m = model(
            nodes,
            inits,
            vec![value_info("x", 1, &[1, 1, 2, 2])],
            outputs,
        );
        optimized(&m)
    };
    let g = build(false);
    assert_eq!(op_types(&g), vec!["Conv"]);
    let conv = &g.main.nodes[0];
    let vals = |i: usize| {
        g.values[conv.inputs[i].unwrap()]
            .constant
            .as_ref()
            .unwrap()
            .to_f64s()
            .unwrap()
    };
    // W·s and B·s + t, per output channel.
    assert_eq!(vals(1), vec![1.0, 12.0]);
    assert_eq!(vals(2), vec![10.5, 16.0]);
    assert_eq!(conv.outputs, g.outputs);
    // The Mul's result has another reader: the Mul still folds (the conv
    // then produces exactly that result), the Add stays.
    assert_eq!(op_types(&build(true)), vec!["Conv", "Add", "Neg"]);
}

#[test]
fn batch_norm_after_a_conv_folds_into_its_weights() {
    let per_channel = |name: &str, v: [f32; 2]| proto::TensorProto {
        name: s(name),
        data_type: Some(1),
        dims: vec![2],
        float_data: v.to_vec(),
        ..Default::default()
    };
    let build = |training: bool| {
        let w = proto::TensorProto {
            name: s("w"),
            data_type: Some(1),
            dims: vec![2, 1, 1, 1],
            float_data: vec![2.0, 3.0],
            ..Default::default()
        };
        let attrs = vec![
            proto::AttributeProto {
                name: s("epsilon"),
                f: Some(0.5),
                r#type: Some(proto::attribute_proto::AttributeType::Float as i32),
                ..Default::default()
            },
            proto::AttributeProto {
                name: s("training_mode"),
                i: Some(training as i64),
                r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
                ..Default::default()
            },
        ];
        let nodes = vec![
            node("Conv", &["x", "w"], &["c"], vec![]),
            node(
                "BatchNormalization",
                &["c", "scale", "shift", "mean", "var"],
                &["y"],
                attrs,
            ),
        ];
        let inits = vec![
            w,
            per_channel("scale", [3.0, -1.0]),
            per_channel("shift", [1.0, 0.25]),
            per_channel("mean", [4.0, -2.0]),
            per_channel("var", [3.5, 0.5]),
        ];
        let m = model(
            nodes,
            inits,
            vec![value_info("x", 1, &[1, 1, 2, 2])],
            vec![value_info("y", 1, &[1, 2, 2, 2])],
        );
        optimized(&m)
    };
    let g = build(false);
    assert_eq!(op_types(&g), vec!["Conv"]);
    let conv = &g.main.nodes[0];
    let vals = |i: usize| {
        g.values[conv.inputs[i].unwrap()]
            .constant
            .as_ref()
            .unwrap()
            .to_f64s()
            .unwrap()
    };
    // s = scale/√(var + ε) = [1.5, -1], t = shift - mean·s = [-5, -1.75]:
    // W·s and (no bias) t.
    assert_eq!(vals(1), vec![3.0, -3.0]);
    assert_eq!(vals(2), vec![-5.0, -1.75]);
    assert_eq!(conv.outputs, g.outputs);
    // Training mode normalizes with the batch's own statistics: kept.
    assert_eq!(op_types(&build(true)), vec!["Conv", "BatchNormalization"]);
}

#[test]
fn gelu_is_fused_from_its_erf_form() {
    // y = Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5), operands shuffled.
    let build = |sqrt2: f32, erf_reader: bool| {
        let mut nodes = vec![
            node("Div", &["x", "sqrt2"], &["d"], vec![]),
            node("Erf", &["d"], &["e"], vec![]),
            node("Add", &["one", "e"], &["a"], vec![]),
            node("Mul", &["a", "x"], &["m"], vec![]),
            node("Mul", &["half", "m"], &["y"], vec![]),
        ];
        let mut outputs = vec![value_info("y", 1, &[4])];
        if erf_reader {
            nodes.push(node("Neg", &["e"], &["z"], vec![]));
            outputs.push(value_info("z", 1, &[4]));
        }
        let inits = vec![
            f32_init("sqrt2", sqrt2),
            f32_init("one", 1.0),
            f32_init("half", 0.5),
        ];
        let m = model(nodes, inits, vec![value_info("x", 1, &[4])], outputs);
        op_types(&optimized(&m))
    };
    assert_eq!(build(std::f32::consts::SQRT_2, false), vec!["Gelu"]);
    assert_eq!(build(1.5, false), vec!["Div", "Erf", "Add", "Mul", "Mul"]);
    assert_eq!(
        build(std::f32::consts::SQRT_2, true),
        vec!["Div", "Erf", "Add", "Mul", "Mul", "Neg"]
    );
}

#[test]
fn layer_norm_is_fused_from_its_decomposed_form() {
    let ints = |name: &str, v: &[i64]| proto::AttributeProto {
        name: s(name),
        ints: v.to_vec(),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ..Default::default()
    };
    let vec_init = |name: &str, v: &[f32]| proto::TensorProto {
        name: s(name),
        data_type: Some(1),
        dims: vec![v.len() as i64],
        float_data: v.to_vec(),
        ..Default::default()
    };
    // (axis of the means, exponent, affine, an extra reader of x - mean)
    let build = |axis: i64, exponent: f32, affine: bool, d_reader: bool| {
        let mut nodes = vec![
            node("ReduceMean", &["x"], &["m"], vec![ints("axes", &[axis])]),
            node("Sub", &["x", "m"], &["d"], vec![]),
            node("Pow", &["d", "two"], &["p"], vec![]),
            node("ReduceMean", &["p"], &["v"], vec![ints("axes", &[axis])]),
            node("Add", &["v", "eps"], &["a"], vec![]),
            node("Sqrt", &["a"], &["r"], vec![]),
            node("Div", &["d", "r"], &["n"], vec![]),
        ];
        let mut y = "n";
        if affine {
            nodes.push(node("Mul", &["gamma", "n"], &["g"], vec![]));
            nodes.push(node("Add", &["g", "beta"], &["y"], vec![]));
            y = "y";
        }
        let mut outputs = vec![value_info(y, 1, &[2, 6])];
        if d_reader {
            nodes.push(node("Neg", &["d"], &["z"], vec![]));
            outputs.push(value_info("z", 1, &[2, 6]));
        }
        let inits = vec![
            f32_init("two", exponent),
            f32_init("eps", 1e-5),
            vec_init("gamma", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            vec_init("beta", &[0.5; 6]),
        ];
        let m = model(nodes, inits, vec![value_info("x", 1, &[2, 6])], outputs);
        op_types(&optimized(&m))
    };
    assert_eq!(build(-1, 2.0, true, false), vec!["LayerNormalization"]);
    assert_eq!(build(-1, 2.0, false, false), vec!["LayerNormalization"]);
    let decomposed = vec![
        "ReduceMean",
        "Sub",
        "Pow",
        "ReduceMean",
        "Add",
        "Sqrt",
        "Div",
    ];
    assert_eq!(build(0, 2.0, false, false), decomposed);
    assert_eq!(build(-1, 3.0, false, false), decomposed);
    let mut with_reader = decomposed.clone();
    with_reader.push("Neg");
    assert_eq!(build(-1, 2.0, false, true), with_reader);
}

#[test]
fn matmul_and_bias_add_are_fused() {
    let mat_init = |name: &str, dims: &[i64]| proto::TensorProto {
        name: s(name),
        data_type: Some(1),
        dims: dims.to_vec(),
        float_data: (0..dims.iter().product::<i64>())
            .map(|v| v as f32)
            .collect(),
        ..Default::default()
    };
    // (bias dims, weights as an initializer rather than a graph input)
    let build = |bias: &[i64], const_w: bool| {
        let nodes = vec![
            node("MatMul", &["x", "w"], &["p"], vec![]),
            node("Add", &["b", "p"], &["y"], vec![]),
        ];
        let mut inits = vec![mat_init("b", bias)];
        let mut inputs = vec![value_info("x", 1, &[2, 3])];
        if const_w {
            inits.push(mat_init("w", &[3, 4]));
        } else {
            inputs.push(value_info("w", 1, &[3, 4]));
        }
        let m = model(nodes, inits, inputs, vec![value_info("y", 1, &[2, 4])]);
        op_types(&optimized(&m))
    };
    assert_eq!(build(&[4], true), vec!["MatMul+Add"]);
    assert_eq!(build(&[2, 4], true), vec!["MatMul", "Add"]);
    assert_eq!(build(&[1], true), vec!["MatMul", "Add"]);
    assert_eq!(build(&[4], false), vec!["MatMul", "Add"]);
}

#[test]
fn residual_adds_are_fused_into_the_producer() {
    let init = |name: &str, dims: &[i64]| proto::TensorProto {
        name: s(name),
        data_type: Some(1),
        dims: dims.to_vec(),
        float_data: (0..dims.iter().product::<i64>())
            .map(|v| v as f32 / 8.0)
            .collect(),
        ..Default::default()
    };
    // Conv(x) [+ Relu] [→ Identity] + r, with r of `r_dims`; optionally a
    // second reader of the conv's result; with or without a bias.
    let build = |r_dims: &[i64], relu: bool, identity: bool, extra: bool, bias: bool| {
        let conv_in: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
        let mut nodes = vec![node("Conv", conv_in, &["c"], vec![])];
        let mut y = "c";
        if relu {
            nodes.push(node("Relu", &[y], &["a"], vec![]));
            y = "a";
        }
        if identity {
            nodes.push(node("Identity", &[y], &["i"], vec![]));
            y = "i";
        }
        nodes.push(node("Add", &["r", y], &["y"], vec![]));
        let mut outputs = vec![value_info("y", 1, &[1, 2, 3, 3])];
        if extra {
            nodes.push(node("Neg", &[y], &["z"], vec![]));
            outputs.push(value_info("z", 1, &[1, 2, 3, 3]));
        }
        let m = model(
            nodes,
            vec![init("w", &[2, 1, 1, 1]), init("b", &[2])],
            vec![
                value_info("x", 1, &[1, 1, 3, 3]),
                value_info("r", 1, r_dims),
            ],
            outputs,
        );
        optimized(&m)
    };
    let g = build(&[1, 2, 3, 3], false, false, false, true);
    assert_eq!(op_types(&g), vec!["Conv+Add"]);
    let n = &g.main.nodes[0];
    assert_eq!(n.inputs.len(), 4);
    assert_eq!(n.inputs[3], Some(g.inputs[1]), "the residual is input 3");
    assert_eq!(n.outputs, g.outputs);
    // After a fused activation, through an Identity, without a bias (an
    // empty bias slot keeps the residual at index 3).
    let g = build(&[1, 2, 3, 3], true, true, false, false);
    assert_eq!(op_types(&g), vec!["Conv+Relu+Add"]);
    assert_eq!(g.main.nodes[0].inputs[2], None);
    assert_eq!(g.main.nodes[0].inputs[3], Some(g.inputs[1]));
    // A broadcast Add, or a conv result read elsewhere, stays apart.
    assert_eq!(
        op_types(&build(&[1, 2, 1, 1], false, false, false, true)),
        vec!["Conv", "Add"]
    );
    assert_eq!(
        op_types(&build(&[1, 2, 3, 3], false, false, true, true)),
        vec!["Conv", "Add", "Neg"]
    );
    // A conv result an `If` branch returns (a reader inside a subgraph's
    // outputs) stays a separate value.
    let branch = |out: &str| proto::AttributeProto {
        name: s(if out == "c" {
            "then_branch"
        } else {
            "else_branch"
        }),
        r#type: Some(proto::attribute_proto::AttributeType::Graph as i32),
        g: Some(proto::GraphProto {
            name: s(out),
            output: vec![value_info(out, 1, &[1, 2, 3, 3])],
            ..Default::default()
        }),
        ..Default::default()
    };
    let m = model(
        vec![
            node("Conv", &["x", "w", "b"], &["c"], vec![]),
            node("Add", &["r", "c"], &["y"], vec![]),
            node("If", &["cond"], &["z"], vec![branch("c"), branch("r")]),
        ],
        vec![init("w", &[2, 1, 1, 1]), init("b", &[2])],
        vec![
            value_info("x", 1, &[1, 1, 3, 3]),
            value_info("r", 1, &[1, 2, 3, 3]),
            value_info("cond", 9, &[]),
        ],
        vec![
            value_info("y", 1, &[1, 2, 3, 3]),
            value_info("z", 1, &[1, 2, 3, 3]),
        ],
    );
    assert_eq!(op_types(&optimized(&m)), vec!["Conv", "Add", "If"]);
    // MatMul + bias + residual.
    let m = model(
        vec![
            node("MatMul", &["x", "w"], &["p"], vec![]),
            node("Add", &["p", "b"], &["q"], vec![]),
            node("Add", &["q", "r"], &["y"], vec![]),
        ],
        vec![init("w", &[3, 4]), init("b", &[4])],
        vec![value_info("x", 1, &[2, 3]), value_info("r", 1, &[2, 4])],
        vec![value_info("y", 1, &[2, 4])],
    );
    assert_eq!(op_types(&optimized(&m)), vec!["MatMul+Add+Add"]);
}

/// Decomposed attention fuses into one node (Div or Mul scale, mask on
/// either side of the Add, or none); a chain that is not attention is
/// left alone: `c / S`, a second reader of the scores,
/// a mask that broadcasts the scores to a larger shape.
#[test]
fn attention_is_fused_from_its_decomposed_form() {
    let perm = |p: &[i64]| proto::AttributeProto {
        name: s("perm"),
        ints: p.to_vec(),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ..Default::default()
    };
    #[derive(Clone, Copy)]
    enum Scale {
        Div,
        Mul,
        DivInto,
        None,
    }
    // q, k, v: [1, 4, 2, 3] (B, S, H, D); mask of `mask_dims`.
    let build = |scale: Scale, mask_dims: Option<&[i64]>, mask_first: bool, extra: bool| {
        let mut nodes = vec![
            node("Transpose", &["q"], &["q4"], vec![perm(&[0, 2, 1, 3])]),
            node("Transpose", &["k"], &["kt"], vec![perm(&[0, 2, 3, 1])]),
            node("Transpose", &["v"], &["v4"], vec![perm(&[0, 2, 1, 3])]),
            node("MatMul", &["q4", "kt"], &["sc"], vec![]),
        ];
        let mut x = "sc";
        match scale {
            Scale::Div => nodes.push(node("Div", &["sc", "c"], &["x1"], vec![])),
            Scale::Mul => nodes.push(node("Mul", &["c", "sc"], &["x1"], vec![])),
            Scale::DivInto => nodes.push(node("Div", &["c", "sc"], &["x1"], vec![])),
            Scale::None => {}
        }
        if !matches!(scale, Scale::None) {
            x = "x1";
        }
        if mask_dims.is_some() {
            let ins = if mask_first { ["m", x] } else { [x, "m"] };
            nodes.push(node("Add", &ins, &["x2"], vec![]));
            x = "x2";
        }
        nodes.push(node("Softmax", &[x], &["p"], vec![int_attr("axis", -1)]));
        nodes.push(node("MatMul", &["p", "v4"], &["o"], vec![]));
        nodes.push(node("Transpose", &["o"], &["y"], vec![perm(&[0, 2, 1, 3])]));
        let mut outputs = vec![value_info("y", 1, &[1, 4, 2, 3])];
        if extra {
            nodes.push(node("Neg", &["sc"], &["z"], vec![]));
            outputs.push(value_info("z", 1, &[1, 2, 4, 4]));
        }
        let mut inputs = vec![
            value_info("q", 1, &[1, 4, 2, 3]),
            value_info("k", 1, &[1, 4, 2, 3]),
            value_info("v", 1, &[1, 4, 2, 3]),
        ];
        if let Some(d) = mask_dims {
            inputs.push(value_info("m", 1, d));
        }
        optimized(&model(
            nodes,
            vec![f32_init("c", 1.7320508)],
            inputs,
            outputs,
        ))
    };
    let fused = |g: &Graph| op_types(g) == ["Attention"];
    let g = build(Scale::Div, Some(&[1, 1, 1, 4]), false, false);
    assert!(fused(&g), "{:?}", op_types(&g));
    assert_eq!(g.main.nodes[0].inputs.len(), 4, "q, k, v, mask");
    assert_eq!(g.main.nodes[0].inputs[3], Some(g.inputs[3]));
    assert!(fused(&build(Scale::Mul, Some(&[4]), true, false)));
    assert!(fused(&build(Scale::None, None, false, false)));
    assert!(fused(&build(Scale::Div, None, false, false)));
    // Not attention, or not only attention.
    for g in [
        build(Scale::DivInto, Some(&[1, 1, 1, 4]), false, false),
        build(Scale::Div, Some(&[1, 1, 1, 4]), false, true),
        build(Scale::Div, Some(&[3, 1, 1, 1]), false, false),
    ] {
        assert!(
            !op_types(&g).contains(&"Attention".to_string()),
            "{:?}",
            op_types(&g)
        );
    }
}

/// Op types of a zoo model after the compiler's passes.
fn optimized_zoo_ops(file: &str, inputs: &str) -> Vec<String> {
    op_types(&optimized_zoo(file, inputs))
}

/// A zoo model after the compiler's passes.
fn optimized_zoo(file: &str, inputs: &str) -> lele_build::ir::Graph {
    let path = lele_build::config::zoo_dir().join(file);
    let mut g = lele_build::onnx::load(&path)
        .unwrap_or_else(|e| panic!("{} (run `cargo xtask models`): {e}", path.display()));
    let toml = ModelToml::parse(&format!(
        "[model]\npath = {:?}\n[inputs]\n{inputs}\n",
        path.display().to_string()
    ))
    .unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    optimize(&mut g, &dims, true, &Default::default()).unwrap();
    g
}

/// Every Linear layer's constant weight is stored packed for the GEMM
/// (`MatMulPacked`), fused bias and residual kept.
#[test]
fn constant_matmul_weights_are_stored_packed_on_real_models() {
    use lele_build::ir::Op;
    use lele_kernels::ops::matmul_packed::MatMulPacked;
    let packed = |g: &lele_build::ir::Graph| -> Vec<(String, usize, usize, usize)> {
        g.main
            .nodes
            .iter()
            .filter_map(|n| {
                let Op::Kernel(k) = &n.op else { return None };
                let any: &dyn std::any::Any = k.as_ref();
                let p = any.downcast_ref::<MatMulPacked>()?;
                Some((n.op_type.clone(), n.inputs.len(), p.k, p.n))
            })
            .collect()
    };
    // MiniLM-L3: Q, K, V, attention output and the two FFN layers of each
    // of its 3 layers; the output and second FFN layer keep their residual.
    let minilm = optimized_zoo(
        "minilm_l3.onnx",
        "input_ids = [1, 128]\nattention_mask = [1, 128]",
    );
    let p = packed(&minilm);
    assert_eq!(p.len(), 18, "{p:?}");
    let with_residual = p.iter().filter(|x| x.0 == "MatMul+Add+Add" && x.1 == 4);
    assert_eq!(with_residual.count(), 6, "{p:?}");
    assert_eq!(p.iter().filter(|x| (x.2, x.3) == (384, 1536)).count(), 3);
    // No MatMul with a constant weight is left (the attention products
    // multiply two activations).
    let left = minilm.main.nodes.iter().filter(|n| {
        let packed = match &n.op {
            Op::Kernel(k) => {
                let any: &dyn std::any::Any = k.as_ref();
                any.downcast_ref::<MatMulPacked>().is_some()
            }
            _ => false,
        };
        n.op_type.starts_with("MatMul")
            && !packed
            && n.inputs
                .get(1)
                .copied()
                .flatten()
                .is_some_and(|w| minilm.values[w].constant.is_some())
    });
    assert_eq!(left.count(), 0);
    // PP-OCRv6 rec: the neck's Linear layers and the 18710-class head.
    let rec = optimized_zoo("ppocr_v6_rec_small.onnx", "x = [1, 3, 48, 320]");
    let p = packed(&rec);
    assert_eq!(p.len(), 9, "{p:?}");
    assert!(p.iter().any(|x| (x.2, x.3) == (120, 18710)), "{p:?}");
}

/// Each main-block kernel node of `g` (for downcasting) with the dims of
/// its input 1 when that is a constant (a weight).
fn kernels_with_weight_dims(
    g: &lele_build::ir::Graph,
) -> Vec<(&dyn std::any::Any, Option<Vec<usize>>)> {
    use lele_build::ir::Op;
    let mut out = Vec::new();
    for n in &g.main.nodes {
        let Op::Kernel(k) = &n.op else { continue };
        let any: &dyn std::any::Any = k.as_ref();
        let w = n.inputs.get(1).copied().flatten();
        let dims = w
            .and_then(|w| g.values[w].constant.as_ref())
            .map(|t| t.dims.clone());
        out.push((any, dims));
    }
    out
}

/// Every convolution with more than 128 output channels (per group, in
/// whole panels of 8: those always run on the GEMM) reads its weight
/// packed for the GEMM's left operand, still shaped as the weight; the
/// counts are the ONNX files' own (27 of PP-OCRv6 rec's convolutions, 6
/// of YOLOv8n's).
#[test]
fn wide_convolution_weights_are_stored_packed_on_real_models() {
    use lele_kernels::ops::conv::{Conv, ConvPackedWeights};
    for (file, inputs, want) in [
        ("ppocr_v6_rec_small.onnx", "x = [1, 3, 48, 320]", 27),
        ("yolov8n_320n.onnx", "images = [1, 3, 640, 640]", 6),
    ] {
        let g = optimized_zoo(file, inputs);
        let (mut packed, mut plain_wide) = (0, 0);
        for (any, dims) in kernels_with_weight_dims(&g) {
            if let Some(p) = any.downcast_ref::<ConvPackedWeights>() {
                let dims = dims.expect("a packed weight is a constant");
                assert!(ConvPackedWeights::applies(p.conv.group, &dims), "{dims:?}");
                packed += 1;
            } else if let (Some(c), Some(dims)) = (any.downcast_ref::<Conv>(), dims)
                && ConvPackedWeights::applies(c.group, &dims)
            {
                plain_wide += 1;
            }
        }
        assert_eq!((packed, plain_wide), (want, 0), "{file}");
    }
}

/// Every dense 3×3 convolution of unit strides and dilations with at least
/// 32 input channels runs as Winograd `F(2×2, 3×3)` from a weight
/// transformed at build time (`[16, M rounded up to 8, C]`), and no plain
/// one that qualifies is left; the counts are the ONNX files' own (30 of
/// YOLOv8n's convolutions, 6 of ddddocr's, 1 of PP-OCRv6 det's).
#[test]
fn dense_3x3_convolutions_run_as_winograd_on_real_models() {
    use lele_kernels::ops::conv::{Conv, ConvWinograd};
    for (file, inputs, want) in [
        ("yolov8n_320n.onnx", "images = [1, 3, 640, 640]", 30),
        ("ddddocr_common.onnx", "input1 = [1, 1, 64, 160]", 6),
        ("ppocr_v6_det_small.onnx", "x = [1, 3, 480, 480]", 1),
    ] {
        let g = optimized_zoo(file, inputs);
        let (mut winograd, mut plain) = (0, 0);
        for (any, dims) in kernels_with_weight_dims(&g) {
            if let Some(k) = any.downcast_ref::<ConvWinograd>() {
                let dims = dims.expect("a transformed weight is a constant");
                assert_eq!(dims[..2], [16, k.m.next_multiple_of(8)], "{file}");
                winograd += 1;
            } else if let (Some(c), Some(dims)) = (any.downcast_ref::<Conv>(), dims)
                && ConvWinograd::applies(c, &dims)
            {
                plain += 1;
            }
        }
        assert_eq!((winograd, plain), (want, 0), "{file}");
    }
}

#[test]
fn built_in_fusions_fire_on_real_models() {
    let count = |ops: &[String], op: &str| ops.iter().filter(|o| *o == op).count();
    let convs = |ops: &[String]| {
        ops.iter()
            .filter(|o| *o == "Conv" || o.starts_with("Conv+"))
            .count()
    };
    // YOLOv8n: every SiLU (57) becomes one Swish, and each of them, following
    // a conv, that conv's epilogue; the head's lone Sigmoid stays.
    let yolo = optimized_zoo_ops("yolov8n_320n.onnx", "images = [1, 3, 640, 640]");
    assert_eq!(
        count(&yolo, "Conv+Swish") + count(&yolo, "Conv+Swish+Add"),
        57,
        "{yolo:?}"
    );
    // The 6 bottleneck shortcuts add onto such a conv's output.
    assert_eq!(count(&yolo, "Conv+Swish+Add"), 6, "{yolo:?}");
    assert_eq!(
        (count(&yolo, "Swish"), count(&yolo, "Mul")),
        (0, 1),
        "{yolo:?}"
    );
    assert_eq!(count(&yolo, "Sigmoid"), 1, "{yolo:?}");
    // PP-OCRv4 det: all 24 decomposed HardSwish chains fuse (then into the
    // conv before them, with the scalar Mul/Add that follows each); no Clip
    // is left.
    let det = optimized_zoo_ops("ppocr_v4_det.onnx", "x = [1, 3, 640, 640]");
    assert_eq!(count(&det, "Conv+HardSwish+Affine"), 24, "{det:?}");
    assert_eq!(
        (count(&det, "HardSwish"), count(&det, "Clip")),
        (0, 0),
        "{det:?}"
    );
    // The Relus of the SE branches and the head fuse into their convs.
    assert!(count(&det, "Conv+Relu") >= 10, "{det:?}");
    // GELU (erf form): MiniLM-L3 has one per layer.
    let minilm = optimized_zoo_ops(
        "minilm_l3.onnx",
        "input_ids = [1, 128]\nattention_mask = [1, 128]",
    );
    assert_eq!(count(&minilm, "Gelu"), 3, "{minilm:?}");
    assert_eq!(count(&minilm, "Erf"), 0, "{minilm:?}");
    // Attention: each layer's Transposes, Q·Kᵀ, Div, mask Add, Softmax,
    // ·V and output Transpose are one node; no Softmax or Transpose is
    // left, and the only MatMuls left carry a weight.
    assert_eq!(count(&minilm, "Attention"), 3, "{minilm:?}");
    assert_eq!(
        (
            count(&minilm, "Softmax"),
            count(&minilm, "Transpose"),
            count(&minilm, "MatMul")
        ),
        (0, 0, 0),
        "{minilm:?}"
    );
    // PP-OCRv6 det: its 13 GELUs fuse, then into the convolution before
    // each, and 19 of its 20 Relus into theirs, through the `Identity`
    // Paddle puts after each bias `Add` (the last Relu follows a
    // ConvTranspose).
    let v6 = optimized_zoo_ops("ppocr_v6_det_small.onnx", "x = [1, 3, 480, 480]");
    assert_eq!(
        (
            count(&v6, "Conv+Gelu"),
            count(&v6, "Gelu"),
            count(&v6, "Erf")
        ),
        (13, 0, 0),
        "{v6:?}"
    );
    assert_eq!(
        (count(&v6, "Conv+Relu"), count(&v6, "Relu")),
        (19, 1),
        "{v6:?}"
    );
    assert_eq!(count(&v6, "Identity"), 0, "{v6:?}");
    // Residual adds: 10 onto a convolution's output in PP-OCRv6 det (the
    // other 13 join two shared values), and in MiniLM the attention
    // output and FFN projections (MatMul + bias) of all 3 layers.
    assert_eq!(count(&v6, "Conv+Add"), 10, "{v6:?}");
    assert_eq!(
        (
            count(&minilm, "MatMul+Add+Add"),
            count(&minilm, "MatMul+Add")
        ),
        (6, 12),
        "{minilm:?}"
    );
    // Decomposed LayerNorms (ReduceMean … Sqrt, Div, Mul, Add): the SVTR
    // neck of PP-OCRv4 rec has 5, no ReduceMean is left.
    let rec = optimized_zoo_ops("ppocr_v4_rec.onnx", "x = [1, 3, 48, 320]");
    assert_eq!(
        (count(&rec, "LayerNormalization"), count(&rec, "ReduceMean")),
        (5, 0),
        "{rec:?}"
    );
    // ... and the per-channel Mul/Add pair Paddle emits for each of the 52
    // batch norms folds into the conv before it (86 Mul and 89 Add before,
    // 34 and 37 after that step, 10 and 13 after the scalar ones): the
    // Mul/Add left scale an SE branch or join branches.
    assert_eq!(convs(&det), 62, "{det:?}");
    assert_eq!(
        (count(&det, "Mul"), count(&det, "Add")),
        (10, 13),
        "{det:?}"
    );
    // PP-OCR cls exports its 35 batch norms as BatchNormalization nodes
    // after a convolution: all fold into it (and the HardSwish or Relu
    // after them then into its epilogue).
    let cls = optimized_zoo_ops("ppocr_cls.onnx", "x = [1, 3, 48, 192]");
    assert_eq!(count(&cls, "BatchNormalization"), 0, "{cls:?}");
    assert_eq!(count(&cls, "HardSwish"), 0, "{cls:?}");
}
