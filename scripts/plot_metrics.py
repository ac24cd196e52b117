#!/usr/bin/env python3
"""Draws the loss and the throughput of a `train --metrics` file.

    scripts/plot_metrics.py metrics.jsonl -o loss.png

Two panels over the step: the loss (and the eval loss where the file has
one) and tokens (or samples) per second. Needs matplotlib (build/test-venv
has it: build/test-venv/bin/python scripts/plot_metrics.py ...).
"""
import argparse
import sys

from metrics_jsonl import step_records


def read(path):
    rows = [rec for _, rec in sorted(step_records(path, "plot_metrics.py").items())]
    if not rows:
        sys.exit(f"plot_metrics.py: error: {path}: no step records")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("metrics")
    ap.add_argument("-o", "--output", required=True, help="image file (.png, .svg, .pdf)")
    args = ap.parse_args()
    rows = read(args.metrics)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_metrics.py: error: matplotlib is missing "
                 "(use build/test-venv/bin/python, made by scripts/setup-test-venv.sh)")
    steps = [r["step"] for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    top.plot(steps, [r["loss"] for r in rows], label="loss")
    evals = [(r["step"], r["eval_loss"]) for r in rows if "eval_loss" in r]
    if evals:
        top.plot(*zip(*evals), "o-", label="eval loss")
    top.set_ylabel("loss")
    top.legend()
    top.grid(alpha=0.3)
    bottom.plot(steps, [r.get("tokens_per_s", 0) for r in rows], color="tab:green")
    bottom.set_ylabel("tokens/s")
    bottom.set_xlabel("step")
    bottom.grid(alpha=0.3)
    fig.suptitle(args.metrics)
    fig.tight_layout()
    fig.savefig(args.output)
    print(f"plot_metrics.py: {len(rows)} steps -> {args.output}")


if __name__ == "__main__":
    main()
