#!/usr/bin/env python3
#===- add_to_corpus.py - turn fuzz reproducers into corpus entries --------===#
#
#   add_to_corpus.py [--corpus test/fuzz/corpus] [--prefix s1-] REPRO...
#
# Copies each reproducer directory that fuzz_importer.py saved (OUT/bad/N,
# OUT/lenient/N) into the corpus without its stack dump: the model and its
# files (links kept), args.txt, fifos.txt, and a what.txt that says what the
# fuzzer found and the outcome hpc-opt gives now ("expect: accepted" or
# "expect: rejected"), which the corpus test then requires. A reproducer
# whose outcome is still bad is refused: fix the importer first.
#
#===-----------------------------------------------------------------------===#

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)

from fuzz_importer import run_hpc_opt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description="Add fuzz reproducers to the corpus.")
    p.add_argument("--corpus", default=os.path.join(HERE, "corpus"))
    p.add_argument("--hpc-opt", default=os.path.join(HERE, "..", "..", "build", "bin", "hpc-opt"))
    p.add_argument("--prefix", default="")
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("repro", nargs="+")
    args = p.parse_args()
    status = 0
    for repro in args.repro:
        repro = repro.rstrip("/")
        with open(os.path.join(repro, "cmd.txt")) as f:
            cmd_lines = f.read().splitlines()
        found = [l[2:] for l in cmd_lines[1:] if l.startswith("# ")]
        name = args.prefix + os.path.basename(repro)
        dest = os.path.join(args.corpus, name)
        if os.path.exists(dest):
            shutil.rmtree(dest)
        shutil.copytree(repro, dest, symlinks=True,
                        ignore=lambda d, names: [n for n in names
                                                 if n in ("cmd.txt", "stderr.txt")])
        if not os.path.exists(os.path.join(dest, "args.txt")):
            tokens = cmd_lines[0].split()
            if tokens[2:-2]:
                with open(os.path.join(dest, "args.txt"), "w") as f:
                    f.write(" ".join(tokens[2:-2]) + "\n")
        for root, dirs, files in os.walk(dest):
            if root != dest and not dirs and not files:  # git keeps no empty dir
                open(os.path.join(root, "keep"), "w").close()
        # Run it as the corpus test will: from a copy, FIFOs made.
        with tempfile.TemporaryDirectory() as tmp:
            work = os.path.join(tmp, name)
            shutil.copytree(dest, work, symlinks=True)
            fifos = os.path.join(work, "fifos.txt")
            if os.path.exists(fifos):
                with open(fifos) as f:
                    for fifo in f.read().split():
                        os.mkfifo(os.path.join(work, fifo))
            extra = []
            if os.path.exists(os.path.join(work, "args.txt")):
                with open(os.path.join(work, "args.txt")) as f:
                    extra = f.read().split()
            model = [m for m in os.listdir(work) if m.endswith((".onnx", ".onnxtxt"))][0]
            outcome, detail, _, err, _ = run_hpc_opt(
                os.path.abspath(args.hpc_opt), os.path.join(work, model), extra,
                "import", args.timeout)
        if outcome == "bad":
            print("%s: still bad (%s); not added" % (repro, detail))
            shutil.rmtree(dest)
            status = 1
            continue
        with open(os.path.join(dest, "what.txt"), "w") as f:
            for line in found:
                f.write(line.replace("outcome:", "found:", 1) + "\n")
            f.write("expect: %s\n" % outcome)
        print("%s: %s" % (name, outcome))
    return status


if __name__ == "__main__":
    sys.exit(main())
