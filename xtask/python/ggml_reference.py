#!/usr/bin/env python3
"""Dequantized ggml blocks by llama.cpp's Python package (`gguf`): `cargo xtask fixtures` runs this.

    ggml_reference.py --out OUTDIR

For each quantized type lele reads, random blocks (half of them with a finite
scale in [-2, 2) written over the raw bytes, half left as random bits, which
include infinite and NaN scales) are dequantized by `gguf.quants.dequantize`,
and saved as OUTDIR/<type>.raw.npy (uint8, blocks × bytes) and
OUTDIR/<type>.f32.npy (float32, blocks × elements).
It also quantizes random activations (with exact halves, ties and zero
blocks) to Q8_0 as llama.cpp's reference does: OUTDIR/q8_0.in.npy (float32)
and OUTDIR/q8_0.out.npy (uint8 blocks).
lele-build/tests/ggml_formats.rs compares lele's dequantization and
quantization with them.
"""

import argparse
import os

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize, quantize

# Each type's f16 scale fields (byte offsets): overwritten with finite values
# in the "valid" half of the blocks.
TYPES = {
    "Q4_0": [0],
    "Q4_1": [0, 2],
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "Q8_0": [0],
    "Q4_K": [0, 2],
    "Q5_K": [0, 2],
    "Q6_K": [208],
}
BLOCKS = 64


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(20261207)
    for name, scale_at in TYPES.items():
        qtype = GGMLQuantizationType[name]
        block, size = GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(BLOCKS, size), dtype=np.uint8)
        for at in scale_at:
            scales = rng.uniform(-2, 2, size=BLOCKS // 2).astype(np.float16)
            raw[: BLOCKS // 2, at : at + 2] = scales.view(np.uint8).reshape(-1, 2)
        with np.errstate(all="ignore"):
            values = dequantize(raw, qtype).astype(np.float32).reshape(BLOCKS, block)
        np.save(os.path.join(args.out, f"{name}.raw.npy"), raw, allow_pickle=False)
        np.save(os.path.join(args.out, f"{name}.f32.npy"), values, allow_pickle=False)
        print(f"ggml       {name:<5} {BLOCKS} blocks of {block} ({size} bytes)", flush=True)
    x = rng.normal(0, 3, size=(BLOCKS, 32)).astype(np.float32)
    # Values whose quotient by the scale is a tie (k + 0.5), and a zero block.
    x[1] = np.arange(32, dtype=np.float32) - 15.5
    x[1, 0] = 127.0
    x[2] = 0.0
    q = quantize(x, GGMLQuantizationType.Q8_0)
    np.save(os.path.join(args.out, "q8_0.in.npy"), x, allow_pickle=False)
    np.save(os.path.join(args.out, "q8_0.out.npy"), np.asarray(q, dtype=np.uint8), allow_pickle=False)
    print(f"ggml       Q8_0 quantization of {BLOCKS} blocks", flush=True)


if __name__ == "__main__":
    main()
