#!/usr/bin/env python3
"""hpc.moe_route, moe_dispatch and moe_gather, compiled and run, against a
numpy reference of the routing.

    moe_routing.py --hpc-opt HPC_OPT --work DIR [--tokens T] [--experts E]
                   [--top-k K] [--capacity-factor F] [--seed S]

Each token's K distinct experts are drawn with skewed probabilities (a few
experts popular, as an untrained router makes them), so a capacity factor of
1 drops choices. The buffers hold C = ceil(F K T / E) rows (T for F = 0).
The reference fills each expert's rows in priority order: every token's first
choice in token order, then every second choice, and so on; a choice past C
rows is dropped. The slots, the load per expert, the dispatched buffers and
the gathered rows must equal the reference exactly. Prints the dropped
choices against the reference's count; exit 1 on any difference.
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np


def reference(choices, experts, capacity):
    tokens, k = choices.shape
    slots = np.full((tokens, k), -1, np.int64)
    load = np.zeros(experts, np.int64)
    for j in range(k):
        for t in range(tokens):
            e = choices[t, j]
            if load[e] < capacity:
                slots[t, j] = e * capacity + load[e]
            load[e] += 1
    return slots, load


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hpc-opt", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=3)
    ap.add_argument("--capacity-factor", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    T, E, K, H = a.tokens, a.experts, a.top_k, a.hidden
    C = T if a.capacity_factor == 0 else min(T, max(1, math.ceil(a.capacity_factor * K * T / E)))
    rng = np.random.default_rng(a.seed)
    popularity = rng.dirichlet(np.full(E, 0.5))
    choices = np.stack([rng.choice(E, K, replace=False, p=popularity) for _ in range(T)])
    x = rng.standard_normal((T, H)).astype(np.float32)
    buf = rng.standard_normal((E, C, H)).astype(np.float32)

    os.makedirs(a.work, exist_ok=True)
    np.save(os.path.join(a.work, "choices.npy"), choices.astype(np.int64))
    np.save(os.path.join(a.work, "x.npy"), x)
    np.save(os.path.join(a.work, "buffer.npy"), buf)
    attrs = f"{{num_experts = {E} : i64, capacity = {C} : i64}}"
    program = f"""
func.func @main(%e: tensor<{T}x{K}xi64> {{hpc.name = "choices"}}, %x: tensor<{T}x{H}xf32> {{hpc.name = "x"}},
                %b: tensor<{E}x{C}x{H}xf32> {{hpc.name = "buffer"}})
    -> (tensor<{T}x{K}xi64> {{hpc.name = "slots"}}, tensor<{E}xi64> {{hpc.name = "load"}},
        tensor<{E}x{C}x{H}xf32> {{hpc.name = "dispatched"}}, tensor<{T}x{K}x{H}xf32> {{hpc.name = "gathered"}}) {{
  %s, %l = hpc.moe_route %e {attrs} : (tensor<{T}x{K}xi64>) -> (tensor<{T}x{K}xi64>, tensor<{E}xi64>)
  %d = hpc.moe_dispatch %x, %s {attrs} : (tensor<{T}x{H}xf32>, tensor<{T}x{K}xi64>) -> tensor<{E}x{C}x{H}xf32>
  %g = hpc.moe_gather %b, %s : (tensor<{E}x{C}x{H}xf32>, tensor<{T}x{K}xi64>) -> tensor<{T}x{K}x{H}xf32>
  return %s, %l, %d, %g : tensor<{T}x{K}xi64>, tensor<{E}xi64>, tensor<{E}x{C}x{H}xf32>, tensor<{T}x{K}x{H}xf32>
}}
"""
    src, exe = os.path.join(a.work, "route.mlir"), os.path.join(a.work, "route.bin")
    with open(src, "w") as f:
        f.write(program)
    out_dir = os.path.join(a.work, "out")
    subprocess.run([a.hpc_opt, src, "--emit=exe", "-o", exe], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([exe, "run", "--output-dir", out_dir]
                   + [f"--input={n}={os.path.join(a.work, n)}.npy" for n in ("choices", "x", "buffer")],
                   check=True, stdout=subprocess.DEVNULL)
    got = {n: np.load(os.path.join(out_dir, n + ".npy"))
           for n in ("slots", "load", "dispatched", "gathered")}

    slots, load = reference(choices, E, C)
    dispatched = np.zeros((E * C, H), np.float32)
    for t in range(T):
        for j in range(K):
            if slots[t, j] >= 0:
                dispatched[slots[t, j]] = x[t]
    flat = buf.reshape(E * C, H)
    gathered = np.where((slots >= 0)[:, :, None], flat[np.maximum(slots, 0)], 0).astype(np.float32)
    want = {"slots": slots, "load": load, "dispatched": dispatched.reshape(E, C, H),
            "gathered": gathered}
    failed = [n for n in want if got[n].shape != want[n].shape or not np.array_equal(got[n], want[n])]
    dropped = int((got["slots"] < 0).sum())
    counted = int(np.maximum(got["load"] - C, 0).sum())
    ref_dropped = int((slots < 0).sum())
    print(f"moe_routing: {T} tokens, top-{K} of {E} experts, capacity {C} "
          f"(factor {a.capacity_factor:g}): dropped {dropped} of {T * K} choices, "
          f"counted from the load {counted}, numpy reference {ref_dropped}; "
          f"load max/mean {got['load'].max() / got['load'].mean():.2f}")
    if failed or dropped != ref_dropped or counted != ref_dropped:
        print("moe_routing: FAIL: " + (", ".join(failed) or "dropped counts") +
              " differ from the numpy reference")
        return 1
    print("moe_routing: ok: slots, load, dispatched buffers and gathered rows equal the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
