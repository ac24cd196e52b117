"""The stability guard's costs and recovery (docs/benchmarks.md, "The stability guard").

A GPT (scripts/gen_gpt.py; by default 8 layers, d=256, vocab 4096, batch 8
x 128 tokens) is compiled as an AdamW train step over --mesh (default
dp=2) and run under mpirun. Printed:

- compile time with and without the conservative plan (hpc-opt compiles
  the step twice by default);
- the guard's cost: the median step time (metrics summary) of runs with
  the guard at work (the loss monitor with --spike-sigma 6,
  --snapshot-every 10, the heartbeat
  file hpc-launch reads) against runs without snapshots or heartbeat
  (--on-divergence=ignore), --repeats of each, alternated; the ratio of
  their medians;
- checkpoint save and load rates (the summary's checkpoint_*_mb_per_s, the
  whole checkpoint over rank 0's time);
- recovery under hpc-launch: kill-rank@1:25 of --steps with checkpoints
  every 10, the report's parts (detect and stop, restart and load, of
  which the checkpoint load, first step), with mpirun's default kill grace
  and with odls_base_sigkill_timeout 0; the final parameters are checked
  bitwise against the uninterrupted run's (--save).

usage: /usr/bin/python3 scripts/bench_guard.py [--layers 8] [--embd 256]
       [--heads 8] [--vocab 4096] [--seq 128] [--batch 8] [--steps 40]
       [--mesh dp=2] [--repeats 3] [--keep DIR]
Needs build/bin/hpc-opt and hpc-launch, numpy and mpirun; exits 1 when the
recovered run's parameters differ from the uninterrupted run's.
"""
import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from mpibench import HPC_OPT, MPIRUN, ROOT, add_gpt_args, gpt_with_tokens, mesh_ranks, run

HPC_LAUNCH = os.path.join(ROOT, "build", "bin", "hpc-launch")


def summary(path):
    with open(path) as f:
        return next(json.loads(line) for line in f if '"summary"' in line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=8, embd=256, heads=8, vocab=4096, seq=128, batch=8, steps=40)
    ap.add_argument("--mesh", default="dp=2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", help="keep the model, binaries and metrics here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        model, line = gpt_with_tokens(d, a)
        print(line)
        n = mesh_ranks(a.mesh)
        compile_cmd = [HPC_OPT, model, f"--input-shape=input_ids={a.batch},{a.seq}", "--train",
                       "--loss=cross-entropy:logits,labels", "--optimizer=adamw",
                       f"--mesh={a.mesh}"]
        times = {}
        for name, extra in (("plain", ["--no-conservative-plan"]), ("model", [])):
            t0 = time.perf_counter()
            run(compile_cmd + extra + ["-o", f"{d}/{name}.bin"])
            times[name] = time.perf_counter() - t0
        print(f"compile: {times['model']:.1f} s with the conservative plan, "
              f"{times['plain']:.1f} s without ({times['model'] / times['plain']:.2f}x)")

        data = ["--data", f"input_ids={d}/input_ids.npy", "--data", f"labels={d}/labels.npy"]
        train = MPIRUN + ["-n", str(n), f"{d}/model.bin", "train"] + data

        # The guard's cost.
        medians = {"off": [], "on": []}
        env = dict(os.environ)
        for r in range(a.repeats):
            for mode in ("off", "on"):
                m = f"{d}/cost-{mode}-{r}.jsonl"
                extra = (["--on-divergence=ignore"] if mode == "off" else
                         ["--spike-sigma", "6", "--snapshot-every", "10"])
                e = dict(env)
                if mode == "on":
                    e["HPC_HEARTBEAT"] = f"{d}/heartbeat"
                subprocess.run(train + ["--steps", str(a.steps), "--metrics", m] + extra,
                               check=True, env=e, capture_output=True)
                medians[mode].append(summary(m)["median_step_ms"])
        off, on = statistics.median(medians["off"]), statistics.median(medians["on"])
        print(f"guard: median step {on:.2f} ms with the guard (monitor with spikes, snapshot every 10, "
              f"heartbeat), {off:.2f} ms without: {100 * (on / off - 1):+.1f}% "
              f"(runs: on {['%.2f' % x for x in medians['on']]}, "
              f"off {['%.2f' % x for x in medians['off']]})")

        # Checkpoint save and load.
        half = a.steps // 2
        run(train + ["--steps", str(half), "--ckpt-dir", f"{d}/ck", "--ckpt-every", "10",
                     "--metrics", f"{d}/ck.jsonl"])
        run(train + ["--steps", str(a.steps), "--ckpt-dir", f"{d}/ck", "--resume",
                     "--metrics", f"{d}/ck-resumed.jsonl"])
        s, l = summary(f"{d}/ck.jsonl"), summary(f"{d}/ck-resumed.jsonl")
        print(f"checkpoint: {s['state_bytes'] * n / 1e6:.1f} MB ({n} shards of "
              f"{s['state_bytes'] / 1e6:.1f} MB); save {s['checkpoint_save_mb_per_s']:.0f} MB/s "
              f"({s['checkpoints_written']} in {s['checkpoint_save_s']:.3f} s), load "
              f"{l['checkpoint_load_mb_per_s']:.0f} MB/s ({l['checkpoint_load_s']:.3f} s, rank 0)")

        # Recovery under hpc-launch.
        run(train + ["--steps", str(a.steps), "--save", f"{d}/ref.safetensors"])
        ok = True
        for label, mpi_args in (("default kill grace", []),
                                ("odls_base_sigkill_timeout 0",
                                 ["--mca", "odls_base_sigkill_timeout", "0"])):
            tag = "grace" if mpi_args else "default"
            e = dict(env)
            e["HPC_FAULT"] = "kill-rank@1:25"
            cmd = [HPC_LAUNCH, "-n", str(n), "--launcher", " ".join(MPIRUN), *mpi_args,
                   "--report", f"{d}/report-{tag}.json", "--", f"{d}/model.bin", "train", *data,
                   "--steps", str(a.steps), "--ckpt-dir", f"{d}/ck-{tag}", "--ckpt-every", "10",
                   "--save", f"{d}/out-{tag}.safetensors"]
            p = subprocess.run(cmd, env=e, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"FAILED: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
            with open(f"{d}/report-{tag}.json") as f:
                [fail] = json.load(f)["failures"]
            same = filecmp.cmp(f"{d}/ref.safetensors", f"{d}/out-{tag}.safetensors", shallow=False)
            ok = ok and same
            print(f"recovery ({label}): {fail['recovery_s']:.2f} s = detect and stop "
                  f"{fail['detect_stop_s']:.2f} s + restart and load {fail['restart_load_s']:.2f} s "
                  f"(checkpoint load {fail['checkpoint_load_s']:.2f} s) + first step "
                  f"{fail['first_step_s']:.2f} s; final parameters "
                  f"{'equal' if same else 'DIFFER from'} the uninterrupted run's")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
