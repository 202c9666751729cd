//! The workspace arena: one 64-byte aligned buffer that holds every
//! intermediate tensor at an offset chosen by the compiler's memory planner.
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use crate::error::KernelError;

/// Alignment of every arena region and of embedded weights.
pub const ALIGN: usize = 64;

#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(64))]
struct Block([u8; ALIGN]);

/// A 64-byte aligned byte buffer, allocated once.
pub struct Arena {
    blocks: Vec<Block>,
}

impl Arena {
    /// Allocates `bytes` zeroed bytes (rounded up to the alignment).
    pub fn new(bytes: usize) -> Arena {
        Arena {
            blocks: vec![Block([0; ALIGN]); bytes.div_ceil(ALIGN)],
        }
    }

    /// The whole buffer.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.blocks)
    }

    /// The whole buffer, read-only.
    pub fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.blocks)
    }
}

/// Splits `buf` into `W` disjoint writable regions and `R` readable ones.
///
/// Readable regions may overlap each other but never a writable one; every
/// writable region must be disjoint from the others. The compiler's planner
/// guarantees both; a violation is reported as an error, never undefined
/// behaviour.
pub fn carve<'a, const R: usize, const W: usize>(
    buf: &'a mut [u8],
    reads: [Range<usize>; R],
    writes: [Range<usize>; W],
) -> Result<([&'a [u8]; R], [&'a mut [u8]; W]), KernelError> {
    const ERR: KernelError = KernelError::Buffer { op: "arena" };
    // Order the writes by start offset.
    let mut order = [0usize; W];
    for (i, o) in order.iter_mut().enumerate() {
        *o = i;
    }
    order.sort_unstable_by_key(|&i| writes[i].start);
    let mut outs: [Option<&'a mut [u8]>; W] = [(); W].map(|_| None);
    // Gaps between writes are shared, read-only pieces.
    let mut gaps: [(usize, &'a [u8]); W] = [(0, &[]); W];
    let mut rest: &'a mut [u8] = buf;
    let mut rest_start = 0usize;
    for (k, &i) in order.iter().enumerate() {
        let w = &writes[i];
        if w.start < rest_start || w.end < w.start || w.end > rest_start + rest.len() {
            return Err(ERR);
        }
        let (gap, tail) = rest.split_at_mut(w.start - rest_start);
        let (region, tail) = tail.split_at_mut(w.end - w.start);
        gaps[k] = (rest_start, gap);
        outs[i] = Some(region);
        rest = tail;
        rest_start = w.end;
    }
    let last: (usize, &'a [u8]) = (rest_start, rest);
    let mut ins: [&'a [u8]; R] = [&[]; R];
    for (r, slot) in reads.iter().zip(ins.iter_mut()) {
        let mut found = false;
        for (start, piece) in gaps.iter().copied().chain(core::iter::once(last)) {
            if r.start >= start && r.end <= start + piece.len() && r.start <= r.end {
                *slot = &piece[r.start - start..r.end - start];
                found = true;
                break;
            }
        }
        if !found {
            return Err(ERR);
        }
    }
    let mut written: [&'a mut [u8]; W] = [(); W].map(|_| <&mut [u8]>::default());
    for (dst, src) in written.iter_mut().zip(outs.iter_mut()) {
        *dst = src.take().ok_or(ERR)?;
    }
    Ok((ins, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carve_disjoint_regions() {
        let mut buf: Vec<u8> = (0..100).collect();
        let (ins, outs) = carve(&mut buf, [0..10, 5..15, 80..90], [20..30, 50..60]).unwrap();
        assert_eq!(ins[0][0], 0);
        assert_eq!(ins[1][0], 5);
        assert_eq!(ins[2][9], 89);
        let [a, b] = outs;
        a[0] = 200;
        b[0] = 201;
        assert_eq!(buf[20], 200);
        assert_eq!(buf[50], 201);
    }

    #[test]
    fn carve_rejects_overlap() {
        let mut buf = vec![0u8; 100];
        assert!(carve(&mut buf, [15..25], [20..30]).is_err());
        assert!(carve::<0, 2>(&mut buf, [], [20..30, 25..35]).is_err());
        assert!(carve::<0, 1>(&mut buf, [], [90..110]).is_err());
    }
}
