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
        ("dfn3_enc_100", "dfn3_enc.onnx"),
        ("dfn3_erb_dec_100", "dfn3_erb_dec.onnx"),
        ("dfn3_df_dec_100", "dfn3_df_dec.onnx"),
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

// ---------------------------------------------------------------------------
// Hostile models, names and inputs (issue 50, classes 6, 7, 10 and 11):
// small models built in code, written to a scratch directory.

mod hostile {
    use std::path::{Path, PathBuf};

    use lele_build::error::is_unsafe_char;
    use lele_build::onnx::proto;
    use prost::Message;

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    /// A tensor value; a dim that is not a number is a named (dynamic) dim.
    pub fn vi(name: &str, elem: i32, dims: &[&str]) -> proto::ValueInfoProto {
        use proto::tensor_shape_proto::{Dimension, dimension};
        let dim = dims
            .iter()
            .map(|d| Dimension {
                value: Some(match d.parse::<i64>() {
                    Ok(n) => dimension::Value::DimValue(n),
                    Err(_) => dimension::Value::DimParam(d.to_string()),
                }),
                ..Default::default()
            })
            .collect();
        proto::ValueInfoProto {
            name: s(name),
            r#type: Some(proto::TypeProto {
                value: Some(proto::type_proto::Value::TensorType(
                    proto::type_proto::Tensor {
                        elem_type: Some(elem),
                        shape: Some(proto::TensorShapeProto { dim }),
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> proto::NodeProto {
        proto::NodeProto {
            op_type: s(op),
            name: s(name),
            input: inputs.iter().map(|x| x.to_string()).collect(),
            output: outputs.iter().map(|x| x.to_string()).collect(),
            ..Default::default()
        }
    }

    /// Writes the model into `dir/model.onnx`.
    pub fn write_model(
        dir: &Path,
        nodes: Vec<proto::NodeProto>,
        inputs: Vec<proto::ValueInfoProto>,
        outputs: Vec<proto::ValueInfoProto>,
        metadata: &[(&str, &str)],
    ) -> PathBuf {
        let m = proto::ModelProto {
            ir_version: Some(8),
            producer_name: s("evil\u{1b}]0;title\u{7}producer"),
            opset_import: vec![proto::OperatorSetIdProto {
                domain: s(""),
                version: Some(17),
            }],
            metadata_props: metadata
                .iter()
                .map(|(k, v)| proto::StringStringEntryProto {
                    key: s(k),
                    value: s(v),
                })
                .collect(),
            graph: Some(proto::GraphProto {
                node: nodes,
                input: inputs,
                output: outputs,
                name: s("g"),
                ..Default::default()
            }),
            ..Default::default()
        };
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join("model.onnx");
        std::fs::write(&p, m.encode_to_vec()).unwrap();
        p
    }

    /// A fresh scratch directory.
    pub fn scratch(what: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lele-hostile-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Panics if `text` holds a character a terminal or rustc could act on
    /// (line breaks aside).
    pub fn assert_safe(what: &str, text: &str) {
        if let Some(c) = text.chars().find(|&c| c != '\n' && is_unsafe_char(c)) {
            panic!("{what}: raw {c:?} in:\n{}", text.escape_debug());
        }
    }

    /// An `.npy` file of this raw header text (version 1) and data.
    pub fn npy_with_header(path: &Path, header: &str, data: &[u8]) {
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        std::fs::write(path, out).unwrap();
    }
}

/// `lele run` checks `--shape` and `.npy` inputs before allocating for
/// them: a huge or wrapping element count, dims against the model's, and a
/// malformed header are each an error naming the input (exit code 1), not
/// an abort or a panic; nothing is compiled for them.
#[test]
fn run_checks_shapes_and_npy_inputs_before_allocating() {
    use hostile::*;
    let dir = scratch("shapes");
    let model = write_model(
        &dir,
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![vi("x", 1, &["n", "4"])],
        vec![vi("y", 1, &["n", "4"])],
        &[],
    );
    let run = |extra: &[&str]| {
        let out = lele()
            .arg("run")
            .arg(&model)
            .arg("--out")
            .arg(dir.join("out"))
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {stderr}");
        stderr
    };
    for (args, wanted) in [
        (&["--random", "--shape", "x=99999999999,4"][..], "exceeds"),
        (
            &["--random", "--shape", "x=4294967296,4294967296,0"],
            "exceeds",
        ),
        (&["--random", "--shape", "x=1073741824,4"], "exceeds"),
        (
            &["--random", "--shape", "x=2,5"],
            "dim 1 is 5 but the model fixes it to 4",
        ),
        (&["--random", "--shape", "x=2,4,1"], "has 3 dims"),
        (
            &["--random", "--shape", "y=2,4"],
            "--shape `y` is not an input",
        ),
    ] {
        let e = run(args);
        assert!(e.contains(wanted), "{args:?}: {e}");
        assert!(e.contains('x') || e.contains('y'), "{args:?}: {e}");
    }
    let h = |shape: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    for (file, header, data, wanted) in [
        ("swapped.npy", h(")2, 4("), &[][..], "bad shape"),
        (
            "wraps.npy",
            h("(4294967296, 4294967296, 0)"),
            &[][..],
            "exceeds",
        ),
        (
            "huge.npy",
            h("(1099511627776, 4)"),
            &[0u8; 16][..],
            "exceeds",
        ),
        ("short.npy", h("(2, 4)"), &[0u8; 16][..], "needs 32"),
        ("rank.npy", h("(8,)"), &[0u8; 32][..], "has 1 dims"),
    ] {
        let p = dir.join(file);
        npy_with_header(&p, &header, data);
        let e = run(&["--input", &format!("x={}", p.display())]);
        assert!(e.contains(wanted), "{file}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Inputs named like the parameters of the generated `forward` (`profiler`,
/// `ws`, `self`), and names, node names and metadata holding CR, newlines,
/// ESC sequences and bidi overrides: `lele gen` writes code that parses,
/// whose functions bind every parameter once, and with no raw control or
/// bidi character anywhere (doc comments included); `lele inspect` shows
/// all of it escaped, non-ASCII letters intact.
#[test]
fn gen_and_inspect_guard_hostile_names() {
    use hostile::*;
    let dir = scratch("names");
    let names = [
        "profiler",
        "Profiler",
        "profiler_",
        "ws",
        "self",
        "cr\rname",
        "rlo\u{202e}name",
        "esc\u{1b}[31mred",
        "line\nbreak",
        "é",
    ];
    let outs: Vec<String> = names.iter().map(|n| format!("{n}\u{2066}out")).collect();
    let nodes = names
        .iter()
        .zip(&outs)
        .map(|(n, o)| node("Relu", &format!("node\u{1b}[2J{n}"), &[n], &[o]))
        .collect();
    let model = write_model(
        &dir,
        nodes,
        names.iter().map(|n| vi(n, 1, &["2"])).collect(),
        outs.iter().map(|o| vi(o, 1, &["2"])).collect(),
        &[("key\u{1b}[1m", "value\r\u{202e}\u{85}")],
    );
    let gen_dir = dir.join("gen");
    let out = lele()
        .arg("gen")
        .arg(&model)
        .arg("-o")
        .arg(&gen_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_safe("gen stdout", &stdout);
    let src = std::fs::read_to_string(gen_dir.join("model.rs")).unwrap();
    assert_safe("generated source", &src);
    let file = syn::parse_file(&src).expect("generated source parses");
    let mut forwards = 0;
    for item in &file.items {
        let syn::Item::Impl(imp) = item else { continue };
        for it in &imp.items {
            let syn::ImplItem::Fn(f) = it else { continue };
            let mut seen = std::collections::HashSet::new();
            for arg in &f.sig.inputs {
                let name = match arg {
                    syn::FnArg::Receiver(_) => "self".to_string(),
                    syn::FnArg::Typed(t) => match &*t.pat {
                        syn::Pat::Ident(i) => i.ident.to_string(),
                        p => panic!("unexpected pattern {}", quote::quote!(#p)),
                    },
                };
                assert!(
                    seen.insert(name.clone()),
                    "`{name}` bound twice in {}",
                    f.sig.ident
                );
            }
            if f.sig.ident.to_string().starts_with("forward") {
                forwards += 1;
                assert_eq!(
                    f.sig.inputs.len(),
                    names.len() + 2 + usize::from(f.sig.ident != "forward")
                );
            }
        }
    }
    assert_eq!(forwards, 3, "forward, forward_profiled and forward_impl");
    // Each name reaches the doc comments escaped.
    assert!(src.contains("`cr\\u{d}name`"), "{src}");
    assert!(src.contains("`rlo\\u{202e}name`"));
    assert!(src.contains("`é`"));

    let out = lele().arg("inspect").arg(&model).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_safe("inspect", &text);
    assert!(
        text.contains("producer: evil\\u{1b}]0;title\\u{7}producer"),
        "{text}"
    );
    assert!(text.contains("esc\\u{1b}[31mred"), "{text}");
    assert!(text.contains("line\\u{a}break"), "{text}");
    assert!(text.contains("  é "), "{text}");

    // An unsupported op with an ESC in its type, domain and node name: the
    // inspect listing and the compile error show them escaped.
    let evil = write_model(
        &dir.join("evil"),
        vec![proto_node_in_domain()],
        vec![vi("x\u{1b}[8m", 1, &["1"])],
        vec![vi("y", 1, &["1"])],
        &[],
    );
    let out = lele().arg("inspect").arg(&evil).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_safe("inspect of an unsupported op", &text);
    assert!(text.contains("Evil\\u{1b}[2J"), "{text}");
    let out = lele()
        .arg("gen")
        .arg(&evil)
        .arg("-o")
        .arg(dir.join("gen-evil"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_safe("gen error", &stderr);
    assert!(stderr.contains("Evil\\u{1b}[2J"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn proto_node_in_domain() -> lele_build::onnx::proto::NodeProto {
    let mut n = hostile::node("Evil\u{1b}[2J", "n\u{9b}31m", &["x\u{1b}[8m"], &["y"]);
    n.domain = Some("dom\u{202e}ain".into());
    n
}

/// `lele run` through generated code on a model whose names collide after
/// sanitizing (`a/b` and `a_b`, `o/1` and `o_1`, two non-ASCII names, an
/// output named like an input's file), with inputs named `profiler` and
/// with CR and U+202E, and an output declared f32 that computes i64:
/// every input and output gets its own file, each output holds its own
/// values, and the i64 output is written as i64. (Builds a runner crate:
/// slow the first time.)
#[test]
fn run_writes_every_output_to_its_own_file_with_its_computed_dtype() {
    use hostile::*;
    let dir = scratch("run-files");
    let inputs = ["profiler", "a/b", "a_b", "rlo\u{202e}\r"];
    let model = write_model(
        &dir,
        vec![
            node("Relu", "r0", &["profiler"], &["o/1"]),
            node("Neg", "r1", &["a/b"], &["o_1"]),
            node("Relu", "r2", &["a_b"], &["é"]),
            node("Neg", "r3", &["rlo\u{202e}\r"], &["ü"]),
            node("Neg", "r4", &["a_b"], &["profiler.input"]),
            node("Shape", "r5", &["profiler"], &["shape"]),
        ],
        inputs.iter().map(|n| vi(n, 1, &["3"])).collect(),
        vec![
            vi("o/1", 1, &["3"]),
            vi("o_1", 1, &["3"]),
            vi("é", 1, &["3"]),
            vi("ü", 1, &["3"]),
            vi("profiler.input", 1, &["3"]),
            // Declared f32; Shape computes i64.
            vi("shape", 1, &["1"]),
        ],
        &[],
    );
    let out_dir = dir.join("out");
    let out = lele()
        .arg("run")
        .arg(&model)
        .args(["--random", "--seed", "3", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_safe("run stdout", &stdout);
    let read = |f: &str| lele_build::npy::read(&out_dir.join(f)).unwrap();
    let vals = |f: &str| read(f).to_f64s().unwrap();
    let (p, ab, a_b, rlo) = (
        vals("profiler.input.npy"),
        vals("a_b.input.npy"),
        vals("a_b_2.input.npy"),
        vals("rlo__.input.npy"),
    );
    // Four distinct random inputs.
    assert!(
        p != ab && ab != a_b && a_b != rlo,
        "{p:?} {ab:?} {a_b:?} {rlo:?}"
    );
    let relu = |v: &[f64]| v.iter().map(|x| x.max(0.0)).collect::<Vec<_>>();
    let neg = |v: &[f64]| v.iter().map(|x| -x).collect::<Vec<_>>();
    assert_eq!(vals("o_1.npy"), relu(&p));
    assert_eq!(vals("o_1_2.npy"), neg(&ab));
    assert_eq!(vals("_.npy"), relu(&a_b));
    assert_eq!(vals("__2.npy"), neg(&rlo));
    assert_eq!(vals("profiler.input_2.npy"), neg(&a_b));
    let shape = read("shape.npy");
    assert_eq!(shape.dtype, lele_kernels::DType::I64);
    assert_eq!(shape.to_i64s().unwrap(), vec![3]);
    assert!(stdout.contains("(output `o/1`)"), "{stdout}");
    assert!(stdout.contains("__2.npy (output `ü`)"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lele bench --latency` takes at least 10,000 calls and reports the
/// tail of their distribution and the init time.
#[test]
fn bench_latency_reports_the_tail_over_ten_thousand_calls() {
    let zoo = lele_build::config::zoo_dir();
    let step = fixtures_dir().join("silero_vad_16k").join("step0");
    let mut cmd = lele();
    cmd.arg("bench").arg(zoo.join("silero_vad.onnx"));
    for (i, name) in ["input", "state", "sr"].iter().enumerate() {
        let file = step.join(format!("in_{i}.npy"));
        cmd.arg("--input").arg(format!("{name}={}", file.display()));
    }
    let out = cmd
        .args(["--latency", "--runs", "5", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let r: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(r["runs"].as_u64(), Some(10_000), "{r}");
    let (p50, p99, p999, max) = (
        r["median_ms"].as_f64().unwrap(),
        r["p99_ms"].as_f64().unwrap(),
        r["p999_ms"].as_f64().unwrap(),
        r["max_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= max, "{r}");
    assert!(r["init_ms"].as_f64().unwrap() > 0.0, "{r}");
}

/// `lele bench --profile` reports each node's arithmetic and bytes: every
/// convolution of YOLOv8n has its products counted, and their sum at
/// 640×640 is within 15% of the 8.7 GFLOPs its authors publish (which
/// also count activations and the box decoding); the table shows rates.
#[test]
fn bench_profile_counts_each_nodes_work() {
    let zoo = lele_build::config::zoo_dir();
    let out = lele()
        .arg("bench")
        .arg(zoo.join("yolov8n_320n.onnx"))
        .args(["--random", "--shape", "images=1,3,640,640"])
        .args(["--profile", "--runs", "1", "--warmup", "0", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r.get("flops").is_some())
        .collect();
    assert!(rows.len() > 50, "{} profile rows", rows.len());
    let mut total = 0u64;
    for r in &rows {
        let (op, flops) = (r["op"].as_str().unwrap(), r["flops"].as_u64().unwrap());
        if op.starts_with("Conv") {
            // Views (Reshape, a Split into pieces) move nothing.
            assert!(flops > 0 && r["bytes"].as_u64().unwrap() > 0, "{r}");
        }
        total += flops;
    }
    let gflops = total as f64 / 1e9;
    assert!(
        (8.7 * 0.85..8.7 * 1.15).contains(&gflops),
        "{gflops} GFLOPs"
    );
    let table = lele()
        .arg("bench")
        .arg(zoo.join("yolov8n_320n.onnx"))
        .args(["--random", "--shape", "images=1,3,64,96"])
        .args(["--profile", "--runs", "1", "--warmup", "0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success() && text.contains("GFLOP/s"), "{text}");
}

/// Where the snapshot of [`gen_output_matches_its_snapshot`] lives.
fn snapshot_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/small_model.rs")
}

/// `lele gen` of a small model (a SiLU the compiler fuses, a transpose, a
/// softmax, a view and a ReLU), compared line by line with the checked-in
/// `tests/snapshots/small_model.rs`, the model hash masked (it changes
/// with every compiler change). Each node's statement carries a comment
/// naming its op type and ONNX node. After an intended change to the
/// generated code, refresh the snapshot with
/// `LELE_UPDATE_SNAPSHOTS=1 cargo test -p lele-build --test cli gen_output`
/// and review its diff.
#[test]
fn gen_output_matches_its_snapshot() {
    use hostile::*;
    use lele_build::onnx::proto;
    let dir = scratch("snapshot");
    let ints = |name: &str, v: &[i64]| proto::AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ..Default::default()
    };
    let int = |name: &str, v: i64| proto::AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    };
    let mut transpose = node("Transpose", "/block/Transpose", &["silu"], &["t"]);
    transpose.attribute.push(ints("perm", &[0, 2, 1]));
    let mut softmax = node("Softmax", "/block/Softmax", &["t"], &["p"]);
    softmax.attribute.push(int("axis", -1));
    let mut flatten = node("Flatten", "/head/Flatten", &["p"], &["f"]);
    flatten.attribute.push(int("axis", 1));
    let nodes = vec![
        node("Sigmoid", "/block/Sigmoid", &["x"], &["s"]),
        node("Mul", "/block/Mul", &["x", "s"], &["silu"]),
        transpose,
        softmax,
        flatten,
        node("Relu", "/head/Relu", &["f"], &["y"]),
    ];
    let model = write_model(
        &dir,
        nodes,
        vec![vi("x", 1, &["1", "4", "6"])],
        vec![vi("y", 1, &["1", "24"])],
        &[],
    );
    let gen_dir = dir.join("gen");
    let out = lele()
        .arg("gen")
        .arg(&model)
        .arg("-o")
        .arg(&gen_dir)
        .args(["--name", "SmallModel"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let src = std::fs::read_to_string(gen_dir.join("small_model.rs")).unwrap();
    let masked: String = src
        .lines()
        .map(
            |l| match l.split_once("pub const MODEL_HASH: &'static str = ") {
                Some((indent, _)) => {
                    format!("{indent}pub const MODEL_HASH: &'static str = \"…\";\n")
                }
                None => format!("{l}\n"),
            },
        )
        .collect();
    let path = snapshot_path();
    if std::env::var_os("LELE_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &masked).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; write it with LELE_UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    if masked != want {
        let first = masked
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(masked.lines().count().min(want.lines().count()));
        panic!(
            "generated code differs from {} from line {}:\n  got:  {:?}\n  want: {:?}\n\
             (after an intended change: LELE_UPDATE_SNAPSHOTS=1, then review the diff)",
            path.display(),
            first + 1,
            masked.lines().nth(first),
            want.lines().nth(first)
        );
    }
    for note in [
        "// Swish `/block/Mul::silu`",
        "// Transpose `/block/Transpose`",
        "// Softmax `/block/Softmax`",
        "// Flatten `/head/Flatten`",
        "// Relu `/head/Relu`",
    ] {
        assert!(masked.contains(note), "no `{note}` comment");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lele inspect` of the zoo's GGUF model: its header, not an ONNX error.
#[test]
fn inspect_reads_a_gguf_header() {
    let path = lele_build::config::zoo_dir().join("gemma-3-270m-q4_k_m.gguf");
    let out = lele().arg("inspect").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for says in [
        "GGUF version 3   architecture: gemma3   tensors: 236",
        "gemma3.block_count",
        "tokenizer.ggml.tokens                        [262144 items]",
        "Q4K",
        "Q6K",
        "decoder: Gemma3, 18 layers of width 640, 4 heads over 1 key/value heads of 256",
    ] {
        assert!(text.contains(says), "{says} not in:\n{text}");
    }
}
