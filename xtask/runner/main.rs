//! The conformance runner (copied into the generated crate by
//! `cargo xtask conformance`): runs every compiled case on each of its data
//! sets and prints one JSON line per case with the comparison result.
mod cases;

use std::path::Path;

use lele::DType;
use lele_build::ir::Tensor;

/// What a case's `run` returns: outputs in ONNX order.
pub type Outputs = Result<Vec<Tensor>, String>;

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn values(t: &Tensor) -> Option<Vec<f64>> {
    t.to_f64s()
}

/// Compares one output; `Err` says how it differs.
fn compare(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    // bfloat16 expectations are stored as their uint16 bits.
    let bits;
    let want = if got.dtype == DType::BF16 && want.dtype == DType::U16 {
        let dims = want.shape().map_err(|e| e.to_string())?;
        bits = Tensor::from_bytes(DType::BF16, dims.dims(), want.bytes()).ok_or("bf16 bits")?;
        &bits
    } else {
        want
    };
    let gs = got.shape().map_err(|e| e.to_string())?;
    let ws = want.shape().map_err(|e| e.to_string())?;
    if gs.dims() != ws.dims() {
        return Err(format!("shape {:?}, expected {:?}", gs.dims(), ws.dims()));
    }
    let same_kind = got.dtype == want.dtype
        || matches!((got.dtype, want.dtype), (DType::Bool, DType::U8) | (DType::U8, DType::Bool));
    if !same_kind {
        return Err(format!(
            "dtype {}, expected {}",
            got.dtype.name(),
            want.dtype.name()
        ));
    }
    if !want.dtype.is_float() {
        if got.bytes() != want.bytes() {
            let (g, w) = (values(got).unwrap_or_default(), values(want).unwrap_or_default());
            let i = g.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "element {i}: {} vs expected {}",
                g.get(i).copied().unwrap_or(f64::NAN),
                w.get(i).copied().unwrap_or(f64::NAN)
            ));
        }
        return Ok(());
    }
    let (g, w) = (
        values(got).ok_or("unreadable output")?,
        values(want).ok_or("unreadable expected output")?,
    );
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = if b.is_nan() {
            a.is_nan()
        } else if b.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= atol + rtol * b.abs()
        };
        if !ok {
            return Err(format!("element {i}: {a} vs expected {b}"));
        }
    }
    Ok(())
}

fn run_case(dir: &Path, sets: usize, rtol: f64, atol: f64, run: fn(&Path) -> Outputs) -> (String, String) {
    for k in 0..sets {
        let set = dir.join(format!("set{k}"));
        let got = match std::panic::catch_unwind(|| run(&set)) {
            Ok(Ok(g)) => g,
            Ok(Err(e)) => return ("runtime-error".into(), e),
            Err(_) => return ("panic".into(), "the generated model panicked".into()),
        };
        for (j, g) in got.iter().enumerate() {
            let want = match lele_build::npy::read(&set.join(format!("out_{j}.npy"))) {
                Ok(t) => t,
                Err(e) => return ("harness-error".into(), e.to_string()),
            };
            if let Err(e) = compare(g, &want, rtol, atol) {
                return ("wrong-result".into(), format!("set {k} output {j}: {e}"));
            }
        }
    }
    ("pass".into(), String::new())
}

fn main() {
    let root = std::env::args().nth(1).expect("usage: runner CASES_DIR");
    let root = Path::new(&root);
    std::panic::set_hook(Box::new(|_| {}));
    for (name, sets, rtol, atol, run) in cases::CASES {
        let (status, detail) = run_case(&root.join(name), *sets, *rtol, *atol, *run);
        println!(
            "{{\"case\":{},\"status\":{},\"detail\":{}}}",
            json_str(name),
            json_str(&status),
            json_str(&detail)
        );
    }
}
