"""Overlap of asynchronous collectives with compute (docs/benchmarks.md,
"Asynchronous collectives"): a two-rank program with one all_reduce and an
independent chain of matmuls, compiled with synchronous collectives and
with --dist-async-collectives (the all_reduce starts first and is waited
for at the return, so the matmuls run while the data moves), plus the
all_reduce alone and the matmuls alone. Each round runs every binary once
(--iters runs, one kernel thread per rank); printed: per-round mean ms/run,
medians, the median over rounds of async/sync, and the ideal ratio
max(comm, compute) / (comm + compute).

usage: /usr/bin/python3 scripts/bench_overlap.py [--rounds 5] [--iters 10]
       [--elements 16777216] [--n 768]
Needs build/bin/hpc-opt, numpy and mpirun.
"""
import argparse
import os
import statistics
import tempfile

import numpy as np

import mpibench
from mpibench import HPC_OPT, ms_per_run, run

MPIRUN = mpibench.MPIRUN + ["-n", "2"]


def program(elements, n, comm, compute):
    x = f"tensor<{elements}xf32>"
    a = f"tensor<{n}x{n}xf32>"
    body, results, types = [], [], []
    if comm:
        body.append(f'%s = dist.all_reduce %x over ["tp"] sum : {x} -> {x}')
        results.append("%s")
        types.append(x)
    if compute:
        body += [f"%p = hpc.matmul %a, %a : ({a}, {a}) -> {a}",
                 f"%q = hpc.matmul %p, %a : ({a}, {a}) -> {a}",
                 f"%r = hpc.matmul %q, %a : ({a}, {a}) -> {a}"]
        results.append("%r")
        types.append(a)
    names = {"%s": "s", "%r": "r"}
    outs = ", ".join(f'{t} {{hpc.name = "{names[r]}"}}' for r, t in zip(results, types))
    lines = "\n    ".join(body)
    return (f"module attributes {{dist.mesh = #dist.mesh<tp = 2 : intra_node>}} {{\n"
            f'  func.func @main(%x: {x} {{hpc.name = "x"}}, %a: {a} {{hpc.name = "a"}}) -> ({outs}) {{\n'
            f"    {lines}\n    return {', '.join(results)} : {', '.join(types)}\n  }}\n}}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--elements", type=int, default=1 << 24)
    ap.add_argument("--n", type=int, default=768)
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    kinds = {"comm": (True, False), "compute": (False, True), "sync": (True, True)}
    bins = {}
    for kind, (comm, compute) in kinds.items():
        src = os.path.join(work, kind + ".mlir")
        with open(src, "w") as f:
            f.write(program(a.elements, a.n, comm, compute))
        bins[kind] = os.path.join(work, kind + ".bin")
        run([HPC_OPT, src, "--emit=exe", "-o", bins[kind]])
    asrc = os.path.join(work, "async.mlir")
    run([HPC_OPT, os.path.join(work, "sync.mlir"), "--dist-async-collectives", "-o", asrc])
    bins["async"] = os.path.join(work, "async.bin")
    run([HPC_OPT, asrc, "--emit=exe", "-o", bins["async"]])
    rng = np.random.default_rng(0)
    np.save(os.path.join(work, "x.npy"), rng.standard_normal(a.elements).astype(np.float32))
    np.save(os.path.join(work, "a.npy"), (rng.standard_normal((a.n, a.n)) / a.n).astype(np.float32))
    inputs = ["--input", "x=" + os.path.join(work, "x.npy"),
              "--input", "a=" + os.path.join(work, "a.npy")]
    times = {k: [] for k in bins}
    print(f"all_reduce of {a.elements * 4 >> 20} MiB f32 on 2 ranks; 3 matmuls {a.n}^3; "
          f"{a.iters} runs per binary per round; load average "
          f"{open('/proc/loadavg').read().split()[0]}")
    print("round " + " ".join(f"{k:>9}" for k in bins))
    for r in range(a.rounds):
        for k, b in bins.items():
            out = run(MPIRUN + [b, "run"] + inputs + ["--output-dir", os.path.join(work, "out-" + k),
                                                      "--iters", str(a.iters), "--threads", "1"])
            times[k].append(ms_per_run(out))
        print(f"{r + 1:>5} " + " ".join(f"{times[k][-1]:>9.1f}" for k in bins))
    med = {k: statistics.median(v) for k, v in times.items()}
    print("median" + " ".join(f"{med[k]:>10.1f}" for k in bins))
    ratio = statistics.median(x / y for x, y in zip(times["async"], times["sync"]))
    ideal = max(med["comm"], med["compute"]) / (med["comm"] + med["compute"])
    print(f"async/sync (median of rounds): {ratio:.2f}; ideal max(comm, compute)/(comm + compute): {ideal:.2f}")


if __name__ == "__main__":
    main()
