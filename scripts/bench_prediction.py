#!/usr/bin/env python3
"""The cost model's prediction against the measured step, and the searched
plan against a grid of plans, on this machine (issue 17, points 2 and 5).

    scripts/bench_prediction.py [--ranks 2,4 | --two-nodes] [--apply-overlap]
                                [--apply-collective-overhead] [--recalibrate]
                                [--repeat R] [--layers 4 --embd 256 ...] [--cluster-dir DIR]
                                [--workdir DIR]

For each rank count N: `hpc-calibrate --ranks N` measures this machine as
an N-device cluster (host-N.json, unless --cluster-dir has one); every plan
of the grid (dp x tp x pp x micro-batches, and ZeRO stages of dp) is
compiled for a GPT of gen_gpt.py with --cluster=host-N.json --report, so its
prediction (plan.prediction) is of exactly the plan that runs, trained
--steps steps under mpirun, and compared with the metrics' measured profile
(the steady steps' medians; scripts/plan_vs_measured.py's columns). Then
`--auto-parallel` searches a plan on the same cluster file, which is
compiled, run and compared with the fastest grid plan. Prints one table row
per plan, the mean absolute error of the step-time predictions, and the
searched plan against the grid's best; the numbers go to
docs/benchmarks.md with the command and the machine.

--reuse: the plans whose metrics are already in --workdir are compiled and
predicted again (with this run's model flags, e.g. --apply-overlap) but not
trained again, so model variants are compared on the same measured runs;
the searched plan trains only when the search picks another plan than the
one measured there last.

--repeat R (default 3): every plan trains R times, in R rounds of one run
of each plan, and the run with the median step time stands for it (its
parts; with --recalibrate, the calibration's metrics); the runs' range is
printed beside it. A small model's steps on shared cores differ by up to a
third between minutes: in rounds, a slow spell slows every plan, not the
few that ran in it. The searched plan runs its rounds beside the grid's
fastest plan again, and the two are compared from those.

--two-nodes: the 2-rank grid on the two-node cluster instead, against the
cluster file hpc-calibrate measures there (two-nodes.json).

--recalibrate: the first plan of each grid (plain data parallelism) is a
calibration run: every later plan, and the search, is predicted with
`hpc-opt --recalibrate` on its metrics (the cost model fitted to that one
measured step, docs/cost-model.md), so its error is out of sample; the
calibration run itself (exact by construction) is left out of the mean.
"""
import argparse
import json
import os
import statistics
import sys

from mpibench import HPC_OPT, MPIRUN, ROOT, add_gpt_args, gpt_with_tokens, mesh_ranks, run
from metrics_jsonl import summary_record

PROG = "bench_prediction.py"
PARTS = ("step_time_s", "compute_s", "exposed_comm_s", "bubble_s")
CALIBRATE = os.path.join(ROOT, "build", "bin", "hpc-calibrate")

# The grid per rank count: (mesh, extra flags). Pipelines run 2 and 4
# micro-batches; ZeRO stages on plain data parallelism; sequence
# parallelism and ZeRO over dp x tp, which the search may pick.
GRID = {
    2: [("dp=2", []), ("tp=2", []), ("tp=2", ["--sequence-parallel"]),
        ("pp=2", ["--micro-batches=2"]), ("pp=2", ["--micro-batches=4"]),
        ("dp=2", ["--zero=1"]), ("dp=2", ["--zero=3"])],
    4: [("dp=4", []), ("dp=2,tp=2", []), ("dp=2,tp=2", ["--sequence-parallel"]),
        ("dp=2,tp=2", ["--zero=1"]), ("tp=4", []), ("pp=2,dp=2", ["--micro-batches=2"]),
        ("pp=2,tp=2", ["--micro-batches=2"]), ("pp=4", ["--micro-batches=4"]),
        ("dp=4", ["--zero=2"])],
}


def cluster_file(a, n):
    path = os.path.join(a.cluster_dir or a.workdir,
                        "two-nodes.json" if a.two_nodes else f"host-{n}.json")
    if not os.path.exists(path):
        run(launcher(a, n) + [CALIBRATE, "-o", path] if a.two_nodes
            else [CALIBRATE, "--ranks", str(n), "-o", path])
    if not a.apply_overlap and not a.apply_collective_overhead and not a.no_collective_overhead:
        return path
    # The measured overlap (calibration.overlap.fraction) and collective
    # overhead (calibration.collective_overhead_us) as the model's, or no
    # collective overhead.
    with open(path) as f:
        c = json.load(f)
    if a.apply_overlap:
        c["efficiency"]["overlap"] = c["calibration"]["overlap"]["fraction"]
    if a.apply_collective_overhead:
        c["efficiency"]["collective_overhead_us"] = c["calibration"]["collective_overhead_us"]
    if a.no_collective_overhead:
        c["efficiency"].pop("collective_overhead_us", None)
    applied = os.path.join(a.workdir, f"host-{n}-applied.json")
    with open(applied, "w") as f:
        json.dump(c, f, indent=1)
    return applied


CLUSTER = os.path.join(ROOT, "scripts", "netns-cluster.sh")
TWO_NODES = "bench-prediction"  # the two-node cluster's name (--two-nodes)


def launcher(a, ranks):
    """How a plan of `ranks` ranks is started: mpirun on this machine, or
    on the two-node cluster (one rank a node) with --two-nodes."""
    if a.two_nodes:
        return ["bash", CLUSTER, "run", "--name", TWO_NODES, "-n", str(ranks), "--"]
    return MPIRUN + ["-n", str(ranks)] if ranks > 1 else []


def compile_plan(a, model, d, name, cluster, flags):
    """Compiles the plan of `flags` into d/name.bin with its report
    (d/name.json); returns the report's plan."""
    report = f"{d}/{name}.json"
    run([HPC_OPT, model, f"--input-shape=input_ids={a.batch},{a.seq}", "--train",
         "--loss=cross-entropy:logits,labels", "--optimizer=adamw", "--lr=1e-3",
         f"--cluster={cluster}", f"--report={report}", *flags, "-o", f"{d}/{name}.bin"])
    with open(report) as f:
        return json.load(f)["plan"]


def train_rounds(a, d, entries):
    """Trains every entry (name, binary, ranks, plan) --repeat times in
    rounds, one run of each per round, so that the machine's drift over the
    rounds (a shared VM's steps differ by a tenth to a third between
    minutes) hits every plan alike. The run whose step time is the median
    stands for its plan: it is kept as d/name.jsonl (with its plan beside
    it, d/name.jsonl.plan), the others are removed. Returns name -> the
    runs' step times."""
    runs = {name: [] for name, _, _, _ in entries}
    for r in range(a.repeat):
        for name, binary, ranks, _ in entries:
            out = f"{d}/{name}.run{r}.jsonl"
            run(launcher(a, ranks) + [binary, "train", "--data", f"input_ids={d}/input_ids.npy",
                                      "--data", f"labels={d}/labels.npy", "--steps",
                                      str(a.steps), "--metrics", out])
            runs[name].append((summary_record(out, PROG)["step_time_s"], out))
    for name, _, _, plan in entries:
        kept = sorted(runs[name])
        os.replace(kept[len(kept) // 2][1], f"{d}/{name}.jsonl")
        for _, out in kept[:len(kept) // 2] + kept[len(kept) // 2 + 1:]:
            os.remove(out)
        with open(f"{d}/{name}.jsonl.plan", "w") as f:
            f.write(describe(plan))
    return {name: [t for t, _ in kept] for name, kept in runs.items()}


def reusable(a, d, name, plan):
    """With --reuse: whether d/name.jsonl holds a run of `plan` (a grid
    plan's always does; a searched one only when the search chose the same
    plan again)."""
    try:
        with open(f"{d}/{name}.jsonl.plan") as f:
            return a.reuse and os.path.exists(f"{d}/{name}.jsonl") and f.read() == describe(plan)
    except OSError:
        return False


def spread(times):
    """The runs' step times, min-max, when there are several."""
    if len(times) < 2:
        return ""
    return f"   (runs {1000 * min(times):.3f}-{1000 * max(times):.3f})"


def describe(plan):
    """A searched plan as mesh-like text (stages, their dp/tp, micro-batches)."""
    s = plan["stages"][0]
    text = f"pp={plan['num_stages']},dp={s['dp']},tp={s['tp']}"
    if s.get("zero"):
        text += f",zero={s['zero']}"
    if s.get("sequence_parallel"):
        text += ",sp=1"
    if s.get("recompute"):
        text += ",recompute=1"
    return text + f",m={plan['num_micro_batches']}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_gpt_args(ap, layers=4, embd=256, heads=4, vocab=2048, seq=64, batch=8, steps=30)
    ap.add_argument("--ranks", default="2,4", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--cluster-dir", default=None,
                    help="where host-N.json are (measured into --workdir when absent)")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench", "prediction"))
    ap.add_argument("--two-nodes", action="store_true",
                    help="run the 2-rank grid on the two-node cluster (scripts/netns-cluster.sh, "
                         "one rank a node, 1 Gbit/s; needs root)")
    ap.add_argument("--recalibrate", action="store_true",
                    help="fit the cost model to the first plan's run, predict the rest on it")
    ap.add_argument("--reuse", action="store_true",
                    help="predict the runs already measured in --workdir again, without "
                         "training them again (model variants on the same runs)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds of runs, one of each plan a round; a plan's median run "
                         "counts (default 3)")
    ap.add_argument("--apply-collective-overhead", action="store_true",
                    help="plan with the measured collective overhead "
                         "(calibration.collective_overhead_us): hpc-calibrate applies it since "
                         "2026-12-07, this applies it in cluster files written before")
    ap.add_argument("--no-collective-overhead", action="store_true",
                    help="plan without the collective overhead (efficiency.collective_overhead_us "
                         "removed), for comparison")
    ap.add_argument("--apply-overlap", action="store_true",
                    help="plan with the measured overlap (calibration.overlap.fraction) "
                         "instead of the default efficiency.overlap")
    a = ap.parse_args()
    if a.apply_collective_overhead and a.no_collective_overhead:
        sys.exit(f"{PROG}: error: --apply-collective-overhead and --no-collective-overhead "
                 "contradict each other")
    if a.repeat < 1:
        sys.exit(f"{PROG}: error: --repeat takes a count >= 1, got {a.repeat}")
    if a.two_nodes:
        a.ranks = [2]
    for n in a.ranks:
        if n not in GRID:
            sys.exit(f"{PROG}: error: --ranks takes {', '.join(map(str, GRID))}, got {n}")
    if a.two_nodes:
        run(["bash", CLUSTER, "up", "--name", TWO_NODES])
    try:
        return measure(a)
    finally:
        if a.two_nodes:
            run(["bash", CLUSTER, "down", "--name", TWO_NODES])


def measure(a):
    os.makedirs(a.workdir, exist_ok=True)
    d = a.workdir
    model, summary = gpt_with_tokens(d, a)
    print(f"model: {summary}; batch {a.batch} x {a.seq} tokens, {a.steps} steps per plan, "
          f"{a.repeat} round(s) of runs")
    print(f"{'ranks':>5} {'plan':<28} {'predicted ms':>12} {'measured ms':>11} {'error':>7}"
          f"   measured compute / exposed comm / bubble ms (predicted)")
    for n in a.ranks:
        cluster = cluster_file(a, n)
        # The grid on the plain cluster file, its runs in rounds.
        grid = []
        for mesh, extra in GRID[n]:
            label = mesh + "".join(" " + e for e in extra)
            stages = int(dict(x.split("=") for x in mesh.split(",")).get("pp", 1))
            if stages > a.layers:
                print(f"{n:5d} {label:28s} skipped: pp={stages} exceeds the {a.layers} layers")
                continue
            name = f"n{n}-" + (mesh + "".join(extra)).replace("=", "").replace(",", "-") \
                .replace("--", "-")
            flags = [f"--mesh={mesh}", *extra]
            grid.append((label, name, flags, mesh_ranks(mesh),
                         compile_plan(a, model, d, name, cluster, flags)))
        times = train_rounds(a, d, [(name, f"{d}/{name}.bin", ranks, plan)
                                    for _, name, _, ranks, plan in grid
                                    if not reusable(a, d, name, plan)])
        # The predictions: with --recalibrate, of the model fitted to the
        # first plan's run (itself, exact by construction, left out).
        errors, best, fitted = [], None, []
        for k, (label, name, flags, ranks, plan) in enumerate(grid):
            if fitted:
                plan = compile_plan(a, model, d, name, cluster, flags + fitted)
            pred, meas = plan["prediction"], summary_record(f"{d}/{name}.jsonl", PROG)
            p, m = 1000 * pred["step_time_s"], 1000 * meas["step_time_s"]
            err = 100 * (p - m) / m
            if a.recalibrate and k == 0:
                fitted = [f"--recalibrate={d}/{name}.jsonl"]
                label += " (calibration)"
            else:
                errors.append(abs(err))
            print(f"{n:>5} {label:<28} {p:>12.3f} {m:>11.3f} {err:>+6.1f}%   "
                  + " / ".join(f"{1000 * meas[k]:.3f}" for k in PARTS[1:])
                  + "   (predicted " + " / ".join(f"{1000 * pred[k]:.3f}" for k in PARTS[1:])
                  + ")" + spread(times.get(name, [])))
            if best is None or m < best[2]:
                best = (label, name, m, ranks, plan)
        print(f"{n:>5} step-time error over {len(errors)} plans: mean {statistics.mean(errors):.1f}%"
              f", worst {max(errors):.1f}%")
        # The searched plan, its runs in rounds beside the grid's fastest
        # plan again (the grid's runs were minutes earlier).
        name = f"n{n}-searched"
        plan = compile_plan(a, model, d, name, cluster, ["--auto-parallel", *fitted])
        label, best_name, best_ms, best_ranks, best_plan = best
        if reusable(a, d, name, plan):
            m, b, times = 1000 * summary_record(f"{d}/{name}.jsonl", PROG)["step_time_s"], \
                best_ms, {}
        else:
            again = f"{best_name}.again"
            times = train_rounds(a, d, [(name, f"{d}/{name}.bin", n, plan),
                                        (again, f"{d}/{best_name}.bin", best_ranks, best_plan)])
            m = 1000 * summary_record(f"{d}/{name}.jsonl", PROG)["step_time_s"]
            b = 1000 * summary_record(f"{d}/{again}.jsonl", PROG)["step_time_s"]
            label += " again"
        print(f"{n:>5} searched {describe(plan)}: predicted "
              f"{1000 * plan['prediction']['step_time_s']:.3f} ms, measured {m:.3f} ms"
              f"{spread(times.get(name, []))}; the grid's fastest, {label}: {b:.3f} ms"
              f"{spread(times.get(best_name + '.again', []))} (searched/best {m / b:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
