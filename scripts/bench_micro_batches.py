"""Micro-batches: memory and step time (docs/benchmarks.md, "Micro-batches").

A GPT (scripts/gen_gpt.py; by default 12 layers, d=256, vocab 4096,
batch 8 x 256 tokens, so that activations dominate) is compiled as an
AdamW train step with --micro-batches=1, 2, 4 and 8 (--counts), on one
rank or on --mesh under mpirun; each trains --steps steps. Printed per
count from the metrics summary: the planned arena and bytes per rank, the
runtime's measured peak, the arena (activations, gradients, temporaries)
and the peak against one micro-batch's, the mean step time (steps after
the first) and its ratio. Checked: the losses equal one micro-batch's
within --rtol (accumulation only reorders float sums), the arenas shrink
as the count grows, 4 micro-batches' at most --bound of one's, and the
measured peaks follow. Step times are printed, never checked.

usage: /usr/bin/python3 scripts/bench_micro_batches.py [--layers 12] [--embd 256]
       [--heads 8] [--vocab 4096] [--seq 256] [--batch 8] [--steps 5]
       [--counts 1,2,4,8] [--mesh dp=2,tp=2] [--bound 0.4] [--rtol 1e-4] [--keep DIR]
Needs build/bin/hpc-opt (or --hpc-opt), numpy, and mpirun with --mesh;
exits 1 when a check fails.
"""
import argparse
import os
import sys
import tempfile

from bench_recompute import summary
from mpibench import HPC_OPT, add_gpt_args, gpt_with_tokens, train_variants


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=12, embd=256, heads=8, vocab=4096, seq=256, batch=8, steps=5)
    ap.add_argument("--counts", default="1,2,4,8", help="micro-batch counts, 1 first")
    ap.add_argument("--mesh", default="", help="partition over this mesh (dp=2,tp=2)")
    ap.add_argument("--bound", type=float, default=0.4,
                    help="4 micro-batches' arena at most this fraction of one's")
    ap.add_argument("--rtol", type=float, default=1e-4,
                    help="losses within this relative tolerance of one micro-batch's")
    ap.add_argument("--hpc-opt", default=HPC_OPT)
    ap.add_argument("--keep", help="keep the model, binaries and metrics here")
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",")]
    if counts[0] != 1:
        sys.exit("bench_micro_batches.py: --counts must start with 1 (the reference)")
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, summary_line = gpt_with_tokens(d, a)
        print(summary_line)
        paths = train_variants(d, a, model, {f"m{m}": [f"--micro-batches={m}"] for m in counts},
                               a.mesh, a.hpc_opt)
        results = {m: summary(paths[f"m{m}"]) for m in counts}
        base, base_losses, base_ms = results[1]
        ok = True
        print(f"AdamW, {a.mesh or 'one rank'}, {a.layers} layers d={a.embd} vocab {a.vocab}, "
              f"batch {a.batch} x {a.seq} tokens")
        print(f"{'micro':>5} {'arena':>11} {'vs 1':>6} {'planned':>11} {'peak':>11} "
              f"{'vs 1':>6} {'step ms':>8} {'vs 1':>6} {'worst rel err':>13}")
        for m, (s, losses, ms) in results.items():
            arena = s["arena_bytes"] / base["arena_bytes"]
            peak = s["peak_bytes_per_rank"] / base["peak_bytes_per_rank"]
            err = max(abs(losses[k] - v) / abs(v) for k, v in base_losses.items())
            good = err <= a.rtol and (m != 4 or arena <= a.bound)
            ok &= good
            print(f"{m:5d} {s['arena_bytes']:11d} {arena:6.3f} "
                  f"{s['planned_bytes_per_rank']:11d} {s['peak_bytes_per_rank']:11d} "
                  f"{peak:6.3f} {ms:8.2f} {ms / base_ms:6.3f} {err:13.2e}"
                  f"{'' if good else '  MISSED'}")
        for key in ("arena_bytes", "peak_bytes_per_rank"):
            v = [results[m][0][key] for m in counts]
            if any(later >= earlier for earlier, later in zip(v, v[1:])):
                print(f"{key} does not shrink as the micro-batches grow: {v}")
                ok = False
        print("micro-batches: " + ("OK" if ok else "FAILED"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
