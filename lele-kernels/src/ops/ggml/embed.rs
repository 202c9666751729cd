//! Rows of a quantized table picked by index (a token embedding kept in
//! its GGUF blocks).
use super::{GgmlType, dequantize};
use crate::DType;
use crate::error::KernelError;
use crate::kernel::{Kernel, input, output, set_out};
use crate::ops::access::check_out;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

const OP: &str = "GgmlGather";

/// `Y[i, :] = dequantize(W[ids[i], :])`: `W` (`[rows, row_bytes]`, u8)
/// holds rows of `cols` elements in blocks of type `ty`, `ids` is i64 of
/// any shape; `Y` has `ids`' shape with `cols` appended. An index outside
/// the table is an error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GgmlGather {
    /// The table's block type.
    pub ty: GgmlType,
    /// Elements per row.
    pub cols: usize,
}
crate::to_rust_struct!(ops::ggml::GgmlGather { ty, cols });

impl GgmlGather {
    fn out_shape(&self, w: &TensorRef<'_>, ids: &TensorRef<'_>) -> Result<Shape, KernelError> {
        let bad = |msg| KernelError::Shape { op: OP, msg };
        let row = self.ty.row_bytes(self.cols).ok_or(bad(
            "cols is not a whole number of blocks of the table's type",
        ))?;
        match *w.shape.dims() {
            [_, r] if r == row && w.dtype == DType::U8 => {}
            _ => return Err(bad("the table must be u8 [rows, row bytes]")),
        }
        if ids.dtype != DType::I64 {
            return Err(KernelError::DTypeMismatch {
                op: OP,
                expected: DType::I64,
                found: ids.dtype,
            });
        }
        let mut s = ids.shape;
        s.push(self.cols)?;
        Ok(s)
    }
}

impl Kernel for GgmlGather {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        let s = self.out_shape(input(inputs, 0, OP)?, input(inputs, 1, OP)?)?;
        set_out(outputs, s, OP)
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (w, ids) = (input(inputs, 0, OP)?, input(inputs, 1, OP)?);
        let shape = self.out_shape(w, ids)?;
        let rows = w.shape.dim(0);
        let row = w.shape.dim(1);
        let table = w.typed::<u8>(OP)?;
        let y = output(outputs, 0, OP)?;
        check_out(y, DType::F32, &shape, OP)?;
        let ys = y.typed::<f32>(OP)?;
        for (&id, y) in ids
            .typed::<i64>(OP)?
            .iter()
            .zip(ys.chunks_exact_mut(self.cols))
        {
            let r = usize::try_from(id)
                .ok()
                .filter(|&r| r < rows)
                .ok_or(KernelError::Invalid {
                    op: OP,
                    msg: "an index is outside the table",
                })?;
            dequantize(self.ty, &table[r * row..(r + 1) * row], y)?;
        }
        Ok(())
    }
}
