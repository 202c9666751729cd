//! ONNX `Attention` (opsets 23–25) in one kernel, f32: scaled dot-product
//! attention with grouped key/value heads, an additive or boolean mask,
//! causal and sliding-window masking, a key/value cache and soft-capping.
//!
//! Inputs: `Q`, `K`, `V` (all 4-D `[B, heads, S, head size]`, or all 3-D
//! `[B, S, heads·head size]` with the head counts from the attributes),
//! optional `attn_mask` (bool: true attends; or f32 added to the scores;
//! broadcast to `[B, Hq, Sq, Stotal]`, a shorter last dim is padded with
//! "masked"), optional `past_key`/`past_value` (4-D), optional
//! `nonpad_kv_seqlen` (`[B]` int64). Outputs: `Y`, optional
//! `present_key`/`present_value` (past ++ current), optional
//! `qk_matmul_output` selected by `qk_mode`.
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, opt_input};
use crate::ops::gemm::{f32_in, f32_out};
use crate::ops::mha::MultiHeadAttention;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "Attention";

/// Parameters (the ONNX attributes; 0 / -1 mean "not set").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attention {
    /// Score scale; 0 means `1/sqrt(head size)`.
    pub scale: f32,
    /// Mask keys after the (offset-aligned) query position.
    pub is_causal: bool,
    /// Query heads of 3-D inputs.
    pub q_num_heads: usize,
    /// Key/value heads of 3-D inputs.
    pub kv_num_heads: usize,
    /// `softcap * tanh(score / softcap)` when positive.
    pub softcap: f32,
    /// What the fourth output holds: 0/1 scores (after soft-capping), 2 with
    /// the mask added, 3 the softmax.
    pub qk_mode: i64,
    /// Keys further than this before the query position are masked (-1: none).
    pub left_window: i64,
    /// Keys further than this after the query position are masked (-1: none).
    pub right_window: i64,
}
crate::to_rust_struct!(ops::attention::Attention {
    scale,
    is_causal,
    q_num_heads,
    kv_num_heads,
    softcap,
    qk_mode,
    left_window,
    right_window
});

#[derive(Clone, Copy)]
struct Dims {
    b: usize,
    hq: usize,
    hk: usize,
    sq: usize,
    skv: usize,
    spast: usize,
    dh: usize,
    dv: usize,
    three_d: bool,
}

impl Dims {
    fn stot(&self) -> usize {
        self.spast + self.skv
    }
}

fn bad(msg: &'static str) -> KernelError {
    KernelError::Shape { op: OP, msg }
}

impl Attention {
    /// This call as the head-interleaved multi-head kernel
    /// ([`MultiHeadAttention`]: its products through the GEMM) and its
    /// inputs seen as `[B, S, H, D]`, when it is one: 3-D f32 inputs with as
    /// many key/value heads as query heads, no past, only the output
    /// wanted, no causal mask, window or soft cap, an additive f32 mask or
    /// none. (A 3-D `[B, S, H·D]` tensor is `[B, S, H, D]` in memory.) The
    /// output's shape as that kernel writes it comes with them.
    fn as_mha<'a>(
        &self,
        inputs: &[Option<TensorRef<'a>>],
        n_outputs: usize,
    ) -> Option<(MultiHeadAttention, [Option<TensorRef<'a>>; 4], Shape)> {
        let d = self.dims(inputs).ok()?;
        let plain =
            !self.is_causal && self.softcap == 0.0 && self.left_window < 0 && self.right_window < 0;
        if !d.three_d || d.hq != d.hk || n_outputs != 1 || !plain {
            return None;
        }
        if opt_input(inputs, 4).is_some() || opt_input(inputs, 5).is_some() {
            return None;
        }
        let mask = opt_input(inputs, 3);
        if mask.is_some_and(|m| m.dtype != DType::F32) {
            return None;
        }
        let heads = |i: usize, s: usize, dd: usize| {
            let t = opt_input(inputs, i).filter(|t| t.dtype == DType::F32)?;
            Some(TensorRef {
                shape: Shape::new(&[d.b, s, d.hq, dd]).ok()?,
                ..*t
            })
        };
        let ins = [
            Some(heads(0, d.sq, d.dh)?),
            Some(heads(1, d.skv, d.dh)?),
            Some(heads(2, d.skv, d.dv)?),
            mask.copied(),
        ];
        let scale = match self.scale {
            0.0 => 1.0 / (d.dh as f32).sqrt(),
            s => s,
        };
        let out = Shape::new(&[d.b, d.sq, d.hq, d.dv]).ok()?;
        Some((MultiHeadAttention { scale }, ins, out))
    }

    fn dims(&self, inputs: &[Option<TensorRef<'_>>]) -> Result<Dims, KernelError> {
        let (q, k, v) = (
            input(inputs, 0, OP)?,
            input(inputs, 1, OP)?,
            input(inputs, 2, OP)?,
        );
        let (qd, kd, vd) = (q.shape.dims(), k.shape.dims(), v.shape.dims());
        if qd.len() != kd.len() || qd.len() != vd.len() {
            return Err(bad("Q, K and V must have the same rank"));
        }
        let d = match qd.len() {
            4 => Dims {
                b: qd[0],
                hq: qd[1],
                hk: kd[1],
                sq: qd[2],
                skv: kd[2],
                spast: 0,
                dh: qd[3],
                dv: vd[3],
                three_d: false,
            },
            3 => {
                let (hq, hk) = (self.q_num_heads, self.kv_num_heads);
                if hq == 0 || hk == 0 || qd[2] % hq != 0 || kd[2] % hk != 0 || vd[2] % hk != 0 {
                    return Err(bad(
                        "3-D inputs need q_num_heads/kv_num_heads dividing the hidden sizes",
                    ));
                }
                Dims {
                    b: qd[0],
                    hq,
                    hk,
                    sq: qd[1],
                    skv: kd[1],
                    spast: 0,
                    dh: qd[2] / hq,
                    dv: vd[2] / hk,
                    three_d: true,
                }
            }
            _ => return Err(bad("Q, K and V must be 3-D or 4-D")),
        };
        let mut d = d;
        let kv_ok = if d.three_d {
            kd[0] == d.b && vd[0] == d.b && vd[1] == d.skv && kd[2] / d.hk == d.dh
        } else {
            kd[0] == d.b && vd[0] == d.b && vd[1] == d.hk && vd[2] == d.skv && kd[3] == d.dh
        };
        if !kv_ok || d.hk == 0 || d.hq % d.hk != 0 {
            return Err(bad(
                "K/V do not match Q (batch, heads, sequence or head size)",
            ));
        }
        match (opt_input(inputs, 4), opt_input(inputs, 5)) {
            (Some(pk), Some(pv)) => {
                let (pkd, pvd) = (pk.shape.dims(), pv.shape.dims());
                if pkd.len() != 4
                    || pkd[..2] != [d.b, d.hk]
                    || pkd[3] != d.dh
                    || pvd.len() != 4
                    || pvd[..3] != pkd[..3]
                    || pvd[3] != d.dv
                {
                    return Err(bad(
                        "past_key/past_value must be [B, kv heads, past, head size]",
                    ));
                }
                d.spast = pkd[2];
            }
            (None, None) => {}
            _ => return Err(bad("past_key and past_value come together")),
        }
        if let Some(m) = opt_input(inputs, 3) {
            let md = m.shape.dims();
            let want = [d.b, d.hq, d.sq, d.stot()];
            if md.is_empty() || md.len() > 4 {
                return Err(bad("attn_mask must have rank 1 to 4"));
            }
            for (i, &x) in md.iter().enumerate() {
                let w = want[4 - md.len() + i];
                let last = i + 1 == md.len();
                if !(x == 1 || x == w || (last && x <= w)) {
                    return Err(bad(
                        "attn_mask does not broadcast to [B, heads, Sq, Stotal]",
                    ));
                }
            }
            if !matches!(m.dtype, DType::Bool | DType::F32) {
                return Err(KernelError::UnsupportedDType {
                    op: OP,
                    dtype: m.dtype,
                });
            }
        }
        if let Some(n) = opt_input(inputs, 6)
            && (n.shape.dims() != [d.b] || d.spast > 0)
        {
            return Err(bad(
                "nonpad_kv_seqlen must be [B] and cannot be combined with a cache",
            ));
        }
        Ok(d)
    }
}

impl Kernel for Attention {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let d = self.dims(inputs)?;
        let shape = |v: &[usize]| Shape::new(v).map_err(|_| bad("rank"));
        let mut shapes = [
            if d.three_d {
                shape(&[d.b, d.sq, d.hq * d.dv])?
            } else {
                shape(&[d.b, d.hq, d.sq, d.dv])?
            },
            shape(&[d.b, d.hk, d.stot(), d.dh])?,
            shape(&[d.b, d.hk, d.stot(), d.dv])?,
            shape(&[d.b, d.hq, d.sq, d.stot()])?,
        ]
        .into_iter();
        for o in outputs.iter_mut() {
            *o = shapes.next().ok_or(bad("at most 4 outputs"))?;
        }
        Ok(())
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> usize {
        if let Some((mha, ins, _)) = self.as_mha(inputs, outputs.len()) {
            return mha.scratch_bytes(&ins, &[]);
        }
        match self.dims(inputs) {
            Ok(d) => (d.b * d.hk * d.stot() * (d.dh + d.dv) + 2 * d.stot()) * 4,
            Err(_) => 0,
        }
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        // Q·Kᵀ and the probabilities times V, per query head.
        self.dims(inputs).map_or(0, |d| {
            let rows = [d.b, d.hq, d.sq, d.stot()]
                .iter()
                .fold(1usize, |a, &v| a.saturating_mul(v));
            crate::kernel::product_flops(rows, d.dh.saturating_add(d.dv))
        })
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        if let Some((mha, ins, shape)) = self.as_mha(inputs, outputs.len()) {
            let [y] = outputs else {
                return Err(KernelError::Buffer { op: OP });
            };
            let mut out = [TensorMut {
                dtype: y.dtype,
                shape,
                data: &mut *y.data,
            }];
            return mha.run(&ins, &mut out, scratch);
        }
        let d = self.dims(inputs)?;
        let q = f32_in(input(inputs, 0, OP)?, OP)?;
        let k = f32_in(input(inputs, 1, OP)?, OP)?;
        let v = f32_in(input(inputs, 2, OP)?, OP)?;
        let stot = d.stot();
        let need = (d.b * d.hk * stot * (d.dh + d.dv) + 2 * stot) * 4;
        let scratch: &mut [f32] = bytemuck::try_cast_slice_mut(
            scratch
                .get_mut(..need)
                .ok_or(KernelError::Buffer { op: OP })?,
        )
        .map_err(|_| KernelError::Buffer { op: OP })?;
        let (kt, rest) = scratch.split_at_mut(d.b * d.hk * stot * d.dh);
        let (vt, rest) = rest.split_at_mut(d.b * d.hk * stot * d.dv);
        let (bias, probs) = rest.split_at_mut(stot);
        // Full keys/values: past ++ current, as [B, Hk, Stot, D].
        let past = (opt_input(inputs, 4), opt_input(inputs, 5));
        for (src_cur, src_past, dst, dd) in
            [(k, past.0, &mut *kt, d.dh), (v, past.1, &mut *vt, d.dv)]
        {
            let past = match src_past {
                Some(p) => f32_in(p, OP)?,
                None => &[],
            };
            for b in 0..d.b {
                for h in 0..d.hk {
                    let base = (b * d.hk + h) * stot * dd;
                    for j in 0..stot {
                        let row = &mut dst[base + j * dd..base + (j + 1) * dd];
                        if j < d.spast {
                            let at = ((b * d.hk + h) * d.spast + j) * dd;
                            row.copy_from_slice(&past[at..at + dd]);
                        } else {
                            let s = j - d.spast;
                            let at = if d.three_d {
                                (b * d.skv + s) * d.hk * dd + h * dd
                            } else {
                                ((b * d.hk + h) * d.skv + s) * dd
                            };
                            row.copy_from_slice(&src_cur[at..at + dd]);
                        }
                    }
                }
            }
        }
        let mask = opt_input(inputs, 3);
        // The mask's values, read once: bool (attend or not) or additive f32.
        enum MaskValues<'m> {
            Bool(&'m [u8]),
            Add(&'m [f32]),
        }
        let mask_values = match mask {
            Some(m) if m.dtype == DType::Bool => Some(MaskValues::Bool(m.as_bool(OP)?)),
            Some(m) => Some(MaskValues::Add(f32_in(m, OP)?)),
            None => None,
        };
        let mask_strides = mask.map(|m| {
            let md = m.shape.dims();
            let mut strides = [0usize; 4];
            let mut dims = [1usize; 4];
            let mut s = 1;
            for i in (0..md.len()).rev() {
                let a = 4 - md.len() + i;
                dims[a] = md[i];
                strides[a] = if md[i] == 1 && a != 3 { 0 } else { s };
                s *= md[i];
            }
            (strides, dims[3])
        });
        let nonpad: Option<&[i64]> = match opt_input(inputs, 6) {
            Some(n) => Some(n.typed::<i64>(OP)?),
            None => None,
        };
        let scale = if self.scale != 0.0 {
            self.scale
        } else {
            1.0 / (d.dh as f32).sqrt()
        };
        let group = d.hq / d.hk;
        let (y_out, rest) = outputs.split_at_mut(1.min(outputs.len()));
        let y = f32_out(y_out.first_mut().ok_or(KernelError::Buffer { op: OP })?, OP)?;
        let mut rest = rest.iter_mut();
        let pk_out = rest.next();
        let pv_out = rest.next();
        let mut qk_out = match rest.next() {
            Some(t) => Some(f32_out(t, OP)?),
            None => None,
        };
        for b in 0..d.b {
            let offset: i64 = match nonpad {
                Some(n) => n[b] - d.sq as i64,
                None => d.spast as i64,
            };
            for h in 0..d.hq {
                let kh = h / group;
                let kbase = (b * d.hk + kh) * stot;
                for i in 0..d.sq {
                    // Additive bias of this row.
                    for (j, bj) in bias.iter_mut().enumerate() {
                        let mut val = 0f32;
                        if let (Some(m), Some((st, mlast))) = (&mask_values, mask_strides) {
                            val = if j >= mlast {
                                f32::NEG_INFINITY
                            } else {
                                let at = b * st[0] + h * st[1] + i * st[2] + j * st[3];
                                match m {
                                    MaskValues::Bool(v) if v[at] != 0 => 0.0,
                                    MaskValues::Bool(_) => f32::NEG_INFINITY,
                                    MaskValues::Add(v) => v[at],
                                }
                            };
                        }
                        let p = i as i64 + offset;
                        let jj = j as i64;
                        if self.is_causal && jj > p {
                            val = f32::NEG_INFINITY;
                        }
                        if (self.left_window >= 0 && p - jj > self.left_window)
                            || (self.right_window >= 0 && jj - p > self.right_window)
                        {
                            val = f32::NEG_INFINITY;
                        }
                        if let Some(n) = nonpad
                            && jj >= n[b]
                        {
                            val = f32::NEG_INFINITY;
                        }
                        *bj = val;
                    }
                    let qrow = if d.three_d {
                        let at = (b * d.sq + i) * d.hq * d.dh + h * d.dh;
                        &q[at..at + d.dh]
                    } else {
                        let at = ((b * d.hq + h) * d.sq + i) * d.dh;
                        &q[at..at + d.dh]
                    };
                    let qk_row = ((b * d.hq + h) * d.sq + i) * stot;
                    let mut max = f32::NEG_INFINITY;
                    let mut bias_max = f32::NEG_INFINITY;
                    for j in 0..stot {
                        let krow = &kt[(kbase + j) * d.dh..(kbase + j + 1) * d.dh];
                        let mut s = qrow.iter().zip(krow).map(|(a, b)| a * b).sum::<f32>() * scale;
                        if self.softcap > 0.0 {
                            s = self.softcap * (s / self.softcap).tanh();
                        }
                        let t = s + bias[j];
                        if let Some(o) = qk_out.as_deref_mut() {
                            match self.qk_mode {
                                2 => o[qk_row + j] = t,
                                3 => {}
                                _ => o[qk_row + j] = s,
                            }
                        }
                        probs[j] = t;
                        max = max.max(t);
                        bias_max = bias_max.max(bias[j]);
                    }
                    if bias_max == f32::NEG_INFINITY || max == f32::NEG_INFINITY {
                        probs.fill(0.0);
                    } else {
                        let mut sum = 0f32;
                        for p in probs.iter_mut() {
                            *p = (*p - max).exp();
                            sum += *p;
                        }
                        let inv = if sum == 0.0 { 1.0 } else { 1.0 / sum };
                        for p in probs.iter_mut() {
                            *p *= inv;
                        }
                    }
                    if self.qk_mode == 3
                        && let Some(o) = qk_out.as_deref_mut()
                    {
                        o[qk_row..qk_row + stot].copy_from_slice(probs);
                    }
                    let yrow = if d.three_d {
                        let at = (b * d.sq + i) * d.hq * d.dv + h * d.dv;
                        &mut y[at..at + d.dv]
                    } else {
                        let at = ((b * d.hq + h) * d.sq + i) * d.dv;
                        &mut y[at..at + d.dv]
                    };
                    yrow.fill(0.0);
                    for (j, &p) in probs.iter().enumerate() {
                        if p == 0.0 {
                            continue;
                        }
                        let vrow = &vt[(kbase + j) * d.dv..(kbase + j + 1) * d.dv];
                        for (o, &x) in yrow.iter_mut().zip(vrow) {
                            *o += p * x;
                        }
                    }
                }
            }
        }
        for (out, src, dd) in [(pk_out, &*kt, d.dh), (pv_out, &*vt, d.dv)] {
            if let Some(t) = out {
                let o = f32_out(t, OP)?;
                if o.len() != d.b * d.hk * stot * dd {
                    return Err(KernelError::Buffer { op: OP });
                }
                o.copy_from_slice(src);
            }
        }
        Ok(())
    }
}
