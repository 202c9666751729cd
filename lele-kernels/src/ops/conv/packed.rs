//! A convolution whose weight was packed at build time for the GEMM.
//!
//! On the GEMM paths (pointwise and im2col) the weight is the product's
//! left operand, which [`Conv`] packs into register panels on every call
//! (and, split over threads by columns, once per task). Stored in the
//! [`PanelsA`](crate::ops::gemm::PanelsA) layout instead, the AVX-512 micro-kernel reads it in place
//! and other ISAs repack it per block. Only convolutions that take the GEMM
//! for every input size on every machine qualify ([`ConvPackedWeights::
//! applies`]): more output channels per group than the direct path takes.
use super::{Conv, GemmWeight, Operands, direct};
use crate::error::KernelError;
use crate::kernel::Kernel;
use crate::ops::gemm::{MatRef, pack_a_panels, panels_a_len};
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// [`Conv`] reading a weight packed by [`ConvPackedWeights::pack`]: the
/// tensor keeps its `[M, C/group, kH, kW]` shape, its values are in the
/// [`PanelsA`](crate::ops::gemm::PanelsA) layout, group by group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvPackedWeights {
    /// The convolution.
    pub conv: Conv,
}
crate::to_rust_struct!(ops::conv::ConvPackedWeights { conv });

impl ConvPackedWeights {
    /// Whether a weight of these dims (`[M, C/group, kH, kW]`) may be
    /// stored packed: every run of such a convolution takes the GEMM (more
    /// output channels per group than the direct path takes, which also
    /// rules out depthwise), and whole panels keep the element count.
    pub fn applies(group: usize, dims: &[usize]) -> bool {
        let &[m, cg, kh, kw] = dims else { return false };
        group > 0
            && m % group == 0
            && m / group > direct::direct_m_max(kh, kw, cg)
            && (m / group).is_multiple_of(crate::ops::gemm::A_PANEL)
    }

    /// The weight `w` (`[M, C/group, kH, kW]` as `dims`, row-major) in the
    /// packed layout, or `None` when [`ConvPackedWeights::applies`] does
    /// not hold or `w` does not match `dims`.
    pub fn pack(group: usize, dims: &[usize], w: &[f32]) -> Option<alloc::vec::Vec<f32>> {
        if !Self::applies(group, dims) || w.len() != dims.iter().product::<usize>() {
            return None;
        }
        let (mg, k) = (dims[0] / group, dims[1] * dims[2] * dims[3]);
        let mut out = alloc::vec![0f32; w.len()];
        let per = panels_a_len(mg, k);
        for (src, dst) in w.chunks_exact(mg * k).zip(out.chunks_exact_mut(per)) {
            if !pack_a_panels(MatRef::row_major(src, k), mg, k, dst) {
                return None;
            }
        }
        Some(out)
    }
}

impl Kernel for ConvPackedWeights {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        self.conv.infer(inputs, outputs)
    }

    fn scratch_bytes(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> usize {
        self.conv.geom(inputs).map_or(0, |g| {
            let tiles = self.conv.channel_tiles_scratch_bytes(&g);
            self.conv.gemm_scratch_bytes(&g).max(tiles)
        })
    }

    fn flops(&self, inputs: &[Option<TensorRef<'_>>], _outputs: &[Shape]) -> u64 {
        self.conv.geom(inputs).map_or(0, |g| g.flops())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let conv = &self.conv;
        let Operands {
            g,
            x,
            w,
            bias,
            residual,
            y,
        } = conv.operands(inputs, outputs, |g| conv.group * panels_a_len(g.mg, g.k()))?;
        #[cfg(target_arch = "x86_64")]
        if conv.runs_channel_tiles(&g)
            && let Ok(blocks) = crate::ops::gemm::scratch_f32(
                scratch,
                super::channel_tiles::padded(g.mg) * g.k(),
                "Conv",
            )
        {
            super::channel_tiles::weights_from_panels(w, g.mg, g.k(), blocks);
            conv.run_channel_tiles(&g, x, blocks, bias, residual, y);
            return Ok(());
        }
        conv.run_gemm(&g, x, GemmWeight::Panels(w), bias, residual, y, scratch)
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use alloc::vec::Vec;

    use super::*;
    use crate::ops::conv::AutoPad;
    use crate::ops::test_util::{rand_vec, run, t};
    use crate::ops::unary::Activation;

    fn conv(group: usize, strides: [usize; 2], pads: [usize; 4]) -> Conv {
        Conv {
            group,
            kernel: [0, 0],
            strides,
            pads,
            dilations: [1, 1],
            auto_pad: AutoPad::NotSet,
            activation: Activation::Swish,
            post_mul: 1.0,
            post_add: 0.0,
        }
    }

    /// Only weights of more output channels per group than the direct
    /// path takes (128 for 1×1 kernels, 64 for larger ones), in whole
    /// panels of eight, are packed.
    #[test]
    fn only_gemm_only_convolutions_qualify() {
        assert!(ConvPackedWeights::applies(1, &[136, 3, 3, 3]));
        assert!(ConvPackedWeights::applies(1, &[72, 3, 3, 3]));
        assert!(ConvPackedWeights::applies(1, &[128, 3, 1, 3]));
        assert!(ConvPackedWeights::applies(2, &[272, 4, 1, 1]));
        for (group, dims) in [
            (1, &[64, 3, 3, 3][..]),
            (1, &[128, 3, 1, 1]),
            (1, &[132, 3, 1, 1]),
            (2, &[256, 3, 1, 1]),
            (136, &[136, 1, 3, 3]),
            (1, &[136, 3, 3]),
            (0, &[136, 3, 1, 1]),
        ] {
            assert!(!ConvPackedWeights::applies(group, dims), "{group} {dims:?}");
        }
        assert!(ConvPackedWeights::pack(1, &[136, 2, 1, 1], &[0.0; 271]).is_none());
    }

    /// With its weight packed, a convolution gives what [`Conv`] gives
    /// from the plain weight: pointwise and 3×3 (stride 1 and 2), grouped,
    /// with bias, fused Swish and a residual, on one thread and split over
    /// three; bit for bit where [`Conv`] takes the blocked GEMM too (more
    /// than 8 outputs per channel).
    #[test]
    fn packed_weights_give_the_plain_convolution() {
        let _serial = crate::threads::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // (group, c, h, w, m, kernel, strides, pads)
        type Case = (
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            [usize; 2],
            [usize; 4],
        );
        let cases: [Case; 5] = [
            (1, 24, 6, 7, 136, 1, [1, 1], [0; 4]),
            (1, 5, 2, 2, 144, 1, [1, 1], [0; 4]),
            (2, 10, 9, 11, 272, 3, [1, 1], [1; 4]),
            (1, 40, 23, 30, 256, 3, [2, 2], [1, 0, 1, 1]),
            (1, 300, 4, 60, 144, 1, [1, 1], [0; 4]),
        ];
        for threads in [1, 3] {
            crate::threads::set_num_threads(threads);
            for (i, &(group, c, h, w, m, kk, strides, pads)) in cases.iter().enumerate() {
                let op = conv(group, strides, pads);
                let wdims = [m, c / group, kk, kk];
                let xv = rand_vec(c * h * w, i as u64);
                let wv = rand_vec(wdims.iter().product(), 10 + i as u64);
                let bv = rand_vec(m, 20 + i as u64);
                let packed = ConvPackedWeights::pack(group, &wdims, &wv).unwrap();
                let x = t(&xv, &[1, c, h, w]);
                let b = t(&bv, &[m]);
                let plain = run(&op, &[Some(x), Some(t(&wv, &wdims)), Some(b)], 1).unwrap();
                let y = &plain[0];
                let res = rand_vec(y.1.len(), 30 + i as u64);
                let r = Some(t(&res, &y.0));
                let want = run(&op, &[Some(x), Some(t(&wv, &wdims)), Some(b), r], 1).unwrap();
                let kernel = ConvPackedWeights { conv: op };
                let got =
                    run(&kernel, &[Some(x), Some(t(&packed, &wdims)), Some(b), r], 1).unwrap();
                assert_eq!(got[0].0, want[0].0);
                crate::ops::test_util::assert_close(&got[0].1, &want[0].1, 1e-5);
                let ohw: usize = want[0].0[2..].iter().product();
                if ohw > 8 {
                    let same = got[0].1.iter().zip(&want[0].1);
                    let same: Vec<bool> = same.map(|(a, b)| a.to_bits() == b.to_bits()).collect();
                    assert!(same.iter().all(|&s| s), "case {i} on {threads} threads");
                }
            }
        }
        crate::threads::set_num_threads(1);
    }
}
