//! Pins the compile errors of `#[lele::model]` (run with `TRYBUILD=overwrite`
//! to update the expected output after an intended change).
use std::path::PathBuf;

use lele_build::onnx::proto;
use prost::Message;

// The frontend tests' model builders (their other helpers go unused here).
#[allow(dead_code)]
#[path = "../../lele-build/tests/frontend/builders.rs"]
mod builders;
use builders::{i64_init, model, node, value_info};

const F32: i32 = 1;

/// `tests/ui`: mistakes a user makes. `tests/hostile`: hostile models and
/// tomls (issue 50), each of which must be a `compile_error!` on the
/// attribute, never a rustc crash, a hang or an allocation of gigabytes;
/// `tests/hostile_pass`: hostile names that must compile. One test, so the
/// environment is set before any cargo child starts.
#[test]
fn diagnostics() {
    write_hostile_models();
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.compile_fail("tests/hostile/*.rs");
    t.pass("tests/hostile_pass/*.rs");
}

/// Generates the hostile models (nothing binary is committed) into a
/// directory the tomls reach as `${LELE_UI_HOSTILE}`.
fn write_hostile_models() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui-hostile");
    std::fs::create_dir_all(&dir).expect("creating the models' directory");
    let write = |name: &str, m: &proto::ModelProto| {
        std::fs::write(dir.join(name), m.encode_to_vec()).expect("writing a model");
    };
    // 2^21 x 2^21 floats: a 16 TiB arena, far past the default cap.
    write(
        "huge_arena.onnx",
        &model(
            vec![node("Expand", &["x", "sh"], &["y"], vec![])],
            vec![i64_init("sh", &[1 << 21, 1 << 21])],
            vec![value_info("x", F32, &[1])],
            vec![value_info("y", F32, &[1 << 21, 1 << 21])],
        ),
    );
    // 2^32 x 2^32 elements: the count wraps to 0 in unchecked arithmetic.
    write(
        "wrapped_count.onnx",
        &model(
            vec![
                node("ConstantOfShape", &["sh"], &["big"], vec![]),
                node("CumSum", &["big", "axis"], &["y"], vec![]),
            ],
            vec![i64_init("sh", &[1 << 32, 1 << 32]), i64_init("axis", &[0])],
            vec![],
            vec![value_info("y", F32, &[])],
        ),
    );
    // Names that once reached rustc: a keyword-like field, a carriage return
    // and a right-to-left override in names that become doc comments.
    write(
        "hostile_names.onnx",
        &model(
            vec![node("Relu", &["profiler"], &["out\r\u{202e}put"], vec![])],
            vec![],
            vec![value_info("profiler", F32, &[2])],
            vec![value_info("out\r\u{202e}put", F32, &[2])],
        ),
    );
    std::fs::write(
        dir.join("garbage.onnx"),
        b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    )
    .expect("writing a garbage model");
    // SAFETY: set before trybuild starts its cargo child, which inherits it;
    // no other thread of this test binary reads the environment meanwhile.
    unsafe { std::env::set_var("LELE_UI_HOSTILE", &dir) };
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/hostile/*.rs");
    t.pass("tests/hostile/pass_*.rs");
}
