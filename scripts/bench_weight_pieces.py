"""Stored weight pieces against pieces copied on every run (docs/benchmarks.md,
"Weight pieces"): a Megatron MLP, x[T, H] @ W1[H, 4H] -> relu -> @ W2[4H, H],
compiled for tp=2 with and without dist-weight-pieces (--no-weight-pieces).
W1 is column parallel: without the pass every run copies each rank's
H x 2H piece out of W1 (all_slice along dim 1); with it the piece is stored
piece-major and read in place. W2 is row parallel, a view either way. Each
round runs both binaries under mpirun -n 2 (--iters runs, one kernel thread
per rank); printed: per-round ms/run, the medians, the median over rounds
of stored/copied, and each binary's arena and kernel count (`info`).

usage: /usr/bin/python3 scripts/bench_weight_pieces.py [--rounds 5]
       [--iters 20] [--tokens 8] [--hidden 1024]
Needs build/bin/hpc-opt, numpy, onnx and mpirun.
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import mpibench
from mpibench import HPC_OPT, ms_per_run, run

MPIRUN = mpibench.MPIRUN + ["-n", "2"]


def mlp(path, tokens, hidden):
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((hidden, 4 * hidden)) / np.sqrt(hidden)).astype(np.float32)
    w2 = (rng.standard_normal((4 * hidden, hidden)) / np.sqrt(4 * hidden)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("MatMul", ["a", "w2"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, hidden])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    model = os.path.join(work, "mlp.onnx")
    mlp(model, a.tokens, a.hidden)
    bins = {"stored": [], "copied": ["--no-weight-pieces"]}
    for kind, flags in bins.items():
        exe = os.path.join(work, kind + ".bin")
        run([HPC_OPT, model, "--mesh=tp=2", "-o", exe] + flags)
        bins[kind] = exe
    x = os.path.join(work, "x.npy")
    np.save(x, np.random.default_rng(1).standard_normal((a.tokens, a.hidden)).astype(np.float32))
    print(f"MLP {a.tokens}x{a.hidden} @ {a.hidden}x{4 * a.hidden} @ {4 * a.hidden}x{a.hidden} "
          f"f32, tp=2 on 2 ranks; {a.iters} runs per binary per round; load average "
          f"{open('/proc/loadavg').read().split()[0]}")
    for kind, exe in bins.items():
        info = run([exe, "info"])
        arena = re.search(r"arena: (\d+) bytes", info).group(1)
        ops = re.search(r"ops: (\d+)", info).group(1)
        print(f"{kind}: arena {int(arena) >> 10} KiB, {ops} kernels")
    times = {k: [] for k in bins}
    outputs = {}
    print("round " + " ".join(f"{k:>9}" for k in bins))
    for r in range(a.rounds):
        for k, exe in bins.items():
            out_dir = os.path.join(work, "out-" + k)
            out = run(MPIRUN + [exe, "run", "--input", "x=" + x, "--output-dir", out_dir,
                                "--iters", str(a.iters), "--threads", "1"])
            times[k].append(ms_per_run(out))
            outputs[k] = np.load(os.path.join(out_dir, "y.npy"))
        print(f"{r + 1:>5} " + " ".join(f"{times[k][-1]:>9.3f}" for k in bins))
    if not np.array_equal(outputs["stored"], outputs["copied"]):
        sys.exit("FAILED: the two binaries give different outputs")
    med = {k: statistics.median(v) for k, v in times.items()}
    print("median" + " ".join(f"{med[k]:>10.3f}" for k in bins))
    ratio = statistics.median(s / c for s, c in zip(times["stored"], times["copied"]))
    print(f"stored/copied (median of rounds): {ratio:.2f}; outputs identical")


if __name__ == "__main__":
    main()
