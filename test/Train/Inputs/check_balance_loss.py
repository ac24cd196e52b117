#!/usr/bin/env python3
"""The metrics' moe_balance_loss against what it must be.

    check_balance_loss.py RUN_A.jsonl ALPHA_A RUN_B.jsonl ALPHA_B --experts E --layers L

Two runs of one model, data and initial state, with --moe-aux-loss ALPHA_A
and ALPHA_B. At step 1 the routing and the router's probabilities are the
same in both (nothing was updated yet), so the balancing loss scales with
alpha (B/A = ALPHA_B/ALPHA_A) and the model's own loss, loss minus the
balancing loss, is the same. Every step of run A reports a balancing loss
in (0, ALPHA_A * E * L] (each layer's sum of f_i P_i is at most 1).
Prints OK or what differs; exit 1 on a difference.
"""
import argparse
import json
import sys


def steps(path):
    with open(path) as f:
        return [r for r in (json.loads(line) for line in f if line.strip())
                if "loss" in r and "step" in r]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("alpha_a", type=float)
    ap.add_argument("b")
    ap.add_argument("alpha_b", type=float)
    ap.add_argument("--experts", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    a = ap.parse_args()
    run_a, run_b = steps(a.a), steps(a.b)
    problems = []
    missing = [r["step"] for r in run_a + run_b if "moe_balance_loss" not in r]
    if missing:
        print(f"check_balance_loss: FAIL: no moe_balance_loss at steps {missing[:5]}")
        return 1
    most = a.alpha_a * a.experts * a.layers
    for r in run_a:
        if not 0 < r["moe_balance_loss"] <= most:
            problems.append(f"step {r['step']}: {r['moe_balance_loss']} outside (0, {most:g}]")
    first_a, first_b = run_a[0], run_b[0]
    ratio = first_b["moe_balance_loss"] / first_a["moe_balance_loss"]
    want = a.alpha_b / a.alpha_a
    if abs(ratio - want) > 1e-5 * want:
        problems.append(f"step 1: balancing losses in ratio {ratio:.7g}, not {want:g}")
    own_a = first_a["loss"] - first_a["moe_balance_loss"]
    own_b = first_b["loss"] - first_b["moe_balance_loss"]
    if abs(own_a - own_b) > 1e-6 * abs(own_a):
        problems.append(f"step 1: the model's own losses differ: {own_a:.9g} vs {own_b:.9g}")
    if problems:
        print("check_balance_loss: FAIL: " + "; ".join(problems))
        return 1
    print(f"check_balance_loss: {len(run_a)} steps, balancing loss "
          f"{min(r['moe_balance_loss'] for r in run_a):.5g}..{max(r['moe_balance_loss'] for r in run_a):.5g}"
          f" (at most {most:g}); step 1 scales with alpha ({ratio:.6f}), own loss {own_a:.6f} "
          f"in both: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
