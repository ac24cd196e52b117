#!/usr/bin/env python3
# Compares a training run of HPC-Opt's trainer with a committed PyTorch
# reference trajectory (made by scripts/make_train_refs.py). Python 3 + numpy
# only (no torch): runs with /usr/bin/python3.
#
#   compare_train_refs.py REF_DIR RUN_DIR [--loss-rtol R] [--loss-atol A]
#                         [--grad-rtol G] [--metrics FILE] [--dump DIR]
#
# REF_DIR  test/models/train/<model>/<optimizer>: ref.json (losses per step,
#          before that step's update) and grads-step<N>.npz (keys = ONNX
#          initializer names).
# RUN_DIR  the trainer's outputs: metrics.jsonl (one JSON object per step with
#          "step" (from 1) and "loss"; "grad_norm" is checked too when there)
#          and dump/step-<N>/grad.<name>.npy for every reference gradient,
#          the file name being the output name "grad.<name>" with every
#          character other than [A-Za-z0-9._-] replaced by "_".
#
# Checks: |loss - ref| <= loss_atol + loss_rtol * |ref| for every reference
# step (the metrics must have all of them); for every reference gradient
# ||g - g_ref|| / ||g_ref|| <= grad_rtol (same shape; a missing file is a
# failure); a grad.* file in a checked step's dump that the reference does not
# have is a failure too (the trained set differs), unless --allow-extra-grads.
# Prints one line per failure and a summary with the worst errors; exit 0 when
# everything passes, 1 otherwise (also for missing or unreadable inputs).
#
# --write-fake OUT_DIR writes a run directory made from the reference itself
# (optionally scaled by 1 + --perturb), to test this script and the test
# wiring without a trainer.
import argparse
import json
import math
import os
import re
import sys
import zipfile

import numpy as np


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def grad_file(dump, step, name):
    return os.path.join(dump, f"step-{step}", sanitize("grad." + name) + ".npy")


def load_ref(ref_dir):
    with open(os.path.join(ref_dir, "ref.json")) as f:
        ref = json.load(f)
    grads = {}
    for fname in sorted(os.listdir(ref_dir)):
        m = re.fullmatch(r"grads-step(\d+)\.npz", fname)
        if m:
            with np.load(os.path.join(ref_dir, fname), allow_pickle=False) as z:
                grads[int(m.group(1))] = {k: z[k] for k in z.files}
    return ref, grads


def load_metrics(path, fails):
    steps = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                fails.append(f"{path}:{lineno}: not JSON: {e}")
                continue
            if not isinstance(rec, dict) or "step" not in rec or "loss" not in rec:
                continue  # other records (e.g. a header) carry no step/loss
            step = int(rec["step"])
            if step in steps and steps[step] != rec:
                fails.append(f"{path}:{lineno}: step {step} logged twice with different values")
            steps[step] = rec
    return steps


def worse(a, b):
    """a is a worse error than b (NaN is worst)."""
    return (math.isnan(a) and not math.isnan(b)) or a > b


def rel_norm(got, ref):
    g = got.astype(np.float64).ravel()
    r = ref.astype(np.float64).ravel()
    d = float(np.linalg.norm(g - r))
    n = float(np.linalg.norm(r))
    if n == 0.0:
        return d  # reference exactly zero: the absolute norm of the difference
    return d / n


def write_fake(ref, grads, out_dir, perturb):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "metrics.jsonl"), "w") as f:
        for i, loss in enumerate(ref["losses"], 1):
            rec = {"step": i, "loss": loss * (1 + perturb)}
            if "grad_norms" in ref:
                rec["grad_norm"] = ref["grad_norms"][i - 1] * (1 + perturb)
            f.write(json.dumps(rec) + "\n")
    for step, g in grads.items():
        d = os.path.join(out_dir, "dump", f"step-{step}")
        os.makedirs(d, exist_ok=True)
        for name, arr in g.items():
            np.save(grad_file(os.path.join(out_dir, "dump"), step, name),
                    (arr * np.float32(1 + perturb)).astype(arr.dtype))
    print(f"compare_train_refs: wrote a fake run from the reference to {out_dir} "
          f"(perturb {perturb:g})")
    return 0


def main():
    ap = argparse.ArgumentParser(description="compare a training run with a PyTorch reference")
    ap.add_argument("ref_dir", help="test/models/train/<model>/<optimizer>")
    ap.add_argument("run_dir", nargs="?", help="the trainer's output directory")
    ap.add_argument("--loss-rtol", type=float, default=1e-5)
    ap.add_argument("--loss-atol", type=float, default=0.0,
                    help="absolute slack added to the loss tolerance (default 0)")
    ap.add_argument("--grad-atol", type=float, default=0.0,
                    help="absolute floor: ||g - g_ref|| at most this passes (default 0)")
    ap.add_argument("--grad-rtol", type=float, default=1e-4,
                    help="max ||g - g_ref|| / ||g_ref|| per tensor")
    ap.add_argument("--grad-norm-rtol", type=float, default=None,
                    help="relative tolerance of metrics' grad_norm (default: --grad-rtol)")
    ap.add_argument("--metrics", help="default RUN_DIR/metrics.jsonl")
    ap.add_argument("--dump", help="default RUN_DIR/dump")
    ap.add_argument("--allow-extra-grads", action="store_true",
                    help="do not fail on dumped gradients that the reference lacks")
    ap.add_argument("--write-fake", metavar="OUT_DIR",
                    help="write a run directory made from the reference, then exit")
    ap.add_argument("--perturb", type=float, default=0.0,
                    help="with --write-fake: scale losses and gradients by 1 + this")
    args = ap.parse_args()

    try:
        ref, grads = load_ref(args.ref_dir)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        print(f"compare_train_refs: FAIL: cannot read the reference {args.ref_dir}: {e}")
        return 1
    if args.write_fake:
        return write_fake(ref, grads, args.write_fake, args.perturb)
    if not args.run_dir and not (args.metrics and args.dump):
        ap.error("RUN_DIR (or both --metrics and --dump) is required")
    metrics_path = args.metrics or os.path.join(args.run_dir, "metrics.jsonl")
    dump = args.dump or os.path.join(args.run_dir, "dump")
    gn_rtol = args.grad_rtol if args.grad_norm_rtol is None else args.grad_norm_rtol
    label = f"{ref.get('model', '?')}/{ref.get('optimizer', {}).get('name', '?')}"

    fails = []
    ref_losses = ref["losses"]
    if len(ref_losses) != ref.get("steps", len(ref_losses)):
        fails.append(f"reference has {len(ref_losses)} losses but steps = {ref['steps']}")
    for step in grads:
        if set(grads[step]) != set(ref.get("trained", grads[step])):
            fails.append(f"reference grads-step{step}.npz keys differ from ref.json 'trained'")
    expected_steps = ref.get("grad_steps")
    if expected_steps is not None and sorted(grads) != sorted(expected_steps):
        fails.append(f"reference has gradient files for steps {sorted(grads)}, "
                     f"ref.json says {expected_steps}")

    # Losses.
    worst_loss = (0.0, None)
    worst_gn = (0.0, None)
    if not os.path.isfile(metrics_path):
        fails.append(f"no metrics file {metrics_path}")
        metrics = {}
    else:
        metrics = load_metrics(metrics_path, fails)
    missing = [s for s in range(1, len(ref_losses) + 1) if s not in metrics]
    if missing and os.path.isfile(metrics_path):
        fails.append(f"metrics {metrics_path} has {len(metrics)} steps; missing reference steps "
                     f"{missing[:10]}{' ...' if len(missing) > 10 else ''}")
    for step, want in enumerate(ref_losses, 1):
        if step not in metrics:
            continue
        try:
            got = float(metrics[step]["loss"])
        except (TypeError, ValueError):
            got = math.nan
        err = abs(got - want)
        rel = err / abs(want) if want != 0 else err
        if not err <= args.loss_atol + args.loss_rtol * abs(want):  # NaN fails
            fails.append(f"loss step {step}: got {got!r}, ref {want!r}, rel err {rel:.3e} "
                         f"(tolerance rtol {args.loss_rtol:g} atol {args.loss_atol:g})")
        if worst_loss[1] is None or worse(rel, worst_loss[0]):
            worst_loss = (rel, step)
        if "grad_norm" in metrics[step] and "grad_norms" in ref:
            want_gn = ref["grad_norms"][step - 1]
            got_gn = float(metrics[step]["grad_norm"])
            rel_gn = abs(got_gn - want_gn) / abs(want_gn) if want_gn else abs(got_gn)
            if not rel_gn <= gn_rtol:
                fails.append(f"grad_norm step {step}: got {got_gn!r}, ref {want_gn!r}, "
                             f"rel err {rel_gn:.3e} (tolerance {gn_rtol:g})")
            if worst_gn[1] is None or worse(rel_gn, worst_gn[0]):
                worst_gn = (rel_gn, step)

    # Gradients.
    worst_grad = (0.0, None, None)
    n_checked = 0
    for step in sorted(grads):
        step_dir = os.path.join(dump, f"step-{step}")
        if not os.path.isdir(step_dir):
            fails.append(f"no gradient dump directory {step_dir} "
                         f"({len(grads[step])} reference gradients at step {step})")
            continue
        expected_files = set()
        for name in sorted(grads[step]):
            want = grads[step][name]
            path = grad_file(dump, step, name)
            expected_files.add(os.path.basename(path))
            if not os.path.isfile(path):
                fails.append(f"grad {name} step {step}: no counterpart ({path} missing)")
                continue
            try:
                got = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as e:
                fails.append(f"grad {name} step {step}: cannot read {path}: {e}")
                continue
            if tuple(got.shape) != tuple(want.shape):
                fails.append(f"grad {name} step {step}: shape {list(got.shape)}, "
                             f"reference {list(want.shape)}")
                continue
            n_checked += 1
            err = rel_norm(got, want)
            # A gradient that is zero in exact arithmetic (a bias before a
            # train-mode batch norm) is rounding noise in both runs: the
            # absolute floor compares its norm, not its direction.
            diff = float(np.linalg.norm(got.astype(np.float64) - want.astype(np.float64)))
            if not (err <= args.grad_rtol or diff <= args.grad_atol):
                fails.append(f"grad {name} step {step}: ||g - g_ref||/||g_ref|| = {err:.3e} "
                             f"(tolerance {args.grad_rtol:g}; ||g_ref|| = "
                             f"{float(np.linalg.norm(want.astype(np.float64))):.4e})")
            if worst_grad[1] is None or worse(err, worst_grad[0]):
                worst_grad = (err, name, step)
        if not args.allow_extra_grads:
            extra = sorted(f for f in os.listdir(step_dir)
                           if f.startswith("grad.") and f.endswith(".npy") and f not in expected_files)
            for f in extra:
                fails.append(f"grad step {step}: {f} has no reference gradient "
                             "(the trained set differs from the reference's)")

    for line in fails:
        print(f"FAIL {label}: {line}")
    n_grads = sum(len(g) for g in grads.values())
    n_losses = sum(1 for s in range(1, len(ref_losses) + 1) if s in metrics)
    summary = (f"compare_train_refs {label}: {n_losses}/{len(ref_losses)} losses compared, worst rel err "
               f"{worst_loss[0]:.3e}" + (f" (step {worst_loss[1]})" if worst_loss[1] else ""))
    if worst_gn[1]:
        summary += f"; grad_norm worst rel err {worst_gn[0]:.3e} (step {worst_gn[1]})"
    summary += (f"; {n_checked}/{n_grads} gradients compared, worst rel err {worst_grad[0]:.3e}"
                + (f" ({worst_grad[1]}, step {worst_grad[2]})" if worst_grad[1] else ""))
    summary += f": {'OK' if not fails else f'FAILED ({len(fails)} failures)'}"
    print(summary)
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
