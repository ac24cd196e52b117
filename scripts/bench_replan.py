"""Re-planning during training on the two-node cluster (docs/benchmarks.md,
"Re-planning during training"; issue 17's acceptance).

A GPT (scripts/gen_gpt.py; by default 2 layers, d=128, vocab 512, batch 16
x 128 tokens: activations large against the weights, so tensor parallelism
across the slow link is a bad plan) is compiled for the two-node cluster
(scripts/netns-cluster.sh, one rank a node, the link shaped to --rate) with
the deliberately bad plan tp=2, against a cluster file hpc-calibrate
measures on that cluster first. The same job then runs twice under
hpc-launch, with checkpoints every --ckpt-every steps:

- staying: the bad plan for all --steps;
- re-planning: hpc-launch --replan-every K --replan-compile "hpc-opt ...
  --cluster=that file": every K steps the profile goes to the compiler,
  which recalibrates and searches, and a plan predicted at least 10% faster
  replaces the job's binary at its next checkpoint (resharded on resume).

Printed: the bad plan's prediction and measurement, each re-plan (the
report's "replans"), both wall times and their ratio, the plan the
re-planned run ended on, and how far its losses are from the staying run's
(a resharded continuation differs from the bad plan only in the order of
its floating-point sums). Exits 1 when the re-planned run did not switch,
did not end faster than staying, or its losses differ by more than 1e-4.

usage: /usr/bin/python3 scripts/bench_replan.py [--steps 100] [--replan-every 10]
       [--ckpt-every 10] [--rate 1gbit] [--layers 2] [--embd 128] [--heads 4]
       [--vocab 512] [--seq 128] [--batch 16] [--name replan] [--keep DIR]
Needs root (the cluster's namespaces), mpirun, numpy and hpc-opt,
hpc-calibrate and hpc-launch (from PATH, else build/bin).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from metrics_jsonl import records, step_records
from mpibench import ROOT, add_gpt_args, gpt_with_tokens, run

PROG = "bench_replan.py"
CLUSTER = os.path.join(ROOT, "scripts", "netns-cluster.sh")


def tool(name):
    """A tool of the build: from PATH (as the tests have it), else build/bin."""
    found = shutil.which(name)
    return found or os.path.join(ROOT, "build", "bin", name)


def launch(cmd, err_path):
    """Runs hpc-launch; its stderr goes to err_path and is returned."""
    with open(err_path, "w") as err:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
    text = open(err_path).read()
    if p.returncode != 0:
        sys.exit(f"{PROG}: FAILED ({p.returncode}): {' '.join(cmd)}\n{text}")
    return text


def last_summary(path):
    found = [r for r in records(path, PROG) if isinstance(r, dict) and r.get("summary")]
    if not found:
        sys.exit(f"{PROG}: {path}: no summary line")
    return found[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpt_args(ap, layers=2, embd=128, heads=4, vocab=512, seq=128, batch=16, steps=100)
    ap.add_argument("--replan-every", type=int, default=10)
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--rate", default="1gbit", help="the link between the nodes")
    ap.add_argument("--name", default="replan", help="the cluster's name")
    ap.add_argument("--keep", help="keep the model, binaries, metrics and reports here")
    a = ap.parse_args()
    hpc_opt, calibrate, hpc_launch = tool("hpc-opt"), tool("hpc-calibrate"), tool("hpc-launch")
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.abspath(a.keep or tmp)
        os.makedirs(d, exist_ok=True)
        for old in ("ck-stay", "ck-replan", "stay.jsonl", "replan.jsonl"):
            p = os.path.join(d, old)
            shutil.rmtree(p) if os.path.isdir(p) else os.path.exists(p) and os.remove(p)
        model, line = gpt_with_tokens(d, a)
        print(line)
        run(["bash", CLUSTER, "up", "--name", a.name, "--rate", a.rate])
        try:
            cluster_run = f"bash {CLUSTER} run --name {a.name}"
            run(cluster_run.split() + ["-n", "2", "--", calibrate, "--quick", "-o",
                                       f"{d}/two-nodes.json"])
            compile_cmd = [hpc_opt, model, "--input-shape", f"input_ids={a.batch},{a.seq}",
                           "--train", "--loss=cross-entropy:logits,labels",
                           "--optimizer=adamw", "--lr=1e-3", f"--cluster={d}/two-nodes.json"]
            run(compile_cmd + ["--mesh=tp=2", f"--report={d}/tp.json", "-o", f"{d}/tp.bin"])
            train = ["train", "--data", f"input_ids={d}/input_ids.npy", "--data",
                     f"labels={d}/labels.npy", "--steps", str(a.steps), "--ckpt-every",
                     str(a.ckpt_every)]
            base = [hpc_launch, "-n", "2", "--launcher", cluster_run]
            launch(base + ["--report", f"{d}/stay-report.json", "--", f"{d}/tp.bin"] + train +
                   ["--ckpt-dir", f"{d}/ck-stay", "--metrics", f"{d}/stay.jsonl"],
                   f"{d}/stay.err")
            launch(base + ["--report", f"{d}/replan-report.json", "--replan-every",
                           str(a.replan_every), "--replan-compile", " ".join(compile_cmd), "--",
                           f"{d}/tp.bin"] + train +
                   ["--ckpt-dir", f"{d}/ck-replan", "--metrics", f"{d}/replan.jsonl"],
                   f"{d}/replan.err")
        finally:
            subprocess.run(["bash", CLUSTER, "down", "--name", a.name],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        predicted = json.load(open(f"{d}/tp.json"))["plan"]["prediction"]["step_time_s"]
        stay_summary = last_summary(f"{d}/stay.jsonl")
        print("bad plan: mesh tp=2 across the nodes, predicted %.1f ms a step, measured %.1f ms"
              % (1e3 * predicted, 1e3 * stay_summary["step_time_s"]))
        stay = json.load(open(f"{d}/stay-report.json"))
        replan = json.load(open(f"{d}/replan-report.json"))
        switched = 0
        for r in replan["replans"]:
            ms = lambda key: "?" if r.get(key) is None else "%.1f" % (1e3 * r[key])
            # The compiler's own report also costs the running plan on the
            # fitted model (what the gain is measured against).
            try:
                running = json.load(open(f"{d}/ck-replan/replan/plan-{r['step']}.json"))[
                    "replan"]["running_predicted_step_s"]
            except (OSError, KeyError, ValueError):
                running = None
            against = "" if running is None else " for the plan that ran (%.1f ms on the " \
                "fitted model)" % (1e3 * running)
            print("re-plan at step %d: %s (predicted %s ms a step against %s ms measured%s; "
                  "compiled in %.1f s)%s" % (
                      r["step"], r["status"], ms("predicted_step_s"), ms("measured_step_s"),
                      against, r["compile_s"] or 0,
                      ", switched at step %d" % r["switched_at_step"]
                      if r["status"] == "switched" else ""))
            switched += r["status"] == "switched"
        final = last_summary(f"{d}/replan.jsonl")
        profiles = [r for r in records(f"{d}/replan.jsonl", PROG)
                    if isinstance(r, dict) and r.get("profile")]
        print("re-planned run ended on: %s, %.1f ms a step" % (
            profiles[-1]["layout"] if profiles else "?", 1e3 * final["step_time_s"]))
        ratio = replan["wall_s"] / stay["wall_s"]
        print("wall time for %d steps: staying %.2f s, re-planning %.2f s (%.2fx)"
              % (a.steps, stay["wall_s"], replan["wall_s"], ratio))
        a_steps, b_steps = step_records(f"{d}/stay.jsonl", PROG), step_records(
            f"{d}/replan.jsonl", PROG)
        worst = max(abs(b_steps[s]["loss"] - a_steps[s]["loss"]) / abs(a_steps[s]["loss"])
                    for s in a_steps)
        if sorted(a_steps) != sorted(b_steps):
            sys.exit(f"{PROG}: the runs logged different steps")
        print("losses: the re-planned run's within %.1e (relative) of staying's over %d steps"
              % (worst, len(a_steps)))
        ok = switched >= 1 and ratio < 1 and worst <= 1e-4
        print("re-planned faster: %s" % ("yes" if ratio < 1 else "no"))
        if not ok:
            sys.exit(f"{PROG}: FAILED: switched {switched} times, ratio {ratio:.2f}, "
                     f"losses within {worst:.1e}")


if __name__ == "__main__":
    main()
