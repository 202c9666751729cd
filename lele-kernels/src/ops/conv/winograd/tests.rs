//! Winograd internals: the transformed input's padding, the column-phase
//! split and the tile-size choice.
use alloc::vec;

use super::moves::{Moves, Portable, Vectors};
use super::*;
use crate::dtype::DType;
use crate::ops::conv::AutoPad;
use crate::ops::conv::winograd_tests::conv;
use crate::ops::test_util::{rand_vec, t};
use crate::ops::unary::Activation;

/// After a run, the columns of `V`'s last panel past the block's tiles
/// are zero, whatever the scratch held: the GEMM multiplies them, and
/// stale subnormal bits there cost a microcode assist per vector.
#[test]
fn padding_columns_of_the_transformed_input_are_zero() {
    let _serial = crate::threads::TEST_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    crate::threads::set_num_threads(1);
    // 5×5 = 25 tiles of 2×2 or 4×4 in one block: one full panel and 9
    // columns.
    for tile in [2, 4] {
        check_padding_columns(tile);
    }
}

/// The column-phase split of the 4×4 tiles' input transform: the
/// portable loop and every vector backend this CPU runs (whole groups and
/// the scalar tail) give `src[4u + k]`, over lengths around the vector
/// widths.
#[test]
fn phase_split_matches_the_plain_loop() {
    struct Split<'a>(&'a [f32], usize);
    impl crate::simd::SimdKernel for Split<'_> {
        type Output = [[f32; RUN + 1]; 4];
        #[inline(always)]
        fn run<S: crate::simd::Simd>(self, s: S) -> Self::Output {
            let mut ph = [[f32::NAN; RUN + 1]; 4];
            Vectors(s).split_phases(self.0, &mut ph, self.1);
            ph
        }
    }
    for n in [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33] {
        let src: Vec<f32> = (0..4 * n).map(|i| i as f32 * 0.5 - 3.0).collect();
        let want: [Vec<f32>; 4] =
            core::array::from_fn(|k| (0..n).map(|u| src[4 * u + k]).collect());
        let mut paths: Vec<(crate::simd::Isa, [[f32; RUN + 1]; 4])> = Vec::new();
        let mut plain = [[f32::NAN; RUN + 1]; 4];
        Portable.split_phases(&src, &mut plain, n);
        paths.push((crate::simd::Isa::Scalar, plain));
        for isa in crate::simd::runnable_isas() {
            if let Ok(ph) = crate::simd::dispatch_on(isa, Split(&src, n)) {
                paths.push((isa, ph));
            }
        }
        for (path, ph) in &paths {
            for (k, w) in want.iter().enumerate() {
                assert_eq!(&ph[k][..n], w.as_slice(), "{path:?} n {n} phase {k}");
            }
        }
    }
}

/// 4×4 tiles for at least 48 input channels unless the plane is known
/// to be small, in blocks of one panel where a run's block would not
/// fit a worker's scratch, not at all where neither fits.
#[test]
fn tile_size_by_channels_plane_and_scratch() {
    assert_eq!(ConvWinograd::tile_for(&[64, 64, 3, 3], Some(1600)), 4);
    assert_eq!(ConvWinograd::tile_for(&[64, 64, 3, 3], None), 4);
    assert_eq!(ConvWinograd::tile_for(&[64, 32, 3, 3], Some(1600)), 2);
    assert_eq!(ConvWinograd::tile_for(&[64, 64, 3, 3], Some(400)), 2);
    assert_eq!(ConvWinograd::tile_for(&[64, 64, 1, 1], Some(1600)), 2);
    assert_eq!((block_tiles(64, 64, 4), block_tiles(64, 64, 2)), (RUN, 64));
    assert_eq!(block_tiles(128, 130, 4), PANEL);
    assert_eq!(ConvWinograd::tile_for(&[130, 128, 3, 3], Some(640)), 4);
    assert!(fits_scratch(224, 224, 2) && !fits_scratch(224, 224, 4));
    assert_eq!(ConvWinograd::tile_for(&[224, 224, 3, 3], Some(640)), 2);
}

/// Only 2×2 and 4×4 tiles have transforms: any other size is refused,
/// however large, without arithmetic overflow.
#[test]
fn other_tile_sizes_are_refused() {
    let dims = [8, 8, 3, 3];
    for tile in [0, 1, 3, 5, 6, usize::MAX / 2, usize::MAX] {
        assert_eq!(ConvWinograd::packed_dims_for(tile, &dims), None);
        assert_eq!(ConvWinograd::pack_for(tile, &dims, &[0.0; 576]), None);
    }
    assert!(ConvWinograd::packed_dims_for(4, &dims).is_some());
}

fn check_padding_columns(tile: usize) {
    let (c, m, h, w) = (8, 8, 5 * tile, 5 * tile);
    let conv = conv([1; 4], AutoPad::NotSet, Activation::None, 1.0);
    let dims = [m, c, 3, 3];
    let (xv, wv) = (rand_vec(c * h * w, 1), rand_vec(m * c * 9, 2));
    let packed = ConvWinograd::pack_for(tile, &dims, &wv).unwrap();
    let pdims = ConvWinograd::packed_dims_for(tile, &dims).unwrap();
    let kernel = ConvWinograd { conv, m };
    let ins = [Some(t(&xv, &[1, c, h, w])), Some(t(&packed, &pdims)), None];
    let mut shapes = [Shape::SCALAR];
    kernel.infer(&ins, &mut shapes).unwrap();
    let mut y = vec![0f32; shapes[0].numel()];
    let sb = kernel.scratch_bytes(&ins, &shapes);
    let mut scratch = vec![f32::from_bits(1); sb.div_ceil(4)];
    let mut outs =
        [TensorMut::new(DType::F32, shapes[0], bytemuck::cast_slice_mut(&mut y)).unwrap()];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut scratch);
    kernel.run(&ins, &mut outs, &mut bytes[..sb]).unwrap();
    let (tiles, vs) = (25, v_stride(c, 25));
    let (geom, t) = kernel.geom(&ins).unwrap();
    assert_eq!(t, tile);
    assert_eq!(Plan::new(&geom, 1, t).block, tiles);
    let rem = tiles % PANEL;
    for k in 0..positions(t) {
        for ci in 0..c {
            let at = k * vs + tiles / PANEL * PANEL * c + ci * PANEL;
            let pad = &scratch[at + rem..at + PANEL];
            assert!(
                pad.iter().all(|&v| v == 0.0),
                "tile {tile} matrix {k} row {ci}: {pad:?}"
            );
            // The tiles' own columns were written.
            assert!(
                scratch[at..at + rem]
                    .iter()
                    .all(|&v| v != f32::from_bits(1))
            );
        }
    }
}
