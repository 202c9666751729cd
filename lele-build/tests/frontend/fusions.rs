//! Each fusion pass on small models built in code: what fuses and what must not.
use lele_build::ir::Graph;
use lele_build::onnx::proto;

use crate::builders::*;

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
    let w = f32_tensor("w", &[2, 1, 1, 1], &[2.0, 3.0]);
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
            f32_tensor("b", &[2], &[1.0, -1.0]),
            f32_tensor("s", &[1, 2, 1, 1], &[0.5, 4.0]),
            f32_tensor("t", &[2, 1, 1], &[10.0, 20.0]),
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
    let vals = |i: usize| constant_input(&g, conv, i);
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
    let per_channel = |name: &str, v: [f32; 2]| f32_tensor(name, &[2], &v);
    let build = |training: bool| {
        let w = f32_tensor("w", &[2, 1, 1, 1], &[2.0, 3.0]);
        let attrs = vec![
            proto::AttributeProto {
                name: s("epsilon"),
                f: Some(0.5),
                r#type: Some(proto::attribute_proto::AttributeType::Float as i32),
                ..Default::default()
            },
            int_attr("training_mode", training as i64),
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
    let vals = |i: usize| constant_input(&g, conv, i);
    // s = scale/√(var + ε) = [1.5, -1], t = shift - mean·s = [-5, -1.75]:
    // W·s and (no bias) t.
    assert_eq!(vals(1), vec![3.0, -3.0]);
    assert_eq!(vals(2), vec![-5.0, -1.75]);
    assert_eq!(conv.outputs, g.outputs);
    // Training mode normalizes with the batch's own statistics: kept.
    assert_eq!(op_types(&build(true)), vec!["Conv", "BatchNormalization"]);
}

#[test]
fn affine_and_activation_after_a_conv_transpose_fuse_into_it() {
    // y = Relu(Add(Mul(ConvTranspose(x, W, B), s), t)), two groups: W is
    // [C = 2, M/group = 2, 1, 1], input channel 1 feeding outputs 2 and 3.
    let build = |activation: &str| {
        let m = model(
            vec![
                node(
                    "ConvTranspose",
                    &["x", "w", "b"],
                    &["c"],
                    vec![int_attr("group", 2)],
                ),
                node("Mul", &["c", "s"], &["m"], vec![]),
                node("Add", &["m", "t"], &["a"], vec![]),
                node(activation, &["a"], &["y"], vec![]),
            ],
            vec![
                f32_tensor("w", &[2, 2, 1, 1], &[1.0, 2.0, 3.0, 4.0]),
                f32_tensor("b", &[4], &[1.0, 1.0, 1.0, 1.0]),
                f32_tensor("s", &[1, 4, 1, 1], &[0.5, 2.0, -1.0, 3.0]),
                f32_tensor("t", &[4, 1, 1], &[1.0, 2.0, 3.0, 4.0]),
            ],
            vec![value_info("x", 1, &[1, 2, 2, 2])],
            vec![value_info("y", 1, &[1, 4, 2, 2])],
        );
        optimized(&m)
    };
    let g = build("Relu");
    assert_eq!(op_types(&g), vec!["ConvTranspose+Relu"]);
    let conv = &g.main.nodes[0];
    let vals = |i: usize| constant_input(&g, conv, i);
    // W[c, j]·s[group(c)·2 + j] and B·s + t.
    assert_eq!(vals(1), vec![0.5, 4.0, -3.0, 12.0]);
    assert_eq!(vals(2), vec![1.5, 4.0, 2.0, 7.0]);
    assert_eq!(conv.outputs, g.outputs);
    // An activation lele does not fuse stays after the folded product.
    assert_eq!(op_types(&build("Tanh")), vec!["ConvTranspose", "Tanh"]);
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
    let mat_init = |name: &str, dims: &[i64]| f32_ramp(name, dims, 1.0);
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
    let init = |name: &str, dims: &[i64]| f32_ramp(name, dims, 1.0 / 8.0);
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
    let branch = |out: &str| {
        let name = if out == "c" {
            "then_branch"
        } else {
            "else_branch"
        };
        graph_attr(name, vec![], &[out], &[1, 2, 3, 3])
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

/// The fusions run inside `If` branches too: a Conv → Relu chain in the
/// `then` branch becomes one node, while in the `else` branch, which also
/// returns the convolution's output, the two stay apart.
#[test]
fn fusions_apply_inside_if_branches() {
    let init = |name: &str, dims: &[i64]| f32_ramp(name, dims, 1.0 / 8.0);
    let then_branch = graph_attr(
        "then_branch",
        vec![
            node("Conv", &["x", "w", "b"], &["tc"], vec![]),
            node("Relu", &["tc"], &["tr"], vec![]),
            node("Conv", &["x", "w", "b"], &["tc2"], vec![]),
        ],
        &["tr", "tc2"],
        &[1, 2, 3, 3],
    );
    let else_branch = graph_attr(
        "else_branch",
        vec![
            node("Conv", &["x", "w", "b"], &["ec"], vec![]),
            node("Relu", &["ec"], &["er"], vec![]),
        ],
        &["er", "ec"],
        &[1, 2, 3, 3],
    );
    let m = model(
        vec![node(
            "If",
            &["cond"],
            &["y", "z"],
            vec![then_branch, else_branch],
        )],
        vec![init("w", &[2, 1, 1, 1]), init("b", &[2])],
        vec![
            value_info("x", 1, &[1, 1, 3, 3]),
            value_info("cond", 9, &[]),
        ],
        vec![
            value_info("y", 1, &[1, 2, 3, 3]),
            value_info("z", 1, &[1, 2, 3, 3]),
        ],
    );
    assert_eq!(
        op_types(&optimized(&m)),
        vec!["If", "Conv+Relu", "Conv", "Conv", "Relu"]
    );
}

/// A `Cast` to its input's own type and a `Slice` over whole axes (start
/// 0, end past any dimension, step 1) become views that vanish; a `Slice`
/// that cuts and a `Cast` that converts stay.
#[test]
fn no_op_casts_and_slices_vanish() {
    let cast = |to: i64| int_attr("to", to);
    let m = model(
        vec![
            node("Slice", &["x", "zero", "end", "ax1"], &["a"], vec![]),
            node("Cast", &["a"], &["b"], vec![cast(1)]),
            node("Slice", &["b", "zero", "two", "ax2", "one"], &["c"], vec![]),
            node("Cast", &["c"], &["y"], vec![cast(11)]),
        ],
        vec![
            i64_init("zero", &[0]),
            i64_init("end", &[i64::MAX]),
            i64_init("two", &[2]),
            i64_init("one", &[1]),
            i64_init("ax1", &[1]),
            i64_init("ax2", &[2]),
        ],
        vec![value_info("x", 1, &[1, 3, 4])],
        vec![value_info("y", 11, &[1, 3, 2])],
    );
    assert_eq!(op_types(&optimized(&m)), vec!["Slice", "Cast"]);
}
