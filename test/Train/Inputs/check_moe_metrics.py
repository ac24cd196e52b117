#!/usr/bin/env python3
"""Checks the mixture-of-experts fields of train --metrics files.

    check_moe_metrics.py METRICS --choices N --capacity C [--same-as OTHER]

Every step must report moe_load (per layer, the choices per expert), each
layer's loads summing to N (tokens x k); moe_max_mean must be each layer's
max/mean and moe_dropped the fraction of choices past C rows, as computed
here from the loads. --same-as: another run's loads must be equal, step by
step (a plan that routes over the whole batch). Exit 1 on any difference.
"""
import argparse
import json
import sys


def steps(path):
    with open(path) as f:
        return {r["step"]: r for r in (json.loads(line) for line in f if line.strip())
                if "loss" in r and "step" in r}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("metrics")
    ap.add_argument("--choices", type=int, required=True)
    ap.add_argument("--capacity", type=int, required=True)
    ap.add_argument("--same-as")
    a = ap.parse_args()
    runs = steps(a.metrics)
    other = steps(a.same_as) if a.same_as else None
    problems, dropped_all = [], []
    for s, r in sorted(runs.items()):
        loads = r.get("moe_load")
        if not loads:
            problems.append(f"step {s}: no moe_load")
            continue
        dropped = sum(max(n - a.capacity, 0) for layer in loads for n in layer)
        total = sum(sum(layer) for layer in loads)
        balance = [max(layer) / (sum(layer) / len(layer)) for layer in loads]
        if any(sum(layer) != a.choices for layer in loads):
            problems.append(f"step {s}: a layer's loads do not sum to {a.choices}: {loads}")
        if abs(r["moe_dropped"] - dropped / total) > 1e-6:
            problems.append(f"step {s}: moe_dropped {r['moe_dropped']}, "
                            f"loads say {dropped / total}")
        if any(abs(x - y) > 1e-4 for x, y in zip(r["moe_max_mean"], balance)):
            problems.append(f"step {s}: moe_max_mean {r['moe_max_mean']}, loads say {balance}")
        if other is not None and other.get(s, {}).get("moe_load") != loads:
            problems.append(f"step {s}: loads differ from {a.same_as}")
        dropped_all.append(dropped / total)
    for p in problems:
        print("check_moe_metrics: FAIL: " + p)
    print(f"check_moe_metrics: {len(runs)} steps, {len(loads)} layers, dropped "
          f"{min(dropped_all):.4f}..{max(dropped_all):.4f} of the choices"
          + (f", loads equal {a.same_as}'s" if other is not None else "")
          + (": OK" if not problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
