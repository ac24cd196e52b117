"""Mixture of experts: dense dispatch against routed layers (docs/benchmarks.md).

A GPT whose MLPs are mixtures of --experts experts, --top-k routed
(scripts/gen_gpt.py --experts; by default 2 layers, d=256, 8 experts top-2,
batch 8 x 64 tokens) is compiled as an AdamW train step several times and
each trains --steps steps.

On one rank (--ranks 1, the default): as exported, every expert on every
token (--moe-dispatch=dense), and routed with capacity factors 0 (every
token: the dense step's results), 1.25 and 1.0 (choices past the capacity
dropped). Checked: the routed step without drops has the dense step's
losses (1e-5 relative).

On --ranks N > 1 (under mpirun): the dense dispatch over dp=N, routed over
dp=N (every rank routes the whole batch and runs every expert on it), and
routed with expert parallelism, ep=N (each rank holds E/N experts; tokens
travel by all_to_all), at capacity factors 0 and 1.25. Checked: each ep
step has the losses of the dp step with the same capacity factor (1e-4).

Printed per variant: the mean step time (steps after the first), its ratio
to the dense step's, and the arena. Step times are printed, never checked.

usage: /usr/bin/python3 scripts/bench_moe.py [--ranks 1] [--layers 2] [--embd 256]
       [--heads 8] [--vocab 2048] [--seq 64] [--batch 8] [--steps 10] [--experts 8]
       [--top-k 2] [--keep DIR]
Needs build/bin/hpc-opt (or --hpc-opt), numpy, and mpirun for --ranks > 1;
exits 1 when a check fails.
"""
import argparse
import os
import sys
import tempfile

from mpibench import HPC_OPT, add_gpt_args, gpt_with_tokens, train_summary, train_variants

VARIANTS = {"dense": ["--moe-dispatch=dense"],
            "routed-f0": ["--moe-capacity-factor=0"],
            "routed-f1.25": ["--moe-capacity-factor=1.25"],
            "routed-f1": ["--moe-capacity-factor=1.0"]}


def same_losses(a, b, rtol):
    return a.keys() == b.keys() and all(abs(a[k] - v) <= rtol * abs(v) for k, v in b.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=2, embd=256, heads=8, vocab=2048, seq=64, batch=8, steps=10)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--hpc-opt", default=HPC_OPT)
    ap.add_argument("--keep", help="keep the model, binaries and metrics here")
    a = ap.parse_args()
    n = a.ranks
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, summary_line = gpt_with_tokens(d, a)
        print(summary_line)
        if n == 1:
            paths = train_variants(d, a, model, VARIANTS, "", a.hpc_opt)
            checks = [("routed-f0", "dense", 1e-5)]
        else:
            paths = train_variants(d, a, model, {
                "dense": ["--moe-dispatch=dense"],
                "routed-f0": ["--moe-capacity-factor=0"],
                "routed-f1.25": ["--moe-capacity-factor=1.25"]}, f"dp={n}", a.hpc_opt)
            paths.update(train_variants(d, a, model, {
                "ep-f0": ["--moe-capacity-factor=0"],
                "ep-f1.25": ["--moe-capacity-factor=1.25"]}, f"ep={n}", a.hpc_opt))
            checks = [("ep-f0", "routed-f0", 1e-4), ("ep-f1.25", "routed-f1.25", 1e-4)]
        results = {name: train_summary(path) for name, path in paths.items()}
        dense_ms = results["dense"][2]
        where = "one rank" if n == 1 else f"{n} ranks (dense and routed over dp={n}, ep over ep={n})"
        print(f"AdamW, {where}, {a.layers} layers d={a.embd}, {a.experts} experts "
              f"top-{a.top_k}, batch {a.batch} x {a.seq} tokens")
        print(f"{'':14} {'step ms':>8} {'vs dense':>8} {'arena':>11}")
        for name, (s, _, ms) in results.items():
            print(f"{name:14} {ms:8.2f} {ms / dense_ms:8.3f} {s['arena_bytes']:11d}")
        ok = True
        for name, reference, rtol in checks:
            same = same_losses(results[name][1], results[reference][1], rtol)
            print(f"{name}: losses " + (f"equal {reference}'s ({rtol:g})" if same
                                        else f"DIFFER from {reference}'s"))
            ok &= same
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
