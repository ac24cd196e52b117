"""Activation recomputation: memory and step time (docs/benchmarks.md, "Recompute").

A GPT (scripts/gen_gpt.py; by default 12 layers, d=256, vocab 4096,
batch 8 x 256 tokens, so that activations dominate) is compiled as an
AdamW train step three times, --recompute=none, full and selective, on one
rank or on --mesh under mpirun; each trains --steps steps. Printed per mode
from the metrics summary: the planned arena and bytes per rank, the
runtime's measured peak, the arena (activations, gradients, temporaries)
and the peak against none's, the mean step time (steps after the first)
and its ratio to none's. Checked: the losses equal none's within 1e-5
relative (fused epilogues may differ where the forward's values are no
longer read by the backward), the arenas are ordered
full < selective < none, each within its bound of none's (--full-bound,
--selective-bound), and the measured peaks follow. Step times are
printed, never checked.

usage: /usr/bin/python3 scripts/bench_recompute.py [--layers 12] [--embd 256]
       [--heads 8] [--vocab 4096] [--seq 256] [--batch 8] [--steps 5]
       [--mesh dp=2,tp=2] [--full-bound 0.5] [--selective-bound 0.8] [--keep DIR]
Needs build/bin/hpc-opt (or --hpc-opt), numpy, and mpirun with --mesh;
exits 1 when a check fails.
"""
import argparse
import os
import sys
import tempfile

from mpibench import HPC_OPT, add_gpt_args, gpt_with_tokens, train_summary, train_variants

MODES = ("none", "full", "selective")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=12, embd=256, heads=8, vocab=4096, seq=256, batch=8, steps=5)
    ap.add_argument("--mesh", default="", help="partition over this mesh (dp=2,tp=2)")
    ap.add_argument("--full-bound", type=float, default=0.5,
                    help="full's arena at most this fraction of none's")
    ap.add_argument("--selective-bound", type=float, default=0.8,
                    help="selective's arena at most this fraction of none's")
    ap.add_argument("--hpc-opt", default=HPC_OPT)
    ap.add_argument("--keep", help="keep the model, binaries and metrics here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, summary_line = gpt_with_tokens(d, a)
        print(summary_line)
        paths = train_variants(d, a, model, {m: [f"--recompute={m}"] for m in MODES},
                               a.mesh, a.hpc_opt)
        results = {mode: train_summary(path) for mode, path in paths.items()}
        base, base_losses, base_ms = results["none"]
        bounds = {"none": None, "full": a.full_bound, "selective": a.selective_bound}
        ok = True
        print(f"AdamW, {a.mesh or 'one rank'}, {a.layers} layers d={a.embd} vocab {a.vocab}, "
              f"batch {a.batch} x {a.seq} tokens")
        print(f"{'':10} {'arena':>11} {'vs none':>7} {'bound':>5} {'planned':>11} "
              f"{'peak':>11} {'vs none':>7} {'step ms':>8} {'vs none':>7}")
        for mode, (s, losses, ms) in results.items():
            arena = s["arena_bytes"] / base["arena_bytes"]
            peak = s["peak_bytes_per_rank"] / base["peak_bytes_per_rank"]
            same = all(abs(losses[k] - v) <= 1e-5 * abs(v) for k, v in base_losses.items())
            bound = bounds[mode]
            good = same and (bound is None or arena <= bound)
            ok &= good
            print(f"{mode:10} {s['arena_bytes']:11d} {arena:7.3f} {bound or '':>5} "
                  f"{s['planned_bytes_per_rank']:11d} {s['peak_bytes_per_rank']:11d} "
                  f"{peak:7.3f} {ms:8.2f} {ms / base_ms:7.3f}{'' if good else '  MISSED'}"
                  f"{'' if same else ' (losses differ)'}")
        for key in ("arena_bytes", "peak_bytes_per_rank"):
            v = [results[m][0][key] for m in ("full", "selective", "none")]
            if not v[0] < v[1] < v[2]:
                print(f"{key} not ordered full < selective < none")
                ok = False
        print("recompute: " + ("OK" if ok else "FAILED"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
