"""Mixture of experts: expert load balance over training (docs/benchmarks.md).

A GPT whose MLPs are --experts experts, top --top-k (scripts/gen_gpt.py
--experts; by default 2 layers, d=32, 8 experts top-2, batch 16 x 64 =
1024 tokens a step) is trained --steps AdamW steps (default 200, learning
rate --lr) on random tokens three times: without balancing, with
DeepSeek-V3's routing bias (--moe-balance=bias:RATE) and with Switch's
auxiliary loss (--moe-aux-loss=ALPHA), once per data seed of --seeds.
Printed per run: the worst layer's max/mean expert load (the metrics'
moe_max_mean) at the first step and averaged over the last --last steps
for each seed, and the final loss; then whether the bias runs meet --bar
in every layer and seed. --plot FILE draws the worst layer's max/mean per
step of the first seed's three runs (needs matplotlib: build/test-venv has
it). Exits 0 whatever it measures (test/Train/moe-balance.test checks).

usage: /usr/bin/python3 scripts/bench_moe_balance.py [--lr 3e-4] [--bias 0.03]
       [--aux 0.01] [--seeds 0,1,2,3] [--steps 200] [--last 50] [--bar 1.3]
       [--plot balance.png] [--keep DIR]
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


def last_mean(rows, last):
    """Each layer's max/mean averaged over the last `last` steps."""
    rows = rows[-last:]
    return [statistics.mean(r["moe_max_mean"][l] for r in rows)
            for l in range(len(rows[0]["moe_max_mean"]))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=2, embd=32, heads=2, vocab=64, seq=64, batch=16, steps=200)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate")
    ap.add_argument("--bias", type=float, default=0.03, help="--moe-balance=bias:RATE")
    ap.add_argument("--aux", type=float, default=0.01, help="--moe-aux-loss=ALPHA")
    ap.add_argument("--seeds", default="0,1,2,3", help="data seeds, one training per seed")
    ap.add_argument("--last", type=int, default=50)
    ap.add_argument("--bar", type=float, default=1.3,
                    help="max/mean the bias runs should stay under (issue 18)")
    ap.add_argument("--plot", help="draw the worst layer's max/mean per step here")
    ap.add_argument("--hpc-opt", default=HPC_OPT)
    ap.add_argument("--keep", help="keep the model, binaries and metrics here")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    variants = {"none": [], f"bias:{a.bias:g}": [f"--moe-balance=bias:{a.bias:g}"],
                f"aux:{a.aux:g}": [f"--moe-aux-loss={a.aux:g}"]}
    runs = {name: [] for name in variants}  # name -> per seed, the metrics rows
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            d = os.path.join(a.keep or tmp, f"seed{seed}")
            os.makedirs(d, exist_ok=True)
            model, summary_line = gpt_with_tokens(d, a, data_seed=seed)
            files = {name.replace(":", "-"): flags + [f"--lr={a.lr:g}"]
                     for name, flags in variants.items()}
            paths = train_variants(d, a, model, files, "", a.hpc_opt)
            for name in variants:
                runs[name].append(balance(paths[name.replace(":", "-")]))
    print(summary_line)
    print(f"{a.steps} AdamW steps (lr {a.lr:g}), batch {a.batch} x {a.seq} random tokens, "
          f"{a.experts} experts top-{a.top_k}; max/mean expert load per layer "
          f"(layer 0 / 1 / ...), mean over the last {a.last} steps, per data seed")
    print(f"{'':10} {'step 1':>12} " + " ".join(f"{'seed %d' % s:>12}" for s in seeds)
          + f" {'final loss':>11}")
    for name, per_seed in runs.items():
        cells = [" / ".join(f"{x:.2f}" for x in last_mean(rows, a.last)) for rows in per_seed]
        first = " / ".join(f"{x:.2f}" for x in per_seed[0][0]["moe_max_mean"])
        print(f"{name:10} {first:>12} " + " ".join(f"{c:>12}" for c in cells)
              + f" {per_seed[0][-1]['loss']:11.5f}")
    bias = next(n for n in runs if n.startswith("bias"))
    worst = max(max(last_mean(rows, a.last)) for rows in runs[bias])
    print(f"{bias}: worst layer and seed {worst:.2f}, "
          + ("meets" if worst <= a.bar else "misses") + f" the {a.bar:g} bar")
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for name, per_seed in runs.items():
            rows = per_seed[0]
            ax.plot([r["step"] for r in rows], [max(r["moe_max_mean"]) for r in rows],
                    label=name, linewidth=1)
        ax.axhline(a.bar, color="grey", linewidth=0.5, linestyle="--")
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
