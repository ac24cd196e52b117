#!/usr/bin/env python3
#===- ort_compare.py - HPC-Opt's executable against onnxruntime -----------===#
#
# Compiles an ONNX model with hpc-opt, runs the executable and onnxruntime
# (CPU execution provider, the same number of threads) on the same inputs and
# compares every output with np.allclose(rtol, atol). Prints, per output, the
# max abs and max rel difference; exits 1 on any mismatch.
#
#   ort_compare.py --model M.onnx [--input-shape NAME=D0,D1,...]...
#                  [--rtol 1e-4] [--atol 1e-5] [--hpc-opt PATH]
#                  [--ref-dir DIR] [--threads T] [--seed S]
#
# Inputs are random, of each graph input's dtype and shape (symbolic dims from
# --input-shape): floats standard normal; int64/int32 in [0, 16) (token ids
# within any vocab), except names that suggest an attention mask (all ones),
# position ids (arange along the last axis) or token type ids (0 or 1); bools
# random.
#
# --ref-dir DIR (test/models/ref/<name>) adds a second comparison on the
# reference inputs DIR/<input>.npy: the executable against onnxruntime, and
# both against the reference outputs DIR/<output>.npy (torch's), with the same
# tolerances.
#
# Needs numpy, onnx and onnxruntime. When the running python lacks them it
# re-runs itself with the venv of scripts/setup-test-venv.sh (--venv, default
# build/test-venv); when there is none it exits 77, which ctest reports as
# skipped (SKIP_RETURN_CODE 77).
#
#===-----------------------------------------------------------------------===#

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_packages(venv):
    """Re-executes with the venv's python when onnxruntime is missing."""
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        return
    except ImportError as e:
        missing = str(e)
    python = os.path.join(venv, "bin", "python")
    if (os.path.realpath(sys.prefix) != os.path.realpath(venv)
            and os.access(python, os.X_OK)):
        os.execv(python, [python] + sys.argv)
    print("ort_compare: SKIPPED: %s (run scripts/setup-test-venv.sh to "
          "create %s)" % (missing, venv))
    sys.exit(SKIP)


def file_name_of(name):
    """The executable's file name for tensor `name` (see conformance.py)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


def parse_shapes(specs):
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        if not sep or not name:
            raise SystemExit("ort_compare: error: --input-shape '%s': "
                             "expected NAME=D0,D1,..." % spec)
        try:
            shapes[name] = [int(d) for d in dims.split(",") if d != ""]
        except ValueError:
            raise SystemExit("ort_compare: error: --input-shape '%s': "
                             "dims must be integers" % spec)
    return shapes


def graph_inputs(model):
    """[(name, numpy dtype, [dims or None])] of the non-initializer inputs."""
    import onnx
    from onnx import helper
    inits = {t.name for t in model.graph.initializer}
    result = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        ttype = value.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(ttype.elem_type) if hasattr(
            helper, "tensor_dtype_to_np_dtype") else \
            onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[ttype.elem_type]
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in ttype.shape.dim]
        result.append((value.name, dtype, dims))
    return result


def make_input(name, dtype, shape, rng):
    import numpy as np
    lname = name.lower()
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if "mask" in lname:
        return np.ones(shape, dtype)
    if "position" in lname or lname in ("pos", "pos_ids"):
        last = shape[-1] if shape else 1
        return np.broadcast_to(np.arange(last, dtype=dtype), shape).copy()
    if "token_type" in lname or "segment" in lname:
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 16, shape).astype(dtype)


def compile_model(args, work):
    exe = os.path.join(work, "model.bin")
    cmd = [args.hpc_opt, args.model, "-o", exe]
    for spec in args.input_shape:
        cmd.insert(2, "--input-shape=" + spec)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit("ort_compare: error: hpc-opt failed (%d): %s" % (
            proc.returncode, (proc.stdout + proc.stderr).strip()))
    return exe


def run_hpc(exe, inputs, work, tag, threads):
    import numpy as np
    out_dir = os.path.join(work, "out-" + tag)
    os.makedirs(out_dir, exist_ok=True)
    cmd = [exe, "run", "--output-dir", out_dir, "--threads", str(threads)]
    for name, value in inputs.items():
        path = os.path.join(work, "%s-in-%s" % (tag, file_name_of(name)))
        np.save(path, value)
        cmd += ["--input", "%s=%s" % (name, path)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit("ort_compare: error: %s failed (%d): %s" % (
            " ".join(cmd), proc.returncode,
            (proc.stdout + proc.stderr).strip()))
    return out_dir


def run_ort(args, inputs):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(args.model, options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def diff(actual, expected, rtol, atol):
    """(ok, max abs diff, max rel diff, tolerance ratio, note): the ratio is
    max |a - e| / (atol + rtol |e|), at most 1 where np.allclose holds."""
    import numpy as np
    if actual.shape != expected.shape:
        return False, float("nan"), float("nan"), float("nan"), \
            "shape %s vs %s" % (
            list(actual.shape), list(expected.shape))
    if actual.dtype != expected.dtype:
        return False, float("nan"), float("nan"), float("nan"), \
            "dtype %s vs %s" % (
            actual.dtype, expected.dtype)
    if actual.size == 0:
        return True, 0.0, 0.0, 0.0, ""
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    abs_diff = np.abs(a - e)
    rel_diff = abs_diff / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
    if expected.dtype.kind in "fc":
        ok = bool(np.allclose(actual, expected, rtol=rtol, atol=atol,
                              equal_nan=True))
    else:
        ok = bool(np.array_equal(actual, expected))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = abs_diff / (atol + rtol * np.abs(e))
    return (ok, float(np.nanmax(abs_diff)), float(np.nanmax(rel_diff)),
            float(np.nanmax(ratio)), "")


def report(title, outputs, actual_of, expected_of, args):
    print("%s (rtol %g, atol %g):" % (title, args.rtol, args.atol))
    ok_all = True
    for name in outputs:
        expected = expected_of(name)
        if expected is None:
            continue
        actual = actual_of(name)
        if actual is None:
            print("  %-24s MISSING" % name)
            ok_all = False
            continue
        ok, max_abs, max_rel, ratio, note = diff(actual, expected, args.rtol,
                                                 args.atol)
        ok_all &= ok
        print("  %-12s %-8s max abs diff %.3e  max rel diff %.3e  "
              "tolerance used %5.1f%%  %s%s" % (
                  name, "ok" if ok else "MISMATCH", max_abs, max_rel,
                  100 * ratio, list(actual.shape),
                  ("  " + note) if note else ""))
    return ok_all


def main():
    parser = argparse.ArgumentParser(
        description="Compare an hpc-opt executable with onnxruntime.")
    parser.add_argument("--model", required=True)
    parser.add_argument("--input-shape", action="append", default=[],
                        metavar="NAME=D0,D1,...")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--hpc-opt",
                        default=os.path.join(ROOT, "build", "bin", "hpc-opt"))
    parser.add_argument("--ref-dir",
                        help="reference inputs and outputs (<name>.npy)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads of both (default: cpu count)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--venv",
                        default=os.path.join(ROOT, "build", "test-venv"))
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder")
    args = parser.parse_args()
    ensure_packages(args.venv)

    import numpy as np
    import onnx

    hpc_opt = shutil.which(args.hpc_opt)
    if not hpc_opt:
        raise SystemExit("ort_compare: error: %s is not an executable" %
                         args.hpc_opt)
    args.hpc_opt = hpc_opt
    model = onnx.load(args.model)
    shapes = parse_shapes(args.input_shape)
    specs = graph_inputs(model)
    outputs = [o.name for o in model.graph.output]
    rng = np.random.default_rng(args.seed)
    inputs = {}
    for name, dtype, dims in specs:
        shape = shapes.get(name, dims)
        if shape is None or any(d is None for d in shape):
            raise SystemExit("ort_compare: error: input '%s' has symbolic "
                             "dims %s: give --input-shape %s=..." %
                             (name, dims, name))
        inputs[name] = make_input(name, np.dtype(dtype), shape, rng)

    work = tempfile.mkdtemp(prefix="ort-compare-")
    try:
        print("model: %s" % args.model)
        print("inputs: %s" % ", ".join(
            "%s %s %s" % (n, v.dtype, list(v.shape))
            for n, v in inputs.items()))
        exe = compile_model(args, work)
        ok = True

        def load(out_dir):
            def get(name):
                path = os.path.join(out_dir, file_name_of(name))
                return np.load(path) if os.path.exists(path) else None
            return get

        ort_out = run_ort(args, inputs)
        hpc_dir = run_hpc(exe, inputs, work, "random", args.threads)
        ok &= report("hpc vs onnxruntime, random inputs", outputs,
                     load(hpc_dir), ort_out.get, args)

        if args.ref_dir:
            ref_inputs = {}
            for name, _, _ in specs:
                path = os.path.join(args.ref_dir, name + ".npy")
                if not os.path.exists(path):
                    raise SystemExit("ort_compare: error: no reference "
                                     "input %s" % path)
                ref_inputs[name] = np.load(path)

            def ref(name):
                path = os.path.join(args.ref_dir, name + ".npy")
                return np.load(path) if os.path.exists(path) else None

            if not any(ref(n) is not None for n in outputs):
                raise SystemExit("ort_compare: error: no reference output "
                                 "in %s" % args.ref_dir)
            ort_ref = run_ort(args, ref_inputs)
            hpc_ref = run_hpc(exe, ref_inputs, work, "ref", args.threads)
            ok &= report("hpc vs onnxruntime, reference inputs", outputs,
                         load(hpc_ref), ort_ref.get, args)
            ok &= report("hpc vs reference outputs", outputs, load(hpc_ref),
                         ref, args)
            # For information: how far onnxruntime itself is from the
            # reference (not part of the verdict).
            report("(onnxruntime vs reference outputs, for information)",
                   outputs, ort_ref.get, ref, args)
    finally:
        if args.keep:
            print("work folder: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("RESULT: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
