#!/usr/bin/env python3
#===- fuzz_importer.py - mutate models, run hpc-opt, classify outcomes ----===#
#
# Runs hpc-opt on mutated models (mutators.py over the seeds of seeds.py) and
# sorts each run into one of:
#
#   accepted   exit 0
#   rejected   exit 1 with exactly one line on stderr, "hpc-opt: error: ..."
#   bad        anything else: a signal (crash), another exit status, an
#              error of several lines or none, or no answer within --timeout
#              (a hang)
#
# Every bad case is saved under --out as a reproducer directory (the model,
# its external files, cmd.txt and stderr.txt). With --checker PYTHON, every
# accepted mutant is also checked with onnx.checker.check_model(full_check=
# True) by that interpreter (the test venv's newer onnx), and the accepted
# ones the checker rejects are saved under OUT/lenient/ and counted.
#
#   fuzz_importer.py --hpc-opt build/bin/hpc-opt --seed 1 --count 10000 \
#       --out /tmp/fuzz --checker build/test-venv/bin/python
#
# --corpus DIR runs the committed reproducers instead of mutants: each one
# must be accepted or rejected (exit 0 or one line).
# Exit status: 0 when no run was bad, 1 otherwise.
#
#===-----------------------------------------------------------------------===#

import argparse
import collections
import concurrent.futures
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))


def write_mutant(mutant, folder):
    os.makedirs(folder, exist_ok=True)
    for name in mutant.dirs:
        os.makedirs(os.path.join(folder, name), exist_ok=True)
    for name, data in mutant.files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    for name, target in mutant.symlinks.items():
        path = os.path.join(folder, name)
        if not os.path.lexists(path):
            os.symlink(target, path)
    for name in mutant.fifos:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            os.mkfifo(path)
    return os.path.join(folder, mutant.model_name)


MEMORY_LIMIT_MB = 4096


def _limit_memory():
    """RLIMIT_AS of MEMORY_LIMIT_MB; none under ASan, which reserves terabytes
    of address space at start (its own soft RSS limit, set in ASAN_OPTIONS
    by test/sanitizers/sanitizer_env.py, bounds the memory there)."""
    import resource
    if "ASAN_OPTIONS" in os.environ:
        return
    limit = MEMORY_LIMIT_MB << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_hpc_opt(hpc_opt, model, args, mode, timeout):
    """(outcome, detail, returncode, stderr, cmd) of one run, in at most
    MEMORY_LIMIT_MB of address space: a model that makes the importer
    allocate without bound fails instead of taking the machine."""
    cmd = [hpc_opt, model] + list(args)
    if mode == "shapes-only":
        cmd.append("--shapes-only")
    if mode == "llvm":
        cmd += ["--emit=llvm"]
    cmd += ["-o", os.devnull]
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout,
                           preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        return "bad", "hang", None, b"", cmd
    err = p.stderr
    lines = err.decode("utf-8", "replace").splitlines()
    if p.returncode == 0:
        return "accepted", "", 0, err, cmd
    if p.returncode < 0:
        return "bad", "signal %d" % -p.returncode, p.returncode, err, cmd
    if p.returncode != 1:
        return "bad", "exit %d" % p.returncode, p.returncode, err, cmd
    if len(lines) != 1 or not lines[0].startswith("hpc-opt: error: "):
        return "bad", "%d-line error" % len(lines), 1, err, cmd
    return "rejected", "", 1, err, cmd


class Checker:
    """onnx.checker in another interpreter, one model path a line."""

    def __init__(self, python):
        self.proc = subprocess.Popen(
            [python, os.path.join(HERE, "check_model.py")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, bufsize=1)
        self.lock = threading.Lock()

    def check(self, path):
        with self.lock:
            self.proc.stdin.write(path + "\n")
            self.proc.stdin.flush()
            return json.loads(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def save(folder, dest, mutant, cmd, rc, detail, stderr, what):
    """A reproducer directory: the model folder as it was run (links kept,
    FIFOs listed in fifos.txt), args.txt, cmd.txt and stderr.txt. Without
    cmd.txt and stderr.txt it is a corpus entry."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(folder, dest, symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in mutant.fifos])
    if mutant.fifos:
        with open(os.path.join(dest, "fifos.txt"), "w") as f:
            f.write("\n".join(mutant.fifos) + "\n")
    extra = cmd[2:-2]  # between the model and "-o /dev/null"
    if extra:
        with open(os.path.join(dest, "args.txt"), "w") as f:
            f.write(" ".join(extra) + "\n")
    with open(os.path.join(dest, "cmd.txt"), "w") as f:
        f.write(" ".join(cmd) + "\n# outcome: %s (rc %s)\n# mutation: %s\n"
                % (detail, rc, "; ".join(what)))
    with open(os.path.join(dest, "stderr.txt"), "wb") as f:
        f.write(stderr[-20000:])


def fuzz(args):
    import mutators
    import seeds as seedlib

    all_seeds = seedlib.all_seeds(big=args.big_seeds)
    # Every seed must import cleanly, or its mutants say nothing.
    good = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, s in enumerate(all_seeds):
            m = mutators.Mutant("seed", "model.onnx",
                                dict(s.files, **{"model.onnx": s.bytes}), s.args, [])
            path = write_mutant(m, os.path.join(tmp, str(i)))
            outcome, *_ = run_hpc_opt(args.hpc_opt, path, s.args, "import", args.timeout)
            if outcome == "accepted":
                good.append(s)
            elif args.verbose:
                print("seed %s does not import; skipped" % s.name)
    if not good:
        print("error: no seed imports", file=sys.stderr)
        return 2

    counts = collections.Counter()
    details = collections.Counter()
    lenient = collections.Counter()
    checker = Checker(args.checker) if args.checker else None
    os.makedirs(args.out, exist_ok=True)
    tmproot = tempfile.mkdtemp(prefix="hpc-fuzz-")
    modes = args.mode.split(",")
    lock = threading.Lock()

    def one(i):
        rng = random.Random("%d:%d" % (args.seed, i))
        seed = rng.choice(good)
        mutant = mutators.mutate(rng, seed)
        mode = rng.choice(modes)
        folder = os.path.join(tmproot, str(i))
        path = write_mutant(mutant, folder)
        outcome, detail, rc, err, cmd = run_hpc_opt(args.hpc_opt, path, mutant.args,
                                                    mode, args.timeout)
        what = ["seed " + seed.name, mutant.kind] + mutant.what
        verdict = None
        if outcome == "accepted" and checker and mutant.model_name.endswith(".onnx"):
            verdict = checker.check(path)
        with lock:
            counts[outcome] += 1
            if outcome == "bad":
                details[detail] += 1
                save(folder, os.path.join(args.out, "bad", "%d-%d" % (args.seed, i)),
                     mutant, cmd, rc, detail, err, what)
                if args.verbose:
                    print("BAD %d: %s: %s" % (i, detail, "; ".join(what)))
            if verdict is not None and not verdict["ok"]:
                counts["accepted, checker rejects"] += 1
                lenient[verdict["error"][:120]] += 1
                save(folder, os.path.join(args.out, "lenient", "%d-%d" % (args.seed, i)),
                     mutant, cmd, rc, "checker: " + verdict["error"], err, what)
        shutil.rmtree(folder, ignore_errors=True)

    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(one, range(args.start, args.start + args.count)))
    finally:
        shutil.rmtree(tmproot, ignore_errors=True)
        if checker:
            checker.close()

    summary = {"seed": args.seed, "count": args.count, "seeds": len(good),
               "outcomes": dict(counts), "bad": dict(details),
               "lenient": dict(lenient)}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print("mutations: %d (seed %d, %d seed models)" % (args.count, args.seed, len(good)))
    for k in ("accepted", "rejected", "bad", "accepted, checker rejects"):
        print("  %-26s %d" % (k + ":", counts.get(k, 0)))
    for k, v in sorted(details.items()):
        print("    bad, %s: %d" % (k, v))
    if args.verbose:
        for k, v in lenient.most_common():
            print("    checker: %d x %s" % (v, k))
    return 1 if counts["bad"] else 0


def corpus(args):
    """Runs every reproducer of the corpus: a directory with one model
    (model.onnx or model.onnxtxt), its files, args.txt (hpc-opt arguments),
    fifos.txt (FIFOs to make next to it: git holds none) and what.txt, whose
    "expect: accepted|rejected" line, when there, is the outcome it must have.
    Each runs from a copy in a temporary folder."""
    bad = 0
    n = 0
    tmproot = tempfile.mkdtemp(prefix="hpc-corpus-")
    try:
        for name in sorted(os.listdir(args.corpus)):
            case = os.path.join(args.corpus, name)
            if not os.path.isdir(case):
                continue
            work = os.path.join(tmproot, name)
            shutil.copytree(case, work, symlinks=True)
            def lines(fname):
                path = os.path.join(work, fname)
                if not os.path.exists(path):
                    return []
                with open(path) as f:
                    return [l.strip() for l in f if l.strip()]
            for fifo in lines("fifos.txt"):
                os.mkfifo(os.path.join(work, fifo))
            extra = " ".join(lines("args.txt")).split()
            expect = [l.split(":", 1)[1].strip() for l in lines("what.txt")
                      if l.startswith("expect:")]
            models = [f for f in sorted(os.listdir(work))
                      if f.endswith(".onnx") or f.endswith(".onnxtxt")]
            for model in models:
                n += 1
                outcome, detail, rc, err, cmd = run_hpc_opt(
                    args.hpc_opt, os.path.join(work, model), extra, "import", args.timeout)
                wrong = outcome == "bad" or (expect and expect[0] != outcome)
                print("%s/%s: %s%s%s" % (name, model, outcome,
                                         (" (%s)" % detail) if detail else "",
                                         (", expected %s" % expect[0]) if wrong and expect else ""))
                if wrong:
                    bad += 1
                    sys.stdout.write(err.decode("utf-8", "replace")[-2000:])
    finally:
        shutil.rmtree(tmproot, ignore_errors=True)
    print("corpus: %d models, %d bad" % (n, bad))
    return 1 if bad or n == 0 else 0


def main():
    global MEMORY_LIMIT_MB
    p = argparse.ArgumentParser(description="Fuzz the ONNX importer of hpc-opt.")
    p.add_argument("--hpc-opt", default=shutil.which("hpc-opt") or
                   os.path.join(HERE, "..", "..", "build", "bin", "hpc-opt"),
                   help="the hpc-opt to run (default: the one on PATH, else build/bin/hpc-opt)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--start", type=int, default=0,
                   help="index of the first mutant (to resume or reproduce one)")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="seconds before a run counts as a hang")
    p.add_argument("--jobs", "-j", type=int, default=2)
    p.add_argument("--memory-limit", type=int, default=4096, metavar="MB",
                   help="address-space limit of each hpc-opt run")
    p.add_argument("--out", default="fuzz-out")
    p.add_argument("--mode", default="import,import,import,shapes-only",
                   help="comma-separated hpc-opt modes drawn per mutant: import "
                        "(-o /dev/null), shapes-only, llvm (--emit=llvm)")
    p.add_argument("--big-seeds", action="store_true",
                   help="also mutate mlp, gpt2 and test/models/*.onnx (slower)")
    p.add_argument("--checker", metavar="PYTHON",
                   help="run onnx.checker (full_check) with this interpreter on "
                        "every accepted mutant")
    p.add_argument("--corpus", metavar="DIR",
                   help="run the reproducers in DIR instead of mutants")
    p.add_argument("--verbose", "-v", action="store_true")
    args = p.parse_args()
    args.hpc_opt = os.path.abspath(args.hpc_opt)
    MEMORY_LIMIT_MB = args.memory_limit
    if args.corpus:
        return corpus(args)
    return fuzz(args)


if __name__ == "__main__":
    sys.exit(main())
