//! The workspace arena: one 64-byte aligned buffer that holds every
//! intermediate tensor at an offset chosen by the compiler's memory planner.
use alloc::vec::Vec;
use core::ops::Range;

use crate::error::KernelError;

/// Alignment of every arena region and of embedded weights.
pub const ALIGN: usize = 64;

/// A 64-byte aligned byte buffer, allocated once.
pub struct Arena {
    /// The allocation: `len + ALIGN` zeroed bytes.
    buf: Vec<u8>,
    /// Where the aligned buffer starts in `buf`.
    start: usize,
    /// Its length, a multiple of [`ALIGN`].
    len: usize,
}

impl Arena {
    /// Allocates `bytes` zeroed bytes (rounded up to the alignment).
    ///
    /// The bytes come zeroed from the allocator as plain bytes (`calloc`:
    /// fresh pages from the system for a large arena, first touched by the
    /// `forward` that uses them) and the buffer starts at the first aligned
    /// one. Asking the allocator for 64-byte alignment instead makes it
    /// clear the whole allocation itself, which made a multi-MB arena slow
    /// to create and delayed the model's first output. (Marking the arena
    /// for transparent huge pages saved a little more, left out: the kernel
    /// may compact memory to find them, a stall a server creating a
    /// workspace should not risk.)
    pub fn new(bytes: usize) -> Arena {
        let len = bytes.div_ceil(ALIGN) * ALIGN;
        let buf = alloc::vec![0u8; len + ALIGN];
        let start = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
        Arena { buf, start, len }
    }

    /// The whole buffer.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    /// The whole buffer, read-only.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

/// Splits `buf` into disjoint writable regions and readable ones: fills
/// `read_out[..reads.len()]` and `write_out[..writes.len()]`.
///
/// Readable regions may overlap each other but never a writable one; every
/// writable region must be disjoint from the others. The compiler's planner
/// guarantees both; a violation is reported as an error, never undefined
/// behaviour. Empty ranges yield empty slices.
pub fn carve_slices<'a>(
    buf: &'a mut [u8],
    reads: &[Range<usize>],
    writes: &[Range<usize>],
    read_out: &mut [&'a [u8]],
    write_out: &mut [&'a mut [u8]],
) -> Result<(), KernelError> {
    // Most nodes write an output or two and their scratch: small arrays
    // (every call initializes its arrays, and 32 regions' worth was a
    // visible share of a small model's time).
    if writes.len() <= 4 {
        carve::<5>(buf, reads, writes, read_out, write_out)
    } else {
        carve::<33>(buf, reads, writes, read_out, write_out)
    }
}

/// [`carve_slices`] for fewer than `GAPS` writable regions (the readable
/// gaps around them are at most `GAPS`).
#[inline(always)]
fn carve<'a, const GAPS: usize>(
    buf: &'a mut [u8],
    reads: &[Range<usize>],
    writes: &[Range<usize>],
    read_out: &mut [&'a [u8]],
    write_out: &mut [&'a mut [u8]],
) -> Result<(), KernelError> {
    const ERR: KernelError = KernelError::Buffer { op: "arena" };
    if writes.len() >= GAPS || write_out.len() < writes.len() || read_out.len() < reads.len() {
        return Err(ERR);
    }
    let mut order = [0usize; GAPS];
    for (i, o) in order.iter_mut().enumerate().take(writes.len()) {
        *o = i;
    }
    let order = &mut order[..writes.len()];
    order.sort_unstable_by_key(|&i| writes[i].start);
    let mut gaps: [(usize, &'a [u8]); GAPS] = [(0, &[]); GAPS];
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
#[allow(clippy::single_range_in_vec_init, clippy::type_complexity)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A new arena is zeroed, 64-byte aligned and rounded up to whole
    /// blocks, small or large (past the allocator's fresh-pages threshold).
    #[test]
    fn new_arena_is_zeroed_and_aligned() {
        for bytes in [0, 1, 100, 4096, 3 << 20] {
            let mut arena = Arena::new(bytes);
            let buf = arena.bytes_mut();
            assert_eq!(buf.len(), bytes.div_ceil(ALIGN) * ALIGN);
            assert!((buf.as_ptr() as usize).is_multiple_of(ALIGN) || buf.is_empty());
            assert!(buf.iter().all(|&b| b == 0), "{bytes} bytes");
            buf.fill(7);
        }
    }

    /// Four writable regions (the small arrays) and six (the large ones),
    /// given out of order, with reads between them: each slice is its
    /// range of the buffer; an overlap among six is refused.
    #[test]
    fn carve_few_and_many_writes() {
        let mut buf: Vec<u8> = (0..200).map(|i| i as u8).collect();
        let writes = [150..160, 10..20, 90..95, 40..48, 170..171, 60..70];
        let reads = [0..10, 20..40, 100..150, 195..200];
        for n in [4, 6] {
            let mut r: [&[u8]; 4] = [&[]; 4];
            let mut w: [&mut [u8]; 6] = Default::default();
            carve_slices(&mut buf, &reads, &writes[..n], &mut r, &mut w).unwrap();
            for (s, range) in r.iter().zip(&reads) {
                assert_eq!(s[0] as usize, range.start, "{n} writes");
                assert_eq!(s.len(), range.len());
            }
            for (s, range) in w.iter().zip(&writes[..n]) {
                assert_eq!(s[0] as usize, range.start, "{n} writes");
                assert_eq!(s.len(), range.len());
            }
        }
        let overlapping = [150..160, 10..20, 90..95, 40..48, 170..171, 45..50];
        let mut r: [&[u8]; 1] = [&[]];
        let mut w: [&mut [u8]; 6] = Default::default();
        assert!(carve_slices(&mut buf, &[], &overlapping, &mut r, &mut w).is_err());
    }

    #[test]
    fn carve_disjoint_regions() {
        let mut buf: Vec<u8> = (0..100).collect();
        let mut r: [&[u8]; 3] = [&[]; 3];
        let mut w: [&mut [u8]; 2] = Default::default();
        carve_slices(
            &mut buf,
            &[0..10, 5..15, 80..90],
            &[50..60, 20..30],
            &mut r,
            &mut w,
        )
        .unwrap();
        assert_eq!(r[0][0], 0);
        assert_eq!(r[1][0], 5);
        assert_eq!(r[2][9], 89);
        w[0][0] = 201;
        w[1][0] = 200;
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
        let cases: [(&[Range<usize>], &[Range<usize>]); 3] = [
            (&[15..25], &[20..30]),
            (&[], &[20..30, 25..35]),
            (&[], &[90..110]),
        ];
        for (reads, writes) in cases {
            let mut buf = vec![0u8; 100];
            let mut r: [&[u8]; 1] = [&[]];
            let mut w: [&mut [u8]; 2] = Default::default();
            assert!(carve_slices(&mut buf, reads, writes, &mut r, &mut w).is_err());
        }
    }
}
