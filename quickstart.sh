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

# The main job: import the example, print its hpc IR (weights elided), then
# the one-screen summary (ops, parameters, FLOPs per token).
"$ROOT/build/bin/hpc-opt" "$ROOT/examples/gpt2.onnx" \
  --input-shape input_ids=1,16 \
  --mlir-elide-elementsattrs-if-larger=16 \
  --mlir-elide-resource-strings-if-larger=64
"$ROOT/build/bin/hpc-opt" "$ROOT/examples/gpt2.onnx" \
  --input-shape input_ids=1,16 --hpc-print-summary -o /dev/null
