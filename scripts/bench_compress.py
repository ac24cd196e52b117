#!/usr/bin/env python3
"""Compressed gradient reductions: convergence and bytes (docs/benchmarks.md,
"Compressed reductions across nodes").

    bench_compress.py convergence [--steps 300] [--lr 1e-3] [--rate 1gbit] [--plot loss.png]
    bench_compress.py bytes [--layers 4 --embd 256 ...]
    bench_compress.py memory [--layers 4 --embd 256 ...]

convergence: the bundled GPT example (examples/gpt2.onnx) trained --steps
steps on the license texts (scripts/make_tokens.py, one token per byte;
global batch --batch x --seq) at dp=4 over the two-node cluster
(scripts/netns-cluster.sh, 2 nodes x 2 ranks), reductions in two levels,
uncompressed and with each codec with and without error feedback (and
with its state in bf16, --error-feedback=bf16, and with the gradient
buffers in bf16, --gradient-buffers=bf16). Printed
per variant: the mean loss of the last 20 steps and its ratio to the
uncompressed run's, with the issue's bounds checked (int8 + error feedback
within 1%, PowerSGD rank 4 + error feedback within 3%); exit status 1 when
one is missed. --plot draws the loss curves (needs matplotlib:
build/test-venv/bin/python). Needs root (network namespaces) and mpirun.

bytes: a GPT of the given size (scripts/gen_gpt.py; numpy and onnx) compiled
for dp=4 on 2 nodes of 2 ranks, flat, in two levels and with each codec;
printed: the bytes that cross nodes per step (the compiler's count, which
the runtime's counters equal: test/Train/hierarchical-two-nodes.test), their
ratio to two levels uncompressed, and for PowerSGD the share its matrices
keep.

memory: the same GPT's train step (uncompressed and with each codec, with
and without error feedback, with the codec state and the gradient buffers
in f32 and in bf16) run 3 steps under mpirun -n 4 on this machine;
printed per rank: the gradient bytes the buckets reduce, the codec state
the compiler planned (residuals, PowerSGD's Q's), the whole plan, the
runtime's measured peak (metrics summary; it includes the collectives'
staging buffers, shown apart, which the compiler does not plan) and their
ratio (within 5%).
"""
import argparse
import json
import os
import re
import sys
import tempfile

from mpibench import HPC_OPT, MPIRUN, ROOT, gpt_with_tokens, run

CLUSTER = os.path.join(ROOT, "scripts", "netns-cluster.sh")
NAME = "bench-compress"
# The bounds on the last-20 mean loss against the uncompressed run.
BOUNDS = {"int8": 0.01, "powersgd:4": 0.03, "int8 bf16-state": 0.01,
          "powersgd:4 bf16-state": 0.03, "int8 bf16-buffers": 0.01, "int8 bf16-all": 0.01,
          "powersgd:4 bf16-all": 0.03}
# The bf16 variants' flags: the codec state (--error-feedback=bf16), the
# gradient buffers (--gradient-buffers=bf16), both.
BF16_STATE = ["--error-feedback=bf16"]
BF16_BUFFERS = ["--gradient-buffers=bf16"]
CLUSTER_JSON = {
    "name": "cpu-2x2", "nodes": 2, "devices_per_node": 2,
    "device": {"kind": "cpu", "memory_gib": 16, "reserved_gib": 1,
               "memory_bandwidth_gbytes_per_s": 20, "peak_tflops": {"fp32": 0.1, "bf16": 0.2}},
    "links": [
        {"level": "intra-node", "name": "shm", "bandwidth_gbytes_per_s": 5, "latency_us": 1},
        {"level": "inter-node", "name": "tcp", "bandwidth_gbytes_per_s": 0.125,
         "latency_us": 50}]}


def compile_gpt(model, shape, d, name, extra):
    """Compiles the train step for dp=4 on 2 x 2; its dist-compress line."""
    out = run([HPC_OPT, model, f"--input-shape=input_ids={shape}", "--train",
               "--loss=cross-entropy:logits,labels", "--optimizer=adamw", *extra,
               f"--cluster={d}/cpu-2x2.json", "--mesh=dp=4", "-o", f"{d}/{name}.bin"])
    return out


def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if '"loss"' in l]


def convergence(a, d):
    variants = {"none": [], "none bf16-buffers": BF16_BUFFERS, "int8": ["--compress=int8"],
                "int8 bf16-state": ["--compress=int8", *BF16_STATE],
                "int8 bf16-buffers": ["--compress=int8", *BF16_BUFFERS],
                "int8 bf16-all": ["--compress=int8", *BF16_STATE, *BF16_BUFFERS],
                "int8 no-ef": ["--compress=int8", "--error-feedback=off"],
                "powersgd:4": ["--compress=powersgd:4"],
                "powersgd:4 bf16-state": ["--compress=powersgd:4", *BF16_STATE],
                "powersgd:4 bf16-all": ["--compress=powersgd:4", *BF16_STATE, *BF16_BUFFERS],
                "powersgd:4 no-ef": ["--compress=powersgd:4", "--error-feedback=off"],
                "topk:0.01": ["--compress=topk:0.01"],
                "topk:0.01 no-ef": ["--compress=topk:0.01", "--error-feedback=off"]}
    run([sys.executable, os.path.join(ROOT, "scripts", "make_tokens.py"), "-o",
         f"{d}/licenses.bin", "/usr/share/common-licenses"])
    model = os.path.join(ROOT, "examples", "gpt2.onnx")
    files = {}
    for name, extra in variants.items():
        files[name] = name.replace(":", "-").replace(" ", "-")
        compile_gpt(model, f"{a.batch},{a.seq}", d, files[name],
                    [f"--lr={a.lr}", "--hierarchical=on", *extra])
    run([CLUSTER, "--name", NAME, "up", "--rate", a.rate])
    try:
        for name in variants:
            run([CLUSTER, "--name", NAME, "run", "-n", "4", "--per-node", "2",
                 f"{d}/{files[name]}.bin", "train", "--tokens", f"{d}/licenses.bin", "--steps",
                 str(a.steps), "--threads", "1", "--metrics", f"{d}/{files[name]}.jsonl"])
    finally:
        run([CLUSTER, "--name", NAME, "down"])
    curves = {name: losses(f"{d}/{files[name]}.jsonl") for name in variants}
    base = sum(curves["none"][-20:]) / 20
    print(f"GPT example, {a.steps} steps on the license texts, global batch {a.batch} x "
          f"{a.seq}, AdamW lr {a.lr}, dp=4 on 2 nodes x 2 ranks (link {a.rate}), two levels")
    print(f"{'variant':>22} {'last-20 loss':>13} {'vs none':>9}")
    ok = True
    for name, curve in curves.items():
        mean = sum(curve[-20:]) / 20
        rel = mean / base - 1
        bound = BOUNDS.get(name)
        verdict = "" if bound is None else ("  OK" if abs(rel) <= bound else "  MISSED") + \
            f" (bound {100 * bound:.0f}%)"
        ok = ok and (bound is None or abs(rel) <= bound)
        print(f"{name:>22} {mean:13.4f} {100 * rel:+8.2f}%{verdict}")
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, (name, curve) in enumerate(curves.items()):
            # A 10-step moving average: the corpus changes from step to step.
            smooth = [sum(curve[max(0, i - 9):i + 1]) / len(curve[max(0, i - 9):i + 1])
                      for i in range(len(curve))]
            ax.plot(range(1, len(curve) + 1), smooth, label=name, color=plt.cm.tab20(i),
                    linestyle="--" if "no-ef" in name else "-")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (10-step moving average)")
        ax.set_title(f"GPT example, dp=4 on two nodes: compressed gradient reductions")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)
        print(f"plot: {a.plot}")
    return ok


def bytes_table(a, d):
    model = f"{d}/gpt.onnx"
    run([sys.executable, os.path.join(ROOT, "scripts", "gen_gpt.py"), "--layers", str(a.layers),
         "--embd", str(a.embd), "--heads", str(a.heads), "--vocab", str(a.vocab),
         "--max-pos", str(a.seq), "-o", model])
    variants = {"flat": ["--hierarchical=off"], "two levels": ["--hierarchical=on"],
                "int8": ["--hierarchical=on", "--compress=int8"],
                "powersgd:4": ["--hierarchical=on", "--compress=powersgd:4"],
                "topk:0.01": ["--hierarchical=on", "--compress=topk:0.01"]}
    rows = {}
    for name, extra in variants.items():
        log = compile_gpt(model, f"{a.batch},{a.seq}", d, "step", ["--lr=1e-4", *extra])
        codec = re.search(r"dist-compress: .*send (\d+) bytes across nodes .*codec state (\d+)",
                          log)
        levels = re.search(r"dist-hierarchical: .* (\d+) across nodes \(flat: (\d+) across\)", log)
        across = int(codec.group(1)) if codec else int(levels.group(1))
        share = re.search(r"\(([\d.]+)x of their values\)", log)
        rows[name] = (across, int(codec.group(2)) if codec else 0,
                      share.group(1) if share else "")
    base = rows["two levels"][0]
    print(f"GPT {a.layers} layers, d={a.embd}, vocab {a.vocab}, global batch {a.batch} x {a.seq}"
          f", dp=4 on 2 nodes x 2 ranks: bytes across nodes a step (all ranks)")
    print(f"{'variant':>12} {'across':>12} {'/ two levels':>13} {'codec state a rank':>19} "
          f"{'matrices keep':>14}")
    for name, (across, state, share) in rows.items():
        print(f"{name:>12} {across:12d} {across / base:12.3f}x {state:19d} {share:>14}")
    return True


def memory_table(a, d):
    a.steps = 3
    model, summary_line = gpt_with_tokens(d, a)
    variants = {"none": [], "none bf16-buffers": BF16_BUFFERS, "int8": ["--compress=int8"],
                "int8 bf16-state": ["--compress=int8", *BF16_STATE],
                "int8 bf16-buffers": ["--compress=int8", *BF16_BUFFERS],
                "int8 bf16-all": ["--compress=int8", *BF16_STATE, *BF16_BUFFERS],
                "int8 no-ef": ["--compress=int8", "--error-feedback=off"],
                "powersgd:4": ["--compress=powersgd:4"],
                "powersgd:4 bf16-state": ["--compress=powersgd:4", *BF16_STATE],
                "powersgd:4 bf16-all": ["--compress=powersgd:4", *BF16_STATE, *BF16_BUFFERS],
                "powersgd:4 no-ef": ["--compress=powersgd:4", "--error-feedback=off"],
                "topk:0.01": ["--compress=topk:0.01"]}
    print(summary_line)
    print(f"dp=4 on 2 nodes x 2 ranks (run on one machine), two levels, global batch "
          f"{a.batch} x {a.seq}; bytes per rank (gradients: the buckets' buffers, bf16 with "
          f"{BF16_BUFFERS[0]}; arena: the planned activations and buffers)")
    print(f"{'variant':>22} {'gradients':>11} {'codec state':>12} {'arena':>11} {'planned':>11} "
          f"{'peak':>11} {'comm buffers':>12} {'plan/peak':>9} {'vs none':>8}")
    ok, base = True, None
    for name, extra in variants.items():
        file = name.replace(":", "-").replace(" ", "-")
        log = compile_gpt(model, f"{a.batch},{a.seq}", d, file,
                          ["--lr=1e-4", "--hierarchical=on", *extra])
        grads = float(re.search(r"bucket\(s\) of ([\d.]+) MB", log).group(1)) * 1e6
        if BF16_BUFFERS[0] in extra:
            grads /= 2
        state = re.search(r"codec state (\d+) bytes a rank", log)
        state = int(state.group(1)) if state else 0
        metrics = f"{d}/{file}.jsonl"
        run(MPIRUN + ["-n", "4", f"{d}/{file}.bin", "train", "--data",
                      f"input_ids={d}/input_ids.npy", "--data", f"labels={d}/labels.npy",
                      "--steps", str(a.steps), "--metrics", metrics])
        with open(metrics) as f:
            summary = next(r for r in map(json.loads, filter(str.strip, f)) if r.get("summary"))
        planned, peak = summary["planned_bytes_per_rank"], summary["peak_bytes_per_rank"]
        base = base or peak
        good = abs(planned - peak) <= 0.05 * peak
        ok &= good
        print(f"{name:>22} {grads:11.0f} {state:12d} {summary['arena_bytes']:11d} "
              f"{planned:11d} {peak:11d} "
              f"{summary['comm_buffer_bytes_per_rank']:12d} {planned / peak:9.4f} "
              f"{peak / base:8.3f}{'' if good else '  MISSED'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["convergence", "bytes", "memory"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=None, help="global batch (8 / 8)")
    ap.add_argument("--seq", type=int, default=None, help="tokens a row (64 / 128)")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--plot", default="")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--keep", default="", help="keep binaries and metrics in this directory")
    a = ap.parse_args()
    a.batch = a.batch or 8
    a.seq = a.seq or (64 if a.what == "convergence" else 128)
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        with open(f"{d}/cpu-2x2.json", "w") as f:
            json.dump(CLUSTER_JSON, f)
        ok = {"convergence": convergence, "bytes": bytes_table,
              "memory": memory_table}[a.what](a, d)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
