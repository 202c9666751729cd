//! Loading models: folding, error reporting, limits, the artifact cache and sizing.
use std::path::Path;

use lele_build::compile::{optimize, resolve_input_dims};
use lele_build::config::ModelToml;
use lele_build::onnx::{Limits, proto};
use lele_build::{BuildError, ir::Graph};

use crate::builders::*;

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

/// A model output that is a view of a model input, reshaped by a
/// caller-given shape: the output gets its own copy (an `Identity`
/// kernel, added after the passes), which sizing must take as keeping the
/// element count of the data-dependent view it reads (the conformance
/// suite's Reshape/Squeeze/Unsqueeze cases with the shape as an input).
#[test]
fn the_copy_of_a_data_dependent_view_output_is_sized() {
    let m = model(
        vec![node("Reshape", &["x", "shape"], &["y"], vec![])],
        vec![],
        vec![value_info("x", 1, &[2, 3, 4]), value_info("shape", 7, &[3])],
        vec![value_info("y", 1, &[4, 2, 3])],
    );
    let mut g = load(&m).unwrap();
    let toml = ModelToml::parse("[model]\npath = \"m.onnx\"\n").unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    optimize(&mut g, &dims, true, &Default::default()).unwrap();
    lele_build::compile::copy_outputs_out_of_inputs_and_weights(&mut g);
    let copy = g.main.nodes.last().unwrap();
    assert!(copy.name.ends_with("::copy"), "{}", copy.name);
    let sizes = size_declared(&g).unwrap();
    assert_eq!(sizes.max_bytes[&g.outputs[0]], 2 * 3 * 4 * 4);
}
