#!/usr/bin/env bash
#===- test/fuzz/libfuzzer/smoke.sh - build and briefly run the targets ----===#
#
#   smoke.sh CLANGXX BUILD_DIR RUNS [TARGET...]
#
# Configures BUILD_DIR (once) with the C++ compiler CLANGXX on top of the
# uninstrumented build/ of this checkout, builds the libFuzzer targets, and
# runs each for RUNS inputs (-seed=1, at most 120 s) from its seeds: the
# importer's from the fuzz corpus (test/fuzz/corpus), the bundled CNN and
# the textual test models, the readers' from seeds/ here; the inputs of
# regressions/TARGET (bugs found and fixed) are seeds too. Inputs a run finds
# are kept in BUILD_DIR/corpus/<target>, crashes in BUILD_DIR/crashes/.
# Exits non-zero when a target finds anything. RUNS=-1 runs until stopped
# (docs/testing.md, "libFuzzer").
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
CLANGXX="$1"
BUILD="$2"
RUNS="$3"
shift 3
TARGETS=("$@")
if [ "${#TARGETS[@]}" -eq 0 ]; then
  TARGETS=(fuzz-importer fuzz-importer-text fuzz-npy fuzz-pb fuzz-safetensors fuzz-onnx-init)
fi

if [ ! -f "$BUILD/build.ninja" ]; then
  launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -G Ninja -S "$HERE" -B "$BUILD" -DCMAKE_CXX_COMPILER="$CLANGXX" \
    -DHPC_BUILD_DIR="$ROOT/build" "${launcher[@]}" >/dev/null
fi
ninja -C "$BUILD" "${TARGETS[@]}"

# The importer's seeds, one file each (corpus entries are directories).
SEEDS="$BUILD/seeds"
rm -rf "$SEEDS"
mkdir -p "$SEEDS/fuzz-importer" "$SEEDS/fuzz-importer-text"
for d in "$ROOT"/test/fuzz/corpus/*/; do
  name="$(basename "$d")"
  [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$SEEDS/fuzz-importer/$name.onnx"
  [ -f "$d/model.onnxtxt" ] && cp "$d/model.onnxtxt" "$SEEDS/fuzz-importer-text/$name.onnxtxt"
done
cp "$ROOT/examples/cnn.onnx" "$SEEDS/fuzz-importer/"
for f in "$ROOT"/test/Import/*.onnxtxt "$ROOT"/test/E2E/*.onnxtxt; do
  cp "$f" "$SEEDS/fuzz-importer-text/"
done
for r in npy pb safetensors onnx-init; do
  mkdir -p "$SEEDS/fuzz-$r"
  cp "$HERE/seeds/$r"/* "$SEEDS/fuzz-$r/"
done
# Inputs that found a bug since fixed run first, as regression tests.
for d in "$HERE"/regressions/*/; do
  [ -d "$d" ] && cp "$d"* "$SEEDS/$(basename "$d")/"
done

mkdir -p "$BUILD/crashes"
status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD/corpus/$t"
  echo "libfuzzer: $t, $RUNS runs"
  if ! "$BUILD/bin/$t" -runs="$RUNS" -seed=1 -max_total_time=120 -timeout=30 \
       -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$t-" \
       "$BUILD/corpus/$t" "$SEEDS/$t" 2>"$BUILD/$t.log"; then
    echo "libfuzzer: $t FOUND A PROBLEM (log $BUILD/$t.log, inputs $BUILD/crashes/):" >&2
    tail -40 "$BUILD/$t.log" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_units|^Done' "$BUILD/$t.log" || true
  fi
done
exit "$status"
