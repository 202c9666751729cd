"""ONNX Runtime runner for `cargo xtask bench`.

    bench_ort.py --model M.onnx --input NAME=FILE.npy [--input ...] \
                 --threads T --warmup W --runs R

Loads the model on CPUExecutionProvider with every graph optimization on,
T intra-op threads, one inter-op thread and sequential execution, feeds each
.npy (already of the dtype and shape the model wants) to its input by name and
runs it: once (`first_output_ms`: from t0 to the end of that run, so including
imports, model load and optimization), then W untimed warm-up runs, then R
individually timed runs. Prints exactly one JSON line on stdout:

    {"engine":"ort","threads":T,"first_output_ms":..,"times_ms":[..],"peak_rss_kb":..}

t0 is taken at the top of this file, before onnxruntime and numpy are
imported; the interpreter's own start-up before that is not measured.
`peak_rss_kb` is VmHWM from /proc/self/status at the end. Errors exit
non-zero with a message on stderr.
"""

import time

T0 = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--runs", type=int, default=1)
    return p.parse_args()


def peak_rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main():
    args = parse_args()
    import numpy as np
    import onnxruntime as ort

    feeds = {}
    for spec in args.input:
        name, sep, path = spec.partition("=")
        if not sep:
            raise SystemExit(f"bench_ort: --input wants NAME=FILE.npy, got {spec!r}")
        feeds[name] = np.load(path)

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])

    wanted = [i.name for i in sess.get_inputs()]
    missing = [n for n in wanted if n not in feeds]
    extra = [n for n in feeds if n not in wanted]
    if missing or extra:
        raise SystemExit(
            f"bench_ort: inputs do not match the model: missing {missing}, "
            f"unknown {extra} (model inputs: {wanted})"
        )

    sess.run(None, feeds)
    first_output_ms = (time.perf_counter() - T0) * 1e3

    for _ in range(args.warmup):
        sess.run(None, feeds)
    times_ms = []
    for _ in range(args.runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times_ms.append((time.perf_counter() - t) * 1e3)

    print(
        json.dumps(
            {
                "engine": "ort",
                "threads": args.threads,
                "first_output_ms": round(first_output_ms, 4),
                "times_ms": [round(t, 4) for t in times_ms],
                "peak_rss_kb": peak_rss_kb(),
            },
            separators=(",", ":"),
        )
    )


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:  # one line on stderr, non-zero exit
        print(f"bench_ort: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
