#!/usr/bin/env python3
"""hpc.moe_route, moe_dispatch and moe_gather, compiled and run, against a
numpy reference of the routing.

    moe_routing.py --hpc-opt HPC_OPT --work DIR [--tokens T] [--experts E]
                   [--top-k K] [--capacity-factor F] [--seed S]
                   [--groups N --ep G]

Each token's K distinct experts are drawn with skewed probabilities (a few
experts popular, as an untrained router makes them), so a capacity factor of
1 drops choices. The buffers hold C = ceil(F K T / E) rows (T for F = 0).
The reference fills each expert's rows in priority order: every token's first
choice in token order, then every second choice, and so on; a choice past C
rows is dropped. The slots, the load per expert, the dispatched buffers and
the gathered rows must equal the reference exactly. Prints the dropped
choices against the reference's count; exit 1 on any difference.

With --groups N (expert parallelism's data-parallel ranks, --ep G of them a
slice), hpc.moe_exchange_slots too: each group's slots into buffers of its
own (Cp = min(C, T/N) rows an expert), a choice's row being its place among
its group's kept choices of that expert in whole-batch row order, and each
slice's compaction of what its G groups send an expert, in the same order;
then the groups' dispatch into [N, E, Cp, H] and the gather back, batched.
All equal a numpy reference written from that definition.
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


def exchange_reference(slots, experts, capacity, groups, ep, group_rows):
    """Group-local slots and each slice's compaction rows (see the docstring)."""
    tokens, k = slots.shape
    per_group = tokens // groups
    compact = min(capacity, ep * group_rows)
    local = np.full((tokens, k), -1, np.int64)
    rows = np.full((groups // ep, experts, compact), -1, np.int64)
    owner = {int(s): (t, j) for (t, j), s in np.ndenumerate(slots) if s >= 0}
    for e in range(experts):
        taken = np.zeros(groups, np.int64)
        filled = np.zeros(groups // ep, np.int64)
        for row in range(capacity):
            if e * capacity + row not in owner:
                continue
            t, j = owner[e * capacity + row]
            g = t // per_group
            local[t, j] = e * group_rows + taken[g]
            d = g // ep
            rows[d, e, filled[d]] = (g % ep) * group_rows + taken[g]
            taken[g] += 1
            filled[d] += 1
    return local, rows


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
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--ep", type=int, default=1)
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
    N, G = a.groups, a.ep
    Tl = T // N
    Cp = min(C, Tl)
    Cd = min(C, G * Cp)
    results = [("slots", f"{T}x{K}xi64"), ("load", f"{E}xi64"),
               ("dispatched", f"{E}x{C}x{H}xf32"), ("gathered", f"{T}x{K}x{H}xf32")]
    exchange = ""
    if N > 1:
        results += [("local", f"{T}x{K}xi64"), ("rows", f"{N // G}x{E}x{Cd}xi64"),
                    ("sent", f"{N}x{E}x{Cp}x{H}xf32"), ("back", f"{N}x{Tl}x{K}x{H}xf32")]
        exchange = f"""
  %ls, %rw = hpc.moe_exchange_slots %s {{num_experts = {E} : i64, capacity = {C} : i64, groups = {N} : i64, ep = {G} : i64, group_capacity = {Cp} : i64}} : (tensor<{T}x{K}xi64>) -> (tensor<{T}x{K}xi64>, tensor<{N // G}x{E}x{Cd}xi64>)
  %x3 = hpc.reshape %x {{shape = array<i64: {N}, {Tl}, {H}>}} : (tensor<{T}x{H}xf32>) -> tensor<{N}x{Tl}x{H}xf32>
  %l3 = hpc.reshape %ls {{shape = array<i64: {N}, {Tl}, {K}>}} : (tensor<{T}x{K}xi64>) -> tensor<{N}x{Tl}x{K}xi64>
  %p = hpc.moe_dispatch %x3, %l3 {{num_experts = {E} : i64, capacity = {Cp} : i64}} : (tensor<{N}x{Tl}x{H}xf32>, tensor<{N}x{Tl}x{K}xi64>) -> tensor<{N}x{E}x{Cp}x{H}xf32>
  %bk = hpc.moe_gather %p, %l3 : (tensor<{N}x{E}x{Cp}x{H}xf32>, tensor<{N}x{Tl}x{K}xi64>) -> tensor<{N}x{Tl}x{K}x{H}xf32>"""
    names = ["%s", "%l", "%d", "%g"] + (["%ls", "%rw", "%p", "%bk"] if N > 1 else [])
    types = ", ".join(t for _, t in results)
    program = f"""
func.func @main(%e: tensor<{T}x{K}xi64> {{hpc.name = "choices"}}, %x: tensor<{T}x{H}xf32> {{hpc.name = "x"}},
                %b: tensor<{E}x{C}x{H}xf32> {{hpc.name = "buffer"}})
    -> ({", ".join(f'tensor<{t}> {{hpc.name = "{n}"}}' for n, t in results)}) {{
  %s, %l = hpc.moe_route %e {attrs} : (tensor<{T}x{K}xi64>) -> (tensor<{T}x{K}xi64>, tensor<{E}xi64>)
  %d = hpc.moe_dispatch %x, %s {attrs} : (tensor<{T}x{H}xf32>, tensor<{T}x{K}xi64>) -> tensor<{E}x{C}x{H}xf32>
  %g = hpc.moe_gather %b, %s : (tensor<{E}x{C}x{H}xf32>, tensor<{T}x{K}xi64>) -> tensor<{T}x{K}x{H}xf32>{exchange}
  return {", ".join(names)} : {", ".join(f"tensor<{t}>" for _, t in results)}
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
    got = {n: np.load(os.path.join(out_dir, n + ".npy")) for n, _ in results}

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
    if N > 1:
        local, rows = exchange_reference(slots, E, C, N, G, Cp)
        sent = np.zeros((N, E * Cp, H), np.float32)
        for t in range(T):
            for j in range(K):
                if local[t, j] >= 0:
                    sent[t // Tl, local[t, j]] = x[t]
        back = np.where((local >= 0)[:, :, None], x[:, None, :], 0).astype(np.float32)
        want.update({"local": local, "rows": rows, "sent": sent.reshape(N, E, Cp, H),
                     "back": back.reshape(N, Tl, K, H)})
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
    if N > 1:
        print(f"moe_routing: {N} groups, ep={G}: {Cp} rows a group's expert, {Cd} compacted "
              f"rows a slice's expert; local slots, compaction rows and the groups' buffers "
              f"equal the reference")
    print("moe_routing: ok: slots, load, dispatched buffers and gathered rows equal the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
