//! Hostile models the compiler must refuse with a clear error.
use lele_build::compile::{optimize, resolve_input_dims};
use lele_build::config::ModelToml;
use lele_build::error::BuildError;

use crate::builders::{graph_attr, load, model, node, value_info};

/// An `If` whose branches return values of different dtypes (f32 and i64)
/// is a `BuildError::Node` naming the node and both dtypes, not an output
/// whose bytes are read as the wrong type.
#[test]
fn if_branches_of_different_dtypes_are_an_error() {
    let m = model(
        vec![node(
            "If",
            &["cond"],
            &["z"],
            vec![
                graph_attr("then_branch", vec![], &["xf"], &[2]),
                graph_attr("else_branch", vec![], &["xi"], &[2]),
            ],
        )],
        vec![],
        vec![
            value_info("cond", 9, &[]),
            value_info("xf", 1, &[2]),
            value_info("xi", 7, &[2]),
        ],
        vec![value_info("z", 1, &[2])],
    );
    let mut g = load(&m).unwrap();
    let toml = ModelToml::parse("[model]\npath = \"m.onnx\"\n").unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    match optimize(&mut g, &dims, true, &Default::default()) {
        Err(e @ BuildError::Node { .. }) => {
            let text = e.to_string();
            assert!(text.contains("If_z"), "{text}");
            assert!(
                text.contains("f32 in then_branch but i64 in else_branch"),
                "{text}"
            );
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(()) => panic!("an If with f32 and i64 branches compiled"),
    }
    // Branches of one dtype still compile.
    let same = model(
        vec![node(
            "If",
            &["cond"],
            &["z"],
            vec![
                graph_attr("then_branch", vec![], &["xf"], &[2]),
                graph_attr("else_branch", vec![], &["yf"], &[2]),
            ],
        )],
        vec![],
        vec![
            value_info("cond", 9, &[]),
            value_info("xf", 1, &[2]),
            value_info("yf", 1, &[2]),
        ],
        vec![value_info("z", 1, &[2])],
    );
    let mut g = load(&same).unwrap();
    let dims = resolve_input_dims(&g, &toml).unwrap();
    optimize(&mut g, &dims, true, &Default::default()).unwrap();
}
