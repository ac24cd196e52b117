#!/bin/sh
# Strategy-search benchmarks (docs/benchmarks.md, "Strategy search"): search
# time for GPT-3 175B on 1024 A100s, predicted per-GPU TFLOP/s against
# Megatron-LM's published weak-scaling table, and the searched plan against
# the best Megatron-style grid plan. Needs build/bin/hpc-opt (ninja -C build
# hpc-opt) and Debian's python3 with python3-onnx. Extra arguments go to
# scripts/bench_search.py (--only time|megatron|grid, --calibrate [--loo]).
set -e
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/bench_search.py "$@"
