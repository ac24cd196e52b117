#!/usr/bin/env python3
#===- import_walk.py - import every ONNX backend test model ---------------===#
#
# Runs
#   hpc-opt MODEL --bind-inputs=DIR/test_data_set_0 --emit=mlir -o /dev/null
# (import only: without --emit, `-o FILE` compiles an executable) on every
# model.onnx of the ONNX backend test data (node, simple, pytorch-converted,
# pytorch-operator) and sorts each outcome into
#
#   imported     exit status 0;
#   unsupported  exit status 1 with exactly one `hpc-opt: error:` line;
#   crash        anything else (a signal, another exit status, a stack dump,
#                more than one line of output, the per-model timeout).
#
# The outcome is compared with the expected-unsupported list (one model path
# relative to the data folder per line, `#` comments, an optional trailing
# ` # reason`). The walk fails when a listed model imports (the list is stale:
# remove the line), when an unlisted model fails, when a listed model does not
# exist, and on any crash. It prints a table per category and the overall
# import rate. --write-expected regenerates the list from the current state.
#
# Standard library only: CI runs it with Debian's python3.
#
#===-----------------------------------------------------------------------===#

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys

CATEGORIES = ["node", "simple", "pytorch-converted", "pytorch-operator"]
ERROR_PREFIX = "hpc-opt: error: "


def find_models(data_dir):
    """Model paths relative to data_dir, sorted, in the walked categories."""
    models = []
    for category in CATEGORIES:
        root = os.path.join(data_dir, category)
        if not os.path.isdir(root):
            continue
        for test in sorted(os.listdir(root)):
            rel = os.path.join(category, test, "model.onnx")
            if os.path.isfile(os.path.join(data_dir, rel)):
                models.append(rel)
    return models


def run_one(hpc_opt, data_dir, rel, timeout):
    """Returns (rel, outcome, detail); outcome is imported/unsupported/crash."""
    model = os.path.join(data_dir, rel)
    cmd = [hpc_opt, model, "--emit=mlir", "-o", os.devnull]
    bound = os.path.join(os.path.dirname(model), "test_data_set_0")
    if os.path.isdir(bound):
        cmd.insert(2, "--bind-inputs=" + bound)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return rel, "crash", "timed out after %d s" % timeout
    except OSError as e:
        return rel, "crash", "cannot run %s: %s" % (hpc_opt, e)
    out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    lines = out.splitlines()
    if proc.returncode == 0:
        return rel, "imported", ""
    if (proc.returncode == 1 and len(lines) == 1
            and lines[0].startswith(ERROR_PREFIX)
            and "Stack dump" not in out):
        return rel, "unsupported", reason_of(lines[0], model)
    if proc.returncode < 0:
        what = "killed by signal %d" % -proc.returncode
    else:
        what = "exit status %d" % proc.returncode
    first = lines[0] if lines else "(no output)"
    return rel, "crash", "%s, %d output lines: %s" % (what, len(lines), first)


def reason_of(line, model):
    """The error line without the prefix and the model path, shortened."""
    reason = line[len(ERROR_PREFIX):]
    if reason.startswith(model + ": "):
        reason = reason[len(model) + 2:]
    reason = reason.replace("#", "")
    if len(reason) > 110:
        reason = reason[:107] + "..."
    return reason


def read_expected(path):
    """Model paths of the expected-unsupported list."""
    expected = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            entry = line.split("#", 1)[0].strip()
            if entry:
                expected.add(entry)
    return expected


def write_expected(path, results):
    with open(path, "w", encoding="utf-8") as f:
        f.write(
            "# ONNX backend test models that hpc-opt does not import (yet).\n"
            "# One model path relative to the test data folder per line, with\n"
            "# the importer's one-line reason, shortened. import_walk.py fails\n"
            "# when a listed model imports: delete its line then.\n"
            "# Regenerate: import_walk.py ... --write-expected THIS_FILE\n")
        for rel, outcome, detail in results:
            if outcome == "unsupported":
                f.write("%s # %s\n" % (rel, detail))


def main():
    parser = argparse.ArgumentParser(
        description="Import every ONNX backend test model with hpc-opt.")
    parser.add_argument("--hpc-opt", required=True, help="the hpc-opt binary")
    parser.add_argument("--data", required=True,
                        help="ONNX backend test data folder (holds node/ ...)")
    parser.add_argument("--expected", required=True,
                        help="the expected-unsupported list")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=int, default=60,
                        help="seconds per model (default 60)")
    parser.add_argument("--write-expected", metavar="FILE",
                        help="write the list of unsupported models to FILE "
                             "(crashes are never listed)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print the outcome of every model")
    args = parser.parse_args()

    hpc_opt = shutil.which(args.hpc_opt)
    if not hpc_opt:
        print("error: %s is not an executable" % args.hpc_opt, file=sys.stderr)
        return 2
    args.hpc_opt = hpc_opt
    models = find_models(args.data)
    if not models:
        print("error: no model.onnx under %s" % args.data, file=sys.stderr)
        return 2
    expected = read_expected(args.expected)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(
            lambda rel: run_one(args.hpc_opt, args.data, rel, args.timeout),
            models))

    failures = []
    for rel, outcome, detail in results:
        if args.verbose:
            print("%-11s %s%s" % (outcome, rel, "  " + detail if detail else ""))
        if outcome == "crash":
            failures.append("CRASH: %s: %s" % (rel, detail))
        elif outcome == "imported" and rel in expected:
            failures.append("UNEXPECTED IMPORT: %s (listed as unsupported; "
                            "delete its line)" % rel)
        elif outcome == "unsupported" and rel not in expected:
            failures.append("UNEXPECTED FAILURE: %s: %s" % (rel, detail))
    walked = set(models)
    for rel in sorted(expected - walked):
        failures.append("STALE ENTRY: %s is listed but not in the test data"
                        % rel)

    print("%-20s %6s %9s %8s" % ("category", "total", "imported", "rate"))
    for category in CATEGORIES + ["all"]:
        rows = [r for r in results
                if category == "all" or r[0].startswith(category + os.sep)]
        if not rows:
            continue
        ok = sum(1 for r in rows if r[1] == "imported")
        print("%-20s %6d %9d %7.1f%%" % (category, len(rows), ok,
                                          100.0 * ok / len(rows)))
    crashes = sum(1 for r in results if r[1] == "crash")
    imported = sum(1 for r in results if r[1] == "imported")
    print("crashes: %d" % crashes)
    print("import rate: %d/%d (%.1f%%)" % (imported, len(results),
                                           100.0 * imported / len(results)))

    if args.write_expected:
        write_expected(args.write_expected, results)

    # Problems go to stderr: lit shows it when the test fails, while stdout
    # (the table) feeds FileCheck.
    sys.stdout.flush()
    for f in failures:
        print(f, file=sys.stderr)
    if failures:
        print("%d problem(s); see above" % len(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
