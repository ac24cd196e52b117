"""Mixture of experts: dense dispatch against routed layers (docs/benchmarks.md).

A GPT whose MLPs are mixtures of --experts experts, --top-k routed
(scripts/gen_gpt.py --experts; by default 2 layers, d=256, 8 experts top-2,
batch 8 x 64 tokens) is compiled as an AdamW train step four times: as
exported, every expert on every token (--moe-dispatch=dense), and routed
with capacity factors 0 (every token: the dense step's results), 1.25 and
1.0 (choices past the capacity dropped); each trains --steps steps on one
rank. Printed per variant: the mean step time (steps after the first), its
ratio to the dense step's, and the arena. Checked: the routed step without
drops has the dense step's losses (1e-5 relative). Step times are printed,
never checked.

usage: /usr/bin/python3 scripts/bench_moe.py [--layers 2] [--embd 256] [--heads 8]
       [--vocab 2048] [--seq 64] [--batch 8] [--steps 10] [--experts 8] [--top-k 2]
       [--keep DIR]
Needs build/bin/hpc-opt (or --hpc-opt) and numpy; exits 1 when the check fails.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=2, embd=256, heads=8, vocab=2048, seq=64, batch=8, steps=10)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--hpc-opt", default=HPC_OPT)
    ap.add_argument("--keep", help="keep the model, binaries and metrics here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, summary_line = gpt_with_tokens(d, a)
        print(summary_line)
        paths = train_variants(d, a, model, VARIANTS, "", a.hpc_opt)
        results = {name: train_summary(path) for name, path in paths.items()}
        _, dense_losses, dense_ms = results["dense"]
        print(f"AdamW, one rank, {a.layers} layers d={a.embd}, {a.experts} experts top-{a.top_k}, "
              f"batch {a.batch} x {a.seq} tokens")
        print(f"{'':14} {'step ms':>8} {'vs dense':>8} {'arena':>11}")
        for name, (s, _, ms) in results.items():
            print(f"{name:14} {ms:8.2f} {ms / dense_ms:8.3f} {s['arena_bytes']:11d}")
        routed = results["routed-f0"][1]
        same = all(abs(routed[k] - v) <= 1e-5 * abs(v) for k, v in dense_losses.items())
        print("routed without drops: losses " + ("equal the dense step's (1e-5)" if same
                                                 else "DIFFER from the dense step's"))
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
