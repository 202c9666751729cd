#!/usr/bin/env python3
"""ONNX backend test cases for `cargo xtask conformance`.

Writes, for every node case of `onnx.backend.test.case.node.collect_testcases`
and every case of the packaged `simple`, `pytorch-converted` and
`pytorch-operator` suites, and the `ort-contrib` suite of ONNX Runtime's contrib
operators (`contrib_cases.py`, expected values from onnxruntime):

    <out>/<suite>/<name>/model.onnx
    <out>/<suite>/<name>/set<k>/in_<i>.npy    graph inputs (initializers excluded), ONNX order
    <out>/<suite>/<name>/set<k>/out_<j>.npy   expected outputs, ONNX order
    <out>/<suite>/<name>/case.json            names, op types, tolerances, and `skip`
                                              when a value cannot be stored as .npy

Values that are not plain tensors of a dtype lele has (sequences, optionals,
strings, float8, int4, ...) make the case `skip` with the reason; it is then
counted as not passing with that reason. The whole tree is rebuilt when the
stamp (onnx version, this script) changes.
"""

import argparse
import glob
import hashlib
import json
import os
import shutil
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

SUPPORTED = {
    np.dtype(t)
    for t in [
        "float32", "float16", "float64", "int8", "uint8", "int16", "uint16",
        "int32", "uint32", "int64", "uint64", "bool",
    ]
}


def plain(v):
    """TensorProto values (exotic dtypes in the Cast tests) as arrays."""
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    return v


def is_bf16(a):
    return a.dtype.name == "bfloat16"


def value_problem(v):
    if v is None:
        return "optional value"
    if isinstance(v, (list, tuple)):
        return "sequence value"
    if isinstance(v, dict):
        return "map value"
    a = np.asarray(v)
    if a.dtype not in SUPPORTED and not is_bf16(a):
        return f"dtype {a.dtype}"
    return None


def write_case(dest, suite, name, model, data_sets, rtol, atol):
    os.makedirs(dest, exist_ok=True)
    onnx.save(model, os.path.join(dest, "model.onnx"))
    inits = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    outputs = [o.name for o in model.graph.output]
    ops = sorted({(n.domain or "") + ("." if n.domain else "") + n.op_type for n in model.graph.node})
    skip = None
    bf16 = set()
    for k, (ins, outs) in enumerate(data_sets):
        ins = [plain(v) for v in ins]
        outs = [plain(v) for v in outs]
        d = os.path.join(dest, f"set{k}")
        os.makedirs(d, exist_ok=True)
        for kind, vals in (("in", ins), ("out", outs)):
            for i, v in enumerate(vals):
                p = value_problem(v)
                if p is not None:
                    skip = skip or f"{'input' if kind == 'in' else 'output'} {i}: {p}"
                    continue
                a = np.asarray(v, order="C")
                if is_bf16(a):
                    # .npy has no bfloat16: store the bits; case.json says so.
                    bf16.add(f"{kind}_{i}")
                    a = a.view(np.uint16)
                np.save(os.path.join(d, f"{kind}_{i}.npy"), a, allow_pickle=False)
    info = {
        "suite": suite,
        "name": name,
        "rtol": float(rtol),
        "atol": float(atol),
        "sets": len(data_sets),
        "inputs": inputs,
        "outputs": outputs,
        "ops": ops,
    }
    if bf16:
        info["bf16"] = sorted(bf16)
    if skip:
        info["skip"] = skip
    with open(os.path.join(dest, "case.json"), "w") as f:
        json.dump(info, f, indent=1)


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def packaged(suite):
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", suite)
    for case_dir in sorted(glob.glob(os.path.join(root, "*"))):
        model_path = os.path.join(case_dir, "model.onnx")
        if not os.path.exists(model_path):
            continue
        model = onnx.load(model_path)
        sets = []
        for sd in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
            n_in = len(glob.glob(os.path.join(sd, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(sd, "output_*.pb")))
            ins = [load_pb(os.path.join(sd, f"input_{i}.pb")) for i in range(n_in)]
            outs = [load_pb(os.path.join(sd, f"output_{i}.pb")) for i in range(n_out)]
            sets.append((ins, outs))
        yield os.path.basename(case_dir), model, sets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    digest = hashlib.sha256()
    for path in (__file__, os.path.join(os.path.dirname(__file__), "contrib_cases.py")):
        with open(path, "rb") as f:
            digest.update(f.read())
    import onnxruntime

    stamp = {
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "script": digest.hexdigest(),
    }
    stamp_path = os.path.join(args.out, "stamp.json")
    if os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if json.load(f) == stamp:
                print("conformance cases: up to date")
                return
    tmp = args.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    warnings.simplefilter("ignore")
    from onnx.backend.test.case.node import collect_testcases

    n = 0
    for c in collect_testcases(None):
        write_case(os.path.join(tmp, "node", c.name), "node", c.name, c.model, c.data_sets, c.rtol, c.atol)
        n += 1
    for suite in ["simple", "pytorch-converted", "pytorch-operator"]:
        for name, model, sets in packaged(suite):
            write_case(os.path.join(tmp, suite, name), suite, name, model, sets, 1e-3, 1e-7)
            n += 1
    import contrib_cases

    for name, model, sets, rtol, atol in contrib_cases.cases():
        write_case(os.path.join(tmp, "ort-contrib", name), "ort-contrib", name, model, sets, rtol, atol)
        n += 1
    with open(os.path.join(tmp, "stamp.json"), "w") as f:
        json.dump(stamp, f)
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    print(f"conformance cases: wrote {n}")


if __name__ == "__main__":
    sys.exit(main())
