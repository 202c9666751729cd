//! Random small ONNX graphs: ops from a table of common ones, attribute
//! values and int64 arguments that are often hostile (0, negative, 2^32,
//! 2^62, i64::MAX…), inputs of random dtypes with fixed, hostile or dynamic
//! dims bounded (sometimes oddly) in the toml.
use lele_build::onnx::proto;
use proto::tensor_shape_proto::{Dimension, dimension};

use crate::harness::Rng;

pub const F32: i32 = 1;
pub const U8: i32 = 2;
pub const I8: i32 = 3;
pub const I32: i32 = 6;
pub const I64: i32 = 7;
pub const BOOL: i32 = 9;
pub const F16: i32 = 10;
pub const F64: i32 = 11;

/// A compiler case: the model and its toml.
#[derive(Clone, Debug)]
pub struct Case {
    pub model: proto::ModelProto,
    pub toml: String,
}

pub fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

/// Mostly small, often hostile.
pub fn hostile_i64(rng: &mut Rng) -> i64 {
    match rng.below(24) {
        0..=11 => rng.range(-2, 6),
        12 => 0,
        13 => -1,
        14 => i64::MAX,
        15 => i64::MIN,
        16 => 1 << 32,
        17 => 1 << 62,
        18 => (1 << 31) - 1,
        19 => 1 << 31,
        20 => -(1 << 32),
        21 => rng.next_u64() as i64,
        22 => 1 << rng.below(63),
        _ => rng.range(-100, 100),
    }
}

fn small_dim(rng: &mut Rng) -> i64 {
    if rng.chance(1, 12) {
        hostile_i64(rng)
    } else {
        rng.range(1, 5)
    }
}

fn hostile_f32(rng: &mut Rng) -> f32 {
    match rng.below(14) {
        0..=6 => rng.range(-4, 4) as f32 * 0.5,
        7 => f32::NAN,
        8 => f32::INFINITY,
        9 => f32::NEG_INFINITY,
        10 => 1e-42,
        11 => 1e30,
        12 => -0.0,
        _ => f32::from_bits(rng.next_u64() as u32),
    }
}

pub fn tensor_type(elem: i32, dims: Option<&[Dimension]>) -> proto::TypeProto {
    proto::TypeProto {
        value: Some(proto::type_proto::Value::TensorType(
            proto::type_proto::Tensor {
                elem_type: Some(elem),
                shape: dims.map(|d| proto::TensorShapeProto { dim: d.to_vec() }),
            },
        )),
        ..Default::default()
    }
}

pub fn fixed(d: i64) -> Dimension {
    Dimension {
        value: Some(dimension::Value::DimValue(d)),
        ..Default::default()
    }
}

pub fn param(p: &str) -> Dimension {
    Dimension {
        value: Some(dimension::Value::DimParam(p.into())),
        ..Default::default()
    }
}

pub fn vi(name: &str, elem: i32, dims: Option<&[Dimension]>) -> proto::ValueInfoProto {
    proto::ValueInfoProto {
        name: s(name),
        r#type: Some(tensor_type(elem, dims)),
        ..Default::default()
    }
}

pub fn attr_i(name: &str, v: i64) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        i: Some(v),
        r#type: Some(2),
        ..Default::default()
    }
}

pub fn attr_f(name: &str, v: f32) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        f: Some(v),
        r#type: Some(1),
        ..Default::default()
    }
}

pub fn attr_s(name: &str, v: &str) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        s: Some(v.as_bytes().to_vec()),
        r#type: Some(3),
        ..Default::default()
    }
}

pub fn attr_ints(name: &str, v: Vec<i64>) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        ints: v,
        r#type: Some(7),
        ..Default::default()
    }
}

pub fn attr_t(name: &str, t: proto::TensorProto) -> proto::AttributeProto {
    proto::AttributeProto {
        name: s(name),
        t: Some(t),
        r#type: Some(4),
        ..Default::default()
    }
}

pub fn i64_tensor(name: &str, dims: Vec<i64>, vals: Vec<i64>) -> proto::TensorProto {
    proto::TensorProto {
        name: s(name),
        data_type: Some(I64),
        dims,
        int64_data: vals,
        ..Default::default()
    }
}

pub fn f32_tensor(name: &str, dims: Vec<i64>, vals: Vec<f32>) -> proto::TensorProto {
    proto::TensorProto {
        name: s(name),
        data_type: Some(F32),
        dims,
        raw_data: Some(vals.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

/// A value available to later nodes.
#[derive(Clone)]
struct Val {
    name: String,
    dtype: i32,
    rank: Option<usize>,
}

struct Gen<'a> {
    rng: &'a mut Rng,
    nodes: Vec<proto::NodeProto>,
    inits: Vec<proto::TensorProto>,
    inputs: Vec<proto::ValueInfoProto>,
    pool: Vec<Val>,
    n: usize,
    toml_inputs: Vec<String>,
}

impl Gen<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.n += 1;
        format!("{prefix}{}", self.n)
    }

    /// A data operand: mostly an existing value (recent ones preferred),
    /// else a new float initializer.
    fn data(&mut self) -> Val {
        if !self.pool.is_empty() && self.rng.chance(4, 5) {
            let n = self.pool.len();
            let i = if self.rng.chance(1, 2) {
                n - 1
            } else {
                self.rng.below(n)
            };
            return self.pool[i].clone();
        }
        self.float_init(None)
    }

    fn float_init(&mut self, rank: Option<usize>) -> Val {
        let rank = rank.unwrap_or_else(|| self.rng.below(4));
        let dims: Vec<i64> = (0..rank).map(|_| small_dim(self.rng)).collect();
        let name = self.fresh("w");
        let count: i64 = dims.iter().map(|&d| d.clamp(0, 64)).product();
        let mut count = count.clamp(0, 4096) as usize;
        if self.rng.chance(1, 20) {
            count = self.rng.below(8);
        }
        let vals: Vec<f32> = (0..count).map(|_| hostile_f32(self.rng)).collect();
        let mut t = f32_tensor(&name, dims, vals);
        if self.rng.chance(1, 3) {
            t.float_data = t
                .raw_data
                .take()
                .unwrap_or_default()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
        }
        self.inits.push(t);
        let v = Val {
            name,
            dtype: F32,
            rank: Some(rank),
        };
        self.pool.push(v.clone());
        v
    }

    /// An int64 argument of `len` elements (a random length when `None`),
    /// rank 1 or, for `scalar`, rank 0; sometimes a dynamic value instead.
    fn ints(&mut self, len: Option<usize>, scalar: bool, make: fn(&mut Rng) -> i64) -> String {
        if self.rng.chance(1, 12) {
            let ints: Vec<Val> = self
                .pool
                .iter()
                .filter(|v| v.dtype == I64)
                .cloned()
                .collect();
            if !ints.is_empty() {
                return self.rng.pick(&ints).name.clone();
            }
        }
        let len = if scalar {
            1
        } else {
            len.unwrap_or_else(|| self.rng.below(5))
        };
        let vals: Vec<i64> = (0..len).map(|_| make(self.rng)).collect();
        let name = self.fresh("k");
        let dims = if scalar { vec![] } else { vec![len as i64] };
        self.inits.push(i64_tensor(&name, dims, vals));
        name
    }

    fn float_scalar(&mut self) -> String {
        let name = self.fresh("f");
        let v = hostile_f32(self.rng);
        self.inits.push(f32_tensor(&name, vec![], vec![v]));
        name
    }

    fn rank_of(&mut self, v: &Val) -> usize {
        v.rank.unwrap_or_else(|| 1 + self.rng.below(4))
    }

    /// Axis-like: mostly in range for `rank`, sometimes hostile.
    fn axis(&mut self, rank: usize) -> i64 {
        if self.rng.chance(1, 6) {
            hostile_i64(self.rng)
        } else {
            let r = rank.max(1) as i64;
            self.rng.range(-r, r - 1)
        }
    }

    fn axes(&mut self, rank: usize) -> Vec<i64> {
        let n = self.rng.below(rank + 2);
        (0..n).map(|_| self.axis(rank)).collect()
    }

    fn spatial(&mut self, n: usize, lo: i64) -> Vec<i64> {
        (0..n)
            .map(|_| {
                if self.rng.chance(1, 8) {
                    hostile_i64(self.rng)
                } else {
                    self.rng.range(lo, 3)
                }
            })
            .collect()
    }

    fn opt(&mut self, name: String) -> String {
        if self.rng.chance(1, 5) {
            String::new()
        } else {
            name
        }
    }

    fn input(&mut self, k: usize) {
        let name = format!("x{k}");
        let dtype = *self
            .rng
            .pick(&[F32, F32, F32, F32, F32, I64, I64, BOOL, I32, F16, U8]);
        let rank = self.rng.below(5);
        let mut dims = Vec::new();
        let mut toml = Vec::new();
        let mut dynamic = false;
        for i in 0..rank {
            match self.rng.below(10) {
                0..=5 => {
                    let d = self.rng.range(1, 6);
                    dims.push(fixed(d));
                    toml.push(d.to_string());
                }
                6..=8 => {
                    dynamic = true;
                    let p = format!("n{}", self.rng.below(2) + i % 2);
                    dims.push(param(&p));
                    toml.push(bound(self.rng));
                }
                _ => {
                    let d = hostile_i64(self.rng);
                    dims.push(fixed(d));
                    toml.push(if d >= 0 { d.to_string() } else { "1".into() });
                }
            }
        }
        // The toml entry is needed for dynamic dims; it sometimes has the
        // wrong length or is missing.
        if dynamic || self.rng.chance(1, 6) {
            if self.rng.chance(1, 10) {
                toml.pop();
            }
            if self.rng.chance(1, 10) {
                toml.push(bound(self.rng));
            }
            if !self.rng.chance(1, 20) {
                self.toml_inputs
                    .push(format!("{name} = [{}]", toml.join(", ")));
            }
        }
        let declared = if self.rng.chance(1, 15) {
            None
        } else {
            Some(&dims[..])
        };
        self.inputs.push(vi(&name, dtype, declared));
        self.pool.push(Val {
            name,
            dtype,
            rank: Some(rank),
        });
    }

    /// One node from the table; returns its outputs.
    fn node(&mut self) {
        let op = *self.rng.pick(OPS);
        let mut ins: Vec<String>;
        let mut attrs: Vec<proto::AttributeProto> = Vec::new();
        let mut n_out = 1;
        let mut out_dtype = F32;
        let mut out_rank: Option<usize> = None;
        let x = self.data();
        let r = self.rank_of(&x);
        match op {
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Equal" | "Less"
            | "Greater" | "And" | "PRelu" | "Mod" => {
                let y = self.data();
                ins = vec![x.name.clone(), y.name];
                if matches!(op, "Equal" | "Less" | "Greater" | "And") {
                    out_dtype = BOOL;
                }
                if op == "Mod" && self.rng.chance(1, 2) {
                    attrs.push(attr_i("fmod", self.rng.range(0, 1)));
                }
            }
            "Relu" | "Sigmoid" | "Tanh" | "Exp" | "Log" | "Sqrt" | "Neg" | "Abs" | "Erf"
            | "Not" | "Identity" | "Floor" | "Reciprocal" | "NonZero" | "Size" | "Shape"
            | "GlobalAveragePool" | "Sign" => {
                ins = vec![x.name.clone()];
                out_rank = x.rank;
                match op {
                    "NonZero" | "Shape" | "Size" => out_dtype = I64,
                    "Not" => out_dtype = BOOL,
                    _ => {}
                }
                if op == "Shape" {
                    if self.rng.chance(1, 2) {
                        attrs.push(attr_i("start", self.axis(r)));
                    }
                    if self.rng.chance(1, 2) {
                        attrs.push(attr_i("end", self.axis(r + 1)));
                    }
                }
            }
            "Reshape" => {
                let len = if self.rng.chance(3, 4) {
                    Some(1 + self.rng.below(4))
                } else {
                    None
                };
                let sh = self.ints(len, false, |rng| {
                    if rng.chance(1, 2) {
                        rng.range(-1, 4)
                    } else {
                        hostile_i64(rng)
                    }
                });
                ins = vec![x.name.clone(), sh];
                if self.rng.chance(1, 4) {
                    attrs.push(attr_i("allowzero", self.rng.range(0, 1)));
                }
            }
            "Transpose" => {
                ins = vec![x.name.clone()];
                if self.rng.chance(4, 5) {
                    let mut perm: Vec<i64> = (0..r as i64).collect();
                    for i in (1..perm.len()).rev() {
                        perm.swap(i, self.rng.below(i + 1));
                    }
                    if self.rng.chance(1, 5) && !perm.is_empty() {
                        let i = self.rng.below(perm.len());
                        perm[i] = hostile_i64(self.rng);
                    }
                    attrs.push(attr_ints("perm", perm));
                }
                out_rank = x.rank;
            }
            "Concat" | "Sum" | "Mean" => {
                ins = vec![x.name.clone()];
                for _ in 0..self.rng.below(3) {
                    let y = self.data();
                    ins.push(y.name);
                }
                if op == "Concat" {
                    attrs.push(attr_i("axis", self.axis(r)));
                }
                out_rank = x.rank;
            }
            "Slice" => {
                let n = if self.rng.chance(3, 4) {
                    Some(1 + self.rng.below(r.max(1)))
                } else {
                    None
                };
                let st = self.ints(n, false, hostile_i64);
                let en = self.ints(n, false, hostile_i64);
                ins = vec![x.name.clone(), st, en];
                if self.rng.chance(2, 3) {
                    let ax = self.ints(n, false, |rng| rng.range(-2, 3));
                    ins.push(ax);
                    if self.rng.chance(1, 2) {
                        let stp = self.ints(n, false, hostile_i64);
                        ins.push(stp);
                    }
                }
                out_rank = x.rank;
            }
            "Gather" | "GatherElements" | "GatherND" => {
                let n = 1 + self.rng.below(3);
                let scalar = self.rng.chance(1, 4);
                let idx = self.ints(Some(n), scalar, hostile_i64);
                ins = vec![x.name.clone(), idx];
                if op != "GatherND" {
                    attrs.push(attr_i("axis", self.axis(r)));
                } else if self.rng.chance(1, 3) {
                    attrs.push(attr_i("batch_dims", hostile_i64(self.rng)));
                }
            }
            "Expand" | "Tile" => {
                let n = if self.rng.chance(3, 4) {
                    Some(r.max(1))
                } else {
                    None
                };
                let sh = self.ints(n, false, |rng| {
                    if rng.chance(2, 3) {
                        rng.range(1, 3)
                    } else {
                        hostile_i64(rng)
                    }
                });
                ins = vec![x.name.clone(), sh];
                out_rank = n;
            }
            "ConstantOfShape" => {
                let n = 1 + self.rng.below(3);
                let sh = self.ints(Some(n), false, |rng| {
                    if rng.chance(2, 3) {
                        rng.range(0, 4)
                    } else {
                        hostile_i64(rng)
                    }
                });
                ins = vec![sh];
                if self.rng.chance(1, 2) {
                    let v = hostile_f32(self.rng);
                    attrs.push(attr_t("value", f32_tensor("", vec![1], vec![v])));
                }
                out_rank = Some(n);
            }
            "Range" => {
                if self.rng.chance(1, 2) {
                    let a = self.ints(None, true, hostile_i64);
                    let b = self.ints(None, true, hostile_i64);
                    let d = self.ints(None, true, hostile_i64);
                    ins = vec![a, b, d];
                    out_dtype = I64;
                } else {
                    ins = (0..3).map(|_| self.float_scalar()).collect();
                }
                out_rank = Some(1);
            }
            "Pad" => {
                let pads = self.ints(Some(2 * r), false, |rng| {
                    if rng.chance(2, 3) {
                        rng.range(-1, 2)
                    } else {
                        hostile_i64(rng)
                    }
                });
                ins = vec![x.name.clone(), pads];
                if self.rng.chance(1, 2) {
                    let c = self.float_scalar();
                    ins.push(self.opt(c));
                }
                let mode = *self
                    .rng
                    .pick(&["constant", "reflect", "edge", "wrap", "bogus"]);
                attrs.push(attr_s("mode", mode));
                out_rank = x.rank;
            }
            "Resize" => {
                let roi = String::new();
                if self.rng.chance(1, 2) {
                    let name = self.fresh("sc");
                    let vals: Vec<f32> = (0..r)
                        .map(|_| {
                            if self.rng.chance(2, 3) {
                                self.rng.range(1, 3) as f32
                            } else {
                                hostile_f32(self.rng)
                            }
                        })
                        .collect();
                    self.inits.push(f32_tensor(&name, vec![r as i64], vals));
                    ins = vec![x.name.clone(), roi, name];
                } else {
                    let sizes = self.ints(Some(r), false, |rng| {
                        if rng.chance(2, 3) {
                            rng.range(1, 6)
                        } else {
                            hostile_i64(rng)
                        }
                    });
                    ins = vec![x.name.clone(), roi, String::new(), sizes];
                }
                let mode = *self.rng.pick(&["nearest", "linear", "cubic", "x"]);
                attrs.push(attr_s("mode", mode));
                if self.rng.chance(1, 2) {
                    let c = *self.rng.pick(&[
                        "half_pixel",
                        "asymmetric",
                        "align_corners",
                        "pytorch_half_pixel",
                        "tf_crop_and_resize",
                    ]);
                    attrs.push(attr_s("coordinate_transformation_mode", c));
                }
                out_rank = x.rank;
            }
            "Conv" | "ConvTranspose" => {
                let sp = r.saturating_sub(2).max(1);
                let w = self.float_init(Some(sp + 2));
                ins = vec![x.name.clone(), w.name];
                if self.rng.chance(1, 3) {
                    let b = self.float_init(Some(1));
                    ins.push(b.name);
                }
                for (key, lo) in [("kernel_shape", 1), ("strides", 1), ("dilations", 1)] {
                    if self.rng.chance(1, 2) {
                        let v = self.spatial(sp, lo);
                        attrs.push(attr_ints(key, v));
                    }
                }
                if self.rng.chance(1, 2) {
                    let v = self.spatial(2 * sp, 0);
                    attrs.push(attr_ints("pads", v));
                }
                if self.rng.chance(1, 3) {
                    attrs.push(attr_i("group", hostile_i64(self.rng)));
                }
                if self.rng.chance(1, 4) {
                    let a = *self
                        .rng
                        .pick(&["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]);
                    attrs.push(attr_s("auto_pad", a));
                }
                if op == "ConvTranspose" {
                    if self.rng.chance(1, 3) {
                        let v = self.spatial(sp, 0);
                        attrs.push(attr_ints("output_padding", v));
                    }
                    if self.rng.chance(1, 4) {
                        let v = self.spatial(sp, 1);
                        attrs.push(attr_ints("output_shape", v));
                    }
                }
                out_rank = x.rank;
            }
            "AveragePool" | "MaxPool" | "LpPool" => {
                let sp = r.saturating_sub(2).max(1);
                let k = self.spatial(sp, 1);
                attrs.push(attr_ints("kernel_shape", k));
                ins = vec![x.name.clone()];
                for (key, n, lo) in [
                    ("strides", sp, 1),
                    ("pads", 2 * sp, 0),
                    ("dilations", sp, 1),
                ] {
                    if self.rng.chance(1, 2) {
                        let v = self.spatial(n, lo);
                        attrs.push(attr_ints(key, v));
                    }
                }
                if self.rng.chance(1, 3) {
                    attrs.push(attr_i("ceil_mode", self.rng.range(0, 1)));
                }
                if self.rng.chance(1, 4) {
                    attrs.push(attr_i("count_include_pad", self.rng.range(0, 1)));
                }
                out_rank = x.rank;
            }
            "MatMul" | "Gemm" => {
                let y = if self.rng.chance(1, 2) {
                    self.data()
                } else {
                    self.float_init(Some(2))
                };
                ins = vec![x.name.clone(), y.name];
                if op == "Gemm" {
                    if self.rng.chance(1, 2) {
                        let c = self.data();
                        ins.push(c.name);
                    }
                    for key in ["transA", "transB"] {
                        if self.rng.chance(1, 2) {
                            attrs.push(attr_i(key, self.rng.range(0, 1)));
                        }
                    }
                    if self.rng.chance(1, 3) {
                        attrs.push(attr_f("alpha", hostile_f32(self.rng)));
                    }
                }
            }
            "DFT" => {
                // Lengths and axes mostly small, sometimes hostile.
                let len = self.ints(None, true, length_like);
                let axis = self.ints(None, true, |rng| rng.range(-4, 4));
                ins = vec![x.name.clone(), self.opt(len), self.opt(axis)];
                attrs.push(attr_i("inverse", self.rng.range(0, 1)));
                attrs.push(attr_i("onesided", self.rng.range(0, 1)));
                out_rank = x.rank;
            }
            "STFT" => {
                let step = self.ints(None, true, |rng| {
                    if rng.chance(2, 3) {
                        rng.range(-1, 9)
                    } else {
                        hostile_i64(rng)
                    }
                });
                let window = self.data();
                let frame = self.ints(None, true, length_like);
                ins = vec![x.name.clone(), step, self.opt(window.name), self.opt(frame)];
                attrs.push(attr_i("onesided", self.rng.range(0, 1)));
                out_rank = Some(4);
            }
            "HannWindow" | "MelWeightMatrix" => {
                let int = |rng: &mut Rng| {
                    if rng.chance(2, 3) {
                        rng.range(-1, 600)
                    } else {
                        hostile_i64(rng)
                    }
                };
                ins = vec![self.ints(None, true, int)];
                if op == "MelWeightMatrix" {
                    ins.push(self.ints(None, true, int));
                    ins.push(self.ints(None, true, int));
                    ins.push(self.float_scalar());
                    ins.push(self.float_scalar());
                    out_rank = Some(2);
                } else {
                    attrs.push(attr_i("periodic", self.rng.range(0, 1)));
                    out_rank = Some(1);
                }
            }
            "Softmax" | "LogSoftmax" | "Hardmax" | "Flatten" | "ArgMax" | "ArgMin" | "CumSum" => {
                ins = vec![x.name.clone()];
                if op == "CumSum" {
                    let a = self.ints(None, true, |rng| rng.range(-2, 3));
                    ins.push(a);
                    if self.rng.chance(1, 2) {
                        attrs.push(attr_i("exclusive", self.rng.range(0, 1)));
                    }
                    if self.rng.chance(1, 2) {
                        attrs.push(attr_i("reverse", self.rng.range(0, 1)));
                    }
                } else {
                    attrs.push(attr_i("axis", self.axis(r)));
                }
                if matches!(op, "ArgMax" | "ArgMin") {
                    out_dtype = I64;
                    attrs.push(attr_i("keepdims", self.rng.range(0, 1)));
                }
                out_rank = x.rank;
            }
            "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceProd" | "ReduceL2" => {
                ins = vec![x.name.clone()];
                let axes = self.axes(r);
                if op == "ReduceSum" || self.rng.chance(1, 2) {
                    if self.rng.chance(3, 4) {
                        let n = self.fresh("ax");
                        self.inits
                            .push(i64_tensor(&n, vec![axes.len() as i64], axes));
                        ins.push(n);
                    }
                } else {
                    attrs.push(attr_ints("axes", axes));
                }
                if self.rng.chance(1, 2) {
                    attrs.push(attr_i("keepdims", self.rng.range(0, 1)));
                }
                if self.rng.chance(1, 4) {
                    attrs.push(attr_i("noop_with_empty_axes", self.rng.range(0, 1)));
                }
            }
            "TopK" => {
                let k = self.ints(Some(1), false, |rng| {
                    if rng.chance(1, 2) {
                        rng.range(0, 4)
                    } else {
                        hostile_i64(rng)
                    }
                });
                ins = vec![x.name.clone(), k];
                attrs.push(attr_i("axis", self.axis(r)));
                if self.rng.chance(1, 3) {
                    attrs.push(attr_i("largest", self.rng.range(0, 1)));
                }
                n_out = 2;
                out_rank = x.rank;
            }
            "Split" => {
                n_out = 1 + self.rng.below(3);
                ins = vec![x.name.clone()];
                if self.rng.chance(1, 2) {
                    let sp = self.ints(Some(n_out), false, |rng| {
                        if rng.chance(2, 3) {
                            rng.range(0, 3)
                        } else {
                            hostile_i64(rng)
                        }
                    });
                    ins.push(sp);
                } else if self.rng.chance(1, 2) {
                    attrs.push(attr_i("num_outputs", n_out as i64));
                }
                attrs.push(attr_i("axis", self.axis(r)));
                out_rank = x.rank;
            }
            "Squeeze" | "Unsqueeze" => {
                ins = vec![x.name.clone()];
                if op == "Unsqueeze" || self.rng.chance(2, 3) {
                    let axes = self.axes(r + 1);
                    let n = self.fresh("ax");
                    self.inits
                        .push(i64_tensor(&n, vec![axes.len() as i64], axes));
                    ins.push(n);
                }
            }
            "Where" => {
                let c = self.fresh("c");
                let n = self.rng.range(1, 3);
                let vals: Vec<u8> = (0..n).map(|_| self.rng.below(2) as u8).collect();
                self.inits.push(proto::TensorProto {
                    name: s(&c),
                    data_type: Some(BOOL),
                    dims: vec![n],
                    raw_data: Some(vals),
                    ..Default::default()
                });
                let y = self.data();
                ins = vec![c, x.name.clone(), y.name];
            }
            "Cast" => {
                ins = vec![x.name.clone()];
                let to = if self.rng.chance(4, 5) {
                    *self.rng.pick(&[F32, I64, I32, BOOL, F16, F64, U8, I8])
                } else {
                    hostile_i64(self.rng) as i32
                };
                attrs.push(attr_i("to", to as i64));
                out_dtype = to;
                out_rank = x.rank;
            }
            "OneHot" => {
                let n = 1 + self.rng.below(3);
                let idx = self.ints(Some(n), false, hostile_i64);
                let depth = self.ints(None, true, |rng| {
                    if rng.chance(1, 2) {
                        rng.range(0, 5)
                    } else {
                        hostile_i64(rng)
                    }
                });
                let v = self.fresh("oh");
                self.inits.push(f32_tensor(&v, vec![2], vec![0.0, 1.0]));
                ins = vec![idx, depth, v];
                attrs.push(attr_i("axis", self.axis(2)));
            }
            "DepthToSpace" | "SpaceToDepth" => {
                ins = vec![x.name.clone()];
                let b = if self.rng.chance(1, 2) {
                    self.rng.range(1, 3)
                } else {
                    hostile_i64(self.rng)
                };
                attrs.push(attr_i("blocksize", b));
                if op == "DepthToSpace" && self.rng.chance(1, 2) {
                    let m = *self.rng.pick(&["DCR", "CRD", "?"]);
                    attrs.push(attr_s("mode", m));
                }
                out_rank = x.rank;
            }
            "LSTM" | "GRU" | "RNN" => {
                let gates: i64 = match op {
                    "LSTM" => 4,
                    "GRU" => 3,
                    _ => 1,
                };
                let hidden = if self.rng.chance(3, 4) {
                    self.rng.range(1, 3)
                } else {
                    hostile_i64(self.rng)
                };
                let dirs = self.rng.range(1, 2);
                let input_size = self.rng.range(1, 4);
                // Hostile on purpose: the declared dim wraps like the
                // model's would.
                let gates_hidden = gates.wrapping_mul(hidden);
                let gh = gates.saturating_mul(hidden).clamp(0, 64);
                let wn = self.fresh("rw");
                let rn = self.fresh("rr");
                let wc = (dirs * gh * input_size) as usize;
                let rc = (dirs * gh * hidden.clamp(0, 64)) as usize;
                let vals = |rng: &mut Rng, n: usize| (0..n).map(|_| hostile_f32(rng)).collect();
                let wv = vals(self.rng, wc);
                let rv = vals(self.rng, rc);
                self.inits
                    .push(f32_tensor(&wn, vec![dirs, gates_hidden, input_size], wv));
                self.inits
                    .push(f32_tensor(&rn, vec![dirs, gates_hidden, hidden], rv));
                ins = vec![x.name.clone(), wn, rn];
                attrs.push(attr_i("hidden_size", hidden));
                if dirs == 2 || self.rng.chance(1, 5) {
                    let d = *self
                        .rng
                        .pick(&["bidirectional", "forward", "reverse", "sideways"]);
                    attrs.push(attr_s("direction", d));
                }
                if op == "GRU" && self.rng.chance(1, 2) {
                    attrs.push(attr_i("linear_before_reset", self.rng.range(0, 1)));
                }
                if op == "LSTM" && self.rng.chance(1, 4) {
                    attrs.push(attr_i("layout", self.rng.range(0, 1)));
                }
                n_out = 1 + self.rng.below(if op == "LSTM" { 3 } else { 2 });
            }
            "Einsum" => {
                let eq = *self.rng.pick(&[
                    "ij,jk->ik",
                    "ij->ji",
                    "ii->i",
                    "...ii->...i",
                    "bij,bjk->bik",
                    "i,i->",
                    "ij",
                    "",
                    "->",
                    "a,b,c->abc",
                    "abcdefghijklmnopqrstuvwxyz->",
                    "ij,jk",
                    "i...,...j->ij",
                    "ij->ij->ij",
                    "Ab,bC->AC",
                ]);
                ins = vec![x.name.clone()];
                for _ in 0..eq.matches(',').count() {
                    let y = self.data();
                    ins.push(y.name);
                }
                attrs.push(attr_s("equation", eq));
            }
            "LayerNormalization" | "InstanceNormalization" | "BatchNormalization" => {
                let c = self.rng.range(1, 4);
                let sc = self.fresh("sc");
                self.inits
                    .push(f32_tensor(&sc, vec![c], vec![1.0; c as usize]));
                let b = self.fresh("b");
                self.inits
                    .push(f32_tensor(&b, vec![c], vec![0.0; c as usize]));
                ins = vec![x.name.clone(), sc, b.clone()];
                if op == "BatchNormalization" {
                    ins.push(b.clone());
                    ins.push(b);
                }
                if op == "LayerNormalization" {
                    attrs.push(attr_i("axis", self.axis(r)));
                }
                if self.rng.chance(1, 3) {
                    attrs.push(attr_f("epsilon", hostile_f32(self.rng)));
                }
                out_rank = x.rank;
            }
            "Clip" => {
                ins = vec![x.name.clone()];
                for _ in 0..self.rng.below(3) {
                    let c = self.float_scalar();
                    ins.push(self.opt(c));
                }
                out_rank = x.rank;
            }
            "Trilu" => {
                let k = self.ints(None, true, hostile_i64);
                ins = vec![x.name.clone(), k];
                attrs.push(attr_i("upper", self.rng.range(0, 1)));
                out_rank = x.rank;
            }
            "ScatterND" | "ScatterElements" => {
                let n = 1 + self.rng.below(3);
                let idx = self.ints(Some(n), false, hostile_i64);
                let upd = self.float_init(Some(1));
                ins = vec![x.name.clone(), idx, upd.name];
                if op == "ScatterElements" {
                    attrs.push(attr_i("axis", self.axis(r)));
                }
                out_rank = x.rank;
            }
            "Constant" => {
                ins = vec![];
                match self.rng.below(3) {
                    0 => {
                        let n = self.rng.below(4);
                        let v = (0..n).map(|_| hostile_i64(self.rng)).collect();
                        attrs.push(attr_ints("value_ints", v));
                        out_dtype = I64;
                    }
                    1 => attrs.push(attr_f("value_float", hostile_f32(self.rng))),
                    _ => {
                        let d = small_dim(self.rng);
                        let n = d.clamp(0, 16) as usize;
                        let vals = (0..n).map(|_| hostile_f32(self.rng)).collect();
                        attrs.push(attr_t("value", f32_tensor("", vec![d], vals)));
                    }
                }
            }
            _ => unreachable!("{op} is in OPS but not generated"),
        }
        let outs: Vec<String> = (0..n_out).map(|_| self.fresh("v")).collect();
        for (i, o) in outs.iter().enumerate() {
            self.pool.push(Val {
                name: o.clone(),
                dtype: if i == 1 && op == "TopK" {
                    I64
                } else {
                    out_dtype
                },
                rank: out_rank,
            });
        }
        // Sometimes a stray attribute with a hostile value.
        if self.rng.chance(1, 10) {
            let key = *self.rng.pick(&["axis", "k", "to", "group", "size", "perm"]);
            attrs.push(attr_i(key, hostile_i64(self.rng)));
        }
        self.nodes.push(proto::NodeProto {
            op_type: s(op),
            name: s(&format!("{op}_{}", self.nodes.len())),
            input: ins,
            output: outs,
            attribute: attrs,
            ..Default::default()
        });
    }
}

/// A transform or frame length: mostly small (0 and -1 included),
/// sometimes hostile.
fn length_like(rng: &mut Rng) -> i64 {
    if rng.chance(2, 3) {
        rng.range(-1, 40)
    } else {
        hostile_i64(rng)
    }
}

/// The ops generated (the table the `compiler` target picks from).
pub const OPS: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Equal",
    "Less",
    "Greater",
    "And",
    "PRelu",
    "Mod",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Log",
    "Sqrt",
    "Neg",
    "Abs",
    "Erf",
    "Not",
    "Identity",
    "Floor",
    "Reciprocal",
    "Sign",
    "NonZero",
    "Size",
    "Shape",
    "GlobalAveragePool",
    "Reshape",
    "Transpose",
    "Concat",
    "Sum",
    "Mean",
    "Slice",
    "Gather",
    "GatherElements",
    "GatherND",
    "Expand",
    "Tile",
    "ConstantOfShape",
    "Range",
    "Pad",
    "Resize",
    "Conv",
    "ConvTranspose",
    "AveragePool",
    "MaxPool",
    "LpPool",
    "MatMul",
    "Gemm",
    "Softmax",
    "LogSoftmax",
    "Hardmax",
    "Flatten",
    "ArgMax",
    "ArgMin",
    "CumSum",
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceProd",
    "ReduceL2",
    "TopK",
    "Split",
    "Squeeze",
    "Unsqueeze",
    "Where",
    "Cast",
    "OneHot",
    "DepthToSpace",
    "SpaceToDepth",
    "LSTM",
    "GRU",
    "RNN",
    "Einsum",
    "LayerNormalization",
    "InstanceNormalization",
    "BatchNormalization",
    "Clip",
    "Trilu",
    "ScatterND",
    "ScatterElements",
    "DFT",
    "STFT",
    "HannWindow",
    "MelWeightMatrix",
    "Constant",
];

/// A toml bound for a dynamic dim: mostly sane, often odd.
fn bound(rng: &mut Rng) -> String {
    match rng.below(16) {
        0..=7 => format!("\"n <= {}\"", rng.range(1, 16)),
        8 => format!("\"{} <= n <= {}\"", rng.range(1, 4), rng.range(4, 32)),
        9 => "\"n <= 18446744073709551615\"".into(),
        10 => "\"n <= 4611686018427387904\"".into(),
        11 => "\"n <= 0\"".into(),
        12 => format!("\"n <= {}\"", 1u64 << (16 + rng.below(24))),
        13 => "\"3 <= n <= 2\"".into(),
        14 => rng.range(0, 8).to_string(),
        _ => "\"0 <= n <= 4\"".into(),
    }
}

/// A random small graph and its toml.
pub fn generate(rng: &mut Rng) -> Case {
    let mut g = Gen {
        rng,
        nodes: Vec::new(),
        inits: Vec::new(),
        inputs: Vec::new(),
        pool: Vec::new(),
        n: 0,
        toml_inputs: Vec::new(),
    };
    for k in 0..g.rng.below(3) {
        g.input(k);
    }
    for _ in 0..1 + g.rng.below(5) {
        g.node();
    }
    // Outputs: the last node's first output, sometimes others.
    let last = g
        .nodes
        .last()
        .map(|n| n.output[0].clone())
        .unwrap_or_default();
    let mut outs = vec![last];
    for _ in 0..g.rng.below(2) {
        let node = g.rng.below(g.nodes.len());
        let o = g.rng.pick(&g.nodes[node].output).clone();
        if !outs.contains(&o) {
            outs.push(o);
        }
    }
    let output: Vec<proto::ValueInfoProto> = outs
        .iter()
        .map(|o| {
            let dtype = g
                .pool
                .iter()
                .find(|v| &v.name == o)
                .map(|v| v.dtype)
                .unwrap_or(F32);
            let dtype = if g.rng.chance(1, 10) {
                *g.rng.pick(&[F32, I64, BOOL, 0, 99])
            } else {
                dtype
            };
            let dims: Option<Vec<Dimension>> = match g.rng.below(4) {
                0 | 1 => None,
                2 => Some(vec![]),
                _ => Some(
                    (0..g.rng.below(4))
                        .map(|_| {
                            if g.rng.chance(1, 2) {
                                param("m")
                            } else {
                                fixed(small_dim(g.rng))
                            }
                        })
                        .collect(),
                ),
            };
            vi(o, dtype, dims.as_deref())
        })
        .collect();
    let opset = if g.rng.chance(9, 10) {
        *g.rng.pick(&[17, 17, 17, 13, 18, 21, 11])
    } else {
        *g.rng.pick(&[0, 1, 7, 22, 1000, i64::MAX, -1])
    };
    let model = proto::ModelProto {
        ir_version: Some(8),
        opset_import: vec![proto::OperatorSetIdProto {
            domain: s(""),
            version: Some(opset),
        }],
        graph: Some(proto::GraphProto {
            node: g.nodes,
            initializer: g.inits,
            input: g.inputs,
            output,
            name: s("g"),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut toml = String::from("[model]\npath = \"m.onnx\"\n");
    let mut codegen = Vec::new();
    if g.rng.chance(1, 4) {
        codegen.push("constant_folding = false".to_string());
    }
    if g.rng.chance(1, 8) {
        codegen.push("flush_subnormal_weights = false".to_string());
    }
    if g.rng.chance(1, 8) {
        let cap = *g
            .rng
            .pick(&[0u64, 1, 64, 4096, 1 << 20, 1 << 40, i64::MAX as u64]);
        codegen.push(format!("max_arena_bytes = {cap}"));
    }
    if !codegen.is_empty() {
        toml.push_str(&format!("[codegen]\n{}\n", codegen.join("\n")));
    }
    if !g.toml_inputs.is_empty() {
        toml.push_str(&format!("[inputs]\n{}\n", g.toml_inputs.join("\n")));
    }
    Case { model, toml }
}

/// Cases one step smaller: a node, an initializer, an attribute, an
/// output or a toml line removed.
pub fn shrink(c: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    let Some(g) = &c.model.graph else {
        return out;
    };
    let with_graph = |f: &dyn Fn(&mut proto::GraphProto)| {
        let mut m = c.model.clone();
        if let Some(g) = m.graph.as_mut() {
            f(g);
        }
        Case {
            model: m,
            toml: c.toml.clone(),
        }
    };
    for i in 0..g.node.len() {
        out.push(with_graph(&|g| {
            g.node.remove(i);
        }));
    }
    for i in 0..g.initializer.len() {
        out.push(with_graph(&|g| {
            g.initializer.remove(i);
        }));
    }
    for i in 0..g.input.len() {
        out.push(with_graph(&|g| {
            g.input.remove(i);
        }));
    }
    if g.output.len() > 1 {
        for i in 0..g.output.len() {
            out.push(with_graph(&|g| {
                g.output.remove(i);
            }));
        }
    }
    for (i, n) in g.node.iter().enumerate() {
        for a in 0..n.attribute.len() {
            out.push(with_graph(&|g| {
                g.node[i].attribute.remove(a);
            }));
        }
        if n.output.len() > 1 {
            out.push(with_graph(&|g| {
                g.node[i].output.pop();
            }));
        }
    }
    let lines: Vec<&str> = c.toml.lines().collect();
    for i in 2..lines.len() {
        let mut l = lines.clone();
        l.remove(i);
        out.push(Case {
            model: c.model.clone(),
            toml: l.join("\n") + "\n",
        });
    }
    out
}
