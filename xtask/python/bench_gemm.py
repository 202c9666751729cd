"""NumPy side of `cargo xtask bench --kernels`.

    bench_gemm.py [--quick]

Times float32 `A @ B` (row-major, C-contiguous) through NumPy's bundled BLAS
on ONE thread, for the same shapes and with the same timing rule as lele's
`kernel_bench` example: one untimed call, a probe call, then enough calls to
fill the time budget (0.5 s, 0.05 s with --quick, at least 3), median.
Prints one JSON object per line: {"kernel","case","m","n","k","ms","gflops"}
plus one {"blas": ...} line naming the library NumPy uses.

The thread count is pinned through the environment before NumPy is imported
(OPENBLAS_NUM_THREADS and friends) and checked with threadpoolctl when it is
installed.
"""

import os

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

# Keep in step with lele-kernels/examples/kernel_bench.rs. The last field:
# B stored transposed (n x k, a Linear layer's weight).
CASES = [
    ("square 256", 256, 256, 256, False),
    ("square 384", 384, 384, 384, False),
    ("square 512", 512, 512, 512, False),
    ("square 768", 768, 768, 768, False),
    ("square 1024", 1024, 1024, 1024, False),
    ("gemv 1x2048x2048", 1, 2048, 2048, False),
    ("conv3x3 yolo 32x25600x144", 32, 25600, 144, False),
    ("conv1x1 yolo 64x6400x128", 64, 6400, 128, False),
    ("minilm qkv 128x384x384", 128, 384, 384, False),
    ("ppocr rec head 40x18710x120", 40, 18710, 120, False),
    ("minilm ffn 128x1536x384", 128, 1536, 384, False),
    ("conv1x1 v6det 768x225x384", 768, 225, 384, False),
    ("linear xWt 16x8210x1024", 16, 8210, 1024, True),
    ("vad stft 258x5x256", 258, 5, 256, False),
    ("vad enc0 128x4x387", 128, 4, 387, False),
    ("lstm step hRt 1x2048x512", 1, 2048, 512, True),
    ("ddddocr head 20x8210x1024 xWt", 20, 8210, 1024, True),
    ("ddddocr lstm xW 20x4096x512 xWt", 20, 4096, 512, True),
    ("linear xWt 40x8210x1024", 40, 8210, 1024, True),
]


def timed(budget, f):
    f()
    t = time.perf_counter()
    f()
    once = max(time.perf_counter() - t, 1e-7)
    reps = min(max(int(budget / once), 3), 2000)
    v = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        v.append(time.perf_counter() - t)
    v.sort()
    return v[len(v) // 2]


def blas_name():
    try:
        cfg = np.show_config(mode="dicts")
        return cfg["Build Dependencies"]["blas"]["name"]
    except Exception:  # noqa: BLE001 - informational only
        return "unknown"


def main():
    budget = 0.05 if "--quick" in sys.argv else 0.5
    rng = np.random.default_rng(7)
    print(json.dumps({"blas": blas_name(), "numpy": np.__version__}))
    for name, m, n, k, b_transposed in CASES:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        if b_transposed:
            b = rng.uniform(-1, 1, (n, k)).astype(np.float32).T
        else:
            b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        c = np.empty((m, n), dtype=np.float32)
        secs = timed(budget, lambda: np.matmul(a, b, out=c))
        print(
            json.dumps(
                {
                    "kernel": "sgemm",
                    "case": name,
                    "m": m,
                    "n": n,
                    "k": k,
                    "ms": secs * 1e3,
                    "gflops": 2.0 * m * n * k / secs / 1e9,
                }
            )
        )


if __name__ == "__main__":
    main()
