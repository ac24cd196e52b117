#!/usr/bin/env python3
"""Compares the per-step losses of two `train --metrics` files.

    compare_metrics.py A.jsonl B.jsonl [--rtol R] [--steps FIRST:LAST] [--bitwise]

Every step of A in the range must be in B with a loss within rtol relative
(--bitwise: the same printed value, i.e. the same float). Prints the worst
step; exit 1 on any difference beyond the tolerance or a missing step.
"""
import argparse
import sys

from metrics_jsonl import step_records


def losses(path):
    return {step: rec["loss"] for step, rec in step_records(path, "compare_metrics.py").items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=0.0)
    ap.add_argument("--steps", default="", help="FIRST:LAST (default: every step of A)")
    ap.add_argument("--bitwise", action="store_true")
    args = ap.parse_args()
    a, b = losses(args.a), losses(args.b)
    steps = sorted(a)
    if args.steps:
        first, last = (int(x) for x in args.steps.split(":"))
        steps = list(range(first, last + 1))
    if not steps:
        sys.exit(f"compare_metrics.py: {args.a}: no steps")
    worst, worst_step, bad = 0.0, None, []
    for s in steps:
        if s not in a or s not in b:
            bad.append(f"step {s}: missing in {args.a if s not in a else args.b}")
            continue
        if args.bitwise:
            err = 0.0 if a[s] == b[s] else float("inf")
        else:
            err = abs(a[s] - b[s]) / max(abs(a[s]), 1e-30)
        if err > worst:
            worst, worst_step = err, s
        if err > args.rtol:
            bad.append(f"step {s}: {a[s]!r} vs {b[s]!r} (rel err {err:.3g})")
    for line in bad:
        print("FAIL " + line)
    mode = "bitwise" if args.bitwise else f"rtol {args.rtol:g}"
    print(f"compare_metrics: {len(steps)} steps ({mode}), worst rel err {worst:.3g}"
          + (f" (step {worst_step})" if worst_step else "") + (": OK" if not bad else ": FAILED"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
