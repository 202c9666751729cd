//! The small runtime that generated `forward` functions call: it resolves
//! where each tensor lives (arena, weights or a model input), carves the
//! arena into disjoint borrows, infers shapes, checks them against the
//! planned capacities and runs a kernel. Nothing here allocates.
use core::ops::Range;

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel::Kernel;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};

/// Most inputs a node may have in generated code.
pub const MAX_NODE_INPUTS: usize = 64;
/// Most outputs a node may have in generated code.
pub const MAX_NODE_OUTPUTS: usize = 16;

/// Inputs of a node that the runtime's small stack arrays hold: nodes with
/// at most this many inputs (and [`FEW_OUTPUTS`] outputs) are prepared in
/// arrays of this size rather than of [`MAX_NODE_INPUTS`], whose 6 KiB of
/// empty slots every node used to initialize and move (on a small model
/// made only of small nodes, a large share of the time went to that).
const FEW_INPUTS: usize = 4;
/// Outputs of a node with the small arrays (see [`FEW_INPUTS`]).
const FEW_OUTPUTS: usize = 3;

/// Metadata key under which the compiler records where a decoder's
/// tokenizer lies in its weights, `"offset,bytes"` (read by `lele::llm`).
pub const TOKENIZER_KEY: &str = "lele.tokenizer";
/// Metadata key of a decoder's context bound, in positions.
pub const CONTEXT_KEY: &str = "lele.decoder.context";
/// The first bytes of the tokenizer data the compiler writes.
pub const TOKENIZER_MAGIC: &[u8; 8] = b"LELETOK1";

/// 64-byte aligned wrapper used to embed weights with `include_bytes!`.
#[repr(C, align(64))]
pub struct Aligned<T: ?Sized>(pub T);

/// Where a node input comes from.
#[derive(Clone, Copy, Debug)]
pub enum Src {
    /// An omitted optional input.
    Absent,
    /// An intermediate in the arena at byte offset `off`; its shape is
    /// `shapes[slot]`.
    Arena {
        /// Byte offset in the arena.
        off: usize,
        /// Index of the runtime shape.
        slot: usize,
        /// Element type.
        dtype: DType,
    },
    /// A model input (argument `index` of `forward`), possibly reshaped by a
    /// view whose shape is `shapes[slot]`.
    Input {
        /// Position among the model inputs.
        index: usize,
        /// Index of the runtime shape.
        slot: usize,
    },
    /// A constant in the weights blob.
    Weight {
        /// Byte offset in the blob.
        off: usize,
        /// Element type.
        dtype: DType,
        /// Static shape.
        shape: Shape,
        /// Runtime shape slot when a view reshaped it, else `usize::MAX`.
        slot: usize,
    },
}

/// Where a node output goes.
#[derive(Clone, Copy, Debug)]
pub struct Dst {
    /// Byte offset in the arena.
    pub off: usize,
    /// Bytes planned for it.
    pub cap: usize,
    /// Index of its runtime shape.
    pub slot: usize,
    /// Element type.
    pub dtype: DType,
    /// ONNX name (for error messages).
    pub name: &'static str,
}

/// Everything a generated function needs at run time.
pub struct Ctx<'a, 'i> {
    /// The weights blob.
    pub weights: &'a [u8],
    /// The workspace arena.
    pub arena: &'a mut [u8],
    /// Runtime shapes, one slot per value.
    pub shapes: &'a mut [Shape],
    /// The model inputs.
    pub inputs: &'a [TensorRef<'i>],
    /// Told after each node finishes (`None` in a plain `forward`).
    pub profiler: Option<&'a mut dyn Profiler>,
}

/// Receives a call after every node of a profiled `forward`.
///
/// Node `i` is entry `i` of the model's `node_labels()`. A profiler that
/// times nodes takes the time between consecutive calls (and between
/// [`Profiler::start`] and the first call).
pub trait Profiler {
    /// The model starts running.
    fn start(&mut self);
    /// Node `node` has finished.
    fn node_done(&mut self, node: usize);
    /// A kernel of the node about to finish ran: its arithmetic
    /// ([`Kernel::flops`]) and the bytes of its inputs and outputs (called
    /// before that node's [`Profiler::node_done`], possibly several times
    /// for one node). Default: ignored.
    fn node_work(&mut self, _flops: u64, _bytes: u64) {}
}

/// Tells the profiler, if any, that the forward pass starts.
#[inline]
pub fn profile_start(ctx: &mut Ctx<'_, '_>) {
    if let Some(p) = ctx.profiler.as_deref_mut() {
        p.start();
    }
}

/// Tells the profiler, if any, that node `node` has finished.
#[inline]
pub fn node_done(ctx: &mut Ctx<'_, '_>, node: usize) {
    if let Some(p) = ctx.profiler.as_deref_mut() {
        p.node_done(node);
    }
}

/// The read-only parts of a [`Ctx`].
struct Sources<'c, 'i> {
    weights: &'c [u8],
    shapes: &'c [Shape],
    inputs: &'c [TensorRef<'i>],
}

/// Splits the arena for a node and builds its input tensors (at most `N`
/// inputs: the size of the caller's arrays).
fn prepare<'c, const N: usize>(
    src: &Sources<'c, '_>,
    arena: &'c mut [u8],
    srcs: &[Src],
    writes: &[Range<usize>],
    ins: &mut [Option<TensorRef<'c>>],
    outs: &mut [&'c mut [u8]],
) -> Result<(), KernelError> {
    const ERR: KernelError = KernelError::Buffer { op: "arena" };
    let (weights, shapes, inputs) = (src.weights, src.shapes, src.inputs);
    if srcs.len() > N || ins.len() < srcs.len() || writes.len() > MAX_NODE_OUTPUTS + 1 {
        return Err(ERR);
    }
    let mut reads: [Range<usize>; N] = [const { 0..0 }; N];
    for (r, s) in reads.iter_mut().zip(srcs) {
        if let Src::Arena { off, slot, dtype } = *s {
            *r = off..off.saturating_add(shapes[slot].numel().saturating_mul(dtype.size()));
        }
    }
    let mut read_slices: [&[u8]; N] = [&[]; N];
    crate::arena::carve_slices(arena, &reads[..srcs.len()], writes, &mut read_slices, outs)?;
    for (i, s) in srcs.iter().enumerate() {
        ins[i] = match *s {
            Src::Absent => None,
            Src::Arena { slot, dtype, .. } => Some(TensorRef {
                dtype,
                shape: shapes[slot],
                data: read_slices[i],
            }),
            Src::Input { index, slot } => {
                let t = inputs.get(index).ok_or(ERR)?;
                Some(TensorRef {
                    dtype: t.dtype,
                    shape: shapes[slot],
                    data: t.data,
                })
            }
            Src::Weight {
                off,
                dtype,
                shape,
                slot,
            } => {
                let shape = if slot == usize::MAX {
                    shape
                } else {
                    shapes[slot]
                };
                let len = shape.numel().saturating_mul(dtype.size());
                let data = weights
                    .get(off..off.saturating_add(len))
                    .ok_or(KernelError::Weights("offset out of range"))?;
                Some(TensorRef { dtype, shape, data })
            }
        };
    }
    Ok(())
}

/// Runs one kernel node: inputs from `srcs`, outputs into `dsts`, scratch
/// at `scratch` (offset, capacity) in the arena.
pub fn exec<K: Kernel>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    dsts: &[Dst],
    scratch: (usize, usize),
) -> Result<(), KernelError> {
    if srcs.len() <= FEW_INPUTS && dsts.len() <= FEW_OUTPUTS {
        exec_with::<K, FEW_INPUTS, { FEW_OUTPUTS + 1 }>(ctx, kernel, srcs, dsts, scratch)
    } else {
        exec_with::<K, MAX_NODE_INPUTS, { MAX_NODE_OUTPUTS + 1 }>(ctx, kernel, srcs, dsts, scratch)
    }
}

/// [`exec`] with arrays for `NI` inputs and `NW - 1` outputs (plus the
/// scratch).
fn exec_with<K: Kernel, const NI: usize, const NW: usize>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    dsts: &[Dst],
    scratch: (usize, usize),
) -> Result<(), KernelError> {
    let n_out = dsts.len();
    let mut writes: [Range<usize>; NW] = [const { 0..0 }; NW];
    if n_out >= NW || srcs.len() > NI {
        return Err(KernelError::Buffer { op: "arena" });
    }
    for (w, d) in writes.iter_mut().zip(dsts) {
        *w = d.off..d.off + d.cap;
    }
    writes[n_out] = scratch.0..scratch.0 + scratch.1;
    let mut ins: [Option<TensorRef<'_>>; NI] = [None; NI];
    let mut outs: [&mut [u8]; NW] = core::array::from_fn(|_| Default::default());
    let mut out_shapes = [Shape::SCALAR; NW];
    {
        let sources = Sources {
            weights: ctx.weights,
            shapes: ctx.shapes,
            inputs: ctx.inputs,
        };
        prepare::<NI>(
            &sources,
            ctx.arena,
            srcs,
            &writes[..n_out + 1],
            &mut ins,
            &mut outs[..n_out + 1],
        )?;
        let ins = &ins[..srcs.len()];
        kernel.infer(ins, &mut out_shapes[..n_out])?;
        check_capacity(dsts, &out_shapes)?;
        let need_scratch = kernel.scratch_bytes(ins, &out_shapes[..n_out]);
        if need_scratch > scratch.1 {
            return Err(KernelError::CapacityExceeded {
                value: "scratch",
                needed: need_scratch,
                planned: scratch.1,
            });
        }
        let (out_bufs, rest) = outs.split_at_mut(n_out);
        let scratch_buf = core::mem::take(&mut rest[0]);
        let mut tensors: [TensorMut<'_>; NW] = core::array::from_fn(|_| TensorMut {
            dtype: DType::U8,
            shape: Shape::SCALAR,
            data: &mut [],
        });
        for ((t, d), (buf, s)) in tensors
            .iter_mut()
            .zip(dsts)
            .zip(out_bufs.iter_mut().zip(&out_shapes))
        {
            *t = TensorMut::new(d.dtype, *s, core::mem::take(buf))?;
        }
        kernel.run(ins, &mut tensors[..n_out], scratch_buf)?;
        if let Some(p) = ctx.profiler.as_deref_mut() {
            let read: usize = ins.iter().flatten().map(|t| t.data.len()).sum();
            let written: usize = tensors[..n_out].iter().map(|t| t.data.len()).sum();
            let flops = kernel.flops(ins, &out_shapes[..n_out]);
            p.node_work(flops, read.saturating_add(written) as u64);
        }
    }
    for (d, s) in dsts.iter().zip(&out_shapes) {
        ctx.shapes[d.slot] = *s;
    }
    Ok(())
}

/// A zero-copy view node (Reshape, Squeeze…): infers the output shape and
/// records it in `slot`; the data stays where the input lives.
pub fn view<K: Kernel>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    slot: usize,
) -> Result<(), KernelError> {
    let mut out_shape = [Shape::SCALAR; 1];
    infer_shapes(ctx, kernel, srcs, &mut out_shape)?;
    ctx.shapes[slot] = out_shape[0];
    Ok(())
}

/// Infers a node's output shapes from its inputs, without touching any
/// output buffer.
fn infer_shapes<K: Kernel>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    out_shapes: &mut [Shape],
) -> Result<(), KernelError> {
    if srcs.len() <= FEW_INPUTS {
        infer_shapes_with::<K, FEW_INPUTS>(ctx, kernel, srcs, out_shapes)
    } else {
        infer_shapes_with::<K, MAX_NODE_INPUTS>(ctx, kernel, srcs, out_shapes)
    }
}

/// [`infer_shapes`] with arrays for `N` inputs.
fn infer_shapes_with<K: Kernel, const N: usize>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    out_shapes: &mut [Shape],
) -> Result<(), KernelError> {
    let mut ins: [Option<TensorRef<'_>>; N] = [None; N];
    let sources = Sources {
        weights: ctx.weights,
        shapes: ctx.shapes,
        inputs: ctx.inputs,
    };
    prepare::<N>(&sources, ctx.arena, srcs, &[], &mut ins, &mut [])?;
    kernel.infer(&ins[..srcs.len()], out_shapes)
}

/// Checks that each output of `shapes` fits the bytes planned for its `dsts`.
fn check_capacity(dsts: &[Dst], shapes: &[Shape]) -> Result<(), KernelError> {
    for (d, s) in dsts.iter().zip(shapes) {
        // An element count past `usize` counts as too large, never as small.
        let needed = s.checked_bytes(d.dtype.size()).unwrap_or(usize::MAX);
        if needed > d.cap {
            return Err(KernelError::CapacityExceeded {
                value: d.name,
                needed,
                planned: d.cap,
            });
        }
    }
    Ok(())
}

/// A Concat (`joined`) or Split whose pieces the memory plan laid out back
/// to back inside the whole (the Concat's output, the Split's input 0):
/// infers the output shapes, checks that at these shapes every dimension
/// before `axis` is 1 and each piece starts where the previous one ends, and
/// moves no data. A layout that does not hold is an error, never a wrong
/// result.
pub fn pieces_in_place<K: Kernel>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    dsts: &[Dst],
    axis: i64,
    joined: bool,
) -> Result<(), KernelError> {
    let op = if joined { "Concat" } else { "Split" };
    const MISPLACED: &str = "pieces are not where the memory plan put them";
    let n_out = dsts.len();
    if n_out > MAX_NODE_OUTPUTS {
        return Err(KernelError::Buffer { op: "arena" });
    }
    let mut out_shapes = [Shape::SCALAR; MAX_NODE_OUTPUTS];
    infer_shapes(ctx, kernel, srcs, &mut out_shapes[..n_out])?;
    check_capacity(dsts, &out_shapes)?;
    let arena_piece = |s: &Src| match *s {
        Src::Arena { off, slot, dtype } => {
            Ok((off, ctx.shapes[slot].numel().saturating_mul(dtype.size())))
        }
        _ => Err(KernelError::Shape { op, msg: MISPLACED }),
    };
    let out_piece = |k: usize| {
        (
            dsts[k].off,
            out_shapes[k].numel().saturating_mul(dsts[k].dtype.size()),
        )
    };
    let (whole_shape, (whole_off, whole_bytes)) = if joined {
        let d = dsts
            .first()
            .ok_or(KernelError::Shape { op, msg: MISPLACED })?;
        (
            out_shapes[0],
            (d.off, out_shapes[0].numel().saturating_mul(d.dtype.size())),
        )
    } else {
        let s = srcs
            .first()
            .ok_or(KernelError::MissingInput { op, index: 0 })?;
        let slot = match *s {
            Src::Arena { slot, .. } => slot,
            _ => return Err(KernelError::Shape { op, msg: MISPLACED }),
        };
        (ctx.shapes[slot], arena_piece(s)?)
    };
    let axis = whole_shape.axis(axis, op)?;
    if whole_shape.dims()[..axis].iter().any(|&d| d != 1) {
        return Err(KernelError::Shape { op, msg: MISPLACED });
    }
    // Each piece must start where the previous one ends.
    let mut at = whole_off;
    let mut next = |(off, bytes): (usize, usize)| {
        let ok = off == at;
        at += bytes;
        ok
    };
    let in_order = if joined {
        let mut ok = true;
        for s in srcs {
            ok = ok && next(arena_piece(s)?);
        }
        ok
    } else {
        (0..n_out).all(|k| next(out_piece(k)))
    };
    if !in_order {
        return Err(KernelError::Shape { op, msg: MISPLACED });
    }
    if at != whole_off + whole_bytes {
        return Err(KernelError::Shape { op, msg: MISPLACED });
    }
    for (d, s) in dsts.iter().zip(&out_shapes) {
        ctx.shapes[d.slot] = *s;
    }
    Ok(())
}

/// Reads a boolean condition (the `If` operator).
pub fn condition(ctx: &mut Ctx<'_, '_>, src: Src) -> Result<bool, KernelError> {
    let mut ins: [Option<TensorRef<'_>>; 1] = [None];
    let sources = Sources {
        weights: ctx.weights,
        shapes: ctx.shapes,
        inputs: ctx.inputs,
    };
    prepare::<1>(&sources, ctx.arena, &[src], &[], &mut ins, &mut [])?;
    let t = ins[0].ok_or(KernelError::MissingInput { op: "If", index: 0 })?;
    if t.numel() != 1 {
        return Err(KernelError::Shape {
            op: "If",
            msg: "condition must hold one element",
        });
    }
    Ok(t.as_bool("If")?[0] != 0)
}

/// Copies a value into an arena destination (If outputs, model outputs that
/// alias inputs or weights).
pub fn copy(ctx: &mut Ctx<'_, '_>, src: Src, dst: Dst) -> Result<(), KernelError> {
    exec(ctx, &CopyKernel, &[src], &[dst], (0, 0))
}

/// Checks a model input against its declared dims and bounds: `fixed[i]` is
/// `Some(n)` for a pinned dim, else `None` and `max[i]` bounds it.
pub fn check_input(
    t: &TensorRef<'_>,
    name: &'static str,
    expected: &'static str,
    dtype: DType,
    fixed: &[Option<usize>],
    max: &[usize],
) -> Result<(), KernelError> {
    let err = KernelError::InputShape {
        input: name,
        expected,
    };
    if t.dtype != dtype || t.shape.rank() != fixed.len() {
        return Err(err);
    }
    for ((d, f), m) in t.shape.dims().iter().zip(fixed).zip(max) {
        match f {
            Some(n) if d != n => return Err(err),
            None if d > m || *d == 0 => return Err(err),
            _ => {}
        }
    }
    Ok(())
}

/// Copies input 0 to output 0.
struct CopyKernel;

impl Kernel for CopyKernel {
    fn infer(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [Shape],
    ) -> Result<(), KernelError> {
        outputs[0] = crate::kernel::input(inputs, 0, "Copy")?.shape;
        Ok(())
    }

    fn run(
        &self,
        inputs: &[Option<TensorRef<'_>>],
        outputs: &mut [TensorMut<'_>],
        _scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let src = crate::kernel::input(inputs, 0, "Copy")?;
        let dst = crate::kernel::output(outputs, 0, "Copy")?;
        if dst.data.len() != src.data.len() {
            return Err(KernelError::Buffer { op: "Copy" });
        }
        dst.data.copy_from_slice(src.data);
        Ok(())
    }
}

/// Bytes per chunk of [`exec_in_place`].
const IN_PLACE_CHUNK: usize = 4096;

/// In-place regions at least this large are split over the threads (by
/// [`exec_in_place_threaded`]).
#[cfg(feature = "std")]
const IN_PLACE_PARALLEL_MIN: usize = 256 * 1024;

/// Runs an elementwise kernel ([`Kernel::elementwise`]) whose output 0
/// overwrites input 0 in the arena (`srcs[0]` lives at `dst.off`).
///
/// The data goes through a small stack buffer chunk by chunk: input 0's
/// chunk is copied out, then the kernel writes the same range, so no
/// reference ever aliases another. Every other input must have the
/// output's shape or hold one element; anything else is an error (the
/// compiler only plans in-place execution where that holds).
pub fn exec_in_place<K: Kernel>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    dst: Dst,
) -> Result<(), KernelError> {
    in_place(ctx, kernel, srcs, dst, None)
}

/// [`exec_in_place`] for a kernel that may run on several threads at
/// once (lele's own kernels; the compiler keeps a user's override on
/// [`exec_in_place`]): a large region is split into one contiguous range
/// per thread, each worked chunk by chunk the same way.
pub fn exec_in_place_threaded<K: Kernel + Sync>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    dst: Dst,
) -> Result<(), KernelError> {
    in_place(ctx, kernel, srcs, dst, Some(kernel))
}

fn in_place<K: Kernel>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    dst: Dst,
    shared: Option<&(dyn Kernel + Sync)>,
) -> Result<(), KernelError> {
    if srcs.len() <= FEW_INPUTS {
        in_place_with::<K, FEW_INPUTS>(ctx, kernel, srcs, dst, shared)
    } else {
        in_place_with::<K, MAX_NODE_INPUTS>(ctx, kernel, srcs, dst, shared)
    }
}

/// [`in_place`] with arrays for `N` inputs.
fn in_place_with<K: Kernel, const N: usize>(
    ctx: &mut Ctx<'_, '_>,
    kernel: &K,
    srcs: &[Src],
    dst: Dst,
    shared: Option<&(dyn Kernel + Sync)>,
) -> Result<(), KernelError> {
    const ERR: KernelError = KernelError::Shape {
        op: "in-place",
        msg: "operand shapes do not allow in-place execution",
    };
    if !kernel.elementwise() || srcs.is_empty() || srcs.len() > N {
        return Err(ERR);
    }
    let in_shape = match srcs[0] {
        Src::Arena { off, slot, dtype } if off == dst.off && dtype == dst.dtype => ctx.shapes[slot],
        _ => return Err(ERR),
    };
    let mut ins: [Option<TensorRef<'_>>; N] = [None; N];
    let mut outs: [&mut [u8]; 1] = Default::default();
    let mut out_shape = [Shape::SCALAR; 1];
    {
        let sources = Sources {
            weights: ctx.weights,
            shapes: ctx.shapes,
            inputs: ctx.inputs,
        };
        // Input 0 is read through the written region; the others are carved
        // as usual.
        let mut others: [Option<TensorRef<'_>>; N] = [None; N];
        prepare::<N>(
            &sources,
            ctx.arena,
            &srcs[1..],
            core::slice::from_ref(&(dst.off..dst.off + dst.cap)),
            &mut others,
            &mut outs,
        )?;
        let n_bytes = in_shape.numel().saturating_mul(dst.dtype.size());
        let region = core::mem::take(&mut outs[0]);
        if region.len() < n_bytes {
            return Err(KernelError::CapacityExceeded {
                value: dst.name,
                needed: n_bytes,
                planned: region.len(),
            });
        }
        let region = &mut region[..n_bytes];
        ins[0] = Some(TensorRef {
            dtype: dst.dtype,
            shape: in_shape,
            data: region,
        });
        ins[1..srcs.len()].copy_from_slice(&others[..srcs.len() - 1]);
        kernel.infer(&ins[..srcs.len()], &mut out_shape)?;
        if out_shape[0] != in_shape {
            return Err(ERR);
        }
        for t in ins[1..srcs.len()].iter().flatten() {
            if t.shape != in_shape && t.numel() != 1 {
                return Err(ERR);
            }
        }
        let others = &others[..srcs.len() - 1];
        if let Some(p) = ctx.profiler.as_deref_mut() {
            // Read and written in place, plus the other inputs.
            let rest: usize = others.iter().flatten().map(|t| t.data.len()).sum();
            let moved = n_bytes.saturating_mul(2).saturating_add(rest);
            p.node_work(kernel.flops(&ins[..srcs.len()], &out_shape), moved as u64);
        }
        #[cfg(feature = "std")]
        if let Some(k) = shared {
            let threads = crate::threads::num_threads();
            if threads > 1 && n_bytes >= IN_PLACE_PARALLEL_MIN {
                // One range per thread, whole chunks each.
                let per = n_bytes.div_ceil(threads).next_multiple_of(IN_PLACE_CHUNK);
                let tasks = n_bytes.div_ceil(per);
                let region = crate::threads::SharedMut::new(region);
                let failure = std::sync::Mutex::new(None);
                crate::threads::run(tasks, &mut [], &|t, _| {
                    let start = t * per;
                    let len = per.min(n_bytes - start);
                    // SAFETY: task t alone touches bytes start..start + len
                    // of the region, and `run` returns after every task.
                    let part = unsafe { region.range(start, len) };
                    if let Err(e) =
                        in_place_range::<_, N>(k, part, start, in_shape, others, dst.dtype)
                        && let Ok(mut f) = failure.lock()
                    {
                        *f = Some(e);
                    }
                });
                if let Some(e) = failure.into_inner().ok().flatten() {
                    return Err(e);
                }
                ctx.shapes[dst.slot] = out_shape[0];
                return Ok(());
            }
        }
        #[cfg(not(feature = "std"))]
        let _ = shared;
        in_place_range::<_, N>(kernel, region, 0, in_shape, others, dst.dtype)?;
    }
    ctx.shapes[dst.slot] = out_shape[0];
    Ok(())
}

/// Runs `kernel` in place over `part`, bytes `base..base + part.len()` of
/// an in-place region of shape `in_shape` (a whole number of elements),
/// chunk by chunk through a stack buffer; `others` are inputs 1.. (of
/// `in_shape`, sliced to the same elements, or single elements).
fn in_place_range<K: Kernel + ?Sized, const N: usize>(
    kernel: &K,
    part: &mut [u8],
    base: usize,
    in_shape: Shape,
    others: &[Option<TensorRef<'_>>],
    dtype: DType,
) -> Result<(), KernelError> {
    let elem = dtype.size();
    let mut tmp = [0u64; IN_PLACE_CHUNK / 8];
    let mut start = 0usize;
    while start < part.len() {
        let end = (start + IN_PLACE_CHUNK).min(part.len());
        let len = end - start;
        let chunk_shape = Shape::new(&[len / elem])?;
        let tmp_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut tmp[..]);
        tmp_bytes[..len].copy_from_slice(&part[start..end]);
        let tmp_bytes: &[u8] = &tmp_bytes[..len];
        let mut chunk_ins: [Option<TensorRef<'_>>; N] = [None; N];
        chunk_ins[0] = Some(TensorRef {
            dtype,
            shape: chunk_shape,
            data: tmp_bytes,
        });
        // Element range of this chunk in the whole region.
        let (e0, e1) = ((base + start) / elem, (base + end) / elem);
        for (c, t) in chunk_ins[1..=others.len()].iter_mut().zip(others) {
            *c = match t {
                Some(t) if t.shape == in_shape => {
                    let size = t.dtype.size();
                    Some(TensorRef {
                        dtype: t.dtype,
                        shape: chunk_shape,
                        data: t
                            .data
                            .get(e0 * size..e1 * size)
                            .ok_or(KernelError::Buffer { op: "in-place" })?,
                    })
                }
                Some(t) => Some(TensorRef {
                    dtype: t.dtype,
                    shape: Shape::SCALAR,
                    data: t.data,
                }),
                None => None,
            };
        }
        let mut out = [TensorMut {
            dtype,
            shape: chunk_shape,
            data: &mut part[start..end],
        }];
        kernel.run(&chunk_ins[..=others.len()], &mut out, &mut [])?;
        start = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
