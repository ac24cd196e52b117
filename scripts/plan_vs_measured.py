#!/usr/bin/env python3
"""Prints a plan's predicted step beside the step a run of it measured.

    plan_vs_measured.py PLAN.json METRICS.jsonl [PLAN2.json METRICS2.jsonl ...]
                        [--max-error PCT] [--profile last|STEP]

PLAN.json is `hpc-opt ... --cluster=C --report=PLAN.json` (its
plan.prediction: step_time_s, compute_s, exposed_comm_s, bubble_s);
METRICS.jsonl the `train --metrics` file of the binary compiled with that
plan, whose summary line holds the same keys, measured (the steady steps'
medians; the parts mean over the ranks). One table row per part, with the
error of the prediction relative to the measurement. --max-error: exit 1
when a step time's error is above PCT percent. --profile: the measurement of
a profile line (`train --profile-every K`: the last K steps up to STEP, or
the last such line) instead of the summary. Bad files, and a run of another
model (its parameter count differs from the report's model.parameters):
one line, exit 1. A plan for another kind of device than the run's host
(cluster.device.kind against the metrics' host) is a warning.
"""
import argparse
import json
import sys

from metrics_jsonl import profile_record, summary_record

PROG = "plan_vs_measured.py"
PARTS = ("step_time_s", "compute_s", "exposed_comm_s", "bubble_s")


def check_same_model(plan_path, report, metrics_path, meas):
    """One line and exit 1 for a run of another model (the parameter counts
    differ); a warning when the plan's cluster is another machine kind."""
    want = report.get("model", {}).get("parameters")
    got = meas.get("parameters")
    if isinstance(want, int) and isinstance(got, int) and want != got:
        sys.exit(f"{PROG}: error: {metrics_path}: a run of another model ({got} parameters; "
                 f"{plan_path}'s model has {want})")
    kind = (report.get("cluster") or {}).get("device", {}).get("kind")
    host = meas.get("host")
    if kind and host and kind != host:
        print(f"{PROG}: warning: {plan_path} plans for '{kind}' devices, {metrics_path} ran on "
              f"'{host}': the prediction is for another machine", file=sys.stderr)


def prediction(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        sys.exit(f"{PROG}: error: {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"{PROG}: error: {path}: not JSON: {e}")
    pred = report.get("plan", {}).get("prediction") if isinstance(report, dict) else None
    if not isinstance(pred, dict) or any(k not in pred for k in PARTS):
        sys.exit(f"{PROG}: error: {path}: no plan.prediction with {', '.join(PARTS)} "
                 "(is it hpc-opt's --report?)")
    return pred, report


def measured(path, profile=None):
    if profile is not None:
        return profile_record(path, PROG, None if profile == "last" else int(profile))
    rec = summary_record(path, PROG)
    missing = [k for k in PARTS if k not in rec]
    if missing:
        sys.exit(f"{PROG}: error: {path}: the summary has no {', '.join(missing)} "
                 "(a binary older than the measured profile?)")
    return rec


def error_pct(pred, meas):
    return 100.0 * (pred - meas) / meas if meas > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="PLAN.json METRICS.jsonl pairs")
    ap.add_argument("--max-error", type=float, default=None, metavar="PCT")
    ap.add_argument("--profile", default=None, metavar="last|STEP")
    args = ap.parse_args()
    if args.profile is not None and args.profile != "last" and not args.profile.isdigit():
        sys.exit(f"{PROG}: error: --profile takes 'last' or a step number, got '{args.profile}'")
    if len(args.files) % 2:
        sys.exit(f"{PROG}: error: give PLAN.json METRICS.jsonl pairs, got {len(args.files)} files")
    worst = 0.0
    print(f"{'plan':<28} {'part':<15} {'predicted ms':>13} {'measured ms':>12} {'error':>8}")
    for plan, metrics in zip(args.files[::2], args.files[1::2]):
        (pred, report), meas = prediction(plan), measured(metrics, args.profile)
        check_same_model(plan, report, metrics, meas)
        for k in PARTS:
            p, m = 1000.0 * float(pred[k]), 1000.0 * float(meas[k])
            e = error_pct(p, m)
            print(f"{plan[-28:]:<28} {k:<15} {p:>13.3f} {m:>12.3f} "
                  f"{'' if e != e else f'{e:+.1f}%':>8}")
        e = error_pct(float(pred["step_time_s"]), float(meas["step_time_s"]))
        worst = max(worst, abs(e)) if e == e else worst
    print(f"worst step-time error: {worst:.1f}%")
    if args.max_error is not None and worst > args.max_error:
        print(f"{PROG}: step-time error {worst:.1f}% above --max-error {args.max_error}%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
