//! Concat and Split whose pieces live inside the whole (`plan::pieces`):
//! when the plan lays them out so, and when it must not.
use lele_build::ir::Graph;
use lele_build::onnx::proto;
use lele_build::plan::Plan;

use crate::builders::*;

/// Arena byte offset of value `name`.
fn at(g: &Graph, p: &Plan, name: &str) -> usize {
    p.regions[&value(g, name)].0
}

/// Whether the node whose first output is `name` moves nothing.
fn moves_nothing(g: &Graph, p: &Plan, name: &str) -> bool {
    p.pieces_in_place.contains_key(&value(g, name))
}

fn f32s(name: &str, dims: &[i64]) -> proto::ValueInfoProto {
    value_info(name, 1, dims)
}

/// `out = Relu(Concat(concat_inputs, axis))` over `a = Relu(x)` and
/// `b = Neg(x)`, `x` of `dims`; `a` is also a model output when
/// `a_is_output`.
fn concat_model(
    dims: &[i64],
    concat_inputs: &[&str],
    axis: usize,
    a_is_output: bool,
) -> proto::ModelProto {
    let mut out_dims = dims.to_vec();
    out_dims[axis] *= concat_inputs.len() as i64;
    let mut outputs = vec![f32s("out", &out_dims)];
    if a_is_output {
        outputs.push(f32s("a", dims));
    }
    model(
        vec![
            node("Relu", &["x"], &["a"], vec![]),
            node("Neg", &["x"], &["b"], vec![]),
            node(
                "Concat",
                concat_inputs,
                &["c"],
                vec![int_attr("axis", axis as i64)],
            ),
            node("Relu", &["c"], &["out"], vec![]),
        ],
        vec![],
        vec![f32s("x", dims)],
        outputs,
    )
}

/// A C2f block in small: a Split of a conv-like output, a layer on one
/// half, and a Concat of both halves and that layer.
#[test]
fn split_and_concat_of_a_c2f_block_move_nothing() {
    let m = model(
        vec![
            node("Relu", &["x"], &["a"], vec![]),
            node(
                "Split",
                &["a", "sizes"],
                &["y0", "y1"],
                vec![int_attr("axis", 1)],
            ),
            node("Neg", &["y1"], &["m"], vec![]),
            node(
                "Concat",
                &["y0", "y1", "m"],
                &["c"],
                vec![int_attr("axis", 1)],
            ),
            node("Relu", &["c"], &["out"], vec![]),
        ],
        vec![i64_init("sizes", &[2, 2])],
        vec![f32s("x", &[1, 4, 8, 8])],
        vec![f32s("out", &[1, 6, 8, 8])],
    );
    let (g, p) = planned(&m);
    assert!(moves_nothing(&g, &p, "y0"), "the Split moves nothing");
    assert!(moves_nothing(&g, &p, "c"), "the Concat moves nothing");
    let c = at(&g, &p, "c");
    // Two channels of 8×8 f32 are 512 bytes.
    assert_eq!(at(&g, &p, "a"), c);
    assert_eq!(at(&g, &p, "y0"), c);
    assert_eq!(at(&g, &p, "y1"), c + 512);
    assert_eq!(at(&g, &p, "m"), c + 1024);
    assert_eq!(p.regions[&value(&g, "m")].1, 512);
    // The output does not overlap the concatenation it is computed from.
    let out = at(&g, &p, "out");
    assert!(out >= c + 1536 || out + 1536 <= c);
}

/// A Concat along a later axis moves nothing when the dims before it are 1.
#[test]
fn a_concat_along_rows_of_a_single_plane_moves_nothing() {
    let m = concat_model(&[1, 1, 4, 16], &["a", "b"], 2, false);
    let (g, p) = planned(&m);
    assert!(moves_nothing(&g, &p, "c"));
    assert_eq!(at(&g, &p, "b"), at(&g, &p, "c") + 256);
}

/// Cases where the pieces cannot be consecutive aligned byte ranges of the
/// whole: the Concat copies as before.
#[test]
fn concats_that_cannot_share_bytes_still_copy() {
    let case = |dims: &[i64], concat_inputs: &[&str], a_is_output: bool| {
        let m = concat_model(dims, concat_inputs, 1, a_is_output);
        let (g, p) = planned(&m);
        moves_nothing(&g, &p, "c")
    };
    // The control: this one moves nothing.
    assert!(case(&[1, 2, 8, 8], &["a", "b"], false));
    // Two images: each piece is two separate ranges.
    assert!(!case(&[2, 2, 8, 8], &["a", "b"], false));
    // The same value twice.
    assert!(!case(&[1, 2, 8, 8], &["a", "a"], false));
    // A model input is not in the arena.
    assert!(!case(&[1, 2, 8, 8], &["x", "b"], false));
    // A piece that is also a model output.
    assert!(!case(&[1, 2, 8, 8], &["a", "b"], true));
    // 3×5 floats: the second piece would start 60 bytes in, unaligned.
    assert!(!case(&[1, 1, 3, 5], &["a", "b"], false));
}

/// Shapes that depend on the input dims give offsets unknown at build time.
#[test]
fn concats_of_run_time_sized_values_still_copy() {
    let m = concat_model(&[1, 2, 8, 8], &["a", "b"], 1, false);
    let (g, p) = planned_graph(load(&m).unwrap(), "x = [1, 2, \"h <= 8\", 8]");
    assert!(!moves_nothing(&g, &p, "c"));
    let (g, p) = planned_graph(load(&m).unwrap(), "x = [1, 2, 8, 8]");
    assert!(moves_nothing(&g, &p, "c"));
}

/// An elementwise node whose input is read for the last time may overwrite
/// it, unless that input is a piece of a Concat (or the whole): then it
/// would change the other value too.
#[test]
fn pieces_are_never_overwritten_in_place() {
    let build = |dims: &[i64]| {
        let mut out_dims = dims.to_vec();
        out_dims[1] *= 2;
        model(
            vec![
                node("Relu", &["x"], &["a"], vec![]),
                node("Neg", &["x"], &["b"], vec![]),
                node("Concat", &["a", "b"], &["c"], vec![int_attr("axis", 1)]),
                node("Neg", &["c"], &["out"], vec![]),
                // Last read of `a`, after the Concat.
                node("Neg", &["a"], &["d"], vec![]),
            ],
            vec![],
            vec![f32s("x", dims)],
            vec![f32s("out", &out_dims), f32s("d", dims)],
        )
    };
    let (g, p) = planned(&build(&[1, 2, 8, 8]));
    assert!(moves_nothing(&g, &p, "c"));
    assert!(!p.in_place.contains(&value(&g, "d")));
    assert!(!p.in_place.contains(&value(&g, "out")));
    // With two images the Concat copies, and `d` overwrites `a` as before.
    let (g, p) = planned(&build(&[2, 2, 8, 8]));
    assert!(!moves_nothing(&g, &p, "c"));
    assert!(p.in_place.contains(&value(&g, "d")));
}
