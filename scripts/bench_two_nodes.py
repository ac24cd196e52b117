"""Overlap of the gradient all-reduces with the backward pass on the two-node
cluster (docs/benchmarks.md, "Overlap on the two-node cluster").

A GPT of the given size (scripts/gen_gpt.py) is compiled for dp=2 (--dp) as a train
step twice: with the default schedule (gradient buckets, each started as
soon as its last gradient is computed and waited for at its first use) and
with --no-overlap (the same buckets, blocking). Each runs on the two-node
cluster (scripts/netns-cluster.sh, one rank a node, the link shaped to
--rate) with --trace; printed per variant: the median step time over the
steps after the warm-up, and from scripts/overlap_report.py the
communication, exposed communication and overlap ratio of those steps;
then the step-time ratio, and the backward compute against the link time of
the gradients (bytes per rank / measured link rate), which the overlap
needs to be well above 1.

With --compare hierarchical (dp=4 or more, two ranks or more a node) the
variants are instead the gradient reductions as flat rings
(--hierarchical=off), in two levels (on) and as the cost model of the
calibrated link chooses (auto), each compiled with --cluster=that link's
file; the bytes across nodes per step (the compiler's count) are printed
with them.

With --compare compress (dp=4 or more) the variants are flat rings, two
levels, two levels with int8 blocks across (--compress=int8), two levels
with PowerSGD rank 4 across (--compress=powersgd:4), and auto (both
choices to the cost model of the calibrated link), each with error
feedback and compiled with --cluster=that link's file.

usage: /usr/bin/python3 scripts/bench_two_nodes.py [--layers 4] [--embd 256]
       [--vocab 2048] [--seq 128] [--batch 64] [--steps 8] [--warmup 3]
       [--rate 1gbit] [--bucket-mb auto|model|MiB] [--dp 2] [--zero N] [--keep DIR]
       [--compare overlap|hierarchical|compress]
Needs root (network namespaces), build/bin/hpc-opt, numpy and mpirun.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import mpibench
from mpibench import HPC_OPT, ROOT, gpt_with_tokens, run

CLUSTER = os.path.join(ROOT, "scripts", "netns-cluster.sh")
NAME = "bench-two-nodes"


def compile_step(model, batch, seq, dp, extra, out):
    log = run([HPC_OPT, model, f"--input-shape=input_ids={batch},{seq}", "--train",
               "--loss=cross-entropy:logits,labels", "--optimizer=adamw", "--lr=1e-4",
               f"--mesh=dp={dp}", *extra, "-o", out])
    return int(re.search(r"each rank sends (\d+) bytes per step", log).group(1)), log


def train(binary, data, dp, steps, trace, metrics):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [CLUSTER, "--name", NAME, "run", "-n", str(dp), binary, "train",
           "--data", f"input_ids={data}/input_ids.npy", "--data", f"labels={data}/labels.npy",
           "--steps", str(steps), "--threads", "1", "--trace", trace, "--metrics", metrics]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    steps_ms = [json.loads(l)["step_ms"] for l in open(metrics) if '"step_ms"' in l]
    return steps_ms


def overlap(trace, warmup):
    out = run([sys.executable, os.path.join(ROOT, "scripts", "overlap_report.py"), trace,
               "--skip-steps", str(warmup), "--json"])
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64, help="global batch (B/dp a rank)")
    ap.add_argument("--dp", type=int, default=2, help="ranks (node-major: dp/2 a node)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--bucket-mb", default="auto",
                    help="MiB, auto, or model (compiled with --cluster=the calibrated link)")
    ap.add_argument("--zero", type=int, default=0, help="ZeRO stage of both variants (0: off)")
    ap.add_argument("--keep", default="", help="keep the binaries and traces in this directory")
    ap.add_argument("--compare", default="overlap",
                    choices=["overlap", "hierarchical", "compress"],
                    help="overlap: with and without overlap; hierarchical: flat, two-level "
                         "and auto reductions; compress: flat, two-level, + int8, + PowerSGD "
                         "and auto")
    a = ap.parse_args()
    if a.compare != "overlap" and a.dp < 4:
        sys.exit(f"--compare {a.compare} needs --dp 4 or more (two ranks a node)")
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, _ = gpt_with_tokens(d, a)
        variants = {"overlap": [], "no-overlap": ["--no-overlap"]}
        if a.compare == "hierarchical":
            variants = {"flat": ["--hierarchical=off"], "two-level": ["--hierarchical=on"],
                        "auto": ["--hierarchical=auto"]}
        elif a.compare == "compress":
            variants = {"flat": ["--hierarchical=off"], "two-level": ["--hierarchical=on"],
                        "int8": ["--hierarchical=on", "--compress=int8"],
                        "powersgd": ["--hierarchical=on", "--compress=powersgd:4"],
                        "auto": ["--hierarchical=auto", "--compress=auto"]}
        bins, sent, chosen, across = {}, 0, "", {}
        run([CLUSTER, "--name", NAME, "up", "--rate", a.rate])
        try:
            # The link first: --bucket-mb model sizes the buckets from it.
            run([CLUSTER, "--name", NAME, "run", "-n", str(a.dp), "--per-node", str(a.dp // 2),
                 os.path.join(ROOT, "build", "bin", "hpc-calibrate"), "--quick",
                 "-o", f"{d}/link.json"])
            beta = [c for c in json.load(open(f"{d}/link.json"))["calibration"]["collectives"]
                    if c["level"] == "inter-node" and c["kind"] == "all_reduce"][0]
            buckets = (["--bucket-mb", "auto", f"--cluster={d}/link.json"]
                       if a.bucket_mb == "model" else ["--bucket-mb", a.bucket_mb])
            for name, extra in variants.items():
                bins[name] = f"{d}/{name}.bin"
                zero = [f"--zero={a.zero}"] if a.zero else []
                if a.compare != "overlap":
                    extra = [*extra, f"--cluster={d}/link.json"]
                sent, log = compile_step(model, a.batch, a.seq, a.dp, [*buckets, *zero, *extra],
                                         bins[name])
                chosen = chosen or "".join(re.findall(r"dist-bucket: .*", log))
                levels = re.search(r"dist-hierarchical: (\d+) of (\d+) .* (\d+) across nodes \(",
                                   log)
                if levels:
                    across[name] = (f"{levels.group(1)}/{levels.group(2)} two-level, "
                                    f"{int(levels.group(3))} bytes across nodes a step")
                codec = re.search(r"dist-compress: (\d+) of (\d+) reductions across nodes "
                                  r"compressed( \(([^;]*?), error feedback \w+\))?.*?"
                                  r"send (\d+) bytes across", log)
                if codec:
                    across[name] += (f"; {codec.group(1)}/{codec.group(2)} compressed"
                                     + (f" ({codec.group(4)})" if codec.group(4) else "")
                                     + f", {int(codec.group(5))} bytes across")
            results = {}
            for name in variants:
                ms = train(bins[name], d, a.dp, a.steps, f"{d}/{name}.json",
                           f"{d}/{name}.jsonl")
                results[name] = (statistics.median(ms[a.warmup:]), overlap(f"{d}/{name}.json",
                                                                          a.warmup))
        finally:
            run([CLUSTER, "--name", NAME, "down"])
    print(f"model: GPT {a.layers} layers, d={a.embd}, vocab {a.vocab}; global batch {a.batch} x {a.seq} tokens, dp={a.dp} "
          f"({a.dp // 2} rank(s) a node), "
          f"link {a.rate}, buckets {a.bucket_mb} MiB" + (f", ZeRO-{a.zero}" if a.zero else ""))
    print(f"gradient bytes each rank sends per step: {sent}; all_reduce across the link "
          f"(hpc-calibrate --quick): beta {beta['beta_gbytes_per_s']:.3f} GB/s, alpha "
          f"{beta['alpha_us']:.0f} us -> {sent / beta['beta_gbytes_per_s'] / 1e6:.1f} ms")
    if chosen:
        print(chosen)
    print(f"{'variant':>10} {'step_ms':>9} {'compute_ms':>10} {'comm_ms':>9} {'exposed_ms':>10} "
          f"{'overlap':>8}")
    for name, (step, rep) in results.items():
        rows = rep["rows"]
        compute = statistics.mean(r["compute_ms"] for r in rows)
        t = rep["total"]
        n = t["steps"] * t["ranks"]
        print(f"{name:>10} {step:9.1f} {compute:10.1f} {t['comm_ms'] / n:9.1f} "
              f"{t['exposed_ms'] / n:10.1f} {100 * t['overlap']:7.1f}%"
              + (f"  {across[name]}" if name in across else ""))
    if a.compare == "overlap":
        print(f"step time overlap / no-overlap: "
              f"{results['overlap'][0] / results['no-overlap'][0]:.3f}")
    else:
        fixed = [n for n in results if n != "auto"]
        for other in results:
            if other != "flat":
                print(f"step time {other} / flat: {results[other][0] / results['flat'][0]:.3f}")
        best = min(fixed, key=lambda n: results[n][0])
        print(f"step time auto / best fixed ({best}): "
              f"{results['auto'][0] / results[best][0]:.3f}")


if __name__ == "__main__":
    main()
