#!/usr/bin/env bash
#===- quickstart.sh - install, build, compile the bundled GPT-2 example ---===#
#
# Installs what is missing, builds HPC-Opt into build/, and runs the compiler
# on examples/gpt2.onnx (a 2-layer GPT-2 with random weights), fixing the
# dynamic input shape to batch 1 x 16 tokens.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

"$ROOT/.ci/install-deps.sh"
"$ROOT/.ci/build.sh"

# The main job, on the bundled 2-layer GPT-2 (batch 1, 16 tokens):
# 1. import it, write its hpc IR, print the one-screen summary;
# 2. compile it to an executable (weights beside it in .safetensors);
# 3. run it on a sample input: output summary and time per run.
OUT="$ROOT/build/examples"
mkdir -p "$OUT"
"$ROOT/build/bin/hpc-opt" "$ROOT/examples/gpt2.onnx" \
  --input-shape input_ids=1,16 --hpc-print-summary \
  --mlir-elide-resource-strings-if-larger=64 -o "$OUT/gpt2.mlir"
echo "hpc IR written to $OUT/gpt2.mlir"
"$ROOT/build/bin/hpc-opt" "$ROOT/examples/gpt2.onnx" \
  --input-shape input_ids=1,16 -o "$OUT/gpt2.bin"
"$OUT/gpt2.bin" run --input input_ids="$ROOT/examples/gpt2-input_ids.npy" \
  --output-dir "$OUT/gpt2-out" --iters 20
