#!/usr/bin/env python3
"""Gemma 3's first-step logits in float64 from the GGUF's dequantized weights.

    llm_f64_reference.py --zoo ZOO --out OUTDIR

The decoder written out in NumPy (float64 throughout; weights dequantized
by llama.cpp's `gguf` package, activations never quantized), for fixed
token sequences (five prompts as Gemma's tokenizer reads them, BOS
first): the 64 largest logits of the last position, ids and values.
Written to OUTDIR/gemma3_270m_f64.json. lele and llama.cpp both quantize
activations to 8 bits and round attention to f16, so each sits some
distance from these values; that distance tells a port bug (large, or
larger than llama.cpp's) from quantization noise.
"""

import argparse
import json
import os

import gguf
import numpy as np

MODEL = "gemma-3-270m-q4_k_m.gguf"
SEQUENCES = [
    [2, 818, 5279, 529, 7001, 563],
    [2, 14946, 3324, 496, 990, 236764, 528, 496, 1944, 9744, 684, 506, 5442, 236764],
    [2, 2063, 10779, 78113, 236769, 236749, 1473],
    [2, 17390, 104264, 657, 496, 4022, 529],
    [2, 1613, 1806, 7913, 529, 506, 30591, 236787],
]
TOP = 64


class Weights:
    def __init__(self, path):
        self.reader = gguf.GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.fields = self.reader.fields

    def meta(self, key, default=None):
        f = self.fields.get(key)
        return default if f is None else f.contents()

    def get(self, name):
        t = self.tensors[name]
        return np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_neox(x, positions, base):
    """x: [tokens, heads, dim]; rotates the halves (i, i + dim/2)."""
    dim = x.shape[-1]
    half = dim // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / dim)
    theta = positions[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def forward(w, tokens):
    p = "gemma3"
    width = w.meta(f"{p}.embedding_length")
    layers = w.meta(f"{p}.block_count")
    heads = w.meta(f"{p}.attention.head_count")
    kv_heads = w.meta(f"{p}.attention.head_count_kv")
    head_dim = w.meta(f"{p}.attention.key_length")
    eps = float(w.meta(f"{p}.attention.layer_norm_rms_epsilon"))
    window = w.meta(f"{p}.attention.sliding_window")
    base_global = float(w.meta(f"{p}.rope.freq_base"))
    base_local = float(w.meta(f"{p}.rope.freq_base_swa", 10000.0))
    embed = w.get("token_embd.weight")
    n = len(tokens)
    positions = np.arange(n)
    x = embed[tokens] * np.sqrt(width)
    causal = positions[None, :] <= positions[:, None]
    for il in range(layers):
        # Every sixth layer attends globally, the others within the window.
        local = il % 6 != 5
        mask = causal & (positions[:, None] - positions[None, :] < window) if local else causal
        base = base_local if local else base_global
        b = f"blk.{il}."
        h = rms_norm(x, w.get(b + "attn_norm.weight"), eps)
        q = (h @ w.get(b + "attn_q.weight").T).reshape(n, heads, head_dim)
        k = (h @ w.get(b + "attn_k.weight").T).reshape(n, kv_heads, head_dim)
        v = (h @ w.get(b + "attn_v.weight").T).reshape(n, kv_heads, head_dim)
        q = rope_neox(rms_norm(q, w.get(b + "attn_q_norm.weight"), eps), positions, base)
        k = rope_neox(rms_norm(k, w.get(b + "attn_k_norm.weight"), eps), positions, base)
        q = q / np.sqrt(head_dim)
        out = np.zeros((n, heads, head_dim))
        for hd in range(heads):
            kv = hd * kv_heads // heads
            scores = q[:, hd, :] @ k[:, kv, :].T
            scores = np.where(mask, scores, -np.inf)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            out[:, hd, :] = scores @ v[:, kv, :]
        attn = out.reshape(n, heads * head_dim) @ w.get(b + "attn_output.weight").T
        x = x + rms_norm(attn, w.get(b + "post_attention_norm.weight"), eps)
        h = rms_norm(x, w.get(b + "ffn_norm.weight"), eps)
        gate = h @ w.get(b + "ffn_gate.weight").T
        up = h @ w.get(b + "ffn_up.weight").T
        down = (gelu_tanh(gate) * up) @ w.get(b + "ffn_down.weight").T
        x = x + rms_norm(down, w.get(b + "post_ffw_norm.weight"), eps)
    last = rms_norm(x[-1], w.get("output_norm.weight"), eps)
    return embed @ last


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    path = os.path.join(args.zoo, MODEL)
    if not os.path.exists(path):
        print(f"llm-f64    {MODEL} not in the zoo: skipped", flush=True)
        return
    w = Weights(path)
    cases = []
    for tokens in SEQUENCES:
        logits = forward(w, np.array(tokens))
        top = np.argsort(-logits, kind="stable")[:TOP]
        cases.append(
            {
                "tokens": tokens,
                "top_ids": [int(t) for t in top],
                "top_logits": [float(logits[t]) for t in top],
            }
        )
        print(f"llm-f64    {len(tokens)} tokens -> top {int(top[0])} ({logits[top[0]]:.3f})", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gemma3_270m_f64.json"), "w") as f:
        json.dump({"model": MODEL, "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
