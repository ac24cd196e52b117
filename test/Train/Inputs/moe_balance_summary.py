#!/usr/bin/env python3
"""Expert load balance of train runs: the mean over the last steps of each
layer's max/mean load (moe_max_mean in the metrics).

    moe_balance_summary.py [--last 50] [--bar 1.3] NONE.jsonl BALANCED.jsonl...

Prints one line per run; exits 1 unless every BALANCED run is below NONE
(the run without balancing) in every layer, and with --bar, at most BAR.
"""
import argparse
import json
import statistics
import sys


def balance(path, last):
    with open(path) as f:
        rows = [json.loads(line) for line in f if '"moe_max_mean"' in line]
    rows = rows[-last:]
    layers = len(rows[0]["moe_max_mean"])
    return [statistics.mean(r["moe_max_mean"][l] for r in rows) for l in range(layers)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--last", type=int, default=50)
    ap.add_argument("--bar", type=float, help="the most a balanced run's layer may reach")
    ap.add_argument("none")
    ap.add_argument("balanced", nargs="+")
    a = ap.parse_args()
    base = balance(a.none, a.last)
    print(f"moe_balance: {a.none}: max/mean over the last {a.last} steps, per layer "
          + " ".join(f"{x:.3f}" for x in base))
    ok = True
    for path in a.balanced:
        b = balance(path, a.last)
        below = all(x < y for x, y in zip(b, base))
        under = a.bar is None or max(b) <= a.bar
        ok &= below and under
        print(f"moe_balance: {path}: " + " ".join(f"{x:.3f}" for x in b)
              + (" (below in every layer)" if below else " FAIL: not below in every layer")
              + ("" if a.bar is None else
                 f" (at most {a.bar:g})" if under else f" FAIL: above {a.bar:g}"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
