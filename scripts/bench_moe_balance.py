"""Mixture of experts: expert load balance over training (docs/benchmarks.md).

A GPT whose MLPs are --experts experts, top --top-k (scripts/gen_gpt.py
--experts; by default 2 layers, d=32, 8 experts top-2, batch 16 x 64 =
1024 tokens a step) is trained --steps AdamW steps (default 200) on random
tokens three times: without balancing, with DeepSeek-V3's routing bias
(--moe-balance=bias:RATE) and with Switch's auxiliary loss
(--moe-aux-loss=ALPHA). Printed per run: each layer's max/mean expert load
(the metrics' moe_max_mean) at the first step and averaged over the last
--last steps, and the final loss; --plot FILE draws the worst layer's
max/mean per step of the three runs (needs matplotlib: build/test-venv has
it). Nothing is checked (test/Train/moe-balance.test checks the order).

usage: /usr/bin/python3 scripts/bench_moe_balance.py [--bias 0.03] [--aux 0.01]
       [--steps 200] [--last 50] [--plot balance.png] [--keep DIR]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

from mpibench import HPC_OPT, add_gpt_args, gpt_with_tokens, train_variants


def balance(path):
    with open(path) as f:
        return [json.loads(line) for line in f if '"moe_max_mean"' in line]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=2, embd=32, heads=2, vocab=64, seq=64, batch=16, steps=200)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--bias", type=float, default=0.03, help="--moe-balance=bias:RATE")
    ap.add_argument("--aux", type=float, default=0.01, help="--moe-aux-loss=ALPHA")
    ap.add_argument("--last", type=int, default=50)
    ap.add_argument("--plot", help="draw the worst layer's max/mean per step here")
    ap.add_argument("--hpc-opt", default=HPC_OPT)
    ap.add_argument("--keep", help="keep the model, binaries and metrics here")
    a = ap.parse_args()
    variants = {"none": [], f"bias:{a.bias:g}": [f"--moe-balance=bias:{a.bias:g}"],
                f"aux:{a.aux:g}": [f"--moe-aux-loss={a.aux:g}"]}
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, summary_line = gpt_with_tokens(d, a)
        print(summary_line)
        files = {name.replace(":", "-"): flags for name, flags in variants.items()}
        paths = train_variants(d, a, model, files, "", a.hpc_opt)
        runs = {name: balance(paths[name.replace(":", "-")]) for name in variants}
        print(f"{a.steps} AdamW steps, batch {a.batch} x {a.seq} tokens, {a.experts} experts "
              f"top-{a.top_k}; max/mean expert load per layer")
        print(f"{'':10} {'step 1':>16} {'last %d steps' % a.last:>18} {'final loss':>11}")
        for name, rows in runs.items():
            last = rows[-a.last:]
            layers = len(rows[0]["moe_max_mean"])
            mean = [statistics.mean(r["moe_max_mean"][l] for r in last) for l in range(layers)]
            print(f"{name:10} {' / '.join(f'{x:.2f}' for x in rows[0]['moe_max_mean']):>16} "
                  f"{' / '.join(f'{x:.2f}' for x in mean):>18} {rows[-1]['loss']:11.5f}")
        if a.plot:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(7, 3.5))
            for name, rows in runs.items():
                ax.plot([r["step"] for r in rows], [max(r["moe_max_mean"]) for r in rows],
                        label=name, linewidth=1)
            ax.set_xlabel("step")
            ax.set_ylabel("max/mean expert load (worst layer)")
            ax.set_ylim(bottom=1)
            ax.legend()
            fig.tight_layout()
            fig.savefig(a.plot, dpi=100)
            print(f"wrote {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
