//! Shape arithmetic on hostile shapes (a zero dim beside dims whose product
//! overflows, counts past usize) gives an error or a result, never an
//! overflow panic (these tests run with overflow checks, as the macro
//! does). Each case is a site the `compiler` fuzz target of lele-build
//! found (`lele-build/tests/fuzz`, overflow checks on).
use lele_kernels::ops::concat::Concat;
use lele_kernels::ops::gather::GatherNd;
use lele_kernels::ops::layout::Flatten;
use lele_kernels::ops::pool::GlobalAveragePool;
use lele_kernels::ops::select::NonZero;
use lele_kernels::ops::softmax::Softmax;
use lele_kernels::{DType, Kernel, Shape, TensorRef};

/// A tensor of `dims` without data (only its shape is read); `None` if
/// `Shape` itself refuses the dims.
fn shaped(dims: &[usize]) -> Option<TensorRef<'static>> {
    Some(TensorRef {
        dtype: DType::F32,
        shape: Shape::new(dims).ok()?,
        data: &[],
    })
}

/// Runs the shape functions of `k` on `inputs`; any result is fine.
fn exercise(k: &dyn Kernel, inputs: &[Option<TensorRef<'_>>], outputs: usize) {
    let mut shapes = vec![Shape::SCALAR; outputs];
    let _ = k.infer(inputs, &mut shapes);
    let _ = k.scratch_bytes(inputs, &shapes);
    let mut bounds = vec![0usize; outputs];
    let _ = k.max_output_elems(inputs, &mut bounds);
}

/// 2^40 on 64-bit targets, 2^20 on 32-bit ones: a product of two or three
/// overflows `usize` on both.
const BIG: usize = 1 << (usize::BITS * 5 / 8);

#[test]
fn products_and_sums_past_usize_do_not_panic() {
    let idx_data = 0i64.to_le_bytes();
    let idx = TensorRef {
        dtype: DType::I64,
        shape: Shape::new(&[1, 1]).unwrap(),
        data: &idx_data,
    };
    let big = BIG as u64;
    for dims in [
        &[big, big, 0][..],
        &[0, big, big],
        &[1 << 63, 0],
        &[1 << 31, 1 << 31, 2],
        &[1, 1 << 62],
        &[1 << 32, 1 << 32, 0, 1],
    ] {
        // Dims a 32-bit `usize` cannot hold are 64-bit-only cases.
        let Ok(dims) = dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
        else {
            continue;
        };
        let Some(x) = shaped(&dims) else {
            continue;
        };
        exercise(&Flatten { axis: 2 }, &[Some(x)], 1);
        exercise(&Flatten { axis: 1 }, &[Some(x)], 1);
        exercise(&GatherNd { batch_dims: 0 }, &[Some(x), Some(idx)], 1);
        exercise(&Concat { axis: 0 }, &[Some(x), Some(x)], 1);
        exercise(&NonZero, &[Some(x)], 1);
        exercise(&Softmax { axis: 0 }, &[Some(x)], 1);
        exercise(&GlobalAveragePool {}, &[Some(x)], 1);
    }
}

/// `run` on empty tensors whose other dims overflow (build-time folding
/// runs kernels on them): Concat's and Gather's row products.
#[test]
fn runs_on_empty_tensors_with_huge_dims_do_not_panic() {
    use lele_kernels::TensorMut;
    use lele_kernels::ops::gather::Gather;
    let Some(x) = shaped(&[BIG, 0, BIG]) else {
        return;
    };
    let mut none: [u8; 0] = [];
    let mut out = [TensorMut::new(DType::F32, x.shape, &mut none).unwrap()];
    let _ = Concat { axis: 1 }.run(&[Some(x), Some(x)], &mut out, &mut []);
    let idx = TensorRef {
        dtype: DType::I64,
        shape: Shape::new(&[0]).unwrap(),
        data: &[],
    };
    let _ = Gather { axis: 1 }.run(&[Some(x), Some(idx)], &mut out, &mut []);
}

/// Fuzz findings of the compiler target fixed after the first round:
/// LayerNormalization's sub-products, RNN/GRU/LSTM weights whose
/// `gates × hidden` overflows, and every recurrent layer's scratch sizes.
#[test]
fn norm_and_recurrent_shapes_past_usize_do_not_panic() {
    use lele_kernels::ops::norm::LayerNormalization;
    use lele_kernels::ops::rnn::{Direction, Gru, Lstm, Rnn};
    let big = BIG;
    for dims in [[big, big, 0], [0, big, big]] {
        let Some(x) = shaped(&dims) else {
            continue;
        };
        let scale = shaped(&[dims[2]]);
        for axis in [1, 2, -1] {
            let ln = LayerNormalization {
                axis,
                epsilon: 1e-5,
            };
            exercise(&ln, &[Some(x), scale], 1);
        }
    }
    let x = shaped(&[2, 1, 3]);
    // R of [1, gates·h, h] where gates·h overflows (h = usize::MAX / 2).
    let h = usize::MAX / 2;
    for gates in [1usize, 3, 4] {
        let r = shaped(&[1, gates.wrapping_mul(h), h]);
        let w = shaped(&[1, gates.wrapping_mul(h), 3]);
        let inputs = [x, w, r];
        let direction = Direction::Forward;
        exercise(
            &Rnn {
                hidden_size: 0,
                direction,
                layout: 0,
            },
            &inputs,
            2,
        );
        exercise(
            &Gru {
                hidden_size: 0,
                direction,
                linear_before_reset: false,
                layout: 0,
            },
            &inputs,
            2,
        );
        exercise(
            &Lstm {
                hidden_size: 0,
                direction,
                layout: 0,
                clip: None,
                input_forget: false,
            },
            &inputs,
            3,
        );
    }
    // A sequence so long that the scratch parts overflow.
    let x = shaped(&[big, big, 1]);
    exercise(
        &Rnn {
            hidden_size: 0,
            direction: Direction::Forward,
            layout: 0,
        },
        &[x, shaped(&[1, 1, 1]), shaped(&[1, 1, 1])],
        2,
    );
}
