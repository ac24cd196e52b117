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
    ap.add_argument("--flag", action="append", default=[],
                    help="one more hpc-opt flag (--flag=--recompute=full); repeatable")
    ap.add_argument("--buffers", default="",
                    help="compare only these buffers of buffers-final.npz (comma-separated)")
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
    cmd += args.flag
    run(cmd)

    data_dir = os.path.normpath(os.path.join(args.ref, ref["data"]["dir"]))
    steps = args.steps or ref["steps"]
    train = args.mpirun + [binary, "train", "--steps", str(steps),
                           "--metrics", os.path.join(args.workdir, "metrics.jsonl"),
                           "--dump-outputs", os.path.join(args.workdir, "dump"),
                           "--dump-steps", ",".join(str(s) for s in ref["grad_steps"])]
    for name in ref["data"]["inputs"]:
        train += ["--data", f"{name}={os.path.join(data_dir, name + '.npy')}"]
    buffers = os.path.join(args.ref, "buffers-final.npz")
    saved = os.path.join(args.workdir, "trained.safetensors")
    if os.path.exists(buffers):
        train += ["--save", saved]
    metrics = os.path.join(args.workdir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    run(train)
    compare = [sys.executable, os.path.join(HERE, "compare_train_refs.py"), args.ref,
               args.workdir] + compare_args
    status = subprocess.run(compare).returncode
    only = [b for b in args.buffers.split(",") if b]
    if os.path.exists(buffers) and not check_buffers(buffers, saved, only):
        status = 1
    sys.exit(status)


def read_safetensors(path):
    """name -> numpy array of a safetensors file (the dtypes training saves)."""
    import numpy as np
    dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtypes[e["dtype"]]).reshape(e["shape"])
    return out


def check_buffers(ref_npz, saved, only, rtol=1e-5):
    """The model's buffers after the last step (batch-norm running statistics
    in train mode) against the reference's, rtol relative in norm."""
    import numpy as np
    want = np.load(ref_npz)
    got = read_safetensors(saved)
    ok = True
    for name in want.files:
        if only and name not in only:
            continue
        if name not in got:
            print(f"FAIL buffer {name}: not in {saved}")
            ok = False
            continue
        w = want[name].astype(np.float64)
        err = float(np.linalg.norm(got[name] - w) / max(np.linalg.norm(w), 1e-30))
        print(f"buffer {name}: ||b - b_ref||/||b_ref|| = {err:.3e}" + ("" if err <= rtol else " FAIL"))
        ok &= err <= rtol
    return ok


if __name__ == "__main__":
    main()
