"""Memory per rank under ZeRO (docs/benchmarks.md, "ZeRO memory").

A GPT whose training state dominates (scripts/gen_gpt.py; by default 12
layers, d=512, vocab 4096: 39.9M parameters) is compiled as an AdamW train
step on dp=4 (--dp) four times: plain data parallelism and --zero=1, 2, 3.
Each trains --steps steps under mpirun; printed per variant from the
metrics summary: the compiler's planned bytes per rank, the runtime's
measured peak (both: state, arena, resident weights, inputs, the kernels'
own buffers), their ratio, the peak against plain dp's, and the peak RSS;
then whether each stage meets the issue's bound (ZeRO-1 <= 0.65, ZeRO-2
<= 0.50, ZeRO-3 <= 0.35 of plain dp, planned within 5% of measured) and
that every variant's losses equal plain dp's within 1e-5 relative.

usage: /usr/bin/python3 scripts/bench_zero_memory.py [--layers 12] [--embd 512]
       [--vocab 4096] [--seq 32] [--batch 4] [--steps 3] [--dp 4] [--keep DIR]
Needs build/bin/hpc-opt, numpy and mpirun; exits 1 when a bound is missed.
"""
import argparse
import json
import os
import sys
import tempfile

from mpibench import add_gpt_args, gpt_with_tokens, train_variants

BOUNDS = {1: 0.65, 2: 0.50, 3: 0.35}


def summary(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    losses = {r["step"]: r["loss"] for r in rows if "loss" in r and "step" in r}
    return next(r for r in rows if r.get("summary")), losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=12, embd=512, heads=8, vocab=4096, seq=32, batch=4, steps=3)
    ap.add_argument("--dp", type=int, default=4)
    ap.add_argument("--keep", help="keep the model, binaries and metrics here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, summary_line = gpt_with_tokens(d, a)
        print(summary_line)
        paths = train_variants(
            d, a, model, {f"zero{z}": [f"--zero={z}"] if z else [] for z in (0, 1, 2, 3)},
            f"dp={a.dp}")
        results = {z: summary(paths[f"zero{z}"]) for z in (0, 1, 2, 3)}
        base = results[0][0]["peak_bytes_per_rank"]
        ok = True
        print(f"AdamW, dp={a.dp}, {a.layers} layers d={a.embd} vocab {a.vocab}, batch "
              f"{a.batch} x {a.seq} tokens")
        print(f"{'':8} {'planned':>12} {'peak':>12} {'plan/peak':>9} {'vs dp':>6} "
              f"{'bound':>6} {'peak RSS':>12}")
        for stage, (s, losses) in results.items():
            planned, peak = s["planned_bytes_per_rank"], s["peak_bytes_per_rank"]
            ratio = peak / base
            bound = BOUNDS.get(stage)
            plan_ok = abs(planned - peak) <= 0.05 * peak
            same = all(abs(losses[k] - v) <= 1e-5 * abs(v)
                       for k, v in results[0][1].items())
            good = plan_ok and same and (bound is None or ratio <= bound)
            ok &= good
            name = f"ZeRO-{stage}" if stage else "plain dp"
            print(f"{name:8} {planned:12d} {peak:12d} {planned / peak:9.4f} {ratio:6.3f} "
                  f"{bound if bound else '':>6} {s['peak_rss_bytes_per_rank']:12d}"
                  f"{'' if good else '  MISSED'}{'' if same else ' (losses differ)'}")
        print("zero memory: " + ("OK" if ok else "FAILED"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
