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

/// Like [`carve`] with run-time counts: fills `read_out[..reads.len()]` and
/// `write_out[..writes.len()]`. Empty read ranges (`0..0`) yield empty slices.
pub fn carve_slices<'a>(
    buf: &'a mut [u8],
    reads: &[Range<usize>],
    writes: &[Range<usize>],
    read_out: &mut [&'a [u8]],
    write_out: &mut [&'a mut [u8]],
) -> Result<(), KernelError> {
    const ERR: KernelError = KernelError::Buffer { op: "arena" };
    const MAXW: usize = 32;
    if writes.len() > MAXW || write_out.len() < writes.len() || read_out.len() < reads.len() {
        return Err(ERR);
    }
    let mut order = [0usize; MAXW];
    for (i, o) in order.iter_mut().enumerate().take(writes.len()) {
        *o = i;
    }
    let order = &mut order[..writes.len()];
    order.sort_unstable_by_key(|&i| writes[i].start);
    let mut gaps: [(usize, &'a [u8]); MAXW + 1] = [(0, &[]); MAXW + 1];
    let mut rest: &'a mut [u8] = buf;
    let mut rest_start = 0usize;
    for (k, &i) in order.iter().enumerate() {
        let w = &writes[i];
        if w.start == w.end {
            // Empty regions (no scratch) take no space and conflict with nothing.
            write_out[i] = &mut [];
            continue;
        }
        if w.start < rest_start || w.end < w.start || w.end > rest_start + rest.len() {
            return Err(ERR);
        }
        let (gap, tail) = rest.split_at_mut(w.start - rest_start);
        let (region, tail) = tail.split_at_mut(w.end - w.start);
        gaps[k] = (rest_start, gap);
        write_out[i] = region;
        rest = tail;
        rest_start = w.end;
    }
    gaps[writes.len()] = (rest_start, rest);
    let gaps = &gaps[..writes.len() + 1];
    for (r, slot) in reads.iter().zip(read_out.iter_mut()) {
        if r.start == r.end {
            *slot = &[];
            continue;
        }
        let piece = gaps
            .iter()
            .find(|(start, piece)| {
                r.start >= *start && r.end <= start + piece.len() && r.start <= r.end
            })
            .ok_or(ERR)?;
        *slot = &piece.1[r.start - piece.0..r.end - piece.0];
    }
    Ok(())
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
    fn carve_slices_allows_empty_writes_anywhere() {
        let mut buf = vec![0u8; 100];
        let mut r: [&[u8]; 1] = [&[]];
        let mut w: [&mut [u8]; 2] = Default::default();
        carve_slices(&mut buf, &[40..50], &[0..32, 0..0], &mut r, &mut w).unwrap();
        assert_eq!(w[0].len(), 32);
        assert_eq!(w[1].len(), 0);
        assert_eq!(r[0].len(), 10);
    }

    #[test]
    fn carve_rejects_overlap() {
        let mut buf = vec![0u8; 100];
        assert!(carve(&mut buf, [15..25], [20..30]).is_err());
        assert!(carve::<0, 2>(&mut buf, [], [20..30, 25..35]).is_err());
        assert!(carve::<0, 1>(&mut buf, [], [90..110]).is_err());
    }
}
