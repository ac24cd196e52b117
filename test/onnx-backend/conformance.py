#!/usr/bin/env python3
#===- conformance.py - ONNX backend conformance of compiled executables ---===#
#
# Compiles every model of the ONNX backend test data (node, simple,
# pytorch-converted, pytorch-operator: 1072 models) into an executable with
#
#   hpc-opt MODEL --bind-inputs=DIR/test_data_set_0 -o WORK/model.bin
#
# runs it on every test_data_set_K (each graph input that is not an
# initializer, in graph order, from input_N.pb) and compares every output with
# output_N.pb: same dtype and shape, then
#
#   float:        np.allclose(actual, expected, rtol=1e-3, atol=1e-5,
#                             equal_nan=True)
#   int and bool: exactly equal.
#
# Each model ends in one of three outcomes:
#
#   pass         compiled, ran and matched on every data set;
#   unsupported  hpc-opt exited 1 with exactly one `hpc-opt: error:` line;
#   wrong        anything else: a mismatch, a failed or crashed run, or an
#                hpc-opt that crashed, timed out or failed without one clean
#                error line;
#   invalid      compiled, but the data set contradicts the model: an
#                input_N.pb whose shape is not the static shape the model
#                declares for that input (a defect of the test data, which no
#                executable specialized to the model can run).
#
# The outcomes are compared with the expected file (conformance-expected.txt):
# one model per line, `node/test_foo # unsupported: reason` or
# `node/test_foo # wrong: reason` (or `# invalid: reason`). The run fails
# when
#
#   * a model that is not listed does not pass;
#   * a listed model passes (the list only shrinks: delete its line);
#   * a listed model has another outcome than its line says (an unsupported
#     op that now gives a wrong answer must not hide behind its old line);
#   * a listed model is not in the test data;
#   * --min-pass-rate is given and the overall pass rate is below it.
#
# A `wrong` line is a known bug, never a way to accept a result: keep the
# reason clear and the bug filed.
#
# With --mesh SPEC every model is compiled partitioned over that mesh and run
# under --mpirun with --ranks ranks; the outcomes must be the single-rank
# ones (conformance-mesh.test).
#
# Standard library plus onnx and numpy only: it runs with Debian's
# /usr/bin/python3 (python3-onnx 1.12).
#
#===-----------------------------------------------------------------------===#

import argparse
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

CATEGORIES = ["node", "simple", "pytorch-converted", "pytorch-operator"]
ERROR_PREFIX = "hpc-opt: error: "
OUTCOMES = ["pass", "wrong", "unsupported", "invalid"]


class HarnessError(Exception):
    """A problem of the run itself (not of a model): stops the run."""


# --- the test data ---------------------------------------------------------


def find_models(data_dir, pattern):
    """Test paths relative to data_dir (`node/test_abs`), sorted."""
    tests = []
    for category in CATEGORIES:
        root = os.path.join(data_dir, category)
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            rel = category + "/" + name
            if not os.path.isfile(os.path.join(root, name, "model.onnx")):
                continue
            if pattern and not pattern.search(rel):
                continue
            tests.append(rel)
    return tests


def data_sets(test_dir):
    """The test_data_set_K folders of a test, in order of K."""
    sets = []
    for name in os.listdir(test_dir):
        m = re.fullmatch(r"test_data_set_(\d+)", name)
        if m and os.path.isdir(os.path.join(test_dir, name)):
            sets.append((int(m.group(1)), os.path.join(test_dir, name)))
    return [path for _, path in sorted(sets)]


def graph_io(model_path):
    """([(name, elem type)] of the inputs that are not initializers,
    [(name, elem type)] of the outputs), in graph order."""
    model = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}

    def elem(value):
        return value.type.tensor_type.elem_type if value.type.HasField(
            "tensor_type") else 0

    def dims(value):
        """The declared shape, None when not static or not a tensor."""
        if not value.type.HasField("tensor_type") or not \
                value.type.tensor_type.HasField("shape"):
            return None
        shape = [d.dim_value if d.HasField("dim_value") else None
                 for d in value.type.tensor_type.shape.dim]
        return None if None in shape else shape

    inputs = [(i.name, elem(i), dims(i)) for i in model.graph.input
              if i.name not in inits]
    outputs = [(o.name, elem(o)) for o in model.graph.output]
    return inputs, outputs


def read_tensor_pb(path):
    """A TensorProto file as (numpy array, data_type); raises on other
    protos."""
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor), tensor.data_type


# bfloat16. numpy has none: the executable reads and writes it as raw 2-byte
# void ('|V2' .npy). The test data of onnx 1.12 stores bfloat16 tensors as
# UINT16 TensorProtos holding the bits, and its expected FLOAT -> BFLOAT16
# casts truncate where the runtime rounds to nearest even: bfloat16 values
# are compared as floats to within one bfloat16 ulp (rtol 2^-7).
BF16 = onnx.TensorProto.BFLOAT16
BF16_RTOL = 2.0 ** -7


def bf16_to_f32(a):
    """bfloat16 bits (uint16 or |V2 array) as float32 values."""
    bits = np.ascontiguousarray(a).view(np.uint16).astype(np.uint32) << 16
    return bits.view(np.float32)


def file_name_of(name):
    """The file name the executable gives an output (`<name>.npy`): every
    character other than letters, digits, `.`, `-` and `_` becomes `_`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


# --- comparison ------------------------------------------------------------


def compare(actual, expected, rtol, atol):
    """None when `actual` matches `expected`, else a one-line reason."""
    if actual.dtype != expected.dtype:
        return "dtype %s, expected %s" % (actual.dtype, expected.dtype)
    if actual.shape != expected.shape:
        return "shape %s, expected %s" % (list(actual.shape),
                                          list(expected.shape))
    if actual.size == 0:
        return None
    if expected.dtype.kind in "fc":
        close = np.isclose(actual, expected, rtol=rtol, atol=atol,
                           equal_nan=True)
    elif expected.dtype.kind in "biuSUO":
        close = actual == expected
    else:
        return "cannot compare dtype %s" % expected.dtype
    if np.all(close):
        return None
    bad = np.argwhere(~np.asarray(close))
    first = tuple(int(i) for i in bad[0])
    a, e = actual[first], expected[first]
    detail = "%d of %d elements differ; first at %s: %s, expected %s" % (
        len(bad), actual.size, list(first), fmt(a), fmt(e))
    if expected.dtype.kind in "fciub":
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(actual.astype(np.float64) -
                          expected.astype(np.float64))
        finite = diff[np.isfinite(diff)]
        if finite.size:
            detail += "; max abs diff %.4g" % finite.max()
    return detail


def fmt(value):
    if isinstance(value, (np.floating, float)):
        return "%.7g" % value
    return str(value)


# --- one model -------------------------------------------------------------


LAUNCH_RETRIES = []


def launch_failure(out):
    """Whether a failed mpirun run never got to the program: no line of the
    program's own (its errors name the executable or a rank) and no rank that
    died (mpirun reports those as 'exited on signal' / 'noticed that')."""
    program = re.compile(r"(^|\s)\S+\.bin: |^rank \d+: |exited on signal|noticed that",
                         re.M)
    # A rank that failed in OpenMPI's own start-up (orte_init: its session
    # directory, ...) never got to the program, whatever mpirun then says.
    if "orte_init failed" in out:
        return True
    return "mpirun" in out.lower() and not program.search(out)


def first_line(text):
    # mpirun frames its messages with lines of dashes: skip those.
    for line in text.splitlines():
        if line.strip() and line.strip().strip("-"):
            return line.strip()
    return "(no output)"


def status_text(returncode):
    if returncode < 0:
        return "killed by signal %d" % -returncode
    return "exit status %d" % returncode


def shorten(text, limit=150):
    text = text.replace("#", "").replace("\n", " ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def compile_model(args, model, bind_dir, exe):
    """(outcome, detail): 'ok', 'unsupported' or 'wrong'."""
    cmd = [args.hpc_opt, model, "-o", exe]
    if args.mesh:
        cmd.append("--mesh=" + args.mesh)
    if bind_dir:
        cmd.insert(2, "--bind-inputs=" + bind_dir)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE,
                              timeout=args.compile_timeout)
    except subprocess.TimeoutExpired:
        return "wrong", "hpc-opt timed out after %d s" % args.compile_timeout
    except OSError as e:
        raise HarnessError("cannot run %s: %s" % (args.hpc_opt, e))
    out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    lines = [l for l in out.splitlines() if l.strip()]
    if proc.returncode == 0:
        if not os.path.isfile(exe):
            return "wrong", "hpc-opt exited 0 but wrote no executable"
        return "ok", ""
    if (proc.returncode == 1 and len(lines) == 1
            and lines[0].startswith(ERROR_PREFIX)):
        reason = lines[0][len(ERROR_PREFIX):]
        if reason.startswith(model + ": "):
            reason = reason[len(model) + 2:]
        return "unsupported", reason
    return "wrong", "hpc-opt %s (%d output lines): %s" % (
        status_text(proc.returncode), len(lines), first_line(out))


def invalid_data(inputs, set_dir):
    """A reason when the data set contradicts the model's own declaration of
    an input (a static shape that the input_K.pb does not have), else None.
    Some data sets of onnx 1.12 do (CastLike's `like` is [1] where the model
    declares [3, 4]); no executable specialized to the model can run them."""
    for k, (name, _, declared) in enumerate(inputs):
        path = os.path.join(set_dir, "input_%d.pb" % k)
        if declared is None or not os.path.isfile(path):
            continue
        tensor = onnx.TensorProto()
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        if list(tensor.dims) != declared:
            return "%s: input_%d.pb of '%s' has shape %s, the model " \
                   "declares %s" % (os.path.basename(set_dir), k, name,
                                    list(tensor.dims), declared)
    return None


def run_data_set(args, exe, inputs, outputs, set_dir, work):
    """None when the executable's outputs match the data set, else a reason."""
    set_name = os.path.basename(set_dir)
    out_dir = os.path.join(work, "out-" + set_name)
    os.makedirs(out_dir, exist_ok=True)
    cmd = [exe, "run"]
    if args.mesh:
        cmd = shlex.split(args.mpirun) + ["-n", str(args.ranks)] + cmd
    for k, (name, elem, _) in enumerate(inputs):
        path = os.path.join(set_dir, "input_%d.pb" % k)
        if not os.path.isfile(path):
            return "%s: no input_%d.pb for input '%s'" % (set_name, k, name)
        if args.npy_inputs or elem == BF16:
            value, data_type = read_tensor_pb(path)
            if elem == BF16 and data_type == onnx.TensorProto.UINT16:
                value = value.view("V2")  # bfloat16 bits stored as uint16
            npy = os.path.join(work, "%s-input_%d.npy" % (set_name, k))
            np.save(npy, value)
            path = npy
        cmd += ["--input", "%s=%s" % (name, path)]
    cmd += ["--output-dir", out_dir, "--threads", str(args.threads)]
    for attempt in range(3):
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE,
                                  timeout=args.run_timeout)
        except subprocess.TimeoutExpired:
            return "%s: run timed out after %d s" % (set_name, args.run_timeout)
        out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        if proc.returncode == 0 or not args.mesh or not launch_failure(out):
            break
        # The launcher could not start the ranks (seen once in thousands of
        # runs on an oversubscribed machine): try again, and say so.
        LAUNCH_RETRIES.append("%s/%s: %s" % (os.path.basename(os.path.dirname(exe)),
                                             set_name, first_line(out)))
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        return "%s: run failed, %s: %s" % (
            set_name, status_text(proc.returncode), first_line(out))
    for k, (name, elem) in enumerate(outputs):
        expected_path = os.path.join(set_dir, "output_%d.pb" % k)
        if not os.path.isfile(expected_path):
            continue
        try:
            expected, _ = read_tensor_pb(expected_path)
        except Exception as e:  # a sequence or optional output
            return "%s: output_%d.pb is not a tensor (%s)" % (set_name, k, e)
        actual_path = os.path.join(out_dir, file_name_of(name))
        if not os.path.isfile(actual_path):
            return "%s: output '%s': the run wrote no %s" % (
                set_name, name, os.path.basename(actual_path))
        try:
            actual = np.load(actual_path, allow_pickle=False)
        except Exception as e:
            return "%s: output '%s': unreadable .npy (%s)" % (set_name, name,
                                                              e)
        rtol = args.rtol
        if elem == BF16:
            if actual.dtype != np.dtype("V2"):
                return "%s: output %d '%s': dtype %s, expected bfloat16 " \
                       "(|V2)" % (set_name, k, name, actual.dtype)
            actual = bf16_to_f32(actual)
            if expected.dtype in (np.uint16, np.dtype("V2")):
                expected = bf16_to_f32(expected)
            rtol = max(rtol, BF16_RTOL)
        mismatch = compare(actual, expected, rtol, args.atol)
        if mismatch:
            return "%s: output %d '%s': %s" % (set_name, k, name, mismatch)
    return None


def check_model(args, rel):
    """(rel, outcome, detail, work dir or None)."""
    test_dir = os.path.join(args.data, rel)
    model = os.path.join(test_dir, "model.onnx")
    sets = data_sets(test_dir)
    work = tempfile.mkdtemp(prefix=rel.replace("/", "-") + "-",
                            dir=args.work_dir)
    try:
        exe = os.path.join(work, "model.bin")
        status, detail = compile_model(args, model,
                                       sets[0] if sets else None, exe)
        if status != "ok":
            return rel, status, detail, work
        if not sets:
            return rel, "wrong", "no test_data_set_K folder", work
        try:
            inputs, outputs = graph_io(model)
        except Exception as e:
            return rel, "wrong", "cannot read the model: %s" % e, work
        for set_dir in sets:
            try:
                invalid = invalid_data(inputs, set_dir)
            except Exception:  # not a TensorProto: let the run report it
                invalid = None
            if invalid:
                return rel, "invalid", invalid, work
            mismatch = run_data_set(args, exe, inputs, outputs, set_dir, work)
            if mismatch:
                return rel, "wrong", mismatch, work
        return rel, "pass", "", work
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


# --- the expected file -----------------------------------------------------

HEADER = """\
# ONNX backend test models that do not pass conformance.py (yet).
# One test per line, relative to the test data folder, then
# `# unsupported: <hpc-opt's error>`, `# wrong: <the bug>` or
# `# invalid: <how the test data contradicts its model>`.
# conformance.py fails when a listed model passes (delete its line),
# when a listed model has another outcome, and when an unlisted model
# does not pass. A `wrong` line is a known bug to fix, never a result
# to accept: give a clear reason and keep the bug filed.
# Regenerate (developers, then review the diff):
#   python3 test/onnx-backend/conformance.py --hpc-opt build/bin/hpc-opt \\
#     --update-expected
"""


def read_expected(path):
    """{rel: (outcome, reason)}; raises ValueError on a malformed line."""
    expected = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            entry, _, comment = line.partition("#")
            entry = entry.strip()
            if not entry:
                continue
            m = re.match(r"\s*(unsupported|wrong|invalid)\s*:\s*(.*)$",
                         comment)
            if not m:
                raise ValueError(
                    "%s:%d: expected `%s # unsupported: reason` or "
                    "`%s # wrong: reason`" % (path, number, entry, entry))
            if entry in expected:
                raise ValueError("%s:%d: %s is listed twice" % (path, number,
                                                                 entry))
            expected[entry] = (m.group(1), m.group(2).strip())
    return expected


def write_expected(path, results, old):
    with open(path, "w", encoding="utf-8") as f:
        f.write(HEADER)
        for rel, outcome, detail, _ in results:
            if outcome == "pass":
                continue
            reason = shorten(detail)
            # Keep a hand-written reason of a known wrong answer.
            if outcome == "wrong" and old.get(rel, (None,))[0] == "wrong":
                reason = old[rel][1]
            f.write("%s # %s: %s\n" % (rel, outcome, reason))


# --- main ------------------------------------------------------------------


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        description="Compile and run every ONNX backend test model with "
                    "hpc-opt and compare the outputs.")
    parser.add_argument("--hpc-opt", default="hpc-opt",
                        help="the hpc-opt binary (default: hpc-opt on PATH)")
    parser.add_argument("--data", default="/usr/share/libonnx-testdata/data",
                        help="ONNX backend test data (holds node/ ...)")
    parser.add_argument("--expected",
                        default=os.path.join(here, "conformance-expected.txt"),
                        help="the expected-not-to-pass list")
    parser.add_argument("--filter", metavar="REGEX",
                        help="only tests whose path (node/test_abs) matches")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="models in parallel (default: cpu count)")
    parser.add_argument("--threads", type=int, default=1,
                        help="--threads of each run (default 1)")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--compile-timeout", type=int, default=120,
                        help="seconds per hpc-opt (default 120)")
    parser.add_argument("--run-timeout", type=int, default=120,
                        help="seconds per run (default 120)")
    parser.add_argument("--npy-inputs", action="store_true",
                        help="convert the input .pb files to .npy first "
                             "(default: hand the executable the .pb files)")
    parser.add_argument("--work-dir",
                        help="where the per-model work folders go "
                             "(default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folders (executables, outputs)")
    parser.add_argument("--update-expected", action="store_true",
                        help="rewrite the expected file from this run "
                             "(developers; review the diff)")
    parser.add_argument("--min-pass-rate", type=float, metavar="PERCENT",
                        help="also fail when the overall pass rate is lower")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every model's outcome")
    parser.add_argument("--mesh", metavar="SPEC",
                        help="compile every model partitioned over this mesh "
                             "(--mesh of hpc-opt) and run it under --mpirun "
                             "with --ranks ranks: the partitioned executables "
                             "must give the same outcomes")
    parser.add_argument("--ranks", type=int, default=2,
                        help="ranks of the mesh (with --mesh; default 2)")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root --oversubscribe",
                        help="the launcher (with --mesh)")
    args = parser.parse_args()

    hpc_opt = shutil.which(args.hpc_opt)
    if not hpc_opt:
        print("error: %s is not an executable" % args.hpc_opt,
              file=sys.stderr)
        return 2
    args.hpc_opt = os.path.abspath(hpc_opt)
    args.data = os.path.abspath(args.data)
    tests = find_models(args.data,
                        re.compile(args.filter) if args.filter else None)
    if not tests:
        print("error: no model under %s%s" % (
            args.data, " matches --filter" if args.filter else ""),
            file=sys.stderr)
        return 2
    try:
        expected = read_expected(args.expected) if os.path.exists(
            args.expected) else {}
    except ValueError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    if args.update_expected and args.filter:
        print("error: --update-expected needs the whole test data "
              "(no --filter)", file=sys.stderr)
        return 2

    own_work = args.work_dir is None
    if own_work:
        args.work_dir = tempfile.mkdtemp(prefix="hpc-conformance-")
    else:
        os.makedirs(args.work_dir, exist_ok=True)
    try:
        with concurrent.futures.ThreadPoolExecutor(
                max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda rel: check_model(args, rel),
                                    tests))
    except HarnessError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    finally:
        if own_work and not args.keep:
            shutil.rmtree(args.work_dir, ignore_errors=True)

    failures = []
    for rel, outcome, detail, work in results:
        if args.verbose:
            print("%-11s %s%s" % (outcome, rel,
                                  "  " + shorten(detail, 200) if detail
                                  else ""))
        listed = expected.get(rel)
        if outcome == "pass":
            if listed:
                failures.append(
                    "UNEXPECTED PASS: %s (listed as %s; delete its line)" %
                    (rel, listed[0]))
        elif not listed:
            failures.append("UNEXPECTED %s: %s: %s" % (
                outcome.upper(), rel, shorten(detail, 300)))
        elif listed[0] != outcome:
            failures.append("CHANGED OUTCOME: %s: listed as %s, now %s: %s" %
                            (rel, listed[0], outcome, shorten(detail, 300)))
    if not args.filter:
        walked = set(tests)
        for rel in sorted(set(expected) - walked):
            failures.append("STALE ENTRY: %s is listed but not in the test "
                            "data" % rel)

    print("%-18s %6s %6s %6s %12s %8s %10s" % (
        "category", "total", "pass", "wrong", "unsupported", "invalid",
        "pass rate"))
    for category in CATEGORIES + ["all"]:
        rows = [r for r in results
                if category == "all" or r[0].startswith(category + "/")]
        if not rows:
            continue
        count = {o: sum(1 for r in rows if r[1] == o) for o in OUTCOMES}
        print("%-18s %6d %6d %6d %12d %8d %9.1f%%" % (
            category, len(rows), count["pass"], count["wrong"],
            count["unsupported"], count["invalid"],
            100.0 * count["pass"] / len(rows)))
    passed = sum(1 for r in results if r[1] == "pass")
    rate = 100.0 * passed / len(results)
    print("pass rate: %d/%d (%.1f%%)" % (passed, len(results), rate))

    wrong = [r for r in results if r[1] == "wrong"]
    print("wrong answers: %d" % len(wrong))
    if LAUNCH_RETRIES:
        print("runs retried after the launcher failed to start them: %d" %
              len(LAUNCH_RETRIES))
        for line in LAUNCH_RETRIES:
            print("  " + line)
    for rel, _, detail, work in wrong:
        known = " [listed]" if expected.get(rel, ("",))[0] == "wrong" else ""
        print("  %s%s: %s" % (rel, known, detail))
        if args.keep:
            print("    work folder: %s" % work)

    invalid = [r for r in results if r[1] == "invalid"]
    if invalid:
        print("invalid test data: %d" % len(invalid))
        for rel, _, detail, _ in invalid:
            print("  %s: %s" % (rel, detail))

    if args.min_pass_rate is not None and rate < args.min_pass_rate:
        failures.append("PASS RATE %.1f%% is below --min-pass-rate %.1f%%" %
                        (rate, args.min_pass_rate))

    if args.update_expected:
        write_expected(args.expected, results, expected)
        print("wrote %s" % args.expected)

    for f in failures:
        print(f)
    if failures:
        print("%d problem(s); see above" % len(failures))
        return 1
    print("conformance: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
