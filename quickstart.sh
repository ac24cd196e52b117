#!/usr/bin/env bash
#===- quickstart.sh - install, build, train the bundled GPT-2 example -----===#
#
# Installs what is missing, builds HPC-Opt into build/, runs the compiler on
# examples/gpt2.onnx (a 2-layer GPT-2 with random weights, batch 1 x 16
# tokens), then compiles its train step and trains it for 300 steps on the
# license texts every Debian machine has (/usr/share/common-licenses, one
# token per byte).
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

# 4. the main job: compile a train step (cross entropy on the logits, AdamW)
#    at batch 8 x 64 tokens and train it on byte-level tokens of the license
#    texts; the loss falls from 6.21 (about ln 512, uniform) to 2.78.
python3 "$ROOT/scripts/make_tokens.py" -o "$OUT/licenses.bin" /usr/share/common-licenses
"$ROOT/build/bin/hpc-opt" "$ROOT/examples/gpt2.onnx" --input-shape input_ids=8,64 \
  --train --loss=cross-entropy:logits,labels --optimizer=adamw --lr=3e-3 \
  -o "$OUT/gpt2-train.bin"
"$OUT/gpt2-train.bin" train --tokens "$OUT/licenses.bin" --steps 300 --log-every 50 \
  --metrics "$OUT/gpt2-train.jsonl" --save "$OUT/gpt2-trained.safetensors"
echo "metrics: $OUT/gpt2-train.jsonl (plot: scripts/plot_metrics.py $OUT/gpt2-train.jsonl -o loss.png)"
