#!/usr/bin/env bash
#===- .ci/sanitize.sh - the ASan/UBSan configuration of CI ----------------===#
#
# Configures build-asan/ with -DHPC_SANITIZE=address,undefined (once, through
# .ci/build.sh, with ccache), builds what the subset needs, and runs the
# subset under the sanitizers (docs/testing.md, "Sanitizers"): the importer's
# lit tests, the fuzz sample and corpus, a few E2E, Train and multi-rank
# tests, the runtime's unit tests (its readers among them), runtime-cli and
# runtime-dist.
# Where clang and libFuzzer exist it also builds the libFuzzer targets
# (test/fuzz/libfuzzer, on top of build/) and runs each briefly from its
# seeds. Exits non-zero when a test fails or any sanitizer report was
# written, whatever the test that caused it concluded.
#
#   HPC_ASAN_BUILD_DIR  the instrumented tree (default build-asan)
#   HPC_FUZZ_BUILD_DIR  the libFuzzer tree (default build-fuzz)
#   HPC_FUZZ_RUNS       inputs per libFuzzer target (default 2000; 0: skip)
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ASAN_DIR="${HPC_ASAN_BUILD_DIR:-$ROOT/build-asan}"
FUZZ_DIR="${HPC_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
FUZZ_RUNS="${HPC_FUZZ_RUNS:-2000}"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
export CCACHE_BASEDIR="$ROOT"

t0=$(date +%s)
stamp() { echo "sanitize: $1 ($(( $(date +%s) - t0 )) s)"; }

HPC_BUILD_DIR="$ASAN_DIR" HPC_BUILD_LOCK="${HPC_BUILD_LOCK:-/tmp/hpc-asan.lock}" \
  HPC_CMAKE_ARGS="-DHPC_SANITIZE=address,undefined" \
  HPC_NINJA_ARGS="hpc-opt hpcrt hpcrt-unit-tests hpcrt-communicator-test" .ci/build.sh
stamp "built $ASAN_DIR"

LOGS="$ASAN_DIR/sanitizer-reports"
rm -rf "$LOGS"
mkdir -p "$LOGS"
export HPC_SANITIZER_LOG_DIR="$LOGS"
eval "$("$PY" test/sanitizers/sanitizer_env.py)"

LIT="$(sed -n 's/^LLVM_EXTERNAL_LIT:[A-Z]*=//p' "$ASAN_DIR/CMakeCache.txt")"
LIT="${LIT:-lit}"
failed=()
step() { # NAME COMMAND...: runs one part of the subset, keeps going on failure
  local name="$1"
  shift
  if "$@"; then stamp "$name: passed"; else stamp "$name: FAILED"; failed+=("$name"); fi
}

T="$ASAN_DIR/test"
step "lit Import" "$LIT" -sv "$T/Import"
# The fuzz drivers as test/fuzz's lit tests run them, but without their
# 4 GiB RLIMIT_AS, which ASan (20 TiB of shadow and heap reserved) cannot
# start under: ASan's soft RSS limit makes allocations past 4 GiB fail
# instead, as the rlimit does in a release build.
FUZZ_ENV=(env "ASAN_OPTIONS=$ASAN_OPTIONS:soft_rss_limit_mb=4096" "PATH=$ASAN_DIR/bin:$PATH")
NO_RLIMIT=$((64 << 20)) # MB
OUT="$ASAN_DIR/sanitize-out"
rm -rf "$OUT"
step "fuzz importer sample" "${FUZZ_ENV[@]}" "$PY" test/fuzz/fuzz_importer.py \
  --hpc-opt "$ASAN_DIR/bin/hpc-opt" --seed 7 --count 400 --timeout 60 --jobs 2 \
  --out "$OUT/importer" --memory-limit "$NO_RLIMIT"
step "fuzz importer corpus" "${FUZZ_ENV[@]}" "$PY" test/fuzz/fuzz_importer.py \
  --hpc-opt "$ASAN_DIR/bin/hpc-opt" --corpus test/fuzz/corpus --timeout 60 \
  --memory-limit "$NO_RLIMIT"
if [ -f test/fuzz/fuzz_runtime.py ]; then
  step "fuzz runtime sample" "${FUZZ_ENV[@]}" "$PY" test/fuzz/fuzz_runtime.py \
    --hpc-opt "$ASAN_DIR/bin/hpc-opt" --seed 7 --count 200 --timeout 30 --jobs 2 \
    --keep-dir "$OUT/runtime" --memory-limit "$NO_RLIMIT"
fi
step "lit E2E" "$LIT" -sv "$T/E2E" \
  --filter '/(run-errors|multi-rank|run-input-errors|weights-header-errors|peer-timeout)\.test'
step "lit Train" "$LIT" -sv "$T/Train" --filter '/(compile-errors|data-errors|train-input-errors)\.test'
step "runtime unit tests" "$ASAN_DIR/bin/hpcrt-unit-tests" --gtest_brief=1
step "ctest runtime-cli, runtime-dist, runtime-communicator-2" ctest --test-dir "$ASAN_DIR" \
  -R '^runtime-(cli|dist|communicator-2)$' \
  --output-on-failure

# libFuzzer: clang-14 (Debian's) with its fuzzer runtime, on build/.
CLANGXX="$(command -v clang++-14 || command -v clang++ || true)"
if [ "$FUZZ_RUNS" != 0 ] && [ -n "$CLANGXX" ] && [ -f "$ROOT/build/lib/libHPCImport.a" ]; then
  step "libFuzzer targets" test/fuzz/libfuzzer/smoke.sh "$CLANGXX" "$FUZZ_DIR" "$FUZZ_RUNS"
else
  stamp "libFuzzer: skipped (no clang++, HPC_FUZZ_RUNS=0 or build/ not built)"
fi

reports=("$LOGS"/report.*)
if [ -e "${reports[0]}" ]; then
  for r in "${reports[@]}"; do
    echo "==== $r"
    head -60 "$r"
  done
  failed+=("${#reports[@]} sanitizer report(s) in $LOGS")
fi
if [ "${#failed[@]}" -ne 0 ]; then
  printf 'sanitize: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
stamp "no sanitizer report; all passed"
