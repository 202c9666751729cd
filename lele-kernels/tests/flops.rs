//! `Kernel::flops`, the arithmetic a profile divides by a node's time:
//! twice the multiply-adds of each product, from the operands' shapes.
use lele_kernels::dtype::DType;
use lele_kernels::kernel::Kernel;
use lele_kernels::ops::conv::{AutoPad, Conv};
use lele_kernels::ops::matmul::MatMul;
use lele_kernels::ops::rnn::{Direction, Gru};
use lele_kernels::ops::unary::Activation;
use lele_kernels::shape::Shape;
use lele_kernels::tensor::TensorRef;

/// A zero f32 tensor of `dims` as bytes (kept alive by the caller).
fn zeros(dims: &[usize]) -> (Shape, Vec<u8>) {
    let shape = Shape::new(dims).unwrap();
    (shape, vec![0u8; shape.numel() * 4])
}

/// `flops` of `kernel` over f32 inputs of these shapes (its outputs
/// inferred).
fn flops_of(kernel: &dyn Kernel, dims: &[&[usize]], n_out: usize) -> u64 {
    let owned: Vec<(Shape, Vec<u8>)> = dims.iter().map(|d| zeros(d)).collect();
    let ins: Vec<Option<TensorRef<'_>>> = owned
        .iter()
        .map(|(shape, data)| {
            Some(TensorRef {
                dtype: DType::F32,
                shape: *shape,
                data,
            })
        })
        .collect();
    let mut outs = vec![Shape::SCALAR; n_out];
    kernel.infer(&ins, &mut outs).unwrap();
    kernel.flops(&ins, &outs)
}

#[test]
fn products_count_two_per_multiply_add() {
    // A batched MatMul: 3 × (5×7 outputs, 11 products each).
    assert_eq!(
        flops_of(&MatMul, &[&[3, 5, 11], &[3, 11, 7]], 1),
        2 * 3 * 5 * 7 * 11
    );
    // A grouped, strided convolution: 2 images, 6 output channels of 3×3
    // (7×7 input, stride 2), each output summing 2 channels × 3×3 taps.
    let conv = Conv {
        group: 2,
        kernel: [3, 3],
        strides: [2, 2],
        pads: [0; 4],
        dilations: [1, 1],
        auto_pad: AutoPad::NotSet,
        activation: Activation::None,
        post_mul: 1.0,
        post_add: 0.0,
    };
    assert_eq!(
        flops_of(&conv, &[&[2, 4, 7, 7], &[6, 2, 3, 3]], 1),
        2 * (2 * 6 * 3 * 3) * (2 * 3 * 3)
    );
    // A GRU over 9 steps of a batch of 2, input 5, hidden 4: each step
    // multiplies the input by the 12×5 W and the state by the 12×4 R.
    let gru = Gru {
        hidden_size: 4,
        direction: Direction::Forward,
        linear_before_reset: false,
        layout: 0,
    };
    assert_eq!(
        flops_of(&gru, &[&[9, 2, 5], &[1, 12, 5], &[1, 12, 4]], 2),
        2 * 9 * 2 * (12 * 5 + 12 * 4)
    );
}
