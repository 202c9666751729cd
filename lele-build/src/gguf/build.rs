//! The architecture builder: a decoder's configuration and its GGUF
//! tensors become an IR graph that the rest of the compiler plans and
//! emits like any other model.
//!
//! The graph takes the new tokens (`tokens`, i64 `[n]`) and the position
//! of the first (`position`, i64 `[1]`) and yields the next-token logits
//! of the last one (`logits`, f32 `[1, vocab]`). Each layer's attention
//! keeps its keys and values in cache outputs that the planner pins
//! ([`Graph::persistent`]), so a call continues where the last one ended.
use std::collections::HashMap;

use lele_kernels::DType;
use lele_kernels::ops::binary::{Binary, BinaryOp};
use lele_kernels::ops::decoder::{CachedAttention, GeluGate, RmsNorm, RopeHalves};
use lele_kernels::ops::ggml::{GgmlGather, GgmlMatMul, GgmlType};
use lele_kernels::ops::layout::Reshape;
use lele_kernels::ops::slice::Slice;

use super::arch::DecoderConfig;
use super::{Gguf, TensorInfo};
use crate::error::{BuildError, Result};
use crate::ir::{DeclaredDim, Graph, Node, Op, OpKernel, OutDType, Tensor, Value, ValueId};

/// Name of the token input.
pub const TOKENS: &str = "tokens";
/// Name of the position input.
pub const POSITION: &str = "position";
/// Name of the logits output.
pub const LOGITS: &str = "logits";

struct Builder<'a> {
    g: Graph,
    file: &'a Gguf,
    data: &'a [u8],
    cfg: &'a DecoderConfig,
    /// Matrices already added (the tied embedding is read twice).
    matrices: HashMap<String, (ValueId, GgmlType, usize)>,
}

impl Builder<'_> {
    fn tensor(&self, name: &str) -> Result<&TensorInfo> {
        self.file
            .tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| BuildError::Gguf(format!("no tensor `{name}`")))
    }

    /// The bytes of tensor `t` in the file.
    fn bytes(&self, t: &TensorInfo) -> Result<&[u8]> {
        let start = usize::try_from(t.offset).ok();
        let len = usize::try_from(t.bytes).ok();
        start
            .zip(len)
            .and_then(|(s, l)| self.data.get(s..s.checked_add(l)?))
            .ok_or_else(|| BuildError::Gguf(format!("tensor `{}` runs past the file", t.name)))
    }

    /// A matrix (`[in, out]` in GGUF order) as a u8 constant of `out` rows
    /// of blocks, with its type.
    fn matrix(&mut self, name: &str) -> Result<(ValueId, GgmlType, usize)> {
        if let Some(&m) = self.matrices.get(name) {
            return Ok(m);
        }
        let t = self.tensor(name)?;
        let (k, rows) = match t.dims[..] {
            [k, rows] => (k as usize, rows as usize),
            _ => return Err(BuildError::Gguf(format!("tensor `{name}` is not a matrix"))),
        };
        let row = t.ggml_type.row_bytes(k).ok_or_else(|| {
            BuildError::Gguf(format!("tensor `{name}` has rows of partial blocks"))
        })?;
        let ty = t.ggml_type;
        let tensor = Tensor::from_bytes(DType::U8, &[rows, row], self.bytes(t)?)
            .ok_or_else(|| BuildError::Gguf(format!("tensor `{name}` has the wrong byte size")))?;
        let m = (self.g.add_constant(name, tensor), ty, k);
        self.matrices.insert(name.to_string(), m);
        Ok(m)
    }

    /// An f32 vector constant.
    fn vector(&mut self, name: &str) -> Result<ValueId> {
        let t = self.tensor(name)?;
        if t.ggml_type != GgmlType::F32 || t.dims.len() != 1 {
            return Err(BuildError::Gguf(format!(
                "tensor `{name}` is not an f32 vector"
            )));
        }
        let n = t.dims[0] as usize;
        let tensor = Tensor::from_bytes(DType::F32, &[n], self.bytes(t)?)
            .ok_or_else(|| BuildError::Gguf(format!("tensor `{name}` has the wrong byte size")))?;
        Ok(self.g.add_constant(name, tensor))
    }

    fn node(
        &mut self,
        name: String,
        op_type: &str,
        kernel: impl OpKernel,
        view: bool,
        inputs: &[ValueId],
        outputs: usize,
    ) -> Vec<ValueId> {
        let outs: Vec<ValueId> = (0..outputs)
            .map(|i| {
                let out = if i == 0 {
                    name.clone()
                } else {
                    format!("{name}:{i}")
                };
                self.g.add_value(&out, Some(DType::F32))
            })
            .collect();
        let k: Box<dyn OpKernel> = Box::new(kernel);
        self.g.main.nodes.push(Node {
            name,
            op_type: op_type.into(),
            domain: "lele".into(),
            op: if view { Op::View(k) } else { Op::Kernel(k) },
            inputs: inputs.iter().map(|&v| Some(v)).collect(),
            outputs: outs.clone(),
            out_dtypes: vec![OutDType::Fixed(DType::F32); outputs],
        });
        outs
    }

    fn one(
        &mut self,
        name: String,
        op_type: &str,
        kernel: impl OpKernel,
        inputs: &[ValueId],
    ) -> ValueId {
        self.node(name, op_type, kernel, false, inputs, 1)[0]
    }

    fn product(&mut self, name: String, x: ValueId, weight: &str) -> Result<ValueId> {
        let (w, ty, k) = self.matrix(weight)?;
        Ok(self.one(name, "GgmlMatMul", GgmlMatMul { ty, k }, &[x, w]))
    }

    fn norm(&mut self, name: String, x: ValueId, weight: &str) -> Result<ValueId> {
        let w = self.vector(weight)?;
        let eps = self.cfg.eps;
        Ok(self.one(name, "RmsNorm", RmsNorm { eps }, &[x, w]))
    }

    fn binary(&mut self, name: String, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        self.one(
            name,
            if op == BinaryOp::Add { "Add" } else { "Mul" },
            Binary { op },
            &[a, b],
        )
    }

    fn scale(&mut self, name: String, x: ValueId, s: f32) -> ValueId {
        let c = self
            .g
            .add_constant(&format!("{name}.factor"), Tensor::f32_scalar(s));
        self.binary(name, BinaryOp::Mul, x, c)
    }

    /// `x` viewed as `[tokens, heads, width]`.
    fn heads(&mut self, name: String, x: ValueId, heads: usize, width: usize) -> ValueId {
        let shape = Tensor::i64_vector(&[-1, heads as i64, width as i64]);
        let s = self.g.add_constant(&format!("{name}.shape"), shape);
        self.node(
            name,
            "Reshape",
            Reshape { allowzero: false },
            true,
            &[x, s],
            1,
        )[0]
    }

    fn layer(
        &mut self,
        l: usize,
        x: ValueId,
        tokens_max: usize,
        context: usize,
    ) -> Result<ValueId> {
        let cfg = self.cfg;
        let p = |s: &str| format!("blk.{l}.{s}");
        let w = |s: &str| format!("blk.{l}.{s}.weight");
        let pos = self.g.inputs[1];
        let h = self.norm(p("attn_norm"), x, &w("attn_norm"))?;
        let q = self.product(p("attn_q"), h, &w("attn_q"))?;
        let k = self.product(p("attn_k"), h, &w("attn_k"))?;
        let v = self.product(p("attn_v"), h, &w("attn_v"))?;
        let q = self.heads(p("q_heads"), q, cfg.heads, cfg.head_dim);
        let k = self.heads(p("k_heads"), k, cfg.kv_heads, cfg.head_dim);
        let v = self.heads(p("v_heads"), v, cfg.kv_heads, cfg.value_dim);
        let q = self.norm(p("attn_q_norm"), q, &w("attn_q_norm"))?;
        let k = self.norm(p("attn_k_norm"), k, &w("attn_k_norm"))?;
        let local = cfg.is_local(l);
        let base = if local {
            cfg.rope_base_local
        } else {
            cfg.rope_base
        };
        let rope = RopeHalves {
            base,
            dims: cfg.head_dim,
        };
        let q = self.one(p("q_rope"), "RopeHalves", rope, &[q, pos]);
        let k = self.one(p("k_rope"), "RopeHalves", rope, &[k, pos]);
        let q = self.scale(p("q_scale"), q, 1.0 / (cfg.head_dim as f32).sqrt());
        let (window, capacity) = if local && cfg.sliding_window < context {
            let cells = cfg
                .sliding_window
                .checked_add(tokens_max)
                .ok_or_else(|| BuildError::Gguf("the sliding window overflows".into()))?;
            (cfg.sliding_window, cells.min(context))
        } else {
            (0, context)
        };
        let attn = CachedAttention {
            heads: cfg.heads,
            kv_heads: cfg.kv_heads,
            head_dim: cfg.head_dim,
            value_dim: cfg.value_dim,
            window,
            capacity,
            scale: 1.0,
        };
        let outs = self.node(
            p("attention"),
            "CachedAttention",
            attn,
            false,
            &[q, k, v, pos],
            3,
        );
        self.g.persistent.extend_from_slice(&outs[1..]);
        let o = self.product(p("attn_output"), outs[0], &w("attn_output"))?;
        let o = self.norm(p("post_attention_norm"), o, &w("post_attention_norm"))?;
        let x = self.binary(p("attn_residual"), BinaryOp::Add, o, x);
        let h = self.norm(p("ffn_norm"), x, &w("ffn_norm"))?;
        let gate = self.product(p("ffn_gate"), h, &w("ffn_gate"))?;
        let up = self.product(p("ffn_up"), h, &w("ffn_up"))?;
        let m = self.one(p("ffn_gelu_gate"), "GeluGate", GeluGate, &[gate, up]);
        let d = self.product(p("ffn_down"), m, &w("ffn_down"))?;
        let d = self.norm(p("post_ffw_norm"), d, &w("post_ffw_norm"))?;
        Ok(self.binary(p("ffn_residual"), BinaryOp::Add, d, x))
    }
}

/// Builds the decoder graph of `cfg` over the tensors of `file`, whose
/// bytes are `data`; at most `tokens_max` tokens per call and `context`
/// positions in all.
pub fn decoder_graph(
    file: &Gguf,
    data: &[u8],
    cfg: &DecoderConfig,
    tokens_max: usize,
    context: usize,
) -> Result<Graph> {
    if context == 0 || tokens_max == 0 {
        return Err(BuildError::Config(
            "[decoder] context and the tokens bound must be at least 1".into(),
        ));
    }
    let mut b = Builder {
        g: Graph {
            opset: 0,
            producer: "GGUF".into(),
            ..Graph::default()
        },
        file,
        data,
        cfg,
        matrices: HashMap::new(),
    };
    for (name, dims) in [
        (TOKENS, vec![DeclaredDim::Dynamic("n".into())]),
        (POSITION, vec![DeclaredDim::Fixed(1)]),
    ] {
        b.g.values.push(Value {
            name: name.into(),
            dtype: Some(DType::I64),
            declared: Some(dims),
            constant: None,
        });
        let id = b.g.values.len() - 1;
        b.g.inputs.push(id);
    }
    let tokens = b.g.inputs[0];
    let (table, ty, width) = b.matrix("token_embd.weight")?;
    let x = b.one(
        "token_embd".into(),
        "GgmlGather",
        GgmlGather { ty, cols: width },
        &[table, tokens],
    );
    let mut x = b.scale("embedding_scale".into(), x, (cfg.width as f32).sqrt());
    for l in 0..cfg.layers {
        x = b.layer(l, x, tokens_max, context)?;
    }
    // Only the last token's logits are wanted; every op before this is
    // row-wise, so slicing here computes the same values.
    let bounds = [("starts", -1), ("ends", i64::MAX), ("axes", 0)].map(|(n, v)| {
        b.g.add_constant(&format!("last_token.{n}"), Tensor::i64_vector(&[v]))
    });
    let x = b.one(
        "last_token".into(),
        "Slice",
        Slice,
        &[x, bounds[0], bounds[1], bounds[2]],
    );
    let x = b.norm("output_norm".into(), x, "output_norm.weight")?;
    let head = if cfg.tied_embeddings {
        "token_embd.weight"
    } else {
        "output.weight"
    };
    let logits = b.product(LOGITS.into(), x, head)?;
    b.g.outputs.push(logits);
    b.g.metadata = file
        .metadata
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .filter(|(k, _)| !k.starts_with("tokenizer."))
        .collect();
    Ok(b.g)
}
