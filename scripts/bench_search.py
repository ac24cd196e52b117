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
#       [--validation [--only RUN,...]]  (published runs of other teams, out
#                                  of sample; PUBLISHED_RUNS)
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


# Out-of-sample validation set (docs/cost-model.md, "Published runs, out of
# sample"): large training runs of other teams, software and hardware
# generations than Table 1, each evaluated with its published configuration.
# None of these rows was used to fit the efficiency factors. Columns: name,
# team / software, hardware, cluster (a preset, or a file under
# examples/clusters/), layers, hidden, heads, sequence length, vocabulary
# (padded as the software pads it), GPUs, tp, pp, global batch (sequences),
# micro-batch per GPU, ZeRO stage, sequence parallelism, full activation
# recomputation, pipeline schedule, published figure, how it counts (below),
# and a marker: "" when the cost model represents the run as published, else
# what it cannot represent (the row is then the closest representable config
# and its error is reported separately).
#
# How a figure counts (every row is compared in its own source's convention,
# so the error is the ratio of step times whatever the convention):
#   "hfu4": TFLOP/s per GPU by Narayanan et al.'s formula with recomputation,
#           96 B s l h^2 (1 + s/(6h) + V/(16 l h)) / step time / GPUs
#           (Megatron-LM's and Megatron-DeepSpeed's logs; MT-NLG's 126
#           TFLOP/s is exactly this for its 60.1 s iterations);
#   "mfu3": model FLOPs, 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) / step time /
#           GPUs, i.e. the published MFU x the bf16 peak (312 on A100, 989.4
#           on H100; Korthikanti et al., Appendix A; Llama 3's 430 TFLOP/s =
#           43% of 989).
LLAMA3_MARKER = ("GQA/SwiGLU as a GPT of equal GEMM FLOPs, FSDP as ZeRO-1, 1F1B for the interleaved schedule;"
                 " full recomputation for none (without flash attention the scores do not fit)")
PUBLISHED_RUNS = [
    # BLOOM 176B: BigScience Workshop, "BLOOM: A 176B-Parameter Open-Access
    # Multilingual Language Model" (arXiv:2211.05100) sec. 3.4; the training
    # page https://bigscience.notion.site/BigScience-176B-Model-ad073ca07cdf479398d5f95d88e218c4
    # ("one copy of the model takes 48 GPUs", "about 150 TFLOPs", 384 A100
    # 80GB) and https://huggingface.co/blog/bloom-megatron-deepspeed
    # (Megatron-DeepSpeed: TP=4, PP=12, DP=8, ZeRO stage 1, bf16). 70
    # layers, hidden 14336, 112 heads, seq 2048, vocabulary 250,680 padded to
    # 250,880. Global batch 2048 (after the ramp-up). Jean Zay nodes: 8 A100
    # with NVLink, 4 x 100 Gb/s Omni-Path per node (examples/clusters/
    # jean-zay-a100-opa.json; NVLink taken as the DGX's 300 GB/s). Assumed:
    # micro-batch 2 (the tr11-176B-ml training script's), full recomputation
    # (--checkpoint-activations), Megatron-DeepSpeed's 4x FLOP count.
    ("bloom-176b", "BigScience / Megatron-DeepSpeed", "384 x A100-80GB, 4x100G OPA",
     "examples/clusters/jean-zay-a100-opa.json", 70, 14336, 112, 2048, 250880,
     384, 4, 12, 2048, 2, 1, 0, 1, "1f1b", 150, "hfu4", ""),
    # MT-NLG 530B: Smith et al., "Using DeepSpeed and Megatron to Train
    # Megatron-Turing NLG 530B" (arXiv:2201.11990) sec. 2.4: 105 layers,
    # hidden 20480, 128 heads, seq 2048, GPT-2 vocabulary (50,257, padded by
    # Megatron to 51,200 at tp 8), 8-way tensor x 35-way pipeline parallelism,
    # global batch 1920 on 280, 350 and 420 DGX A100 (80 GB, HDR InfiniBand,
    # Selene): 60.1, 50.2 and 44.4 s per iteration, 126, 121 and 113 TFLOP/s
    # per GPU. Assumed: micro-batch 1, full recomputation, ZeRO-1 (DeepSpeed's
    # pipeline engine supports no higher stage), 1F1B.
    ("mt-nlg-530b-2240", "Microsoft+NVIDIA / DeepSpeed+Megatron", "2240 x A100-80GB, HDR IB",
     "dgx-a100-80g", 105, 20480, 128, 2048, 51200,
     2240, 8, 35, 1920, 1, 1, 0, 1, "1f1b", 126, "hfu4", ""),
    ("mt-nlg-530b-2800", "Microsoft+NVIDIA / DeepSpeed+Megatron", "2800 x A100-80GB, HDR IB",
     "dgx-a100-80g", 105, 20480, 128, 2048, 51200,
     2800, 8, 35, 1920, 1, 1, 0, 1, "1f1b", 121, "hfu4", ""),
    ("mt-nlg-530b-3360", "Microsoft+NVIDIA / DeepSpeed+Megatron", "3360 x A100-80GB, HDR IB",
     "dgx-a100-80g", 105, 20480, 128, 2048, 51200,
     3360, 8, 35, 1920, 1, 1, 0, 1, "1f1b", 113, "hfu4", ""),
    # Korthikanti et al., "Reducing Activation Recomputation in Large
    # Transformer Models" (arXiv:2205.05198, MLSys 2023), abstract and sec.
    # 6.3: the 530B GPT (105 layers, hidden 20480, 128 heads, seq 2048,
    # vocabulary 51,200) on 2240 A100 80GB (tp 8 x pp 35 x dp 8): 42.1% MFU
    # with full recomputation, 54.2% with sequence parallelism and selective
    # recomputation (Megatron-LM 2022; the abstract). Assumed: tp 8 x pp 35
    # (the paper's configuration table, not re-read), global batch 2240 (the
    # paper's weak-scaling batch of one sequence per GPU), micro-batch 1,
    # 1F1B. Selective recomputation (only the attention core is recomputed,
    # +1.6% FLOPs) is not representable: that row runs without recomputation.
    ("megatron-sp-530b-full", "NVIDIA / Megatron-LM 2022", "2240 x A100-80GB, HDR IB",
     "dgx-a100-80g", 105, 20480, 128, 2048, 51200,
     2240, 8, 35, 2240, 1, 0, 0, 1, "1f1b", 0.421 * 312, "mfu3", ""),
    ("megatron-sp-530b-selective", "NVIDIA / Megatron-LM 2022", "2240 x A100-80GB, HDR IB",
     "dgx-a100-80g", 105, 20480, 128, 2048, 51200,
     2240, 8, 35, 2240, 1, 0, 1, 0, "1f1b", 0.542 * 312, "mfu3", "selective recomputation as none"),
    # GPT-NeoX-20B: Black et al., "GPT-NeoX-20B: An Open-Source Autoregressive
    # Language Model" (arXiv:2204.06745) sec. 2.3 and 3: 44 layers, hidden
    # 6144, 64 heads, seq 2048, vocabulary 50,432 (padded), 12 servers of 8
    # A100-SXM4-40GB, four ConnectX-6 (HDR 200 Gb/s) HCAs per server
    # (examples/clusters/neox-a100-40g-4hca.json), tensor parallel 2,
    # pipeline parallel 4, ZeRO, 117 TFLOP/s per GPU; batch "approximately
    # 3.15M tokens (1538 contexts)" with 32 gradient-accumulation steps: 12 x
    # 32 x 4 = 1536 sequences, micro-batch 4. Assumed: ZeRO-1, full
    # recomputation (the released 20B config), fp16 (the A100's fp16 peak is
    # its bf16 peak), the GPT-NeoX 4x FLOP count.
    ("neox-20b", "EleutherAI / GPT-NeoX", "96 x A100-40GB, 4x200G HDR IB",
     "examples/clusters/neox-a100-40g-4hca.json", 44, 6144, 64, 2048, 50432,
     96, 2, 4, 1536, 4, 1, 0, 1, "1f1b", 117, "hfu4", ""),
    # Llama 3 405B: Llama Team, "The Llama 3 Herd of Models" (arXiv:2407.21783)
    # Table 3 (126 layers, hidden 16384, FFN 53248, 128 heads, 8 KV heads,
    # vocabulary 128,256) and Table 4 (seq 8192, TP 8, CP 1, PP 16, DP 64 or
    # 128, 32 or 16 sequences per DP group, 430 or 400 TFLOP/s per GPU, 43%
    # or 41% BF16 MFU) on H100 80GB with 400 Gb/s RoCE per GPU (dgx-h100's
    # 50 GB/s per GPU); sec. 3.3.2: no activation checkpointing at 8K, FSDP
    # sharding optimizer states and gradients, an interleaved schedule. Not
    # representable: SwiGLU and grouped-query attention (a GPT block with a
    # 4h MLP has the same 12 h^2 linear parameters and GEMM FLOPs per layer:
    # 2.25 h^2 attention + 9.75 h^2 SwiGLU), flash attention (the cost model
    # stores and reads the s x s scores), Meta's FSDP (as ZeRO-1), the
    # interleaved schedule's chunk count (not published; evaluated as 1F1B).
    # Assumed: micro-batch 1, sequence parallelism on. Without flash
    # attention the stored 8192 x 8192 scores need about 335 GiB per GPU
    # without recomputation, so the rows recompute (Llama 3 did not): the
    # prediction includes a forward pass the run did not do.
    ("llama3-405b-8k", "Meta / Llama 3 4D parallelism", "8192 x H100-80GB, 400G RoCE",
     "dgx-h100", 126, 16384, 128, 8192, 128256,
     8192, 8, 16, 2048, 1, 1, 1, 1, "1f1b", 430, "mfu3", LLAMA3_MARKER),
    ("llama3-405b-16k", "Meta / Llama 3 4D parallelism", "16384 x H100-80GB, 400G RoCE",
     "dgx-h100", 126, 16384, 128, 8192, 128256,
     16384, 8, 16, 2048, 1, 1, 1, 1, "1f1b", 400, "mfu3", LLAMA3_MARKER),
]
# Left out: OPT-175B (Zhang et al., arXiv:2203.02068: 992 A100 80GB, 147
# TFLOP/s per GPU with FSDP and Megatron tensor parallelism) publishes neither
# its tensor-parallel degree nor its micro-batch nor how its TFLOP/s count;
# Llama 3's 131K-token stage needs context parallelism (CP 16), which the
# cost model lacks.


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


def published_flops(convention, batch, seq, layers, hidden, vocab):
    """FLOPs of one step as a published figure of `convention` counts them
    (see PUBLISHED_RUNS)."""
    if convention == "hfu4":
        return 96 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
    assert convention == "mfu3", convention
    return 72 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))


def published_cluster(cluster, gpus):
    if cluster.endswith(".json"):
        return "%s:%d" % (os.path.join(ROOT, cluster), gpus // 8)
    return "%s:%d" % (cluster, gpus // 8)


def bench_validation(args, names):
    """Evaluates PUBLISHED_RUNS (or the named ones) with the current cost model
    and prints the per-run errors, the out-of-sample MAPE and, unless a subset
    is named, the in-sample MAPE on Table 1."""
    rows = [r for r in PUBLISHED_RUNS if not names or r[0] in names]
    unknown = sorted(set(names) - set(r[0] for r in PUBLISHED_RUNS))
    if unknown:
        sys.exit("bench_search.py: error: unknown published run(s) %s (known: %s)"
                 % (", ".join(unknown), ", ".join(r[0] for r in PUBLISHED_RUNS)))
    print("## Published runs, out of sample\n")
    print("Each row: the published configuration as `mesh=dp=..,tp=..,pp=..,zero=..,sp=..,recompute=..,mbs=..`"
          " with `schedule=`; published and predicted TFLOP/s per GPU counted as the source counts them"
          " (hfu4: Megatron's formula with recomputation; mfu3: model FLOPs, MFU x peak); error = predicted /"
          " published - 1 = published step time / predicted step time - 1. Rows marked * are the closest"
          " representable configuration.\n")
    print("| run | team / software | hardware | config | published TFLOP/s per GPU | predicted | error |")
    print("|---|---|---|---|---|---|---|")
    exact, approx, failed = [], [], []
    for (name, team, hardware, cluster, layers, hidden, heads, seq, vocab, gpus, tp, pp, batch, mbs, zero, sp,
         recompute, schedule, published, convention, marker) in rows:
        dp = gpus // (tp * pp)
        model = generate(args.work, layers, hidden, heads, seq=seq, vocab=vocab)
        mesh = "dp=%d,tp=%d,pp=%d,zero=%d,sp=%d,recompute=%d,mbs=%d" % (dp, tp, pp, zero, sp, recompute, mbs)
        config = "tp %d, pp %d, dp %d, batch %d, mbs %d, zero %d, sp %s, recompute %s, %s" % (
            tp, pp, dp, batch, mbs, zero, "on" if sp else "off", "full" if recompute else "none", schedule)
        label = name + (" *" if marker else "")
        rep, _, err = search(args.hpc_opt, model, {"cluster": published_cluster(cluster, gpus), "global-batch": batch,
                                                   "mesh": mesh, "schedule": schedule}, args.work)
        if rep is None:
            print("| %s | %s | %s | %s | %.0f (%s) | failed: %s | - |"
                  % (label, team, hardware, config, published, convention,
                     err.splitlines()[-1].split("error: ")[-1] if err else "?"))
            failed.append(name)
            continue
        step = rep["plan"]["prediction"]["step_time_s"]
        pred = published_flops(convention, batch, seq, layers, hidden, vocab) / step / gpus / 1e12
        e = pred / published - 1
        (approx if marker else exact).append(abs(e))
        print("| %s | %s | %s | %s | %.0f (%s) | %.1f | %+.1f%% |"
              % (label, team, hardware, config, published, convention, pred, 100 * e))
    for (name, *_rest, marker) in rows:
        if marker:
            print("\n\\* %s: %s" % (name, marker), end="")
    print("\n")
    both = exact + approx
    if failed:
        print("not evaluated (the cost model rejects the configuration): %s" % ", ".join(failed))
    if not both:
        return 100.0
    if exact:
        print("out of sample, rows as published (%d): mean absolute percentage error %.2f%%, largest %.1f%%"
              % (len(exact), 100 * sum(exact) / len(exact), 100 * max(exact)))
    if approx:
        print("out of sample, closest representable rows (%d): mean absolute percentage error %.2f%%, largest %.1f%%"
              % (len(approx), 100 * sum(approx) / len(approx), 100 * max(approx)))
    print("out of sample, all %d rows: mean absolute percentage error %.2f%% (goal <= 10%%)"
          % (len(both), 100 * sum(both) / len(both)))
    if names:
        print()
        return 100 * sum(both) / len(both)
    errors = []
    for ((layers, hidden, heads), gpus, batch, mesh, tflops) in calibration_rows()[:len(MEGATRON_TABLE1)]:
        model = generate(args.work, layers, hidden, heads)
        rep, _, err = search(args.hpc_opt, model, {"cluster": args.cluster("dgx-a100-80g", gpus // 8),
                                                   "global-batch": batch, "mesh": mesh}, args.work)
        errors.append(abs(rep["plan"]["prediction"]["tflops_per_device"] - tflops) / tflops if rep else 1.0)
    print("in sample, Narayanan et al. Table 1 (%d rows, the fitting set): mean absolute percentage error %.2f%%,"
          " largest %.1f%%\n" % (len(errors), 100 * sum(errors) / len(errors), 100 * max(errors)))
    return 100 * sum(both) / len(both)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hpc-opt", default=os.path.join(ROOT, "build", "bin", "hpc-opt"))
    ap.add_argument("--work", default="/tmp/hpc-bench-search")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", help="time, megatron or grid; with --validation: comma-separated names of"
                    " PUBLISHED_RUNS")
    ap.add_argument("--validation", action="store_true",
                    help="evaluate the published runs of other teams (PUBLISHED_RUNS) out of sample and Table 1"
                    " in sample")
    ap.add_argument("--calibrate", action="store_true",
                    help="fit the efficiency factors to Table 1 (coordinate descent) and print them")
    ap.add_argument("--loo", action="store_true", help="with --calibrate: leave-one-out cross-validation")
    ap.add_argument("--cluster-file", help="JSON cluster whose device/links/efficiency replace the presets'"
                    " (node count and preset still come from each case)")
    args = ap.parse_args()
    if not args.validation and args.only not in (None, "time", "megatron", "grid"):
        ap.error("--only must be time, megatron or grid (run names need --validation)")
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
    if args.validation:
        names = [n for n in (args.only or "").split(",") if n]
        bench_validation(args, names)
        return 0
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
