#!/usr/bin/env python3
"""Trains a model as a PyTorch reference did, and compares with it.

REF is a directory of test/models/train/<model>/<optimizer>/ (made by
scripts/make_train_refs.py): its ref.json gives the model, the compile flags,
the optimizer's hyperparameters and the data. This script compiles the model
with hpc-opt (--keep-gradients, so the step returns every gradient), runs the
binary's `train` for the reference's steps on the same data, dumping the
outputs of the steps whose gradients the reference holds, and then runs
scripts/compare_train_refs.py on the result. Needs numpy only (no torch).

    check_train_ref.py --hpc-opt build/bin/hpc-opt --workdir /tmp/w \\
        test/models/train/mlp/sgd --loss-rtol 1e-5 --grad-rtol 1e-4
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def optimizer_flags(opt):
    """The hpc-opt flags of a reference's optimizer dictionary."""
    flags = [f"--optimizer={opt['name']}", f"--lr={opt['lr']!r}",
             f"--weight-decay={opt.get('weight_decay', 0.0)!r}"]
    if opt["name"] == "sgd":
        flags.append(f"--momentum={opt.get('momentum', 0.0)!r}")
        if opt.get("nesterov"):
            flags.append("--nesterov")
    else:
        b1, b2 = opt["betas"]
        flags += [f"--beta1={b1!r}", f"--beta2={b2!r}", f"--eps={opt['eps']!r}"]
    return flags


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref", help="reference directory (with ref.json)")
    ap.add_argument("--hpc-opt", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpirun", nargs="*", default=[],
                    help="launcher and its arguments (multi-rank runs)")
    ap.add_argument("--mesh", default="", help="compile for this mesh")
    ap.add_argument("--steps", type=int, default=0, help="default: the reference's")
    args, compare_args = ap.parse_known_args()

    with open(os.path.join(args.ref, "ref.json")) as f:
        ref = json.load(f)
    os.makedirs(args.workdir, exist_ok=True)
    binary = os.path.join(args.workdir, "model.bin")
    model = os.path.join(ROOT, ref["onnx"])
    cmd = [args.hpc_opt, model] + ref["compile"] + optimizer_flags(ref["optimizer"]) + \
          ["--keep-gradients", "-o", binary]
    if args.mesh:
        cmd.append(f"--mesh={args.mesh}")
    run(cmd)

    data_dir = os.path.normpath(os.path.join(args.ref, ref["data"]["dir"]))
    steps = args.steps or ref["steps"]
    train = args.mpirun + [binary, "train", "--steps", str(steps),
                           "--metrics", os.path.join(args.workdir, "metrics.jsonl"),
                           "--dump-outputs", os.path.join(args.workdir, "dump"),
                           "--dump-steps", ",".join(str(s) for s in ref["grad_steps"])]
    for name in ref["data"]["inputs"]:
        train += ["--data", f"{name}={os.path.join(data_dir, name + '.npy')}"]
    metrics = os.path.join(args.workdir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    run(train)
    compare = [sys.executable, os.path.join(HERE, "compare_train_refs.py"), args.ref,
               args.workdir] + compare_args
    sys.exit(subprocess.run(compare).returncode)


if __name__ == "__main__":
    main()
