//! Products of f32 activations with a quantized weight matrix kept in its
//! GGUF blocks: each activation row is quantized once to the weight type's
//! activation type, then dotted with every weight row in integers.
use super::vector_dot::RowProducts;
use super::{GgmlType, activation_type, quantize_q8_0_activations, quantize_q8_k, vec_dot};
use crate::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, product_flops, set_out};
use crate::ops::access::check_out;
use crate::shape::Shape;
use crate::simd::dispatch;
use crate::tensor::{TensorMut, TensorRef};
use crate::threads::for_parts;
use core::sync::atomic::{AtomicBool, Ordering};

const OP: &str = "GgmlMatMul";

/// `Y[.., n] = X[.., k] · Wᵀ` with `W` (`[n, row_bytes]`, u8) holding `n`
/// rows of `k` elements in blocks of type `ty`, computed as llama.cpp does:
/// activations quantized per row ([`quantize_q8_0_activations`] for the
/// 32-element types, [`quantize_q8_k`] for the K types), integer block
/// sums, block scales applied once per block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GgmlMatMul {
    /// The weight's block type.
    pub ty: GgmlType,
    /// Elements per weight row (the contracted dim).
    pub k: usize,
}
crate::to_rust_struct!(ops::ggml::GgmlMatMul { ty, k });

impl GgmlMatMul {
    /// `(activation type, bytes of one quantized activation row, bytes of
    /// one weight row)`.
    fn layout(&self) -> Result<(GgmlType, usize, usize), KernelError> {
        let bad = |msg| KernelError::Invalid { op: OP, msg };
        let act = activation_type(self.ty).ok_or(bad("no quantized product for this ggml type"))?;
        let act_row = act
            .row_bytes(self.k)
            .ok_or(bad("k is not a whole number of activation blocks"))?;
        let w_row = self
            .ty
            .row_bytes(self.k)
            .ok_or(bad("k is not a whole number of weight blocks"))?;
        Ok((act, act_row, w_row))
    }

    /// `(rows of X, rows of W)` after checking both shapes.
    fn geometry(
        &self,
        x: &TensorRef<'_>,
        w: &TensorRef<'_>,
    ) -> Result<(usize, usize), KernelError> {
        let bad = |msg| KernelError::Shape { op: OP, msg };
        let (_, _, w_row) = self.layout()?;
        if x.dtype != DType::F32 || w.dtype != DType::U8 {
            return Err(KernelError::DTypeMismatch {
                op: OP,
                expected: if x.dtype != DType::F32 {
                    DType::F32
                } else {
                    DType::U8
                },
                found: if x.dtype != DType::F32 {
                    x.dtype
                } else {
                    w.dtype
                },
            });
        }
        let (&k, _) = x
            .shape
            .dims()
            .split_last()
            .ok_or(bad("X must have rank ≥ 1"))?;
        if k != self.k {
            return Err(bad("X's last dim differs from the weight's row length"));
        }
        let [n, row] = *w.shape.dims() else {
            return Err(bad("W must be [rows, row bytes]"));
        };
        if row != w_row {
            return Err(bad("W's row bytes do not hold k elements of its type"));
        }
        Ok((x.shape.numel() / k.max(1), n))
    }
}

impl Kernel for GgmlMatMul {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let (x, w) = (input(inputs, 0, OP)?, input(inputs, 1, OP)?);
        let (_, n) = self.geometry(x, w)?;
        let mut s = x.shape;
        if let Some(last) = s.dims_mut().last_mut() {
            *last = n;
        }
        set_out(outputs, s, OP)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        let (Ok(x), Ok((_, act_row, _))) = (input(inputs, 0, OP), self.layout()) else {
            return 0;
        };
        (x.shape.numel() / self.k.max(1)).saturating_mul(act_row)
    }

    fn flops(&self, _inputs: &[Option<TensorRef<'_>>], outputs: &[Shape]) -> u64 {
        outputs
            .first()
            .map_or(0, |y| product_flops(y.numel(), self.k))
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (x, w) = (input(inputs, 0, OP)?, input(inputs, 1, OP)?);
        let (rows, n) = self.geometry(x, w)?;
        let (act, act_row, w_row) = self.layout()?;
        let xs = x.typed::<f32>(OP)?;
        let wb = w.typed::<u8>(OP)?;
        let y = output(outputs, 0, OP)?;
        let mut shape = x.shape;
        if let Some(last) = shape.dims_mut().last_mut() {
            *last = n;
        }
        check_out(y, DType::F32, &shape, OP)?;
        let ys = y.typed::<f32>(OP)?;
        let qa = scratch
            .get_mut(
                ..rows
                    .checked_mul(act_row)
                    .ok_or(KernelError::Buffer { op: OP })?,
            )
            .ok_or(KernelError::Buffer { op: OP })?;
        let quantize = match act {
            GgmlType::Q8_0 => quantize_q8_0_activations,
            _ => quantize_q8_k,
        };
        for (x, q) in xs.chunks_exact(self.k).zip(qa.chunks_exact_mut(act_row)) {
            quantize(x, q)?;
        }
        // Parts of at least this many multiply-adds go to other threads:
        // decoding (one row) splits the weight rows, a batch its rows.
        const MIN_PART_MACS: usize = 1 << 16;
        let failed = AtomicBool::new(false);
        let ty = self.ty;
        let qa = &*qa;
        let products = |w: &[u8], act: &[u8], y: &mut [f32], n: usize| {
            let vector = dispatch(RowProducts {
                ty,
                w,
                w_row,
                act,
                act_row,
                y: &mut *y,
                n,
            });
            if matches!(vector, Ok(Some(()))) {
                return;
            }
            for (q, y) in act.chunks_exact(act_row).zip(y.chunks_exact_mut(n)) {
                for (y, w) in y.iter_mut().zip(w.chunks_exact(w_row)) {
                    match vec_dot(ty, w, q) {
                        Ok(v) => *y = v,
                        Err(_) => failed.store(true, Ordering::Relaxed),
                    }
                }
            }
        };
        if rows == 1 {
            let min = MIN_PART_MACS.div_ceil(self.k.max(1));
            for_parts(ys, 1, min, &|start, y| {
                let w = &wb[start * w_row..(start + y.len()) * w_row];
                products(w, qa, y, y.len());
            });
        } else {
            let min = MIN_PART_MACS.div_ceil(self.k.max(1).saturating_mul(n.max(1)));
            for_parts(ys, n, min, &|start, y| {
                let first = start / n.max(1);
                let act = &qa[first * act_row..(first + y.len() / n.max(1)) * act_row];
                products(wb, act, y, n);
            });
        }
        if failed.load(Ordering::Relaxed) {
            return Err(KernelError::Buffer { op: OP });
        }
        Ok(())
    }
}
