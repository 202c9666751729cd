#!/usr/bin/env python3
"""llama.cpp's speed on the zoo's GGUF language model: `cargo xtask llm-bench` runs this.

    llm_bench.py --zoo ZOO --prompt TEXT --decode N --threads T

With llama-cpp-python (flash attention off, n_ctx 512, as the reference
generations): the prompt evaluated in one call (prefill), then N tokens
decoded greedily one call each; the best of three runs of each. Prints
one JSON line: prompt tokens, prefill and decode tokens per second.
"""

import argparse
import json
import time

import numpy as np
from llm_reference import open_model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    llm = open_model(args.zoo, args.threads)
    tokens = llm.tokenize(args.prompt.encode(), add_bos=True)
    best_prefill = best_decode = float("inf")
    for _ in range(3):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        best_prefill = min(best_prefill, time.perf_counter() - t0)
        ptr = llm._ctx.get_logits()
        t0 = time.perf_counter()
        for _ in range(args.decode):
            tok = int(np.argmax(np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))))
            llm.eval([tok])
            ptr = llm._ctx.get_logits()
        best_decode = min(best_decode, time.perf_counter() - t0)
    print(
        json.dumps(
            {
                "prompt_tokens": len(tokens),
                "prefill_tokens_per_s": len(tokens) / best_prefill,
                "decode_tokens_per_s": args.decode / best_decode,
                "threads": args.threads,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
