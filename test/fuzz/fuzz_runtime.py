#!/usr/bin/env python3
#===- fuzz_runtime.py - bad inputs for compiled programs, classify runs ---===#
#
# Compiles a few small programs with hpc-opt (y = x + w, the bundled CNN, a
# Gather, the train step of a linear layer, and the GPT example's train step
# fed --tokens), then runs them on inputs made by runtime_mutators.py: .npy
# and TensorProto files, weights files, command lines, devices and special
# files, train data, token files and checkpoints.
# Each case carries a verdict found without the runtime (see
# runtime_mutators.py), and each run is sorted into one of:
#
#   accepted   exit 0 on an input that may be valid
#   rejected   exit 1 with exactly one line on stderr, "<prog>: error: ..."
#              (stdout does not count)
#   lenient    exit 0 on an input invalid only in what the runtime does not
#              read (the padding of a .npy header, a manifest's world_size):
#              counted, not bad
#   bad        silent (exit 0 on an input that is invalid), crash (a
#              signal), other (another exit status, or a run that replaced
#              /dev/full by a file), multiline (exit 1 with
#              more or fewer than one line, or one not "<prog>: error: "),
#              oom (the one line is "out of memory": the reader ran into
#              the --memory-limit cap, which no case needs), hang (no
#              answer within --timeout)
#   pending    with --pending DIR: bad like one of the reproducers in DIR
#              (the same category, outcome and kind of mutation): a failure
#              reported and not fixed yet, counted apart
#
# Every run has stdin closed, --timeout seconds and --memory-limit MB of
# address space. Every bad case is saved under --keep-dir as a reproducer
# folder (case.json, files/, stderr.txt) that --corpus replays.
#
#   fuzz_runtime.py --seed 1 --count 1000 --keep-dir /tmp/rt-fuzz
#   fuzz_runtime.py --corpus test/fuzz/runtime-corpus
#
# Exit status: 0 when no run was bad, 1 otherwise.
#
#===-----------------------------------------------------------------------===#

import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import fuzz_importer  # noqa: E402  (the memory cap of each run)
import runtime_mutators as rm  # noqa: E402

GATHER = """<ir_version: 8, opset_import: ["" : 17]>
gather (int64[3] idx) => (float[3,2] y)
<float[4,2] w = {1,2,3,4,5,6,7,8}>
{
  y = Gather(w, idx)
}
"""

LINEAR = """<ir_version: 8, opset_import: ["" : 17]>
linear (float[4,3] x) => (float[4,2] y)
<float[3,2] w = {1,2,3,4,5,6}, float[2] b = {0.5,-0.5}>
{
  h = MatMul(x, w)
  y = Add(h, b)
}
"""


class Target:
    """A compiled program and what its valid inputs are."""

    def __init__(self, name, model, args, command, inputs, batch=None, text=None,
                 index_bound=0, vocab=0, categories=None):
        self.name = name
        self.model = model          # path under the repository, or None with text
        self.text = text
        self.args = args
        self.command = command      # "run" or "train"
        self.inputs = inputs        # (name, numpy dtype, shape): per sample for train
        self.batch = batch
        self.samples = 8
        self.index_bound = index_bound
        self.vocab = vocab          # fed by --tokens: token ids below this
        self.categories = categories  # the only ones drawn for it, when set
        self.program = None
        self.weights = None         # bytes of its weights file
        self.weights_name = None
        self.checkpoint = {}        # "step-2/..." -> bytes
        self.check_inputs = False   # run --check-inputs exists
        self.peer_timeout = False   # --peer-timeout exists


TARGETS = [
    Target("add", "test/E2E/Inputs/add-w1.onnxtxt", [], "run", [("x", "float32", (2, 3))]),
    Target("cnn", "examples/cnn.onnx", [], "run", [("image", "float32", (1, 3, 32, 32))]),
    Target("gather", None, [], "run", [("idx", "int64", (3,))], text=GATHER, index_bound=4),
    Target("train", None, ["--train", "--loss=mse:y,target", "--optimizer=adamw",
                           "--lr=0.01"], "train",
           [("x", "float32", (3,)), ("target", "float32", (2,))], batch=4, text=LINEAR),
    Target("gpt", "examples/gpt2.onnx",
           ["--input-shape", "input_ids=2,16", "--train", "--loss=cross-entropy:logits,labels",
            "--optimizer=sgd"], "train",
           [("input_ids", "int64", (16,)), ("labels", "int64", (16,))], batch=2, vocab=512,
           categories=("tokens", "special")),
]


def build_targets(hpc_opt, work, names=None):
    """Compiles the targets into `work` and checks that each runs on its
    valid inputs (else the cases say nothing)."""
    out = []
    for t in TARGETS:
        if names and t.name not in names:
            continue
        model = os.path.join(ROOT, t.model) if t.model else os.path.join(work, t.name + ".onnxtxt")
        if t.text:
            with open(model, "w") as f:
                f.write(t.text)
        t.program = os.path.join(work, t.name + ".bin")
        subprocess.run([hpc_opt, model] + t.args + ["-o", t.program], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t.weights_name = t.name + ".bin.safetensors"
        wpath = os.path.join(work, t.weights_name)
        if os.path.exists(wpath):
            with open(wpath, "rb") as f:
                t.weights = f.read()
        usage = subprocess.run([t.program, "--help"], capture_output=True, text=True).stdout
        t.check_inputs = "--check-inputs" in usage
        t.peer_timeout = "--peer-timeout" in usage
        base = rm.base_case("base", t, [], "any")
        if t.command == "train":
            base.argv += ["--ckpt-dir", "{case}/ck", "--ckpt-every", "1"]
        folder = os.path.join(work, "base-" + t.name)
        outcome, detail, rc, err = run_case(t, base, folder, 60)
        if outcome != "accepted":
            raise RuntimeError("%s does not run on valid inputs: %s %s" % (
                t.name, detail, err.decode("utf-8", "replace")))
        if t.command == "train":
            for sub in ("manifest.json", "rank-0.safetensors"):
                with open(os.path.join(folder, "ck", "step-2", sub), "rb") as f:
                    t.checkpoint["step-2/" + sub] = f.read()
        shutil.rmtree(folder, ignore_errors=True)
        out.append(t)
    return out


def write_case(target, case, folder):
    """Writes the case folder; returns the command line."""
    os.makedirs(folder, exist_ok=True)
    for name in case.dirs:
        os.makedirs(os.path.join(folder, name), exist_ok=True)
    for name, data in case.files.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    for name, dest in case.symlinks.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(dest, path)
    for name in case.fifos:
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkfifo(path)
    for name, mode in case.modes.items():
        os.chmod(os.path.join(folder, name), mode)
    program = target.program
    if case.link_program:
        program = os.path.join(folder, os.path.basename(target.program))
        try:
            os.link(target.program, program)
        except OSError:
            shutil.copy2(target.program, program)
    return [program] + [a.replace("{case}", folder) for a in case.argv]


def expected(case):
    """The case's verdict; an unreadable file is readable by root."""
    if case.expect == "any-if-root":
        return "any" if os.geteuid() == 0 else "reject"
    return case.expect


def classify(case, prog, rc, err):
    """(outcome, detail): outcome "accepted", "rejected", "lenient" or
    "bad" with what was wrong in `detail`."""
    lines = err.decode("utf-8", "replace").splitlines()
    verdict = expected(case)
    if rc == 0:
        if verdict == "reject":
            return "bad", "silent"
        if verdict == "strict":
            return "lenient", ""
        return "accepted", ""
    if rc < 0:
        return "bad", "crash"
    if rc != 1:
        return "bad", "other: exit %d" % rc
    if len(lines) != 1 or not lines[0].startswith(prog + ": error: "):
        return "bad", "multiline"
    if lines[0] == prog + ": error: out of memory":
        return "bad", "oom"
    return "rejected", ""


def run_case(target, case, folder, timeout):
    """(outcome, detail, returncode, stderr) of one case."""
    cmd = write_case(target, case, folder)
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout, cwd=folder,
                           preexec_fn=fuzz_importer._limit_memory
                           if fuzz_importer.MEMORY_LIMIT_MB else None)
    except subprocess.TimeoutExpired as e:
        return "bad", "hang", None, e.stderr or b""
    outcome, detail = classify(case, os.path.basename(cmd[0]), p.returncode, p.stderr)
    if "/dev/full" in " ".join(cmd) and not device_intact("/dev/full", 1, 7):
        return "bad", "other: replaced /dev/full", p.returncode, p.stderr
    return outcome, detail, p.returncode, p.stderr


def device_intact(path, major, minor):
    """Whether `path` is still that character device; if a run replaced it
    (a writer that renames a temporary file over its target, as root), it
    is made again when this process may."""
    try:
        st = os.lstat(path)
        if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == major and \
                os.minor(st.st_rdev) == minor:
            return True
    except OSError:
        pass
    try:
        if os.path.lexists(path):
            os.remove(path)
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(path, 0o666)
    except OSError:
        print("warning: %s is no longer the device it was" % path, file=sys.stderr)
    return False


def save_case(case, dest, detail=None, rc=None, err=b""):
    """A reproducer folder: case.json and files/ (FIFOs, links, folders and
    modes are made from case.json when it runs)."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(os.path.join(dest, "files"))
    for name, data in case.files.items():
        path = os.path.join(dest, "files", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    d = case.to_json()
    if detail:
        d["found"] = "%s (rc %s)" % (detail, rc)
    with open(os.path.join(dest, "case.json"), "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    if err:
        with open(os.path.join(dest, "stderr.txt"), "wb") as f:
            f.write(err[-4000:])


def load_case(folder):
    with open(os.path.join(folder, "case.json")) as f:
        d = json.load(f)
    files = {}
    root = os.path.join(folder, "files")
    for dirpath, _, names in os.walk(root):
        for n in names:
            path = os.path.join(dirpath, n)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = f.read()
    return rm.Case.from_json(d, files)


def remove_tree(folder):
    for dirpath, dirnames, _ in os.walk(folder):
        for n in dirnames:
            try:
                os.chmod(os.path.join(dirpath, n), 0o755)
            except OSError:
                pass
    shutil.rmtree(folder, ignore_errors=True)


COLUMNS = ["accepted", "rejected", "lenient", "pending", "silent", "crash", "hang",
           "multiline", "oom", "other"]


def signature(case, detail):
    """What kind of failure a case shows: its category, the outcome and
    the first two parts of its description, numbers left out (an input's
    name does not count)."""
    names = {n for t in TARGETS if t.name == case.target for n, _, _ in t.inputs}
    what = [w for w in case.what if w not in names][:2]
    return (case.category, column("bad", detail),
            tuple(re.sub(r"[0-9]+", "N", w) for w in what))


def pending_signatures(folder):
    """The signatures of the reproducers in `folder` (test/fuzz/runtime-
    pending: failures reported and not fixed yet)."""
    sigs = set()
    if folder and os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            if os.path.exists(os.path.join(folder, name, "case.json")):
                case = load_case(os.path.join(folder, name))
                with open(os.path.join(folder, name, "case.json")) as f:
                    found = json.load(f).get("found", "silent")
                sigs.add(signature(case, found))
    return sigs


def column(outcome, detail):
    """The table column of a run: its outcome, or for a bad one the kind
    ("silent", "hang", "other" for "other: exit 3")."""
    return detail.split(":")[0].split()[0] if outcome == "bad" else outcome


def print_table(title, rows):
    """rows: category -> Counter of outcomes (bad ones by detail)."""
    print(title)
    print("  %-12s %6s" % ("category", "cases") + "".join(" %9s" % c for c in COLUMNS))
    total = collections.Counter()
    for cat in sorted(rows):
        r = rows[cat]
        total.update(r)
        print("  %-12s %6d" % (cat, sum(r.values())) + "".join(" %9d" % r[c] for c in COLUMNS))
    print("  %-12s %6d" % ("total", sum(total.values())) +
          "".join(" %9d" % total[c] for c in COLUMNS))
    return sum(total[c] for c in COLUMNS[4:])


def fuzz(args):
    work = tempfile.mkdtemp(prefix="hpc-rtfuzz-")
    try:
        targets = build_targets(args.hpc_opt, work, args.targets)
        return _fuzz(args, targets, work)
    finally:
        remove_tree(work)


def _fuzz(args, targets, work):
    by_name = {t.name: t for t in targets}
    rows = collections.defaultdict(collections.Counter)
    lock = threading.Lock()
    keep = args.keep_dir
    bad_cases = []
    pending = pending_signatures(args.pending)
    if keep:
        os.makedirs(keep, exist_ok=True)
    log = open(args.log, "w") if args.log else None

    def one(i):
        rng = random.Random("%d:%d" % (args.seed, i))
        case = rm.generate(rng, targets, args.categories)
        folder = os.path.join(work, "case-%d" % i)
        outcome, detail, rc, err = run_case(by_name[case.target], case, folder, args.timeout)
        remove_tree(folder)
        if outcome == "bad" and signature(case, detail) in pending:
            outcome = "pending"
        key = column(outcome, detail)
        line = err.decode("utf-8", "replace").splitlines()[:1]
        with lock:
            if log:
                log.write(json.dumps({"index": i, "category": case.category,
                                      "target": case.target, "what": case.what,
                                      "expect": case.expect, "outcome": outcome,
                                      "detail": detail, "stderr": line}) + "\n")
            rows[case.category][key] += 1
            if outcome == "bad":
                bad_cases.append(i)
                if keep:
                    save_case(case, os.path.join(keep, "bad", "%d-%d" % (args.seed, i)),
                              detail, rc, err)
                if args.verbose:
                    print("BAD %d: %s: %s/%s: %s" % (i, detail, case.category, case.target,
                                                     "; ".join(case.what)))
            elif outcome == "lenient" and keep:
                save_case(case, os.path.join(keep, "lenient", "%d-%d" % (args.seed, i)),
                          "lenient", rc, err)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, range(args.start, args.start + args.count)))

    if log:
        log.close()
    bad = print_table("runtime cases: %d (seed %d, %d programs)" % (
        args.count, args.seed, len(targets)), rows)
    if pending:
        print("pending: %d (failures like those of the %d kinds in %s)" % (
            sum(r["pending"] for r in rows.values()), len(pending), args.pending))
    print("bad: %d" % bad)
    if keep:
        with open(os.path.join(keep, "summary.json"), "w") as f:
            json.dump({"seed": args.seed, "count": args.count,
                       "rows": {k: dict(v) for k, v in rows.items()},
                       "bad": sorted(bad_cases)}, f, indent=2)
        if bad:
            print("reproducers: %s" % os.path.join(keep, "bad"))
    return 1 if bad else 0


def corpus(args):
    """Replays every reproducer folder (case.json) under args.corpus: each
    must now end in one of the outcomes that are not bad."""
    work = tempfile.mkdtemp(prefix="hpc-rtcorpus-")
    try:
        cases = []
        for name in sorted(os.listdir(args.corpus)):
            if os.path.exists(os.path.join(args.corpus, name, "case.json")):
                cases.append((name, load_case(os.path.join(args.corpus, name))))
        needed = sorted({c.target for _, c in cases})
        targets = {t.name: t for t in build_targets(args.hpc_opt, work, needed)}
        rows = collections.defaultdict(collections.Counter)
        bad = 0
        for name, case in cases:
            folder = os.path.join(work, "case-" + name)
            outcome, detail, rc, err = run_case(targets[case.target], case, folder,
                                                args.timeout)
            remove_tree(folder)
            rows[case.category][column(outcome, detail)] += 1
            if outcome == "bad" or args.verbose:
                print("%s: %s%s: %s" % (name, outcome, " (%s)" % detail if detail else "",
                                        "; ".join(case.what)))
            if outcome == "bad":
                bad += 1
                sys.stdout.write(err.decode("utf-8", "replace")[-1000:])
        print_table("corpus: %d cases, %d bad" % (len(cases), bad), rows)
        return 1 if bad or not cases else 0
    finally:
        remove_tree(work)


def main():
    p = argparse.ArgumentParser(description="Fuzz the inputs of compiled programs.")
    p.add_argument("--hpc-opt", default=shutil.which("hpc-opt") or
                   os.path.join(ROOT, "build", "bin", "hpc-opt"),
                   help="the hpc-opt that compiles the programs (default: the one on "
                        "PATH, else build/bin/hpc-opt)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--start", type=int, default=0,
                   help="index of the first case (to resume or reproduce one)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds before a run counts as a hang")
    p.add_argument("--jobs", "-j", type=int, default=2)
    p.add_argument("--memory-limit", type=int, default=4096, metavar="MB",
                   help="address-space limit of each run; 0: none (for an ASan "
                        "build, whose shadow memory reserves terabytes)")
    p.add_argument("--keep-dir", "--out", metavar="DIR",
                   help="save a reproducer of every bad case under DIR/bad")
    p.add_argument("--log", metavar="FILE",
                   help="write one JSON line per case: what it was, its verdict and "
                        "outcome, the first stderr line")
    p.add_argument("--categories", type=lambda s: s.split(","),
                   help="comma-separated categories to draw from: " +
                        ", ".join(c for c, _, _ in rm.CATEGORIES))
    p.add_argument("--targets", type=lambda s: s.split(","),
                   help="comma-separated programs: " + ", ".join(t.name for t in TARGETS))
    p.add_argument("--pending", metavar="DIR",
                   help="count a bad case like one of the reproducers in DIR (reported, "
                        "not fixed yet) as pending instead of bad")
    p.add_argument("--corpus", metavar="DIR",
                   help="replay the reproducers in DIR instead of new cases")
    p.add_argument("--verbose", "-v", action="store_true")
    args = p.parse_args()
    args.hpc_opt = os.path.abspath(args.hpc_opt)
    fuzz_importer.MEMORY_LIMIT_MB = args.memory_limit
    if args.corpus:
        return corpus(args)
    return fuzz(args)


if __name__ == "__main__":
    sys.exit(main())
