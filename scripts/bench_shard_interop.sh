#!/bin/sh
# Communication volume of dist-partition against upstream MLIR's shard
# partitioning of the same graph (docs/benchmarks.md, "Partitioning against
# upstream shard"): bytes each rank sends per step for the bundled GPT-2 and
# MLP examples on several meshes. Upstream runs twice: from the input and
# weight shardings alone (its own --sharding-propagation, default
# traversal) and from dist-propagate's complete plan (annotations=all); a
# count marked "(signature!)" is of a program whose outputs came back split.
# Needs build/bin/hpc-opt.
set -e
cd "$(dirname "$0")/.."
H=build/bin/hpc-opt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$H examples/gpt2.onnx --input-shape input_ids=2,16 -o "$work/gpt2.mlir"
$H examples/mlp.onnx --input-shape x=4,784 -o "$work/mlp.mlir"
$H examples/cnn.onnx -o "$work/cnn.mlir"
# The transformers exports of test/models (batch 1: dp has nothing to split).
for m in bert gpt2 llama mixtral t5 vit; do
  $H "test/models/$m.onnx" -o "$work/hf-$m.mlir"
done
prep=canonicalize,cse,hpc-fuse-composites
bytes() { sed -n 's/.*each rank sends \([0-9]*\) bytes.*/\1/p'; }
printf '%-12s %-10s %14s %18s %16s\n' model mesh dist-partition upstream-inputs upstream-all
row() {
  model=$1 mesh=$2
  ours=$($H "$work/$model.mlir" -o /dev/null \
    --pass-pipeline="builtin.module($prep,dist-propagate{mesh=$mesh},dist-partition)" 2>&1 | bytes)
  line="$ours"
  for mode in inputs all; do
    up=$($H "$work/$model.mlir" -o "$work/up.mlir" --pass-pipeline="builtin.module($prep,dist-propagate{mesh=$mesh},convert-dist-to-shard{annotations=$mode},func.func(sharding-propagation,shard-partition),convert-shard-to-dist,canonicalize,dist-comm-report)" 2>&1 | bytes)
    # A per-rank program must keep the global signature (whole outputs).
    if [ "$(grep -m1 'func.func @main' "$work/up.mlir")" != "$(grep -m1 'func.func @main' "$work/$model.mlir")" ]; then
      up="$up(signature!)"
    fi
    line="$line $up"
  done
  set -- $line
  printf '%-12s %-10s %14s %18s %16s\n' "$model" "$mesh" "$1" "$2" "$3"
}
for model in gpt2 mlp; do
  for mesh in tp=2 tp=4 dp=2,tp=2; do row $model $mesh; done
done
for mesh in tp=2 tp=4; do row cnn $mesh; done
for m in bert gpt2 llama mixtral t5 vit; do
  for mesh in tp=2 tp=4; do row hf-$m $mesh; done
done
