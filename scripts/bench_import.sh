#!/usr/bin/env bash
#===- bench_import.sh - import speed and memory on GPT-3 175B shapes -------===#
#
# Generates the GPT-3-175B-shaped model (96 layers, hidden 12288, 96 heads,
# seq 2048; weights external and absent) with scripts/gen_gpt3_shapes.py and
# imports it with --shapes-only --hpc-print-summary, RUNS times (default 3)
# printing the IR to /dev/null and RUNS times printing it to a file. Each run
# reports wall time and peak RSS from /usr/bin/time -v. Targets: under 3 s
# and under 1 GiB per run. A benchmark, not a test: it prints numbers (record
# them in docs/benchmarks.md) and exits 0 unless a run fails.
#
#   scripts/bench_import.sh [OUT_DIR]        (default: bench-out/, ignored by git)
#   HPC_OPT=path/to/hpc-opt RUNS=5 scripts/bench_import.sh
#
#===-----------------------------------------------------------------------===#

set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bench-out}
hpc_opt=${HPC_OPT:-$root/build/bin/hpc-opt}
runs=${RUNS:-3}
python=${PYTHON:-/usr/bin/python3}

[[ -x $hpc_opt ]] || { echo "error: $hpc_opt is not built" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
mkdir -p "$out"
model=$out/gpt3_175b.onnx

echo "== machine"
echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "hpc-opt: $hpc_opt"

echo "== generating $model"
gen_start=$(date +%s.%N)
"$python" "$root/scripts/gen_gpt3_shapes.py" -o "$model"
gen_end=$(date +%s.%N)
printf 'generated in %.1f s, %s bytes\n' "$(echo "$gen_end - $gen_start" | bc)" \
  "$(stat -c %s "$model")"

# Seconds from /usr/bin/time's "h:mm:ss" or "m:ss.ss".
to_seconds() {
  awk -F: '{ s = 0; for (i = 1; i <= NF; ++i) s = s * 60 + $i; printf "%.2f", s }' <<<"$1"
}

# run LABEL OUTPUT: one timed import; prints one line.
run() {
  local label=$1 output=$2 log=$out/time.log
  if ! /usr/bin/time -v "$hpc_opt" "$model" --shapes-only --hpc-print-summary \
      --emit=mlir -o "$output" 2>"$log"; then
    echo "error: import failed:" >&2
    cat "$log" >&2
    exit 1
  fi
  local wall rss
  wall=$(to_seconds "$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$log")")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
  printf '%-22s wall %6s s   peak RSS %7.1f MiB\n' "$label" "$wall" \
    "$(echo "$rss / 1024" | bc -l)"
  summary=$(sed -n '/=== hpc model summary/,/forward FLOPs/p' "$log")
}

echo "== import: $hpc_opt $model --shapes-only --hpc-print-summary --emit=mlir -o /dev/null"
for i in $(seq "$runs"); do run "run $i, -o /dev/null" /dev/null; done
echo "== import: ... -o $out/out.mlir"
for i in $(seq "$runs"); do run "run $i, -o out.mlir" "$out/out.mlir"; done
printf 'out.mlir: %s bytes\n' "$(stat -c %s "$out/out.mlir")"

echo "== summary (last run)"
echo "$summary" | grep -E '^(inputs|outputs|ops|parameters|forward FLOPs)'
echo "== targets: wall < 3 s, peak RSS < 1 GiB per run"
