//! Causal attention of new tokens over a key/value cache that persists
//! between calls (the cache is this kernel's own output, which the
//! planner keeps in place from one call to the next).
use half::f16;

use super::position;
use crate::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, set_out};
use crate::ops::access::check_out;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "CachedAttention";

/// Multi-head attention of `n` new tokens at positions `p0..p0+n` (input
/// 3, i64) with grouped key/value heads.
///
/// Inputs: `Q` f32 `[n, heads, head_dim]`, `K` f32 `[n, kv_heads,
/// head_dim]`, `V` f32 `[n, kv_heads, value_dim]`, the position. Outputs:
/// `Y` f32 `[n, heads · value_dim]` and the key and value caches,
/// `[capacity, kv_heads, head_dim | value_dim]` f32 holding f16-rounded
/// values. Position `p` lives in cell `p mod capacity`; a call first writes
/// its keys and values there, then each token attends to the positions
/// `q` with `q ≤ p` (and `p − q < window` when `window > 0`).
///
/// The arithmetic is llama.cpp's CPU attention with an f16 cache and
/// flash attention off (llama-cpp-python's default): the query rounded to
/// f16, each score a sum of f16 products in the lane order of a 16-lane
/// product loop, times `scale`; the softmax's exponentials summed per 16
/// positions in f64, the probabilities rounded to f16 and summed with the
/// values in that lane order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CachedAttention {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (dividing `heads`).
    pub kv_heads: usize,
    /// Width of a query or key head.
    pub head_dim: usize,
    /// Width of a value head.
    pub value_dim: usize,
    /// Positions a token sees, itself included (0: all earlier ones).
    pub window: usize,
    /// Cells of the cache.
    pub capacity: usize,
    /// Factor of every score.
    pub scale: f32,
}
crate::to_rust_struct!(ops::decoder::CachedAttention {
    heads,
    kv_heads,
    head_dim,
    value_dim,
    window,
    capacity,
    scale
});

fn round_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// Sums 16 lanes as a 512-bit vector's horizontal add does: halves,
/// quarters, eighths, then the last pair.
fn lane_tree(l: &[f32; 16]) -> f32 {
    let h: [f32; 8] = core::array::from_fn(|i| l[i] + l[i + 8]);
    let q: [f32; 4] = core::array::from_fn(|i| h[i] + h[i + 4]);
    (q[0] + q[1]) + (q[2] + q[3])
}

/// `Σ a[i]·b[i]` over f16-valued `a` and `b` as a 16-lane product loop
/// sums it: lane `l` adds the products `i ≡ l (mod 16)` in order, then the
/// lanes as a tree. Products of f16 values are exact in f32, so only this
/// order decides the rounding.
fn dot_f16_values(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        lanes[i % 16] += x * y;
    }
    lane_tree(&lanes)
}

impl CachedAttention {
    fn shapes(
        &self,
        q: &TensorRef<'_>,
        k: &TensorRef<'_>,
        v: &TensorRef<'_>,
    ) -> Result<[Shape; 3], KernelError> {
        let bad = |msg| KernelError::Shape { op: OP, msg };
        if self.kv_heads == 0 || !self.heads.is_multiple_of(self.kv_heads) || self.capacity == 0 {
            return Err(bad(
                "kv_heads must divide heads and the cache must have cells",
            ));
        }
        let n = q.shape.dims().first().copied().unwrap_or(0);
        let want_q = [n, self.heads, self.head_dim];
        let want_k = [n, self.kv_heads, self.head_dim];
        let want_v = [n, self.kv_heads, self.value_dim];
        if q.shape.dims() != want_q || k.shape.dims() != want_k || v.shape.dims() != want_v {
            return Err(bad(
                "Q, K, V must be [tokens, heads, width] of the declared heads and widths",
            ));
        }
        if [q.dtype, k.dtype, v.dtype].iter().any(|&d| d != DType::F32) {
            return Err(bad("Q, K and V must be f32"));
        }
        let width = self
            .heads
            .checked_mul(self.value_dim)
            .ok_or(bad("the output width overflows"))?;
        Ok([
            Shape::new(&[n, width])?,
            Shape::new(&[self.capacity, self.kv_heads, self.head_dim])?,
            Shape::new(&[self.capacity, self.kv_heads, self.value_dim])?,
        ])
    }
}

impl Kernel for CachedAttention {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (q, k, v) = (
            input(inputs, 0, OP)?,
            input(inputs, 1, OP)?,
            input(inputs, 2, OP)?,
        );
        let [y, kc, vc] = self.shapes(q, k, v)?;
        set_out(outputs, y, OP)?;
        match outputs {
            [_, k_out, v_out, ..] => {
                *k_out = kc;
                *v_out = vc;
                Ok(())
            }
            _ => Err(KernelError::MissingInput { op: OP, index: 2 }),
        }
    }

    fn scratch_bytes(&self, _inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        self.head_dim
            .saturating_add(self.capacity)
            .saturating_mul(4)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (q, k, v) = (
            input(inputs, 0, OP)?,
            input(inputs, 1, OP)?,
            input(inputs, 2, OP)?,
        );
        let shapes = self.shapes(q, k, v)?;
        let p0 = position(inputs, 3, OP)?;
        let n = q.shape.dim(0);
        let (hd, dv, cap) = (self.head_dim, self.value_dim, self.capacity);
        let full = KernelError::Invalid {
            op: OP,
            msg: "the tokens do not fit the key/value cache (context bound reached)",
        };
        let end = p0.checked_add(n).ok_or(full.clone())?;
        let fits = if self.window == 0 {
            end <= cap
        } else {
            n.checked_add(self.window).is_some_and(|w| w - 1 <= cap)
        };
        if !fits {
            return Err(full);
        }
        let [y, kc, vc, ..] = outputs else {
            return Err(KernelError::MissingInput { op: OP, index: 2 });
        };
        for (t, s) in [(&*y, &shapes[0]), (&*kc, &shapes[1]), (&*vc, &shapes[2])] {
            check_out(t, DType::F32, s, OP)?;
        }
        let (qs, ks, vs) = (
            q.typed::<f32>(OP)?,
            k.typed::<f32>(OP)?,
            v.typed::<f32>(OP)?,
        );
        let (kw, vw) = (self.kv_heads * hd, self.kv_heads * dv);
        {
            let kcs = kc.typed::<f32>(OP)?;
            let vcs = vc.typed::<f32>(OP)?;
            for t in 0..n {
                let cell = (p0 + t) % cap;
                for (c, &x) in kcs[cell * kw..][..kw].iter_mut().zip(&ks[t * kw..][..kw]) {
                    *c = round_f16(x);
                }
                for (c, &x) in vcs[cell * vw..][..vw].iter_mut().zip(&vs[t * vw..][..vw]) {
                    *c = round_f16(x);
                }
            }
        }
        let (kcs, vcs) = (&*kc.typed::<f32>(OP)?, &*vc.typed::<f32>(OP)?);
        let ys = y.typed::<f32>(OP)?;
        let scratch: &mut [f32] = bytemuck::try_cast_slice_mut(
            scratch
                .get_mut(..(hd + cap) * 4)
                .ok_or(KernelError::Buffer { op: OP })?,
        )
        .map_err(|_| KernelError::Buffer { op: OP })?;
        let (q16, probs) = scratch.split_at_mut(hd);
        let group = self.heads / self.kv_heads;
        for t in 0..n {
            let p = p0 + t;
            let first = if self.window == 0 {
                0
            } else {
                (p + 1).saturating_sub(self.window)
            };
            // The keys seen, oldest first, and where each one's lane is:
            // positions index the lanes of the sums below.
            let seen = first..=p;
            for h in 0..self.heads {
                let g = h / group;
                for (d, &x) in q16.iter_mut().zip(&qs[(t * self.heads + h) * hd..][..hd]) {
                    *d = round_f16(x);
                }
                let probs = &mut probs[..seen.clone().count()];
                let mut max = f32::NEG_INFINITY;
                for (s, key) in probs.iter_mut().zip(seen.clone()) {
                    let cell = key % cap;
                    *s = dot_f16_values(&kcs[cell * kw + g * hd..][..hd], q16) * self.scale;
                    max = max.max(*s);
                }
                // exp(s − max), summed per 16 positions as a vector's
                // horizontal add, the sixteens in f64.
                let mut sum = 0f64;
                let mut lanes = [0f32; 16];
                let mut chunk = first / 16;
                for (s, key) in probs.iter_mut().zip(seen.clone()) {
                    if key / 16 != chunk {
                        sum += f64::from(lane_tree(&lanes));
                        lanes = [0.0; 16];
                        chunk = key / 16;
                    }
                    *s = (*s - max).exp();
                    lanes[key % 16] = *s;
                }
                sum += f64::from(lane_tree(&lanes));
                let inv = (1.0 / sum) as f32;
                for s in probs.iter_mut() {
                    *s = round_f16(*s * inv);
                }
                let out = &mut ys[(t * self.heads + h) * dv..][..dv];
                for (d, y) in out.iter_mut().enumerate() {
                    let mut lanes = [0f32; 16];
                    for (&pr, key) in probs.iter().zip(seen.clone()) {
                        let cell = key % cap;
                        lanes[key % 16] += vcs[cell * vw + g * dv + d] * pr;
                    }
                    *y = lane_tree(&lanes);
                }
            }
        }
        Ok(())
    }
}
