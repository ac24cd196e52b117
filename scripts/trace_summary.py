#!/usr/bin/env python3
"""Adds up a kernel trace (`run --trace`, `train --trace`) per op.

    python3 scripts/trace_summary.py TRACE.json [--by name|loc] [--top N]
                                      [--skip-runs K] [--pid P]

Prints, per op name (hpc.matmul, ...) or per op (--by loc: each op of the
program, its ONNX node), the time per program run, the share of the kernels'
time and the calls per run, largest first. --skip-runs K leaves out the first
K runs (warm-up steps); the per-run times are the mean over the runs kept.
Standard library only.
"""

import argparse
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--by", choices=["name", "loc"], default="name")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--skip-runs", type=int, default=0)
    ap.add_argument("--pid", type=int, default=None, help="one rank's events only")
    a = ap.parse_args()
    try:
        with open(a.trace) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace_summary.py: error: {a.trace}: {e}")
    # The kernels: the main thread's events (tid 1 is the communication
    # thread's data movement, scripts/overlap_report.py's business).
    events = [e for e in events if e.get("ph") == "X" and e.get("tid", 0) == 0]
    runs = sorted({e["args"]["run"] for e in events})
    kept = set(runs[a.skip_runs:])
    if not kept:
        sys.exit(f"trace_summary.py: error: {a.trace}: no runs left after --skip-runs")
    total = collections.Counter()
    calls = collections.Counter()
    for e in events:
        if e["args"]["run"] not in kept or (a.pid is not None and e["pid"] != a.pid):
            continue
        key = e["name"] if a.by == "name" else f'{e["args"]["op"]:5d} {e["name"]} {e["args"]["loc"]}'
        total[key] += e["dur"]
        calls[key] += 1
    n = len(kept)
    all_us = sum(total.values())
    print(f"{a.trace}: {n} run(s) kept, kernels {all_us / n / 1000:.3f} ms per run")
    print(f"{'ms/run':>10} {'share':>6} {'calls/run':>9}  {'op' if a.by == 'name' else 'index op node'}")
    for key, us in total.most_common(a.top):
        print(f"{us / n / 1000:10.3f} {100 * us / all_us:5.1f}% {calls[key] / n:9.1f}  {key}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stderr.close()
        sys.exit(0)
