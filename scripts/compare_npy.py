#!/usr/bin/env python3
"""Compares the outputs of two runs, .npy file by .npy file.

    compare_npy.py A B [--atol X] [--rtol R] [--differ]

A and B are .npy files or directories of them (a run's --output-dir), or
.safetensors files (a run's --save; each tensor compared by name): every
file of A must be in B with the same dtype and shape, and |a - b| <=
atol + rtol * |a| elementwise (numpy's allclose, computed in float64; NaNs
must be at the same places). --differ also requires that some output is
not bitwise equal: a run in another precision that gives exactly the
reference's bytes did not run in that precision. Prints one line per output
(max abs diff, max |a|) and a verdict; exit 1 on any failure.
"""
import argparse
import os
import sys

import numpy as np


def files_of(path):
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".npy"))
        return {n[:-4]: os.path.join(path, n) for n in names}
    return {os.path.basename(path)[:-4]: path}


def tensors_of(path):
    """name -> array of a .safetensors file, or name -> .npy path."""
    if path.endswith(".safetensors"):
        from check_train_ref import read_safetensors
        try:
            return read_safetensors(path)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"compare_npy.py: error: {path}: {e}")
    return files_of(path)


def load(path):
    if isinstance(path, np.ndarray):
        return path
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        sys.exit(f"compare_npy.py: error: {path}: {e}")


def compare(name, a, b, atol, rtol):
    """(failure message or None, bitwise equal) of one output."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{name}: {a.dtype} {list(a.shape)} vs {b.dtype} {list(b.shape)}", False
    if a.tobytes() == b.tobytes():
        print(f"{name}: {a.dtype} {list(a.shape)}: bitwise equal")
        return None, True
    x, y = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isnan(x), np.isnan(y)):
        return f"{name}: NaNs at different places", False
    finite = ~np.isnan(x)
    diff = np.abs(x - y)[finite]
    ref = np.abs(x)[finite]
    worst = float(diff.max()) if diff.size else 0.0
    print(f"{name}: {a.dtype} {list(a.shape)}: max abs diff {worst:.3g}, "
          f"max |a| {float(ref.max()) if ref.size else 0.0:.3g}")
    bad = diff > atol + rtol * ref
    if bad.any():
        return (f"{name}: {int(bad.sum())} of {diff.size} elements beyond "
                f"atol {atol:g} + rtol {rtol:g} * |a| (max abs diff {worst:.3g})"), False
    return None, False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--atol", type=float, default=0.0)
    ap.add_argument("--rtol", type=float, default=0.0)
    ap.add_argument("--differ", action="store_true",
                    help="fail when every output is bitwise equal")
    args = ap.parse_args()
    a, b = tensors_of(args.a), tensors_of(args.b)
    if not a:
        sys.exit(f"compare_npy.py: error: {args.a}: no .npy files or tensors")
    bad, equal = [], 0
    for name, path in a.items():
        if name not in b:
            bad.append(f"{name}: missing in {args.b}")
            continue
        failure, same = compare(name, load(path), load(b[name]), args.atol, args.rtol)
        equal += same
        if failure:
            bad.append(failure)
    if args.differ and equal == len(a):
        bad.append("every output is bitwise equal (--differ)")
    for line in bad:
        print("FAIL " + line)
    print(f"compare_npy: {len(a)} outputs, atol {args.atol:g}, rtol {args.rtol:g}"
          + (", must differ" if args.differ else "") + (": OK" if not bad else ": FAILED"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
