//! Pins the compile errors of `#[lele::model]` (run with `TRYBUILD=overwrite`
//! to update the expected output after an intended change).
#[test]
fn diagnostics() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
