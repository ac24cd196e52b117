"""Reads the records of a `train --metrics` file (JSON lines).

One place for the scripts that read those files (compare_metrics.py,
plot_metrics.py, plan_vs_measured.py): a resumed run appends, so a step run
again after the last checkpoint appears twice and the later line counts;
step_records skips the closing summary line and records without a step and
a loss, summary_record returns the last summary line.
"""
import json
import sys


def records(path, prog):
    """The JSON records of the metrics file at `path`, in order; exits with
    one line naming `prog`, the file and the line on a malformed file."""
    try:
        f = open(path)
    except OSError as e:
        sys.exit(f"{prog}: error: {path}: {e.strerror}")
    with f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{prog}: error: {path}:{n}: not JSON: {e}")


def step_records(path, prog):
    """{step: record} of the metrics file at `path`."""
    out = {}
    for rec in records(path, prog):
        if isinstance(rec, dict) and "step" in rec and "loss" in rec and not rec.get("summary"):
            out[rec["step"]] = rec
    return out


def summary_record(path, prog):
    """The closing summary record of the metrics file at `path` (of a resumed
    run, the last one); exits with one line when it holds none."""
    last = None
    for rec in records(path, prog):
        if isinstance(rec, dict) and rec.get("summary"):
            last = rec
    if last is None:
        sys.exit(f"{prog}: error: {path}: no summary line (did the run finish?)")
    return last


def profile_record(path, prog, step=None):
    """The profile line (`train --profile-every K`) of `step` in the metrics
    file at `path`, or the last one when `step` is None; exits with one line
    when there is none."""
    found = None
    for rec in records(path, prog):
        if isinstance(rec, dict) and rec.get("profile") and (step is None or rec.get("step") == step):
            found = rec
    if found is None:
        at = "" if step is None else f" at step {step}"
        sys.exit(f"{prog}: error: {path}: no profile line{at} (train --profile-every K writes them)")
    return found
