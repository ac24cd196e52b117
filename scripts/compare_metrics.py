#!/usr/bin/env python3
"""Compares the per-step losses of two `train --metrics` files.

    compare_metrics.py A.jsonl B.jsonl [--rtol R] [--steps FIRST:LAST] [--bitwise]
                       [--differ] [--final-below F] [--group K]

Every step of A in the range must be in B with a loss within rtol relative
(--bitwise: the same printed value, i.e. the same float). --differ also
requires some step's losses to differ (a run in another precision that gives
exactly the reference's losses did not run in it); --final-below F, that B's
loss at the range's last step is below F times its loss at the first (B
learns). --group K: each step s of B ran A's steps (s-1)K+1 .. sK as the
micro-batches of one step (--micro-batches=K on K times A's batch); B's loss
is compared with the mean of theirs, which is the same only where the
updates leave the weights as they were (a vanishing learning rate): a check
of what the micro-batches' forward passes compute and carry (train mode's
running statistics). Prints the worst step; exit 1 on any failure or a missing step.
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
    ap.add_argument("--differ", action="store_true",
                    help="fail when every step's losses are equal")
    ap.add_argument("--final-below", type=float, default=0.0, metavar="F",
                    help="B's last loss must be below F times its first")
    ap.add_argument("--group", type=int, default=1, metavar="K",
                    help="B's step s against the mean loss of A's steps (s-1)K+1 .. sK")
    args = ap.parse_args()
    a, b = losses(args.a), losses(args.b)
    if args.group < 1:
        sys.exit("compare_metrics.py: --group must be at least 1")
    if args.group > 1:
        k = args.group
        a = {s: sum(a[(s - 1) * k + j] for j in range(1, k + 1)) / k
             for s in range(1, max(a, default=0) // k + 1)
             if all((s - 1) * k + j in a for j in range(1, k + 1))}
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
    present = [s for s in steps if s in a and s in b]
    if args.differ and present and all(a[s] == b[s] for s in present):
        bad.append(f"every step's loss is equal in {args.a} and {args.b} (--differ)")
    if args.final_below and present:
        first, last = b[present[0]], b[present[-1]]
        print(f"{args.b}: loss {first:.6g} at step {present[0]}, {last:.6g} at step "
              f"{present[-1]} (x{last / first:.3g}, must be below x{args.final_below:g})")
        if not last < args.final_below * first:
            bad.append(f"{args.b}: loss {last!r} at step {present[-1]} is not below "
                       f"{args.final_below:g} x {first!r}")
    for line in bad:
        print("FAIL " + line)
    mode = "bitwise" if args.bitwise else f"rtol {args.rtol:g}"
    print(f"compare_metrics: {len(steps)} steps ({mode}), worst rel err {worst:.3g}"
          + (f" (step {worst_step})" if worst_step else "") + (": OK" if not bad else ": FAILED"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
