//! ONNX Runtime's contrib operators (domain `com.microsoft`, and its
//! `SimplifiedLayerNormalization` in the default domain), which ORT's
//! optimizer and quantizer write into the files they export. Each is
//! rewritten at import into the standard operators that compute the same
//! values (ORT's definitions: its schemas' function bodies and CPU
//! kernels), so the standard kernels, folding and fusions serve them.
//!
//! The rewrite names its intermediate values after the node
//! (`NODE::contrib.K`) and keeps the node's own output names.
use super::proto::{self, AttributeProto, NodeProto, attribute_proto::AttributeType};

/// Whether `(domain, op_type)` is a contrib operator [`expand`] rewrites.
pub(super) fn is_contrib(domain: &str, op_type: &str) -> bool {
    match domain {
        "com.microsoft" => OPS.contains(&op_type),
        "" | "ai.onnx" => op_type == "SimplifiedLayerNormalization",
        _ => false,
    }
}

/// The `com.microsoft` operators rewritten here.
pub const OPS: &[&str] = &[
    "FastGelu",
    "BiasGelu",
    "Gelu",
    "QuickGelu",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
    "FusedMatMul",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
    "BiasAdd",
    "BiasSplitGelu",
    "MatMulNBits",
    "RotaryEmbedding",
    "MultiHeadAttention",
    "Attention",
    "EmbedLayerNormalization",
];

/// The rank of the first output of standard node `np` where its inputs'
/// ranks (and constant axes or shapes) give it: element-wise operations,
/// casts, reductions, (un)squeezes, reshapes to a constant shape.
pub(super) fn output_rank(
    np: &NodeProto,
    rank: &dyn Fn(&str) -> Option<usize>,
    numel: &dyn Fn(&str) -> Option<usize>,
) -> Option<usize> {
    let domain = np.domain.as_deref().unwrap_or("");
    if !(domain.is_empty() || domain == "ai.onnx") {
        return None;
    }
    let a = crate::ops::Attrs::new(np);
    let input = |i: usize| np.input.get(i).filter(|s| !s.is_empty());
    let first = || input(0).and_then(|v| rank(v));
    // Axes from the attribute, or from a constant second input.
    let axes = || -> Option<usize> {
        match a.ints_opt("axes") {
            Some(v) => Some(v.len()),
            None => input(1).and_then(|v| numel(v)),
        }
    };
    match np.op_type.as_deref().unwrap_or("") {
        "Cast" | "CastLike" | "Identity" | "Neg" | "Not" | "Abs" | "Sqrt" | "Exp" | "Log"
        | "Erf" | "Relu" | "Sigmoid" | "Tanh" | "Softmax" | "Transpose" | "LayerNormalization" => {
            first()
        }
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Equal" | "Less" | "Greater" | "And" | "Or"
        | "Where" | "Max" | "Min" => {
            let ranks: Option<Vec<usize>> = np.input.iter().map(|v| rank(v)).collect();
            ranks?.into_iter().max()
        }
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" => {
            let r = first()?;
            if a.int("keepdims", 1) != 0 {
                return Some(r);
            }
            // No axes (and keepdims 0) reduces every axis.
            match axes() {
                Some(n) if n > 0 => r.checked_sub(n),
                _ if input(1).is_some() => None,
                _ => Some(0),
            }
        }
        "Unsqueeze" => first()?.checked_add(axes()?),
        "Squeeze" => first()?.checked_sub(axes()?),
        "Shape" => Some(1),
        "Reshape" => input(1).and_then(|v| numel(v)),
        _ => None,
    }
}

/// What the nodes before a contrib node tell of its operands: the ranks
/// [`output_rank`] gives, and the lengths of `Constant` nodes' values
/// (axes, shapes).
#[derive(Default)]
pub(super) struct Seen {
    ranks: std::collections::HashMap<String, usize>,
    lengths: std::collections::HashMap<String, usize>,
}

impl Seen {
    /// Notes `np`'s first output: its rank `rank` (if known) and, for a
    /// `Constant`, its number of elements.
    pub(super) fn record(&mut self, np: &NodeProto, rank: Option<usize>) {
        let Some(out) = np.output.first().filter(|o| !o.is_empty()) else {
            return;
        };
        if np.op_type.as_deref() == Some("Constant") {
            let a = crate::ops::Attrs::new(np);
            let len = if let Some(v) = a.ints_opt("value_ints") {
                Some((v.len(), 1))
            } else if let Some(v) = a.floats_opt("value_floats") {
                Some((v.len(), 1))
            } else if a.has("value_int") || a.has("value_float") {
                Some((1, 0))
            } else {
                a.tensor("value").and_then(|t| {
                    let dims: Option<Vec<usize>> =
                        t.dims.iter().map(|&d| usize::try_from(d).ok()).collect();
                    let dims = dims?;
                    Some((
                        dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?,
                        dims.len(),
                    ))
                })
            };
            if let Some((numel, rank)) = len {
                self.lengths.insert(out.clone(), numel);
                self.ranks.insert(out.clone(), rank);
            }
            return;
        }
        if let Some(r) = rank {
            self.ranks.insert(out.clone(), r);
        }
    }

    /// The rank noted for `v`.
    pub(super) fn rank(&self, v: &str) -> Option<usize> {
        self.ranks.get(v).copied()
    }

    /// The number of elements of `v` when a `Constant` node made it.
    pub(super) fn numel(&self, v: &str) -> Option<usize> {
        self.lengths.get(v).copied()
    }
}

/// What [`expand`] may ask of the values a node reads.
pub(super) struct Known<'a> {
    /// The rank of a value where the file declares it (graph inputs,
    /// initializers).
    pub rank: &'a dyn Fn(&str) -> Option<usize>,
    /// The value of a constant (an initializer or a `Constant` node).
    pub constant: &'a dyn Fn(&str) -> Option<std::sync::Arc<crate::ir::Tensor>>,
}

/// The standard nodes that compute contrib node `np` (named `name`), or
/// why it cannot be rewritten. `opset` is the model's default-domain
/// opset.
pub(super) fn expand(
    np: &NodeProto,
    name: &str,
    opset: i64,
    known: &Known<'_>,
) -> Result<Vec<NodeProto>, String> {
    let rank = known.rank;
    let op_type = np.op_type.as_deref().unwrap_or_default();
    let mut x = Expansion {
        base: name.to_string(),
        count: 0,
        nodes: Vec::new(),
        opset,
    };
    let a = crate::ops::Attrs::new(np);
    let input = |i: usize| {
        np.input
            .get(i)
            .filter(|s| !s.is_empty())
            .map(String::as_str)
    };
    let output = |i: usize| {
        np.output
            .get(i)
            .filter(|s| !s.is_empty())
            .map(String::as_str)
    };
    let need = |i: usize, what: &str| {
        input(i).ok_or_else(|| format!("{op_type} without its {what} input"))
    };
    let out0 = output(0).ok_or_else(|| format!("{op_type} without its first output"))?;
    match op_type {
        "FastGelu" => {
            let t = x.add_optional(need(0, "X")?, input(1), None);
            x.node("Gelu", &[&t], &[out0], vec![attr_s("approximate", "tanh")]);
        }
        "BiasGelu" => {
            let t = x.add_optional(need(0, "A")?, Some(need(1, "B")?), None);
            x.node("Gelu", &[&t], &[out0], vec![]);
        }
        "Gelu" => {
            x.node("Gelu", &[need(0, "X")?], &[out0], vec![]);
        }
        "QuickGelu" => {
            // x · sigmoid(alpha · x)
            let v = need(0, "X")?;
            let alpha = x.scalar(a.float("alpha", 1.702), v);
            let scaled = x.fresh("Mul", &[v, &alpha], vec![]);
            let gate = x.fresh("Sigmoid", &[&scaled], vec![]);
            x.node("Mul", &[v, &gate], &[out0], vec![]);
        }
        "SkipLayerNormalization" => {
            // s = input + skip (+ bias); LayerNormalization over the last
            // axis gives the output, the mean and 1/σ; output 3 is s.
            let sum = x.add_optional(need(0, "input")?, Some(need(1, "skip")?), None);
            let sum = x.add_optional(&sum, input(4), output(3));
            let gamma = need(2, "gamma")?;
            let mut ins = vec![sum.as_str(), gamma];
            if let Some(beta) = input(3) {
                ins.push(beta);
            }
            let outs = [out0, output(1).unwrap_or(""), output(2).unwrap_or("")];
            let used = outs
                .iter()
                .rposition(|o| !o.is_empty())
                .map_or(1, |i| i + 1);
            let epsilon = a.float("epsilon", 1e-12);
            x.node(
                "LayerNormalization",
                &ins,
                &outs[..used],
                vec![attr_i("axis", -1), attr_f("epsilon", epsilon)],
            );
        }
        "SkipSimplifiedLayerNormalization" => {
            // s = input + skip (+ bias at index 3); RMS normalization over
            // the last axis; ORT's mean output is zeros.
            let sum = x.add_optional(need(0, "input")?, Some(need(1, "skip")?), None);
            let sum = x.add_optional(&sum, input(3), output(3));
            let epsilon = a.float("epsilon", 1e-12);
            x.node(
                "RMSNormalization",
                &[&sum, need(2, "gamma")?],
                &[out0],
                vec![attr_i("axis", -1), attr_f("epsilon", epsilon)],
            );
            x.rms_statistics(&sum, epsilon, output(1), output(2));
        }
        "SimplifiedLayerNormalization" => {
            let v = need(0, "X")?;
            let axis = a.int("axis", -1);
            let epsilon = a.float("epsilon", 1e-5);
            if a.int("stash_type", 1) != 1 {
                return Err("SimplifiedLayerNormalization with stash_type other than float".into());
            }
            x.node(
                "RMSNormalization",
                &[v, need(1, "scale")?],
                &[out0],
                vec![attr_i("axis", axis), attr_f("epsilon", epsilon)],
            );
            if output(1).is_some() {
                if axis != -1 && rank(v).is_none_or(|r| axis != r as i64 - 1) {
                    return Err(
                        "SimplifiedLayerNormalization's inv_std_var over more than the last axis"
                            .into(),
                    );
                }
                x.rms_statistics(v, epsilon, None, output(1));
            }
        }
        "FusedMatMul" => {
            let (a_in, b_in) = (need(0, "A")?, need(1, "B")?);
            let flag = |n: &str| a.int(n, 0) != 0;
            let (ta, tb) = (flag("transA"), flag("transB"));
            let (tba, tbb) = (flag("transBatchA"), flag("transBatchB"));
            let alpha = a.float("alpha", 1.0);
            let a_t = x.transposed(a_in, ta, tba, rank)?;
            let b_t = x.transposed(b_in, tb, tbb, rank)?;
            if alpha == 1.0 {
                x.node("MatMul", &[&a_t, &b_t], &[out0], vec![]);
            } else {
                let product = x.fresh("MatMul", &[&a_t, &b_t], vec![]);
                let alpha = x.scalar(alpha, &product);
                x.node("Mul", &[&product, &alpha], &[out0], vec![]);
            }
        }
        "MatMulIntegerToFloat" => {
            // float((A − a_zp) @ (B − b_zp)) · (a_scale · b_scale) + bias
            let (qa, qb) = (need(0, "A")?, need(1, "B")?);
            let scale = x.fresh("Mul", &[need(2, "a_scale")?, need(3, "b_scale")?], vec![]);
            x.integer_product(qa, qb, input(4), input(5), &scale, input(6), out0);
        }
        "DynamicQuantizeMatMul" => {
            // A quantized per tensor to uint8 as DynamicQuantizeLinear
            // does, then as MatMulIntegerToFloat.
            let (q, s, z) = (x.name(), x.name(), x.name());
            x.node(
                "DynamicQuantizeLinear",
                &[need(0, "A")?],
                &[&q, &s, &z],
                vec![],
            );
            let scale = x.fresh("Mul", &[&s, need(2, "b_scale")?], vec![]);
            x.integer_product(
                &q,
                need(1, "B")?,
                Some(&z),
                input(3),
                &scale,
                input(4),
                out0,
            );
        }
        "BiasAdd" => {
            let t = x.add_optional(need(0, "X")?, Some(need(1, "bias")?), None);
            x.node("Add", &[&t, need(2, "skip")?], &[out0], vec![]);
        }
        "BiasSplitGelu" => {
            // (X + bias) split in halves on the last axis: left · gelu(right).
            let t = x.add_optional(need(0, "X")?, Some(need(1, "bias")?), None);
            let (left, right) = (x.name(), x.name());
            let mut attrs = vec![attr_i("axis", -1)];
            if x.opset >= 18 {
                attrs.push(attr_i("num_outputs", 2));
            }
            x.node("Split", &[&t], &[&left, &right], attrs);
            let g = x.fresh("Gelu", &[&right], vec![]);
            x.node("Mul", &[&left, &g], &[out0], vec![]);
        }
        "MatMulNBits" => {
            // The block-quantized weight, dequantized once here into a
            // constant K × N float matrix, then A @ W (+ bias).
            if input(4).is_some() {
                return Err("MatMulNBits with g_idx (act-order) is not supported".into());
            }
            if a.int("weight_prepacked", 0) != 0 {
                return Err("MatMulNBits with weight_prepacked is not supported".into());
            }
            let q = NBits {
                k: positive(a.int("K", 0), "K")?,
                n: positive(a.int("N", 0), "N")?,
                bits: a.int("bits", 4),
                block: positive(a.int("block_size", 0), "block_size")?,
            };
            let constant = |i: usize, what: &str| {
                input(i)
                    .and_then(known.constant)
                    .ok_or_else(|| format!("MatMulNBits whose {what} is not a constant"))
            };
            let zero_points = match input(3) {
                Some(_) => Some(constant(3, "zero points")?),
                None => None,
            };
            let (weight, scales) = (constant(1, "weight")?, constant(2, "scales")?);
            let w = q.dequantize(&weight, &scales, zero_points.as_deref())?;
            let w_name = x.fresh("Constant", &[], vec![attr_t("value", w)]);
            let a_in = need(0, "A")?;
            match input(5) {
                Some(bias) => {
                    let product = x.fresh("MatMul", &[a_in, &w_name], vec![]);
                    x.node("Add", &[&product, bias], &[out0], vec![]);
                }
                None => x.node("MatMul", &[a_in, &w_name], &[out0], vec![]),
            }
        }
        "RotaryEmbedding" => {
            // ONNX's RotaryEmbedding (opset 23) with the inputs reordered;
            // a one-element position_ids is an offset: positions
            // offset..offset + seq for every batch item.
            if a.int("is_packed_batching", 0) != 0 {
                return Err("RotaryEmbedding with is_packed_batching".into());
            }
            if a.float("scale", 1.0) != 1.0 {
                return Err("RotaryEmbedding with a scale other than 1".into());
            }
            let v = need(0, "input")?;
            let pos = need(1, "position_ids")?;
            let positions = match rank(pos) {
                Some(2) => pos.to_string(),
                Some(1) => {
                    let seq_axis = match rank(v) {
                        Some(3) => 1,
                        Some(4) => 2,
                        _ => {
                            return Err(format!(
                                "RotaryEmbedding with an offset position_ids on `{v}`, whose rank (3 or 4) the file does not declare"
                            ));
                        }
                    };
                    x.offset_positions(v, pos, seq_axis)
                }
                _ => {
                    return Err(format!(
                        "RotaryEmbedding whose position_ids `{pos}` has no declared rank of 1 or 2"
                    ));
                }
            };
            x.node(
                "RotaryEmbedding",
                &[v, need(2, "cos_cache")?, need(3, "sin_cache")?, &positions],
                &[out0],
                vec![
                    attr_i("interleaved", a.int("interleaved", 0)),
                    attr_i("num_heads", a.int("num_heads", 0)),
                    attr_i("rotary_embedding_dim", a.int("rotary_embedding_dim", 0)),
                ],
            );
        }
        "EmbedLayerNormalization" => {
            // BERT's embeddings: word + position (+ segment) rows gathered
            // and summed (output 2), then LayerNormalization (output 0);
            // the mask's count of ones per row as the int32 mask index
            // (output 1). Positions default to 0..seq.
            let ids = need(0, "input_ids")?;
            let words = x.fresh("Gather", &[need(2, "word_embedding")?, ids], vec![]);
            let positions = match input(8) {
                Some(p) => p.to_string(),
                None => {
                    let shape = x.fresh("Shape", &[ids], vec![]);
                    let seq = x.slice_1d(&shape, 1, 2);
                    let one = x.ints(&[1]);
                    let dims = x.fresh("Concat", &[&one, &seq], vec![attr_i("axis", 0)]);
                    x.positions(&dims, 1)
                }
            };
            let pos_rows = x.fresh(
                "Gather",
                &[need(3, "position_embedding")?, &positions],
                vec![],
            );
            let sum = match (input(1), input(4)) {
                (Some(seg), Some(table)) => {
                    let seg_rows = x.fresh("Gather", &[table, seg], vec![]);
                    let partial = x.fresh("Add", &[&words, &pos_rows], vec![]);
                    x.add_optional(&partial, Some(&seg_rows), output(2))
                }
                (None, None) => x.add_optional(&words, Some(&pos_rows), output(2)),
                _ => {
                    return Err(
                        "EmbedLayerNormalization with only one of segment_ids and segment_embedding"
                            .into(),
                    );
                }
            };
            x.node(
                "LayerNormalization",
                &[&sum, need(5, "gamma")?, need(6, "beta")?],
                &[out0],
                vec![
                    attr_i("axis", -1),
                    attr_f("epsilon", a.float("epsilon", 1e-12)),
                ],
            );
            if let Some(mask_index) = output(1) {
                let mask = input(7).ok_or("EmbedLayerNormalization's mask_index without a mask")?;
                let to_i32 = || attr_i("to", proto::tensor_proto::DataType::Int32 as i64);
                let ints = x.fresh("Cast", &[mask], vec![to_i32()]);
                let count = if x.opset >= 13 {
                    let axes = x.ints(&[1]);
                    x.fresh("ReduceSum", &[&ints, &axes], vec![attr_i("keepdims", 0)])
                } else {
                    let attrs = vec![attr_ints("axes", &[1]), attr_i("keepdims", 0)];
                    x.fresh("ReduceSum", &[&ints], attrs)
                };
                x.node("Cast", &[&count], &[mask_index], vec![to_i32()]);
            }
        }
        "Attention" => {
            // BERT's fused attention: input @ weights (+ bias) split into
            // Q, K and V (thirds, or qkv_hidden_sizes), then ONNX's
            // Attention; a 0/1 mask_index of [batch, total] or [batch,
            // seq, total] becomes ORT's additive mask; the combined past
            // [2, batch, heads, past, head] is split into key and value and
            // the present joined back.
            if input(6).is_some() {
                return Err("Attention with past_sequence_length (buffer sharing)".into());
            }
            if a.int("do_rotary", 0) != 0 || a.int("past_present_share_buffer", 0) != 0 {
                return Err("Attention with do_rotary or past_present_share_buffer".into());
            }
            let heads = a.int("num_heads", 0);
            if heads <= 0 {
                return Err("Attention without num_heads".into());
            }
            let product = x.fresh("MatMul", &[need(0, "input")?, need(1, "weights")?], vec![]);
            let proj = x.add_optional(&product, input(2), None);
            let (q, k, v) = (x.name(), x.name(), x.name());
            let mut split_ins = vec![proj.as_str()];
            let mut split_attrs = vec![attr_i("axis", -1)];
            let sizes;
            match a.ints_opt("qkv_hidden_sizes") {
                Some(s) if s.len() == 3 && s.iter().all(|&d| d > 0) => {
                    if x.opset >= 13 {
                        sizes = x.ints(s);
                        split_ins.push(&sizes);
                    } else {
                        split_attrs.push(attr_ints("split", s));
                    }
                }
                Some(s) => return Err(format!("Attention with qkv_hidden_sizes {s:?}")),
                None if x.opset >= 18 => split_attrs.push(attr_i("num_outputs", 3)),
                None => {}
            }
            x.node("Split", &split_ins, &[&q, &k, &v], split_attrs);
            let filter = a.float("mask_filter_value", -10000.0);
            let padding = match input(3) {
                Some(m) => match rank(m) {
                    // Right padding: keys from mask_index[b] on are masked.
                    // (The [2·batch] form with start positions fails the
                    // reshape to [batch] at run time.)
                    Some(1) if input(4).is_none() => {
                        let keep = x.keys_before(need(0, "input")?, &k, m);
                        Some(x.additive_mask(&keep, filter, &[1, 2]))
                    }
                    Some(2) => Some(x.additive_mask(m, filter, &[1, 2])),
                    Some(3) => Some(x.additive_mask(m, filter, &[1])),
                    _ => {
                        return Err(format!(
                            "Attention's mask_index `{m}` is not declared as a 0/1 mask of [batch, total] or [batch, seq, total] (index forms are not supported)"
                        ));
                    }
                },
                None => None,
            };
            let mask = x.combine_masks(padding, input(5));
            let mut ins = vec![q.clone(), k, v, mask.unwrap_or_default()];
            if let Some(past) = input(4) {
                for i in 0..2 {
                    let at = x.fresh("Constant", &[], vec![attr_i("value_int", i)]);
                    ins.push(x.fresh("Gather", &[past, &at], vec![attr_i("axis", 0)]));
                }
            }
            while ins.last().is_some_and(String::is_empty) {
                ins.pop();
            }
            let present = output(1);
            let (pk, pv) = (x.name(), x.name());
            let outs: Vec<&str> = match present {
                Some(_) => vec![out0, &pk, &pv],
                None => vec![out0],
            };
            let attrs = attention_attrs(&a, heads);
            let ins: Vec<&str> = ins.iter().map(String::as_str).collect();
            x.node("Attention", &ins, &outs, attrs);
            if let Some(present) = present {
                let pk = x.unsqueeze(&pk, &[0]);
                let pv = x.unsqueeze(&pv, &[0]);
                x.node("Concat", &[&pk, &pv], &[present], vec![attr_i("axis", 0)]);
            }
        }
        "MultiHeadAttention" => {
            // ONNX's Attention (opset 23) on 3-D query, key and value: the
            // projection bias split and added, the key padding mask turned
            // into ORT's additive mask (mask_filter_value where 0) and
            // added to the attention bias, past and present as they are.
            let q = need(0, "query")?;
            let (Some(k), Some(v)) = (input(1), input(2)) else {
                return Err("MultiHeadAttention with packed QKV (no key and value)".into());
            };
            for (i, what) in [(8, "past_sequence_length"), (9, "cache_indirection")] {
                if input(i).is_some() {
                    return Err(format!("MultiHeadAttention with {what} (buffer sharing)"));
                }
            }
            if output(3).is_some() {
                return Err("MultiHeadAttention's qk output".into());
            }
            for t in [q, k, v] {
                if rank(t) != Some(3) {
                    return Err(format!(
                        "MultiHeadAttention on `{t}`, which is not declared 3-D (packed and per-head key/value are not supported)"
                    ));
                }
            }
            let heads = a.int("num_heads", 0);
            if heads <= 0 {
                return Err("MultiHeadAttention without num_heads".into());
            }
            let (q, k, v) = match input(3) {
                Some(bias) => {
                    let shape = |x: &mut Expansion, t: &str| {
                        let s = x.fresh("Shape", &[t], vec![]);
                        x.slice_1d(&s, 2, 3)
                    };
                    let (d, dv) = (shape(&mut x, q), shape(&mut x, v));
                    let zero = x.ints(&[0]);
                    let two_d = x.fresh("Add", &[&d, &d], vec![]);
                    let end = x.fresh("Add", &[&two_d, &dv], vec![]);
                    let axes = x.ints(&[0]);
                    let part = |x: &mut Expansion, from: &str, to: &str| {
                        x.fresh("Slice", &[bias, from, to, &axes], vec![])
                    };
                    let (qb, kb, vb) = (
                        part(&mut x, &zero, &d),
                        part(&mut x, &d, &two_d),
                        part(&mut x, &two_d, &end),
                    );
                    (
                        x.fresh("Add", &[q, &qb], vec![]),
                        x.fresh("Add", &[k, &kb], vec![]),
                        x.fresh("Add", &[v, &vb], vec![]),
                    )
                }
                None => (q.to_string(), k.to_string(), v.to_string()),
            };
            let filter = a.float("mask_filter_value", -10000.0);
            let padding = match input(4) {
                Some(m) if rank(m) == Some(2) => Some(x.additive_mask(m, filter, &[1, 2])),
                Some(m) => {
                    return Err(format!(
                        "MultiHeadAttention's key_padding_mask `{m}` is not declared [batch, kv_sequence_length]"
                    ));
                }
                None => None,
            };
            let mask = x.combine_masks(padding, input(5));
            let mut ins = vec![
                q.as_str(),
                k.as_str(),
                v.as_str(),
                mask.as_deref().unwrap_or(""),
            ];
            if let (Some(pk), Some(pv)) = (input(6), input(7)) {
                ins.extend([pk, pv]);
            } else if input(6).is_some() || input(7).is_some() {
                return Err("MultiHeadAttention with only one of past_key and past_value".into());
            }
            while ins.last() == Some(&"") {
                ins.pop();
            }
            let outs = [out0, output(1).unwrap_or(""), output(2).unwrap_or("")];
            let used = outs
                .iter()
                .rposition(|o| !o.is_empty())
                .map_or(1, |i| i + 1);
            let attrs = attention_attrs(&a, heads);
            x.node("Attention", &ins, &outs[..used], attrs);
        }
        other => return Err(format!("no rewrite for contrib operator {other}")),
    }
    Ok(x.nodes)
}

/// The nodes of one rewrite being built.
struct Expansion {
    base: String,
    count: usize,
    nodes: Vec<NodeProto>,
    opset: i64,
}

impl Expansion {
    /// A new intermediate value's name.
    fn name(&mut self) -> String {
        self.count += 1;
        format!("{}::contrib.{}", self.base, self.count)
    }

    /// Appends a default-domain node.
    fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attribute: Vec<AttributeProto>,
    ) {
        let name = format!("{}::contrib.node{}", self.base, self.nodes.len());
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: Some(name),
            op_type: Some(op.to_string()),
            domain: Some(String::new()),
            attribute,
            ..Default::default()
        });
    }

    /// Appends a node with one new output and returns its name.
    fn fresh(&mut self, op: &str, inputs: &[&str], attribute: Vec<AttributeProto>) -> String {
        let out = self.name();
        self.node(op, inputs, &[&out], attribute);
        out
    }

    /// A float scalar constant of `like`'s element type.
    fn scalar(&mut self, v: f32, like: &str) -> String {
        let c = self.fresh("Constant", &[], vec![attr_f("value_float", v)]);
        self.fresh("CastLike", &[&c, like], vec![])
    }

    /// `a + b` when `b` is given (into `into` if named), else `a` (copied
    /// into `into` when that output is wanted).
    fn add_optional(&mut self, a: &str, b: Option<&str>, into: Option<&str>) -> String {
        match (b, into) {
            (Some(b), Some(out)) => {
                self.node("Add", &[a, b], &[out], vec![]);
                out.to_string()
            }
            (Some(b), None) => self.fresh("Add", &[a, b], vec![]),
            (None, Some(out)) => {
                self.node("Identity", &[a], &[out], vec![]);
                out.to_string()
            }
            (None, None) => a.to_string(),
        }
    }

    /// The statistics outputs of an RMS normalization of `s` over its last
    /// axis: `mean` (zeros, as ORT writes them) and `inv` = 1/√(mean(s²) +
    /// ε), each where wanted.
    fn rms_statistics(&mut self, s: &str, epsilon: f32, mean: Option<&str>, inv: Option<&str>) {
        if mean.is_none() && inv.is_none() {
            return;
        }
        let square = self.fresh("Mul", &[s, s], vec![]);
        let ms = if self.opset >= 18 {
            let axes = self.fresh("Constant", &[], vec![attr_ints("value_ints", &[-1])]);
            self.fresh("ReduceMean", &[&square, &axes], vec![attr_i("keepdims", 1)])
        } else {
            self.fresh(
                "ReduceMean",
                &[&square],
                vec![attr_ints("axes", &[-1]), attr_i("keepdims", 1)],
            )
        };
        if let Some(inv) = inv {
            let eps = self.scalar(epsilon, &ms);
            let var = self.fresh("Add", &[&ms, &eps], vec![]);
            let root = self.fresh("Sqrt", &[&var], vec![]);
            self.node("Reciprocal", &[&root], &[inv], vec![]);
        }
        if let Some(mean) = mean {
            let zero = self.scalar(0.0, &ms);
            let shape = self.fresh("Shape", &[&ms], vec![]);
            self.node("Expand", &[&zero, &shape], &[mean], vec![]);
        }
    }

    /// `[batch, seq]` positions `offset + j` (`offset` the one value of
    /// `pos`) for `v`, whose batch is axis 0 and sequence axis `seq_axis`:
    /// ones of that shape summed along the sequence (exclusively), plus
    /// the offset.
    fn offset_positions(&mut self, v: &str, pos: &str, seq_axis: i64) -> String {
        let shape = self.fresh("Shape", &[v], vec![]);
        let (batch, seq) = (
            self.slice_1d(&shape, 0, 1),
            self.slice_1d(&shape, seq_axis, seq_axis + 1),
        );
        let dims = self.fresh("Concat", &[&batch, &seq], vec![attr_i("axis", 0)]);
        let steps = self.positions(&dims, 1);
        self.fresh("Add", &[&steps, pos], vec![])
    }

    /// ORT's additive attention mask from a 0/1 `mask`: `(1 − mask) ·
    /// filter`, with new axes at `axes` to broadcast over heads (and
    /// query rows).
    fn additive_mask(&mut self, mask: &str, filter: f32, axes: &[i64]) -> String {
        let to_float = attr_i("to", proto::tensor_proto::DataType::Float as i64);
        let float = self.fresh("Cast", &[mask], vec![to_float]);
        let one = self.scalar(1.0, &float);
        let off = self.fresh("Sub", &[&one, &float], vec![]);
        let filter = self.scalar(filter, &float);
        let additive = self.fresh("Mul", &[&off, &filter], vec![]);
        self.unsqueeze(&additive, axes)
    }

    /// `[batch, kv]` booleans: key `j` of batch item `b` is before
    /// `ends[b]` (`ends` reshaped to `[batch]`, the batch being `input`'s
    /// axis 0; the keys `key`'s axis 1).
    fn keys_before(&mut self, input: &str, key: &str, ends: &str) -> String {
        let input_shape = self.fresh("Shape", &[input], vec![]);
        let batch = self.slice_1d(&input_shape, 0, 1);
        let ends = self.fresh("Reshape", &[ends, &batch], vec![]);
        let to_i64 = attr_i("to", proto::tensor_proto::DataType::Int64 as i64);
        let ends = self.fresh("Cast", &[&ends], vec![to_i64]);
        let ends = self.unsqueeze(&ends, &[1]);
        let key_shape = self.fresh("Shape", &[key], vec![]);
        let keys = self.slice_1d(&key_shape, 1, 2);
        let positions = self.positions(&keys, 0);
        let positions = self.unsqueeze(&positions, &[0]);
        self.fresh("Less", &[&positions, &ends], vec![])
    }

    /// `0, 1, …` along `axis` of a tensor of shape `dims` (int64): ones
    /// summed exclusively.
    fn positions(&mut self, dims: &str, axis: i64) -> String {
        let one = proto::TensorProto {
            dims: vec![1],
            data_type: Some(proto::tensor_proto::DataType::Int64 as i32),
            int64_data: vec![1],
            ..Default::default()
        };
        let ones = self.fresh("ConstantOfShape", &[dims], vec![attr_t("value", one)]);
        let axis = self.fresh("Constant", &[], vec![attr_i("value_int", axis)]);
        self.fresh("CumSum", &[&ones, &axis], vec![attr_i("exclusive", 1)])
    }

    /// The additive mask of a padding mask and an attention bias, either or
    /// both (their sum).
    fn combine_masks(&mut self, padding: Option<String>, bias: Option<&str>) -> Option<String> {
        match (padding, bias) {
            (Some(p), Some(b)) => Some(self.fresh("Add", &[&p, b], vec![])),
            (Some(p), None) => Some(p),
            (None, Some(b)) => Some(b.to_string()),
            (None, None) => None,
        }
    }

    /// An int64 vector constant.
    fn ints(&mut self, v: &[i64]) -> String {
        self.fresh("Constant", &[], vec![attr_ints("value_ints", v)])
    }

    /// Elements `start..end` of the 1-D `v`.
    fn slice_1d(&mut self, v: &str, start: i64, end: i64) -> String {
        let (s, e, axes) = (self.ints(&[start]), self.ints(&[end]), self.ints(&[0]));
        self.fresh("Slice", &[v, &s, &e, &axes], vec![])
    }

    /// `v` with new axes of size 1 at `axes` (as an input from opset 13).
    fn unsqueeze(&mut self, v: &str, axes: &[i64]) -> String {
        if self.opset >= 13 {
            let axes = self.ints(axes);
            self.fresh("Unsqueeze", &[v, &axes], vec![])
        } else {
            self.fresh("Unsqueeze", &[v], vec![attr_ints("axes", axes)])
        }
    }

    /// `v` as FusedMatMul's operand: the batch dim 0 moved before the
    /// matrix dims (`batch`) and the matrix dims swapped (`swap`); the
    /// permutation needs `v`'s rank (a 1-D operand is used as it is).
    fn transposed(
        &mut self,
        v: &str,
        swap: bool,
        batch: bool,
        rank: &dyn Fn(&str) -> Option<usize>,
    ) -> Result<String, String> {
        if !swap && !batch {
            return Ok(v.to_string());
        }
        let r = rank(v).ok_or_else(|| {
            format!(
                "FusedMatMul transposes `{v}`, whose rank the file does not declare (declare its shape)"
            )
        })?;
        if r < 2 {
            // A vector is promoted as MatMul promotes it; a transpose
            // leaves it as it is.
            return Ok(v.to_string());
        }
        let r = r as i64;
        let mut perm: Vec<i64> = (0..r).collect();
        if batch {
            if r < 3 {
                return Err("FusedMatMul with transBatch on an operand of rank below 3".into());
            }
            // Dim 0 moves to position r − 2.
            perm = (1..r - 1).chain([0, r - 1]).collect();
        }
        if swap {
            perm.swap(r as usize - 2, r as usize - 1);
        }
        Ok(self.fresh("Transpose", &[v], vec![attr_ints("perm", &perm)]))
    }

    /// `float(MatMulInteger(a, b, a_zp, b_zp)) · scale (+ bias)` into `out`.
    #[allow(clippy::too_many_arguments)]
    fn integer_product(
        &mut self,
        a: &str,
        b: &str,
        a_zp: Option<&str>,
        b_zp: Option<&str>,
        scale: &str,
        bias: Option<&str>,
        out: &str,
    ) {
        let mut ins = vec![a, b];
        if a_zp.is_some() || b_zp.is_some() {
            ins.push(a_zp.unwrap_or(""));
        }
        if let Some(z) = b_zp {
            ins.push(z);
        }
        let acc = self.fresh("MatMulInteger", &ins, vec![]);
        let float = self.fresh(
            "Cast",
            &[&acc],
            vec![attr_i("to", proto::tensor_proto::DataType::Float as i64)],
        );
        match bias {
            Some(bias) => {
                let scaled = self.fresh("Mul", &[&float, scale], vec![]);
                self.node("Add", &[&scaled, bias], &[out], vec![]);
            }
            None => self.node("Mul", &[&float, scale], &[out], vec![]),
        }
    }
}

/// ONNX Attention's attributes for ORT's attention operators: `heads` query
/// and key/value heads, causal when `unidirectional`, their `scale`.
fn attention_attrs(a: &crate::ops::Attrs<'_>, heads: i64) -> Vec<AttributeProto> {
    let mut attrs = vec![
        attr_i("q_num_heads", heads),
        attr_i("kv_num_heads", heads),
        attr_i("is_causal", a.int("unidirectional", 0)),
    ];
    if let Some(scale) = a.float_opt("scale") {
        attrs.push(attr_f("scale", scale));
    }
    attrs
}

/// A positive integer attribute as a size.
fn positive(v: i64, name: &str) -> Result<usize, String> {
    usize::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("MatMulNBits with {name} = {v}"))
}

/// MatMulNBits' weight format: `N` rows (output features) of `K` values
/// in blocks of `block` along K, each value `bits` wide, packed low bits
/// first into bytes (`[N, blocks, block·bits/8]`), one scale per block
/// (`[N · blocks]`) and a zero point per block (packed the same way per
/// row, or floats `[N · blocks]`; `2^(bits−1)` when absent).
struct NBits {
    k: usize,
    n: usize,
    bits: i64,
    block: usize,
}

impl NBits {
    /// `W[k][n] = (q[n][k] − zero[n][k / block]) · scale[n][k / block]`
    /// as a `K × N` float tensor.
    fn dequantize(
        &self,
        b: &crate::ir::Tensor,
        scales: &crate::ir::Tensor,
        zero_points: Option<&crate::ir::Tensor>,
    ) -> Result<proto::TensorProto, String> {
        use lele_kernels::DType;
        let bits = match self.bits {
            2 | 4 | 8 => self.bits as usize,
            b => {
                return Err(format!(
                    "MatMulNBits with bits = {b} (2, 4 and 8 are supported)"
                ));
            }
        };
        let (k, n, block) = (self.k, self.n, self.block);
        let blocks = k.div_ceil(block);
        let per_byte = 8 / bits;
        if block % per_byte != 0 {
            return Err(format!(
                "MatMulNBits with block_size {block} at {bits} bits"
            ));
        }
        // Sizes from attributes, checked against the constants (whose size
        // the file bounds) before anything is allocated.
        let row_bytes = blocks
            .checked_mul(block / per_byte)
            .ok_or("MatMulNBits' weight size overflows")?;
        let weight_len = n
            .checked_mul(row_bytes)
            .ok_or("MatMulNBits' weight size overflows")?;
        if b.dtype != DType::U8 || b.bytes().len() != weight_len {
            return Err(format!(
                "MatMulNBits' weight is not {weight_len} uint8 ([N, blocks, block·bits/8])"
            ));
        }
        let out_len = k
            .checked_mul(n)
            .and_then(|v| v.checked_mul(4))
            .ok_or("MatMulNBits' weight size overflows")?;
        let scales = match scales.to_f64s() {
            Some(s) if scales.dtype == DType::F32 && s.len() == n * blocks => s,
            _ => {
                return Err(format!(
                    "MatMulNBits' scales are not {} float32",
                    n * blocks
                ));
            }
        };
        let mask = ((1u16 << bits) - 1) as u8;
        let unpack = |bytes: &[u8], i: usize| -> f64 {
            f64::from((bytes[i / per_byte] >> ((i % per_byte) * bits)) & mask)
        };
        let zero: Vec<f64> = match zero_points {
            None => vec![f64::from(1u32 << (bits - 1)); n * blocks],
            Some(z) if z.dtype == DType::U8 => {
                let per_row = blocks.div_ceil(per_byte);
                if z.bytes().len() != n * per_row {
                    return Err(format!(
                        "MatMulNBits' packed zero points are not {} bytes",
                        n * per_row
                    ));
                }
                (0..n * blocks)
                    .map(|i| unpack(&z.bytes()[(i / blocks) * per_row..][..per_row], i % blocks))
                    .collect()
            }
            Some(z) => match z.to_f64s() {
                Some(v) if v.len() == n * blocks => v,
                _ => {
                    return Err(format!(
                        "MatMulNBits' zero points are not {} values",
                        n * blocks
                    ));
                }
            },
        };
        let mut raw = vec![0u8; out_len];
        for row in 0..n {
            let bytes = &b.bytes()[row * row_bytes..][..row_bytes];
            for kk in 0..k {
                let j = row * blocks + kk / block;
                let w = ((unpack(bytes, kk) - zero[j]) * scales[j]) as f32;
                raw[(kk * n + row) * 4..][..4].copy_from_slice(&w.to_le_bytes());
            }
        }
        Ok(proto::TensorProto {
            dims: vec![k as i64, n as i64],
            data_type: Some(proto::tensor_proto::DataType::Float as i32),
            raw_data: Some(raw),
            ..Default::default()
        })
    }
}

fn attr_t(name: &str, t: proto::TensorProto) -> AttributeProto {
    AttributeProto {
        t: Some(t),
        ..attr(name, AttributeType::Tensor)
    }
}

fn attr(name: &str, ty: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(ty as i32),
        ..Default::default()
    }
}

fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        f: Some(v),
        ..attr(name, AttributeType::Float)
    }
}

fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        i: Some(v),
        ..attr(name, AttributeType::Int)
    }
}

fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        s: Some(v.as_bytes().to_vec()),
        ..attr(name, AttributeType::String)
    }
}

fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        ints: v.to_vec(),
        ..attr(name, AttributeType::Ints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attribute: Vec<AttributeProto>,
    ) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            op_type: Some(op.to_string()),
            domain: Some("com.microsoft".into()),
            attribute,
            ..Default::default()
        }
    }

    fn known(rank: Option<usize>) -> Known<'static> {
        let rank: &'static dyn Fn(&str) -> Option<usize> = match rank {
            Some(_) => &|_| Some(3),
            None => &|_| None,
        };
        Known {
            rank,
            constant: &|_| None,
        }
    }

    #[test]
    fn a_transpose_of_an_operand_of_unknown_rank_is_an_error() {
        let np = node(
            "FusedMatMul",
            &["a", "b"],
            &["y"],
            vec![attr_i("transB", 1)],
        );
        let err = expand(&np, "n", 17, &known(None)).unwrap_err();
        assert!(err.contains("declare its shape"), "{err}");
        // Without transposes the rank does not matter.
        let np = node("FusedMatMul", &["a", "b"], &["y"], vec![]);
        let nodes = expand(&np, "n", 17, &known(None)).unwrap();
        assert_eq!(nodes.len(), 1, "{nodes:?}");
        assert_eq!(nodes[0].op_type.as_deref(), Some("MatMul"));
    }

    #[test]
    fn missing_inputs_and_outputs_are_errors() {
        for (op, inputs) in [
            ("SkipLayerNormalization", &["x", "skip"][..]),
            ("BiasGelu", &["a"][..]),
            ("MatMulIntegerToFloat", &["a", "b", "sa"][..]),
            ("DynamicQuantizeMatMul", &[][..]),
        ] {
            let np = node(op, inputs, &["y"], vec![]);
            assert!(expand(&np, "n", 17, &known(Some(3))).is_err(), "{op}");
        }
        let np = node("Gelu", &["x"], &[], vec![]);
        assert!(expand(&np, "n", 17, &known(Some(3))).is_err());
    }

    #[test]
    fn the_node_keeps_its_output_names() {
        let np = node(
            "SkipLayerNormalization",
            &["x", "skip", "gamma", "", "bias"],
            &["y", "", "inv", "sum"],
            vec![],
        );
        let nodes = expand(&np, "n", 17, &known(Some(3))).unwrap();
        let outs: Vec<&str> = nodes
            .iter()
            .flat_map(|n| n.output.iter().map(String::as_str))
            .collect();
        for want in ["y", "inv", "sum"] {
            assert!(outs.contains(&want), "{want} in {outs:?}");
        }
    }

    /// Sizes from attributes that disagree with the constants, or overflow,
    /// are errors before anything is allocated.
    #[test]
    fn hostile_matmulnbits_attributes_are_errors() {
        use crate::ir::Tensor;
        use lele_kernels::DType;
        let weight =
            std::sync::Arc::new(Tensor::from_bytes(DType::U8, &[2, 1, 16], &[7; 32]).unwrap());
        let scales = std::sync::Arc::new(Tensor::from_values::<f32>(&[2], &[0.5, 0.25]).unwrap());
        let constant = move |v: &str| match v {
            "b" => Some(weight.clone()),
            "s" => Some(scales.clone()),
            _ => None,
        };
        let known = Known {
            rank: &|_| Some(2),
            constant: &constant,
        };
        let nbits = |k: i64, n: i64, bits: i64, block: i64| {
            node(
                "MatMulNBits",
                &["a", "b", "s"],
                &["y"],
                vec![
                    attr_i("K", k),
                    attr_i("N", n),
                    attr_i("bits", bits),
                    attr_i("block_size", block),
                ],
            )
        };
        // The well-formed case: 32 four-bit values per row in one block.
        assert!(expand(&nbits(32, 2, 4, 32), "n", 17, &known).is_ok());
        for (k, n, bits, block) in [
            (i64::MAX, 2, 4, 32),
            (32, i64::MAX, 4, 32),
            (32, 2, 3, 32),
            (32, 2, 4, 0),
            (32, 2, 4, -16),
            (64, 2, 4, 32),
            (32, 3, 4, 32),
            (1 << 62, 1 << 62, 8, 16),
        ] {
            assert!(
                expand(&nbits(k, n, bits, block), "n", 17, &known).is_err(),
                "K {k} N {n} bits {bits} block {block}"
            );
        }
    }
}
