"""Reads the per-step records of a `train --metrics` file (JSON lines).

One place for the scripts that read those files (compare_metrics.py,
plot_metrics.py): a resumed run appends, so a step run again after the last
checkpoint appears twice and the later line counts; the closing summary line
and records without a step and a loss are skipped.
"""
import json
import sys


def step_records(path, prog):
    """{step: record} of the metrics file at `path`; exits with one line
    naming `prog`, the file and the line on a malformed file."""
    out = {}
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
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{prog}: error: {path}:{n}: not JSON: {e}")
            if isinstance(rec, dict) and "step" in rec and "loss" in rec and not rec.get("summary"):
                out[rec["step"]] = rec
    return out


def summary_record(path, prog):
    """The closing summary record of the metrics file at `path` (of a resumed
    run, the last one); exits with one line naming `prog` and the file when
    the file cannot be read or holds none."""
    last = None
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
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{prog}: error: {path}:{n}: not JSON: {e}")
            if isinstance(rec, dict) and rec.get("summary"):
                last = rec
    if last is None:
        sys.exit(f"{prog}: error: {path}: no summary line (did the run finish?)")
    return last
