use super::*;
use crate::ops::binary::{Binary, BinaryOp};
use crate::ops::unary::{Unary, UnaryOp};

/// A Concat of two `[1, 2, 4]` f32 pieces at `a_off`/`b_off` into a
/// `[1, 4, 4]` whole at 0, then a Split of the whole back into pieces at
/// `split_offs`, through [`pieces_in_place`]: the shapes it records, or
/// the first error.
fn pieces_at(
    a_off: usize,
    b_off: usize,
    split_offs: [usize; 2],
    whole: [usize; 3],
) -> Result<[Shape; 5], KernelError> {
    use crate::ops::concat::{Concat, Split};
    let mut arena = crate::Arena::new(256);
    let mut shapes = [Shape::SCALAR; 5];
    shapes[0] = Shape::new(&[1, 2, 4])?;
    shapes[1] = Shape::new(&[1, 2, 4])?;
    let arena_src = |off, slot| Src::Arena {
        off,
        slot,
        dtype: DType::F32,
    };
    let dst = |off, slot| Dst {
        off,
        cap: 64,
        slot,
        dtype: DType::F32,
        name: "piece",
    };
    let mut ctx = Ctx {
        weights: &[],
        arena: arena.bytes_mut(),
        shapes: &mut shapes,
        inputs: &[],
        profiler: None,
    };
    let joined = Dst {
        cap: 64,
        ..dst(0, 2)
    };
    pieces_in_place(
        &mut ctx,
        &Concat { axis: 1 },
        &[arena_src(a_off, 0), arena_src(b_off, 1)],
        &[joined],
        1,
        true,
    )?;
    ctx.shapes[2] = Shape::new(&whole)?;
    pieces_in_place(
        &mut ctx,
        &Split {
            axis: 1,
            num_outputs: 2,
        },
        &[arena_src(0, 2)],
        &[dst(split_offs[0], 3), dst(split_offs[1], 4)],
        1,
        false,
    )?;
    Ok(shapes)
}

#[test]
fn pieces_in_place_checks_the_layout_and_moves_nothing() {
    let half = Shape::new(&[1, 2, 4]).unwrap();
    let shapes = pieces_at(0, 32, [0, 32], [1, 4, 4]).unwrap();
    assert_eq!(shapes[2], Shape::new(&[1, 4, 4]).unwrap());
    assert_eq!((shapes[3], shapes[4]), (half, half));
    // A second piece that does not start where the first ends.
    assert!(pieces_at(0, 64, [0, 32], [1, 4, 4]).is_err());
    assert!(pieces_at(0, 32, [0, 64], [1, 4, 4]).is_err());
    // Pieces in the wrong order.
    assert!(pieces_at(32, 0, [0, 32], [1, 4, 4]).is_err());
    // A whole of two images: its pieces would be strided.
    assert!(pieces_at(0, 32, [0, 16], [2, 2, 4]).is_err());
}

#[test]
fn in_place_unary_and_binary_match_out_of_place() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // 3001 floats: several chunks plus a ragged tail; then regions big
    // enough for the threaded version to split (ragged per thread).
    for (n, threads) in [(3001, 1), (3001, 3), (100_003, 2), (70_001, 3)] {
        for threaded in [false, true] {
            crate::threads::set_num_threads(threads);
            in_place_sequence(n, threaded);
        }
    }
    crate::threads::set_num_threads(1);
}

/// relu, + a same-shape operand, × a scalar model input, in place, on
/// `n` floats, through [`exec_in_place`] or [`exec_in_place_threaded`].
fn in_place_sequence(n: usize, threaded: bool) {
    let vals: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    let cap = (n * 4).next_multiple_of(64);
    let (mut arena, mut shapes) = (crate::Arena::new(2 * cap), [Shape::SCALAR; 4]);
    let bytes: &[u8] = bytemuck::cast_slice(&vals);
    arena.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
    let other: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    arena.bytes_mut()[cap..cap + bytes.len()].copy_from_slice(bytemuck::cast_slice(&other));
    let shape = Shape::new(&[1, n]).unwrap();
    shapes[0] = shape;
    shapes[2] = shape;
    let two = [2.0f32];
    let inputs = [TensorRef::new(DType::F32, Shape::SCALAR, bytemuck::cast_slice(&two)).unwrap()];
    let dst = Dst {
        off: 0,
        cap,
        slot: 1,
        dtype: DType::F32,
        name: "x",
    };
    let a = Src::Arena {
        off: 0,
        slot: 0,
        dtype: DType::F32,
    };
    let mut ctx = Ctx {
        weights: &[],
        arena: arena.bytes_mut(),
        shapes: &mut shapes,
        inputs: &inputs,
        profiler: None,
    };
    run_in_place(&mut ctx, &Unary { op: UnaryOp::Relu }, &[a], dst, threaded).unwrap();
    // x = relu(x) + other, then x = x * 2 (scalar model input).
    let b = Src::Arena {
        off: cap,
        slot: 2,
        dtype: DType::F32,
    };
    run_in_place(
        &mut ctx,
        &Binary { op: BinaryOp::Add },
        &[a, b],
        dst,
        threaded,
    )
    .unwrap();
    let s = Src::Input { index: 0, slot: 3 };
    ctx.shapes[3] = Shape::SCALAR;
    run_in_place(
        &mut ctx,
        &Binary { op: BinaryOp::Mul },
        &[a, s],
        dst,
        threaded,
    )
    .unwrap();
    assert_eq!(ctx.shapes[1], shape);
    let got: &[f32] = bytemuck::cast_slice(&ctx.arena[..n * 4]);
    for i in 0..n {
        let want = (vals[i].max(0.0) + other[i]) * 2.0;
        assert_eq!(got[i], want, "element {i} of {n}, threaded {threaded}");
    }
    // An operand in the written region is refused, never aliased.
    assert!(
        run_in_place(
            &mut ctx,
            &Binary { op: BinaryOp::Add },
            &[a, a],
            dst,
            threaded
        )
        .is_err()
    );
    // Comparisons change the dtype: not elementwise-in-place.
    assert!(
        run_in_place(
            &mut ctx,
            &Binary { op: BinaryOp::Less },
            &[a, b],
            dst,
            threaded
        )
        .is_err()
    );
}

/// [`exec_in_place_threaded`] or [`exec_in_place`].
fn run_in_place<K: Kernel + Sync>(
    ctx: &mut Ctx<'_, '_>,
    k: &K,
    srcs: &[Src],
    dst: Dst,
    threaded: bool,
) -> Result<(), KernelError> {
    if threaded {
        exec_in_place_threaded(ctx, k, srcs, dst)
    } else {
        exec_in_place(ctx, k, srcs, dst)
    }
}

/// [`exec`] over nodes whose operands fit the small arrays and nodes that
/// need the large ones: a Sum of 2 and of 6 arena values (the second also
/// reading a weight and a model input), then a Split into 2 and into 6
/// outputs; each result equals the element-wise definition.
#[test]
fn exec_runs_nodes_of_few_and_many_operands() {
    use crate::ops::binary::{Variadic, VariadicOp};
    use crate::ops::concat::Split;
    let piece = |k: usize| -> Vec<f32> { (0..6).map(|i| (k * 10 + i) as f32).collect() };
    let (cap, pieces) = (64usize, 6usize);
    let mut arena = crate::Arena::new(cap * (pieces + 2 + 6));
    let mut shapes = [Shape::SCALAR; 24];
    let shape = Shape::new(&[1, 6]).unwrap();
    for (k, s) in shapes[..pieces].iter_mut().enumerate() {
        arena.bytes_mut()[k * cap..k * cap + 24].copy_from_slice(bytemuck::cast_slice(&piece(k)));
        *s = shape;
    }
    let weight = piece(7);
    let weights: &[u8] = bytemuck::cast_slice(&weight);
    let input = piece(8);
    let inputs = [TensorRef::new(DType::F32, shape, bytemuck::cast_slice(&input)).unwrap()];
    let src = |k: usize| Src::Arena {
        off: k * cap,
        slot: k,
        dtype: DType::F32,
    };
    let dst = |k: usize, slot: usize| Dst {
        off: k * cap,
        cap,
        slot,
        dtype: DType::F32,
        name: "out",
    };
    let mut ctx = Ctx {
        weights,
        arena: arena.bytes_mut(),
        shapes: &mut shapes,
        inputs: &inputs,
        profiler: None,
    };
    let sum = Variadic {
        op: VariadicOp::Sum,
    };
    let mut many: Vec<Src> = (0..pieces).map(src).collect();
    many.push(Src::Weight {
        off: 0,
        dtype: DType::F32,
        shape,
        slot: usize::MAX,
    });
    many.push(Src::Input { index: 0, slot: 23 });
    ctx.shapes[23] = shape;
    let f32s = |ctx: &Ctx<'_, '_>, k: usize, n: usize| -> Vec<f32> {
        bytemuck::cast_slice::<u8, f32>(&ctx.arena[k * cap..k * cap + 4 * n]).to_vec()
    };
    exec(&mut ctx, &sum, &[src(0), src(1)], &[dst(6, 6)], (0, 0)).unwrap();
    let want: Vec<f32> = (0..6).map(|i| piece(0)[i] + piece(1)[i]).collect();
    assert_eq!(f32s(&ctx, 6, 6), want);
    exec(&mut ctx, &sum, &many, &[dst(7, 7)], (0, 0)).unwrap();
    let want: Vec<f32> = (0..6)
        .map(|i| (0..9).filter(|&k| k != 6).map(|k| piece(k)[i]).sum())
        .collect();
    assert_eq!(f32s(&ctx, 7, 6), want);
    assert_eq!(ctx.shapes[7], shape);
    // Split the sum of the first two into 2 and into 6 pieces.
    for parts in [2usize, 6] {
        let split = Split {
            axis: 1,
            num_outputs: parts,
        };
        let outs: Vec<Dst> = (0..parts).map(|p| dst(8 + p, 8 + p)).collect();
        exec(&mut ctx, &split, &[src(6)], &outs, (0, 0)).unwrap();
        let each = 6 / parts;
        for p in 0..parts {
            let want: Vec<f32> = (p * each..(p + 1) * each)
                .map(|i| piece(0)[i] + piece(1)[i])
                .collect();
            assert_eq!(f32s(&ctx, 8 + p, each), want, "{parts} parts, part {p}");
            assert_eq!(ctx.shapes[8 + p], Shape::new(&[1, each]).unwrap());
        }
    }
}
