"""ONNX Runtime time per model call, for the model calls an example made.

    time_ort_calls.py --zoo ZOO --calls CALLS.jsonl

CALLS.jsonl holds one JSON object per model call of the lele examples
(`{"example", "model", "what", "shape", "ms"}`, written by their
`--timings` option). For every distinct (model, input shape) this script
builds an input of that shape, creates one ONNX Runtime session per model
(apps_reference.session: CPUExecutionProvider, ORT_ENABLE_ALL, 1 intra-op
and 1 inter-op thread, sequential), runs 3 untimed calls, then times max(10, number of calls with
that shape) calls with perf_counter and keeps their median. Each call of the
example is then given the median of its shape, and each (example, model,
what) group reports the median over its calls: the same statistic the lele
side reports. Prints one JSON line per group on stdout:

    {"example", "model", "what", "calls", "ort_ms"}

Inputs: the first input gets the shape from CALLS. Silero VAD gets a
speech-like signal, a zero state and `sr` = 16000 for 576 samples
(64 context + 512) or 8000 for 288; MiniLM gets [CLS] random word ids [SEP]
and an all-ones mask; image models get uniform random values in [0, 1]
(numpy default_rng seed 0); GTCRN gets a standard normal `mix` frame and
zero caches. These networks do the same arithmetic whatever
the values, so random data times them fairly.
"""

import argparse
import json
import os
import statistics
import sys
import time
from collections import OrderedDict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apps_reference import session  # noqa: E402  (the same ORT session options)


def feeds_for(model, sess, shape, rng):
    inputs = sess.get_inputs()
    if model.startswith("silero_vad"):
        n = shape[1]
        sr = {576: 16000, 288: 8000}.get(n)
        if sr is None:
            raise SystemExit(f"time_ort_calls: silero input of {n} samples")
        t = np.arange(n, dtype=np.float32) / sr
        x = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)[None]
        return {"input": x, "state": np.zeros((2, 1, 128), np.float32),
                "sr": np.array(sr, dtype=np.int64)}
    if model.startswith("minilm"):
        n = shape[1]
        ids = rng.integers(2000, 20000, size=(1, n)).astype(np.int64)
        ids[0, 0], ids[0, -1] = 101, 102
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        return {k: v for k, v in feeds.items() if k in {i.name for i in inputs}}
    if model.startswith("gtcrn"):
        # One STFT frame of noise and zero caches (the declared shapes).
        feeds = {i.name: np.zeros(i.shape, np.float32) for i in inputs}
        feeds["mix"] = rng.standard_normal(shape).astype(np.float32)
        return feeds
    if len(inputs) != 1:
        raise SystemExit(f"time_ort_calls: {model} has {len(inputs)} inputs")
    return {inputs[0].name: rng.uniform(0, 1, size=shape).astype(np.float32)}


def time_shape(sess, feeds, runs):
    for _ in range(3):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zoo", required=True)
    p.add_argument("--calls", required=True)
    a = p.parse_args()
    with open(a.calls, encoding="utf-8") as f:
        calls = [json.loads(line) for line in f if line.strip()]
    groups = OrderedDict()
    for c in calls:
        groups.setdefault((c["example"], c["model"], c["what"]), []).append(tuple(c["shape"]))
    rng = np.random.default_rng(0)
    sessions, per_shape = {}, {}
    for (_, model, _), shapes in groups.items():
        path = os.path.join(a.zoo, model)
        if not os.path.isfile(path):
            raise SystemExit(f"time_ort_calls: missing {path}")
        sess = sessions.setdefault(model, session(path))
        for shape in sorted(set(shapes)):
            if (model, shape) not in per_shape:
                feeds = feeds_for(model, sess, list(shape), rng)
                per_shape[(model, shape)] = time_shape(sess, feeds, max(10, shapes.count(shape)))
    for (example, model, what), shapes in groups.items():
        ms = statistics.median(per_shape[(model, s)] for s in shapes)
        print(json.dumps({"example": example, "model": model, "what": what,
                          "calls": len(shapes), "ort_ms": round(ms, 4)}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
