//! Builders of small ONNX models in code, and the compiler steps the tests run on them.
use std::path::Path;

use lele_build::compile::{
    copy_outputs_out_of_inputs_and_weights, optimize, resolve_input_dims, sizing_points,
};
use lele_build::config::ModelToml;
use lele_build::ir::Graph;
use lele_build::onnx::{Limits, from_proto, proto};
use lele_build::passes::size_graph;
use lele_build::plan::{Plan, plan};

pub(crate) fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

pub(crate) fn value_info(name: &str, elem: i32, dims: &[i64]) -> proto::ValueInfoProto {
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

pub(crate) fn node(
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

pub(crate) fn int_attr(name: &str, v: i64) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        i: Some(v),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    }
}

pub(crate) fn i64_init(name: &str, vals: &[i64]) -> proto::TensorProto {
    proto::TensorProto {
        name: s(name),
        data_type: Some(7),
        dims: vec![vals.len() as i64],
        int64_data: vals.to_vec(),
        ..Default::default()
    }
}

/// A scalar f32 initializer.
pub(crate) fn f32_init(name: &str, v: f32) -> proto::TensorProto {
    proto::TensorProto {
        name: s(name),
        data_type: Some(1),
        dims: vec![],
        float_data: vec![v],
        ..Default::default()
    }
}

/// An f32 initializer of these dims and values.
pub(crate) fn f32_tensor(name: &str, dims: &[i64], vals: &[f32]) -> proto::TensorProto {
    proto::TensorProto {
        name: s(name),
        data_type: Some(1),
        dims: dims.to_vec(),
        float_data: vals.to_vec(),
        ..Default::default()
    }
}

/// An f32 initializer of these dims holding `0, step, 2·step, …`.
pub(crate) fn f32_ramp(name: &str, dims: &[i64], step: f32) -> proto::TensorProto {
    let vals: Vec<f32> = (0..dims.iter().product::<i64>())
        .map(|v| v as f32 * step)
        .collect();
    f32_tensor(name, dims, &vals)
}

/// A graph attribute (an `If` branch) named `name`: `nodes`, returning
/// the f32 values `outputs`, each of `dims`.
pub(crate) fn graph_attr(
    name: &str,
    nodes: Vec<proto::NodeProto>,
    outputs: &[&str],
    dims: &[i64],
) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        r#type: Some(proto::attribute_proto::AttributeType::Graph as i32),
        g: Some(proto::GraphProto {
            name: s(name),
            node: nodes,
            output: outputs.iter().map(|o| value_info(o, 1, dims)).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The values of node `n`'s input `i`, a constant after the passes.
pub(crate) fn constant_input(g: &Graph, n: &lele_build::ir::Node, i: usize) -> Vec<f64> {
    g.values[n.inputs[i].expect("the input is present")]
        .constant
        .as_ref()
        .expect("the input is a constant")
        .to_f64s()
        .expect("the constant is numeric")
}

pub(crate) fn model(
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

pub(crate) fn load(m: &proto::ModelProto) -> lele_build::Result<Graph> {
    from_proto(m, Path::new("."), &Limits::default())
}

/// Loads a test model (no `[inputs]` needed) and runs the compiler's passes.
pub(crate) fn optimized(m: &proto::ModelProto) -> Graph {
    let mut g = load(m).unwrap();
    let toml = ModelToml::parse("[model]\npath = \"m.onnx\"\n").unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    optimize(&mut g, &dims, true, &Default::default()).unwrap();
    g
}

/// Compiles a graph up to its memory plan, as `compile` does: passes,
/// sizing at the dims of `[inputs]` lines `inputs` (empty: as declared),
/// planning.
pub(crate) fn planned_graph(mut g: Graph, inputs: &str) -> (Graph, Plan) {
    let toml =
        ModelToml::parse(&format!("[model]\npath = \"m.onnx\"\n[inputs]\n{inputs}\n")).unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    optimize(&mut g, &dims, true, &Default::default()).unwrap();
    copy_outputs_out_of_inputs_and_weights(&mut g);
    let sizes = size_graph(&g, &sizing_points(&dims)).unwrap();
    let p = plan(&g, &sizes);
    (g, p)
}

/// [`planned_graph`] of a test model at its declared dims.
pub(crate) fn planned(m: &proto::ModelProto) -> (Graph, Plan) {
    planned_graph(load(m).unwrap(), "")
}

/// The value named `name`.
pub(crate) fn value(g: &Graph, name: &str) -> usize {
    g.values
        .iter()
        .position(|v| v.name == name)
        .unwrap_or_else(|| panic!("no value {name}"))
}

pub(crate) fn op_types(g: &Graph) -> Vec<String> {
    let mut v = Vec::new();
    g.for_each_node(&mut |n| v.push(n.op_type.clone()));
    v
}
