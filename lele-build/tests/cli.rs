//! The `lele` binary on real models: `run` through generated code against
//! ONNX Runtime reference outputs, and `inspect` naming what is missing.
use std::path::{Path, PathBuf};
use std::process::Command;

use lele_build::ir::Tensor;

fn fixtures_dir() -> PathBuf {
    std::env::var_os("LELE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fixtures"))
}

fn lele() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lele"))
}

/// |lele - ort| <= 1e-4 + 1e-3 |ort| for floats, equality otherwise.
fn check(what: &str, actual: &Tensor, expected: &Tensor) {
    assert_eq!(actual.dims, expected.dims, "{what}: shape");
    assert_eq!(actual.dtype, expected.dtype, "{what}: dtype");
    if expected.dtype.is_float() {
        let (a, e) = (actual.to_f64s().unwrap(), expected.to_f64s().unwrap());
        let bad = a
            .iter()
            .zip(&e)
            .filter(|(x, y)| {
                let err = (*x - *y).abs();
                err.is_nan() || err > 1e-4 + 1e-3 * y.abs()
            })
            .count();
        assert_eq!(
            bad,
            0,
            "{what}: {bad} of {} elements out of tolerance",
            e.len()
        );
    } else {
        assert_eq!(actual.bytes(), expected.bytes(), "{what}: values");
    }
}

fn file_name(name: &str) -> String {
    lele_build::cli::file_name(name)
}

fn run_case(case: &str, model: &str) {
    let dir = fixtures_dir().join(case);
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("case.json")).expect("run `cargo xtask fixtures`"),
    )
    .unwrap();
    let zoo = lele_build::config::zoo_dir();
    let out = std::env::temp_dir().join(format!("lele-cli-{case}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut cmd = lele();
    cmd.arg("run").arg(zoo.join(model)).arg("--out").arg(&out);
    for (i, inp) in meta["inputs"].as_array().unwrap().iter().enumerate() {
        let name = inp["name"].as_str().unwrap();
        cmd.arg("--input").arg(format!(
            "{name}={}",
            dir.join("step0").join(format!("in_{i}.npy")).display()
        ));
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "lele run failed on {case}");
    for (j, o) in meta["outputs"].as_array().unwrap().iter().enumerate() {
        let name = o["name"].as_str().unwrap();
        let actual = lele_build::npy::read(&out.join(format!("{}.npy", file_name(name)))).unwrap();
        let expected =
            lele_build::npy::read(&dir.join("step0").join(format!("out_{j}.npy"))).unwrap();
        check(&format!("{case}/{name}"), &actual, &expected);
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn run_matches_ort_on_every_supported_model() {
    for (case, model) in [
        ("silero_vad_16k", "silero_vad.onnx"),
        ("ppocr_v4_det_320x480", "ppocr_v4_det.onnx"),
        ("ppocr_v4_rec_48x320", "ppocr_v4_rec.onnx"),
        ("ppocr_cls_48x192", "ppocr_cls.onnx"),
        ("ppocr_v6_det_480x480", "ppocr_v6_det_small.onnx"),
        ("ppocr_v6_rec_48x320", "ppocr_v6_rec_small.onnx"),
        ("yolov8n_320", "yolov8n_320n.onnx"),
        ("minilm_l3_seq16", "minilm_l3.onnx"),
        ("minilm_int8_seq32", "minilm_l6_int8.onnx"),
        ("ddddocr_common_160", "ddddocr_common.onnx"),
        ("oww_mel", "oww_melspectrogram.onnx"),
        ("oww_embedding", "oww_embedding.onnx"),
    ] {
        run_case(case, model);
    }
}

#[test]
fn run_random_writes_seeded_inputs_and_outputs() {
    let zoo = lele_build::config::zoo_dir();
    let out = std::env::temp_dir().join(format!("lele-cli-random-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let ok = lele()
        .args(["run"])
        .arg(zoo.join("yolov8n_320n.onnx"))
        .args([
            "--random",
            "--seed",
            "7",
            "--shape",
            "images=1,3,64,96",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let input = lele_build::npy::read(&out.join("images.input.npy")).unwrap();
    assert_eq!(input.dims, vec![1, 3, 64, 96]);
    let vals = input.to_f64s().unwrap();
    assert!(vals.iter().all(|v| (-1.0..1.0).contains(v)));
    let output = lele_build::npy::read(&out.join("output0.npy")).unwrap();
    // 64x96 input: (8*12 + 4*6 + 2*3) anchors, 4 box + 18 class rows.
    assert_eq!(output.dims, vec![1, 22, 126]);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn inspect_names_every_missing_op() {
    let zoo = lele_build::config::zoo_dir();
    let out = lele()
        .arg("inspect")
        .arg(zoo.join("ddddocr_common_old.onnx"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("unsupported op types"))
        .expect(&text);
    assert_eq!(
        line,
        "unsupported op types (1): com.microsoft.DynamicQuantizeLSTM x1"
    );
    let ok = lele()
        .arg("inspect")
        .arg(zoo.join("silero_vad.onnx"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8(ok.stdout)
            .unwrap()
            .contains("unsupported: none")
    );
}

/// `lele inspect … | head -1`: once the reader is gone, the command ends
/// quietly (exit 0, nothing on stderr) instead of panicking on the write.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    use std::process::Stdio;
    let zoo = lele_build::config::zoo_dir();
    let mut child = lele()
        .arg("inspect")
        .arg(zoo.join("ppocr_v4_det.onnx"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the child writes anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn gen_writes_formatted_source_and_weights() {
    let zoo = lele_build::config::zoo_dir();
    let out = std::env::temp_dir().join(format!("lele-cli-gen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let toml = out.with_extension("toml");
    std::fs::write(
        &toml,
        format!(
            "[model]\npath = {:?}\n\n[inputs]\ninput = [1, \"n <= 576\"]\nstate = [2, 1, 128]\nsr = []\n",
            zoo.join("silero_vad.onnx").display().to_string()
        ),
    )
    .unwrap();
    let ok = lele()
        .arg("gen")
        .arg(zoo.join("silero_vad.onnx"))
        .arg("-o")
        .arg(&out)
        .args(["--name", "SileroVad", "--toml"])
        .arg(&toml)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let src = std::fs::read_to_string(out.join("silero_vad.rs")).unwrap();
    // Formatted (one item per line), parseable, and referencing its weights file.
    syn::parse_file(&src).expect("generated source parses");
    assert!(src.contains("pub struct SileroVad {"));
    assert!(src.contains("include_bytes!(\"silero_vad.weights\")"));
    let weights = std::fs::metadata(out.join("silero_vad.weights"))
        .unwrap()
        .len();
    assert!(src.contains(&format!("pub const WEIGHTS_BYTES: usize = {weights}usize;")));
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&toml);
}
