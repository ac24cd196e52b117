"""Compiles a model for one rank and for a mesh, runs both (the mesh under
mpirun), and checks that the outputs agree and that every rank sent exactly
the bytes the compiler planned.

usage: multirank.py --hpc-opt HPC_OPT --mpirun "MPIRUN ..." --model M.onnx
                    --input-shape N=D,.. --input NAME=FILE.npy --mesh SPEC
                    --ranks N --work DIR [--partitioned PER_RANK.mlir]
                    [--compile-flag=FLAG ...] [--search-cluster CLUSTER.json]

With --partitioned, the mesh binary is compiled from that per-rank program
(partitioned elsewhere, e.g. by upstream shard-partition) and the planned
bytes are its `dist.bytes_per_rank` attribute.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

import numpy as np


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hpc-opt", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--input-shape", required=True)
    ap.add_argument("--input", required=True, action="append",
                    help="NAME=FILE.npy (repeatable)")
    ap.add_argument("--mesh", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-6)
    ap.add_argument("--partitioned")
    ap.add_argument("--search-cluster",
                    help="compile the mesh binary with --cluster=FILE --auto-parallel "
                         "(the plan the search picks) instead of --mesh")
    ap.add_argument("--compile-flag", action="append", default=[],
                    help="extra hpc-opt flag for the mesh binary (repeatable)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    single = os.path.join(a.work, "single.bin")
    multi = os.path.join(a.work, "multi.bin")
    run([a.hpc_opt, a.model, "--input-shape", a.input_shape, "-o", single])
    if a.partitioned:
        run([a.hpc_opt, a.partitioned, "--emit=exe", "-o", multi])
        with open(a.partitioned) as f:
            planned = int(re.search(r"dist.bytes_per_rank = (\d+)", f.read()).group(1))
    else:
        how = (["--cluster=" + a.search_cluster, "--auto-parallel"] if a.search_cluster
               else ["--mesh=" + a.mesh])
        log = run([a.hpc_opt, a.model, "--input-shape", a.input_shape, "-o", multi] + how +
                  a.compile_flag)
        planned = int(re.search(r"each rank sends (\d+) bytes", log).group(1))
    inputs = [arg for i in a.input for arg in ("--input", i)]
    run([single, "run"] + inputs + ["--output-dir", os.path.join(a.work, "out1")])
    out = run(shlex.split(a.mpirun) + ["-n", str(a.ranks), multi, "run"] + inputs + [
                                       "--output-dir", os.path.join(a.work, "outN"),
                                       "--verbose"])
    sent = [int(b) for b in re.findall(r"comm: rank \d+ sent (\d+) bytes", out)]
    if len(sent) != a.ranks or any(b != planned for b in sent):
        sys.exit(f"bytes sent per rank {sent} != planned {planned}")
    worst = 0.0
    for name in sorted(os.listdir(os.path.join(a.work, "out1"))):
        x = np.load(os.path.join(a.work, "out1", name))
        y = np.load(os.path.join(a.work, "outN", name))
        if x.shape != y.shape or not np.allclose(y, x, rtol=a.rtol, atol=a.atol):
            sys.exit(f"{name}: mesh {a.mesh} differs from one rank "
                     f"(max abs diff {np.abs(y - x).max()})")
        worst = max(worst, float(np.abs(y - x).max()))
    print(f"ok: mesh {a.mesh} on {a.ranks} ranks agrees with one rank "
          f"(max abs diff below rtol {a.rtol} atol {a.atol}); "
          f"every rank sent the planned {planned} bytes")


if __name__ == "__main__":
    main()
