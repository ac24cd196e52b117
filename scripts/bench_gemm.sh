#!/usr/bin/env bash
#===- bench_gemm.sh - the runtime's matmul/gemm kernels against oneDNN ----===#
#
# Builds hpcrt-gemm-bench (test/runtime/GemmBench.cpp) and runs it with 1 and
# 2 threads: GFLOP/s of f32 products of the shapes of the bundled models and
# of GPT-2 small at 128 tokens (the four linear layers, the tied LM head
# 128x768 x (50257x768)^T through hpcrt_gemm trans_b, the batched attention
# products of 12 heads) computed by libhpcrt's kernels through their C entry
# points (hpcrt_matmul, hpcrt_gemm) on a real context, and by oneDNN's matmul
# primitive made directly (f32, plain row-major layouts, created once,
# executed repeatedly) on the same buffers. Per product: a warm-up call, then
# the best of 3 rounds of ~S seconds. Prints, per dtype and thread count, a
# markdown table (M K N, both GFLOP/s, runtime/oneDNN) and the minimum and
# geometric mean of the ratio. `--dtypes "f32 bf16"` adds the bf16 products
# (bf16 operands and result, f32 accumulation: where the CPU has no bf16
# kernels, oneDNN's primitive is refused and the bench says so).
#
#   scripts/bench_gemm.sh [--threads "1 2"] [--time S] [--dtypes "f32 bf16"]
#
# S defaults to 0.3. HPC_BUILD_DIR (default build/) is the build tree. The
# machine should be otherwise idle: the numbers are single-process peaks.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HPC_BUILD_DIR:-$ROOT/build}"
threads="1 2"
time_s=0.3
dtypes="f32"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --time) time_s="$2"; shift 2 ;;
    --dtypes) dtypes="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "bench_gemm.sh: error: unknown option '$1'" >&2; exit 1 ;;
  esac
done

flock /tmp/hpc-build.lock ninja -C "$BUILD" hpcrt-gemm-bench >/dev/null

echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
rc=0
for dtype in $dtypes; do
  for t in $threads; do
    echo
    echo "## $dtype, $t thread(s); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    OMP_NUM_THREADS="$t" "$BUILD/bin/hpcrt-gemm-bench" --threads "$t" --time "$time_s" \
      --dtype "$dtype" || rc=$?
  done
done
exit $rc
