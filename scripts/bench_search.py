#!/usr/bin/env python3
# Benchmarks of the dist-search pass (docs/benchmarks.md, "Strategy search"):
#
#  1. search time: GPT-3 175B (96 layers, hidden 12288, 96 heads, seq 2048,
#     global batch 1536) on dgx-a100-80g:128 (1024 GPUs); target < 10 s;
#  2. predicted per-GPU TFLOP/s for the weak-scaling configurations of
#     Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
#     Clusters Using Megatron-LM", SC'21 (arXiv:2104.04473), Table 1, against
#     the published figures; target: mean absolute percentage error <= 10%;
#  3. the searched plan against the best Megatron-style grid search (dp, tp,
#     pp, micro-batch size; recomputation on/off) in the same cost model:
#     never worse; the ratio of step times.
#
# Models come from scripts/gen_gpt3_shapes.py (weights never written) and are
# imported with --shapes-only. Needs build/bin/hpc-opt and Debian's python3
# with python3-onnx. Usage:
#   /usr/bin/python3 scripts/bench_search.py [--hpc-opt build/bin/hpc-opt]
#       [--work /tmp/hpc-bench-search] [--only time|megatron|grid]
#       [--cluster-file F.json]   (evaluate with another cluster/efficiency)
#       [--calibrate [--loo]]      (fit the efficiency factors to Table 1)
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Narayanan et al. (SC'21), Table 1: GPT models with vocabulary 51,200 and
# sequence length 2048 on Selene (DGX A100 80 GB, 8 x 200 Gb/s HDR
# InfiniBand per node), with activation recomputation. Columns: parameters
# (billions), attention heads, hidden size, layers, tensor-parallel size,
# pipeline-parallel size, GPUs, global batch size, achieved teraFLOP/s per
# GPU, percentage of theoretical peak.
MEGATRON_TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52),
]


# Narayanan et al. (SC'21), Table 2: GPT-3 175B (96 layers, hidden 12288, 96
# heads) and a 530B model (105 layers, hidden 20480, 128 heads) trained with
# ZeRO-3 without model parallelism (DeepSpeed) and with PTD-P (Megatron-LM:
# tp 8 x pp 12 for 175B, tp 8 x pp 35 for 530B). Columns: scheme,
# parameters (billions), layers, hidden, heads, tp, pp, GPUs, global batch,
# micro-batch size, achieved teraFLOP/s per GPU. The cost model was not
# calibrated on the PTD-P rows; they check it out of sample. The ZeRO-3 rows
# fix how ZeRO's per-micro-batch collectives behave (docs/cost-model.md).
MEGATRON_TABLE2 = [
    ("zero3", 174.6, 96, 12288, 96, 1, 1, 384, 1536, 4, 144),
    ("zero3", 174.6, 96, 12288, 96, 1, 1, 768, 1536, 2, 88),
    ("zero3", 174.6, 96, 12288, 96, 1, 1, 1536, 1536, 1, 44),
    ("zero3", 529.6, 105, 20480, 128, 1, 1, 640, 2560, 4, 138),
    ("zero3", 529.6, 105, 20480, 128, 1, 1, 1120, 2240, 2, 98),
    ("zero3", 529.6, 105, 20480, 128, 1, 1, 2240, 2240, 1, 48),
    ("ptd-p", 174.6, 96, 12288, 96, 8, 12, 384, 1536, 1, 153),
    ("ptd-p", 174.6, 96, 12288, 96, 8, 12, 768, 1536, 1, 149),
    ("ptd-p", 174.6, 96, 12288, 96, 8, 12, 1536, 1536, 1, 141),
    ("ptd-p", 529.6, 105, 20480, 128, 8, 35, 560, 2240, 1, 171),
    ("ptd-p", 529.6, 105, 20480, 128, 8, 35, 1120, 2240, 1, 167),
    ("ptd-p", 529.6, 105, 20480, 128, 8, 35, 2240, 2240, 1, 159),
]


def table2_mesh(kind, tp, pp, gpus, mbs):
    dp = gpus // (tp * pp)
    if kind == "zero3":
        return "dp=%d,tp=1,pp=1,zero=3,sp=0,recompute=1,mbs=%d" % (dp, mbs)
    return "dp=%d,tp=%d,pp=%d,zero=0,sp=0,recompute=1,mbs=%d" % (dp, tp, pp, mbs)


def generate(work, layers, hidden, heads, seq=2048, vocab=51200):
    path = os.path.join(work, "gpt_l%d_h%d_a%d_s%d_v%d.onnx" % (layers, hidden, heads, seq, vocab))
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_gpt3_shapes.py"),
                        "--layers", str(layers), "--hidden", str(hidden), "--heads", str(heads),
                        "--seq", str(seq), "--vocab", str(vocab), "-o", path],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def search(hpc_opt, model, options, work):
    report = os.path.join(work, "report.json")
    opts = " ".join("%s=%s" % kv for kv in options.items())
    cmd = [hpc_opt, model, "--shapes-only", "--dist-search=" + opts + " report=" + report + " table=0",
           "-o", "/dev/null"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        return None, wall, done.stderr.strip()
    with open(report) as f:
        return json.load(f), wall, ""


def bench_time(args):
    model = generate(args.work, 96, 12288, 96)
    runs = []
    for _ in range(args.repeat):
        rep, wall, err = search(args.hpc_opt, model, {"cluster": args.cluster("dgx-a100-80g", 128),
                                                      "global-batch": 1536}, args.work)
        if rep is None:
            sys.exit("search failed: " + err)
        runs.append((rep["search"]["seconds"], wall, rep))
    rep = runs[-1][2]
    plan = rep["plan"]
    st = plan["stages"]
    print("## Search time: GPT-3 175B on dgx-a100-80g:128 (1024 GPUs), global batch 1536\n")
    print("| run | search (s) | hpc-opt total incl. import (s) |")
    print("|---|---|---|")
    for i, (s, w, _) in enumerate(runs):
        print("| %d | %.3f | %.3f |" % (i + 1, s, w))
    print("\nmedian search %.3f s (target < 10 s); %d stage evaluations, %d Pareto entries"
          % (statistics.median(r[0] for r in runs), rep["search"]["stage_evaluations"],
             rep["search"]["front_entries"]))
    print("plan: %d stages x %d GPUs, micro-batch %d x %d; stage 0: dp %d tp %d sp %s zero %d recompute %s;"
          " predicted step %.2f s, %.1f TFLOP/s per GPU, MFU %.1f%%\n"
          % (plan["num_stages"], plan["devices_per_stage"], plan["micro_batch"], plan["num_micro_batches"],
             st[0]["dp"], st[0]["tp"], st[0]["sequence_parallel"], st[0]["zero"], st[0]["recompute"],
             plan["prediction"]["step_time_s"], plan["prediction"]["tflops_per_device"],
             100 * plan["prediction"]["mfu"]))
    return statistics.median(r[0] for r in runs)


def bench_megatron(args):
    print("## Predicted per-GPU TFLOP/s vs Megatron-LM (Narayanan et al. SC'21, Table 1)\n")
    print("Each row: the published (tp, pp, GPUs, batch) as `mesh=dp=..,tp=..,pp=..,zero=0,sp=0,recompute=1`"
          " on dgx-a100-80g; the micro-batch size is chosen by the cost model.\n")
    print("| params (B) | layers | hidden | heads | tp | pp | dp | GPUs | batch | micro-batch | published TFLOP/s |"
          " predicted TFLOP/s | error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    for (p, heads, hidden, layers, tp, pp, gpus, batch, tflops, pct) in MEGATRON_TABLE1:
        model = generate(args.work, layers, hidden, heads)
        dp = gpus // (tp * pp)
        rep, _, err = search(args.hpc_opt, model,
                             {"cluster": args.cluster("dgx-a100-80g", gpus // 8), "global-batch": batch,
                              "mesh": "dp=%d,tp=%d,pp=%d,zero=0,sp=0,recompute=1" % (dp, tp, pp)}, args.work)
        if rep is None:
            print("| %.1f | %d | %d | %d | %d | %d | %d | %d | %d | - | %d | failed: %s | - |"
                  % (p, layers, hidden, heads, tp, pp, dp, gpus, batch, tflops, err))
            errors.append(1.0)
            continue
        pred = rep["plan"]["prediction"]["tflops_per_device"]
        mbs = rep["plan"]["micro_batch"] // dp
        e = (pred - tflops) / tflops
        errors.append(abs(e))
        print("| %.1f | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.1f | %+.1f%% |"
              % (p, layers, hidden, heads, tp, pp, dp, gpus, batch, mbs, tflops, pred, 100 * e))
    mape = 100 * sum(errors) / len(errors)
    print("\nmean absolute percentage error: %.2f%% (target <= 10%%); largest %.1f%%\n"
          % (mape, 100 * max(errors)))

    print("### Table 2: ZeRO-3 (DeepSpeed) and PTD-P at 175B and 530B\n")
    print("| scheme | params (B) | GPUs | batch | micro-batch | published TFLOP/s | predicted TFLOP/s | error |")
    print("|---|---|---|---|---|---|---|---|")
    errs2 = {"zero3": [], "ptd-p": []}
    for (kind, p, layers, hidden, heads, tp, pp, gpus, batch, mbs, tflops) in MEGATRON_TABLE2:
        model = generate(args.work, layers, hidden, heads)
        rep, _, err = search(args.hpc_opt, model,
                             {"cluster": args.cluster("dgx-a100-80g", gpus // 8), "global-batch": batch,
                              "mesh": table2_mesh(kind, tp, pp, gpus, mbs)}, args.work)
        if rep is None:
            print("| %s | %.1f | %d | %d | %d | %d | failed: %s | - |" % (kind, p, gpus, batch, mbs, tflops, err))
            errs2[kind].append(1.0)
            continue
        pred = rep["plan"]["prediction"]["tflops_per_device"]
        e = (pred - tflops) / tflops
        errs2[kind].append(abs(e))
        print("| %s | %.1f | %d | %d | %d | %d | %.1f | %+.1f%% |" % (kind, p, gpus, batch, mbs, tflops, pred, 100 * e))
    for kind, es in errs2.items():
        print("\n%s: mean absolute percentage error %.2f%%, largest %.1f%%"
              % (kind, 100 * sum(es) / len(es), 100 * max(es)))
    print()
    return mape


GRID_CASES = [
    # (name, layers, hidden, heads, cluster preset, nodes, global batch)
    ("GPT-3 1.3B", 24, 2048, 16, "dgx-a100-80g", 1, 512),
    ("GPT-3 13B", 40, 5120, 40, "dgx-a100-80g", 8, 1024),
    ("GPT-3 175B", 96, 12288, 96, "dgx-a100-80g", 128, 1536),
    ("GPT-3 175B", 96, 12288, 96, "dgx-a100-40g", 128, 1536),
    ("GPT-3 175B", 96, 12288, 96, "dgx-h100", 64, 1536),
    ("GPT-3 13B", 40, 5120, 40, "ascend-910", 8, 512),
]


def bench_grid(args):
    print("## Searched plan vs the best Megatron-style grid plan (same cost model)\n")
    print("Grid: dp x tp x pp = all GPUs, tp inside or across nodes, layers split evenly, every micro-batch"
          " size, recomputation on or off, no ZeRO, no sequence parallelism (Megatron-LM's SC'21 knobs).\n")
    print("| model | cluster | batch | searched plan | searched step (s) | grid plan | grid step (s) |"
          " grid / searched |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for (name, layers, hidden, heads, preset, nodes, batch) in GRID_CASES:
        model = generate(args.work, layers, hidden, heads, vocab=50257)
        rep, _, err = search(args.hpc_opt, model, {"cluster": args.cluster(preset, nodes), "global-batch": batch,
                                                   "compare-grid": 1}, args.work)
        if rep is None:
            print("| %s | %s:%d | %d | failed: %s | | | | |" % (name, preset, nodes, batch, err))
            continue

        def describe(plan):
            s = plan["stages"]
            tps = sorted(set(x["tp"] for x in s))
            dps = sorted(set(x["dp"] for x in s))
            zs = sorted(set(x["zero"] for x in s))
            return "pp %d, tp %s, dp %s, zero %s, mb %d" % (
                plan["num_stages"], "/".join(map(str, tps)), "/".join(map(str, dps)),
                "/".join(map(str, zs)), plan["micro_batch"])
        plan, base = rep["plan"], rep["baseline"]
        if not base["valid"]:
            print("| %s | %s:%d | %d | %s | %.3f | no grid plan fits | - | - |"
                  % (name, preset, nodes, batch, describe(plan), plan["prediction"]["step_time_s"]))
            continue
        ratio = base["step_time_ratio"]
        ratios.append(ratio)
        print("| %s | %s:%d | %d | %s | %.3f | %s | %.3f | %.3f |"
              % (name, preset, nodes, batch, describe(plan), plan["prediction"]["step_time_s"],
                 describe(base), base["prediction"]["step_time_s"], ratio))
    print("\nratio grid/searched: min %.3f, geometric mean %.3f (>= 1: the search is never worse)\n"
          % (min(ratios), statistics.geometric_mean(ratios)))
    return min(ratios)


def calibration_rows():
    """(model dims, GPUs, batch, mesh, published TFLOP/s) of Table 1 and of
    Table 2's ZeRO-3 rows."""
    rows = []
    for (p, heads, hidden, layers, tp, pp, gpus, batch, tflops, pct) in MEGATRON_TABLE1:
        dp = gpus // (tp * pp)
        rows.append(((layers, hidden, heads), gpus, batch,
                     "dp=%d,tp=%d,pp=%d,zero=0,sp=0,recompute=1" % (dp, tp, pp), tflops))
    for (kind, p, layers, hidden, heads, tp, pp, gpus, batch, mbs, tflops) in MEGATRON_TABLE2:
        if kind == "zero3":
            rows.append(((layers, hidden, heads), gpus, batch, table2_mesh(kind, tp, pp, gpus, mbs), tflops))
    return rows


def megatron_errors(args, cluster_file, rows):
    """Signed relative errors of the predictions for `rows` with a cluster file."""
    errors = []
    for ((layers, hidden, heads), gpus, batch, mesh, tflops) in rows:
        model = generate(args.work, layers, hidden, heads)
        with open(cluster_file) as f:
            c = json.load(f)
        c["nodes"] = gpus // 8
        path = os.path.join(args.work, "calib_%d.json" % gpus)
        with open(path, "w") as f:
            json.dump(c, f)
        rep, _, err = search(args.hpc_opt, model, {"cluster": path, "global-batch": batch, "mesh": mesh},
                             args.work)
        errors.append((rep["plan"]["prediction"]["tflops_per_device"] - tflops) / tflops if rep else 1.0)
    return errors


def calibrate(args):
    """Coordinate descent on the efficiency factors, minimizing the MAPE over
    Table 1 and Table 2's ZeRO-3 rows; prints the fitted factors and
    leave-one-out errors."""
    # Start from the preset, as clusterToJSON writes it (via a tiny search).
    model = generate(args.work, 2, 256, 4, seq=64, vocab=1000)
    rep, _, err = search(args.hpc_opt, model, {"cluster": "dgx-a100-80g:1"}, args.work)
    base = rep["cluster"]
    grid = {"matmul": [0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90],
            "memory": [0.5, 0.6, 0.7, 0.8, 0.9],
            "network": [0.5, 0.6, 0.7, 0.8, 0.9],
            "network_inter": [0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0],
            "overlap": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            "kernel_overhead_us": [0, 2, 4, 6, 8, 12]}
    all_rows = calibration_rows()
    path = os.path.join(args.work, "calib.json")

    def mape(eff, rows=None):
        c = json.loads(json.dumps(base))
        c["efficiency"].update(eff)
        with open(path, "w") as f:
            json.dump(c, f)
        errs = megatron_errors(args, path, all_rows)
        if rows is not None:
            errs = [errs[i] for i in rows]
        return sum(abs(e) for e in errs) / len(errs), errs

    def fit(rows=None):
        eff = dict(base["efficiency"])
        best, _ = mape(eff, rows)
        for _ in range(3):
            improved = False
            for key, values in grid.items():
                for v in values:
                    trial = dict(eff, **{key: v})
                    m, _ = mape(trial, rows)
                    if m < best - 1e-9:
                        best, eff, improved = m, trial, True
            if not improved:
                break
        return eff, best

    eff, best = fit()
    _, errs = mape(eff)
    n1 = len(MEGATRON_TABLE1)
    print("fitted efficiency:", json.dumps(eff), "MAPE %.2f%% (Table 1 %.2f%%, ZeRO-3 rows %.2f%%)"
          % (100 * best, 100 * sum(map(abs, errs[:n1])) / n1,
             100 * sum(map(abs, errs[n1:])) / (len(errs) - n1)))
    if args.loo:
        loo = []
        for i in range(len(all_rows)):
            rows = [j for j in range(len(all_rows)) if j != i]
            e_i, _ = fit(rows)
            _, errs = mape(e_i)
            loo.append(abs(errs[i]))
            print("leave out row %d: fitted %s, error on it %.1f%%" % (i, json.dumps(e_i), 100 * errs[i]))
        print("leave-one-out MAPE %.2f%%" % (100 * sum(loo) / len(loo)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hpc-opt", default=os.path.join(ROOT, "build", "bin", "hpc-opt"))
    ap.add_argument("--work", default="/tmp/hpc-bench-search")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=("time", "megatron", "grid"))
    ap.add_argument("--calibrate", action="store_true",
                    help="fit the efficiency factors to Table 1 (coordinate descent) and print them")
    ap.add_argument("--loo", action="store_true", help="with --calibrate: leave-one-out cross-validation")
    ap.add_argument("--cluster-file", help="JSON cluster whose device/links/efficiency replace the presets'"
                    " (node count and preset still come from each case)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    def cluster(preset, nodes):
        if not args.cluster_file:
            return "%s:%d" % (preset, nodes)
        with open(args.cluster_file) as f:
            c = json.load(f)
        c["nodes"] = nodes
        path = os.path.join(args.work, "cluster_%d.json" % nodes)
        with open(path, "w") as f:
            json.dump(c, f)
        return path
    args.cluster = cluster

    print("machine: %s, %d CPUs, %s; python %s\n" % (platform.node(), os.cpu_count(), platform.platform(),
                                                     platform.python_version()))
    if args.calibrate:
        return calibrate(args)
    ok = True
    if args.only in (None, "time"):
        ok &= bench_time(args) < 10
    if args.only in (None, "megatron"):
        ok &= bench_megatron(args) <= 10
    if args.only in (None, "grid"):
        ok &= bench_grid(args) >= 1 - 1e-12
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
