"""Pipeline bubble per schedule (docs/benchmarks.md, "Pipeline stages").

A GPT (scripts/gen_gpt.py; by default 8 layers, d=256, vocab 1024, batch 8
x 128 tokens) is compiled as an AdamW train step with --mesh=pp=P and
--micro-batches=M under each schedule (--schedules), and trained --steps
steps with one thread per rank (`train --threads 1`; mpirun binds each rank
to its own core where there are enough) and a trace. Printed per schedule and stage: the measured
bubble (overlap_report.py: the time the stage's rank waits on receives from
other stages, over the step), the schedule's theory for equal stages
(GPipe and 1F1B (P-1)/(M+P-1), interleaved (P-1)/(V M+P-1), ZB-H1 with
F = B = W (P-1)/(3 M+P-1)) and the cost model's prediction (dist-pipeline
replays the schedule with its estimate of each block), and the median step
time and each stage's planned arena. Checked: every schedule's losses equal GPipe's within --rtol, and
ZB-H1's measured mean bubble is at most --zb-bound of 1F1B's. Step times
and bubbles are measured, so they vary from run to run; the check compares
two schedules measured in one run.

usage: python3 scripts/bench_pipeline.py [--layers 8] [--embd 256] [--heads 8]
       [--vocab 1024] [--seq 128] [--batch 8] [--steps 8] [--pp 2] [--micro 8]
       [--schedules gpipe,1f1b,interleaved:2,zb-h1] [--skip 3] [--zb-bound 0.5]
       [--keep DIR]
Needs build/bin/hpc-opt (or --hpc-opt), numpy, onnx and mpirun; exits 1 when
a check fails.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from mpibench import HPC_OPT, MPIRUN, ROOT, add_gpt_args, gpt_with_tokens, run


def theory(schedule, p, m):
    if schedule.startswith("interleaved:"):
        v = int(schedule.split(":")[1])
        return (p - 1) / (v * m + p - 1)
    if schedule == "zb-h1":
        return (p - 1) / (3 * m + p - 1)
    return (p - 1) / (m + p - 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=8, embd=256, heads=8, vocab=1024, seq=128, batch=8, steps=8)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--micro", type=int, default=8)
    ap.add_argument("--schedules", default="gpipe,1f1b,interleaved:2,zb-h1")
    ap.add_argument("--skip", type=int, default=3, help="warm-up steps left out")
    ap.add_argument("--zb-bound", type=float, default=0.5,
                    help="ZB-H1's mean bubble at most this fraction of 1F1B's")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--hpc-opt", default=HPC_OPT)
    ap.add_argument("--keep", help="keep the model, binaries, traces and metrics here")
    a = ap.parse_args()
    schedules = a.schedules.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, line = gpt_with_tokens(d, a)
        print(line)
        results = {}
        for sch in schedules:
            name = sch.replace(":", "")
            out = f"{d}/{name}.bin"
            compiled = run([a.hpc_opt, model, f"--input-shape=input_ids={a.batch},{a.seq}",
                            "--train", "--loss=cross-entropy:logits,labels",
                            "--optimizer=adamw", f"--mesh=pp={a.pp}",
                            f"--micro-batches={a.micro}", f"--pipeline-schedule={sch}",
                            "-o", out])
            arenas = [int(x) for x in re.search(r"\(arena ([\d, ]+) bytes\)", compiled)
                      .group(1).split(",")]
            predicted = [float(x) / 100 for x in re.search(
                r"predicted bubble ([\d.%, ]+) \(", compiled).group(1).replace("%", "")
                .split(",")]
            trace, metrics = f"{d}/{name}.trace.json", f"{d}/{name}.jsonl"
            # Each rank its own core where there are enough (pp=4 on 2 cores
            # shares them).
            bind = (["--bind-to", "core", "--map-by", "core"]
                    if a.pp <= (os.cpu_count() or 1) else ["--bind-to", "none"])
            run(MPIRUN + bind + ["-n", str(a.pp), out,
                          "train", "--threads", "1", "--data",
                          f"input_ids={d}/input_ids.npy", "--data", f"labels={d}/labels.npy",
                          "--steps", str(a.steps), "--trace", trace, "--metrics", metrics])
            report = json.loads(subprocess.run(
                [sys.executable, os.path.join(ROOT, "scripts", "overlap_report.py"), trace,
                 "--skip-steps", str(a.skip), "--json"], capture_output=True, text=True,
                check=True).stdout)
            steps = [json.loads(l) for l in open(metrics) if '"step"' in l]
            losses = {s["step"]: s["loss"] for s in steps if "loss" in s}
            times = [s["step_ms"] for s in steps if "step_ms" in s][a.skip:]
            results[sch] = (report["bubble"], predicted, losses,
                            statistics.median(times) if times else float("nan"), arenas)
        print(f"pp={a.pp}, {a.micro} micro-batches, one thread a rank; {a.layers} layers "
              f"d={a.embd}, batch {a.batch} x {a.seq} tokens, AdamW")
        print(f"{'schedule':>14} {'stage':>5} {'measured':>9} {'theory':>7} {'predicted':>9} "
              f"{'step ms':>8} {'arena MB':>9}")
        ok = True
        mean = {}
        ref = results[schedules[0]][2]
        for sch, (bubble, predicted, losses, ms, arenas) in results.items():
            for row in bubble:
                s = row["stage"]
                print(f"{sch:>14} {s:5d} {100 * row['bubble']:8.1f}% "
                      f"{100 * theory(sch, a.pp, a.micro):6.1f}% "
                      f"{100 * predicted[s]:8.1f}% {ms:8.1f} {arenas[s] / 1e6:9.1f}")
            mean[sch] = sum(r["bubble"] for r in bubble) / len(bubble)
            err = max(abs(losses[k] - v) / abs(v) for k, v in ref.items())
            if err > a.rtol:
                print(f"{sch}: losses differ from {schedules[0]}'s by {err:.2e}")
                ok = False
        for sch in schedules:
            print(f"{sch:>14} mean {100 * mean[sch]:5.1f}%")
        if "1f1b" in mean and "zb-h1" in mean:
            ratio = mean["zb-h1"] / mean["1f1b"]
            # Ranks that share cores wait for the core as well as for each
            # other: reported, not checked.
            shared = a.pp > (os.cpu_count() or 1)
            good = shared or ratio <= a.zb_bound
            ok &= good
            print(f"zb-h1 / 1f1b mean bubble: {ratio:.2f} "
                  + (f"(not checked: {a.pp} ranks share {os.cpu_count()} cores)" if shared
                     else f"(bound {a.zb_bound}){'' if good else '  MISSED'}"))
        print("pipeline bubble: " + ("OK" if ok else "FAILED"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
