#!/usr/bin/env python3
"""llama.cpp's generations of the zoo's GGUF language model: `cargo xtask llm-reference` runs this.

    llm_reference.py --zoo ZOO --out OUTDIR [--threads N]

With llama-cpp-python (built from source into the managed venv), one
thread unless told otherwise, for each fixed prompt: the prompt's token ids
(with BOS), the first step's 20 largest logits (ids and values), and 64
greedily decoded token ids; plus prefill and decode tokens per second.
Written to OUTDIR/gemma3_270m.json. lele's decoder is to match the token
ids exactly and the logits within 1e-2 (issue 55).
"""

import argparse
import json
import os
import time

import numpy as np
from llama_cpp import Llama

MODEL = "gemma-3-270m-q4_k_m.gguf"
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):",
    "Water boils at a temperature of",
    "List three colors of the rainbow:",
]
STEPS = 64
TOP = 20
# Texts whose tokens lele's tokenizer must reproduce: spaces and their
# runs, newlines, tabs, digits, accents, scripts, emoji, unknown
# characters (byte fallback), spelled special tokens.
TOKENIZE = [
    "Hello world",
    " leading space and  two   three",
    "line one\nline two\n\n\nfour newlines\n\n\n\n",
    "\ttab\t\tand code: fn main() { println!(\"{}\", 1_000_000); }",
    "Ünïcödé façade — naïve café, 東京タワー, Привет мир, مرحبا",
    "emoji 🦀🔥👩‍💻 and rare \u2581 \U0001F9EC \u0007 chars",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "3.14159 + 2,718 = 5859.87; 12345678901234567890",
]


def last_logits(llm):
    """The logits after the last evaluated token, from llama.cpp's context
    (llama-cpp-python keeps them only with `logits_all`)."""
    ptr = llm._ctx.get_logits()
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float32)


def open_model(zoo, threads):
    """The zoo's GGUF in llama.cpp as the references use it: n_ctx 512,
    flash attention off (the default), `threads` threads."""
    return Llama(
        model_path=os.path.join(zoo, MODEL),
        n_ctx=512,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=False,
        verbose=False,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    llm = open_model(args.zoo, args.threads)
    cases = []
    prefill_tokens = prefill_secs = decode_tokens = decode_secs = 0.0
    for prompt in PROMPTS:
        tokens = llm.tokenize(prompt.encode(), add_bos=True)
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        prefill_secs += time.perf_counter() - t0
        prefill_tokens += len(tokens)
        logits = last_logits(llm)
        top = np.argsort(-logits, kind="stable")[:TOP]
        generated = []
        t0 = time.perf_counter()
        for _ in range(STEPS):
            tok = int(np.argmax(last_logits(llm)))
            generated.append(tok)
            llm.eval([tok])
        decode_secs += time.perf_counter() - t0
        decode_tokens += STEPS
        cases.append(
            {
                "prompt": prompt,
                "prompt_ids": [int(t) for t in tokens],
                "top_ids": [int(t) for t in top],
                "top_logits": [float(logits[t]) for t in top],
                "greedy_ids": generated,
                "greedy_text": llm.detokenize(generated).decode("utf-8", "replace"),
            }
        )
        print(f"llm        {prompt!r} -> {cases[-1]['greedy_text'][:60]!r}", flush=True)
    tokenizations = [
        {
            "text": text,
            "special": special,
            "ids": [int(t) for t in llm.tokenize(text.encode(), add_bos=True, special=special)],
        }
        for text in TOKENIZE
        for special in (False, True)
    ]
    os.makedirs(args.out, exist_ok=True)
    out = {
        "model": MODEL,
        "threads": args.threads,
        "prefill_tokens_per_s": prefill_tokens / prefill_secs,
        "decode_tokens_per_s": decode_tokens / decode_secs,
        "cases": cases,
        "tokenizations": tokenizations,
    }
    with open(os.path.join(args.out, "gemma3_270m.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(
        f"llm        prefill {out['prefill_tokens_per_s']:.1f} tok/s, decode "
        f"{out['decode_tokens_per_s']:.1f} tok/s, {args.threads} thread(s)",
        flush=True,
    )


if __name__ == "__main__":
    main()
