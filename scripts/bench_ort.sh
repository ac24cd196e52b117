#!/usr/bin/env bash
#===- bench_ort.sh - latency of compiled models against onnxruntime -------===#
#
# Measures, in one run on one machine, the latency of
#
#   examples/gpt2.onnx   input_ids int64 [1, 64]
#   examples/cnn.onnx    image f32 [1, 3, 32, 32]
#
# compiled by hpc-opt (`./model.bin run --iters N --threads T`: the mean the
# executable prints over its N runs) and run by onnxruntime (CPU execution
# provider, intra-op threads T, inter-op 1, default graph optimizations; one
# warm-up run, then the mean of N timed runs), on the same inputs. Prints the
# mean (and min) ms of each and the ratio hpc/ort of the means.
#
#   scripts/bench_ort.sh [--threads T] [--iters N] [--hpc-opt PATH]
#
# T defaults to nproc, N to 50. onnxruntime comes from build/test-venv
# (scripts/setup-test-venv.sh, run first when it is missing).
#
#===-----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads="$(nproc)"
iters=50
hpc_opt="$root/build/bin/hpc-opt"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --hpc-opt) hpc_opt="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench_ort: error: unknown option '$1'" >&2; exit 1 ;;
  esac
done
[ -x "$hpc_opt" ] || { echo "bench_ort: error: no hpc-opt at $hpc_opt" >&2; exit 1; }

py="$("$root/scripts/setup-test-venv.sh" | tail -n 1)"
work="$(mktemp -d -t hpc-bench-ort-XXXXXX)"
trap 'rm -rf "$work"' EXIT

cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo "machine: $(nproc) cores, $cpu"
echo "threads: $threads, runs: $iters"
echo "onnxruntime: $("$py" -c 'import onnxruntime; print(onnxruntime.__version__)')"
printf '%-26s %12s %12s %12s %12s %9s\n' model "hpc ms" "hpc min" "ort ms" "ort min" "hpc/ort"

# bench TAG LABEL MODEL INPUT DTYPE SHAPE LOW HIGH [hpc-opt flags...]
bench() {
  local name="$1" label="$2" model="$3" input="$4" dtype="$5" shape="$6" low="$7" high="$8"
  shift 8
  local exe="$work/$name.bin" npy="$work/$name-$input.npy"
  "$hpc_opt" "$model" "$@" -o "$exe" 2> "$work/$name.compile.log" || {
    cat "$work/$name.compile.log" >&2; exit 1; }
  "$py" - "$npy" "$dtype" "$shape" "$low" "$high" <<'EOF'
import sys
import numpy as np
path, dtype, shape, low, high = sys.argv[1:]
shape = [int(d) for d in shape.split(",")]
rng = np.random.default_rng(0)
if np.dtype(dtype).kind in "iu":
    a = rng.integers(int(low), int(high), shape)
else:
    a = rng.uniform(float(low), float(high), shape)
np.save(path, a.astype(dtype))
EOF
  local out
  out="$("$exe" run --input "$input=$npy" --output-dir "$work/$name-out" \
          --iters "$iters" --threads "$threads")"
  local hpc_mean hpc_min
  hpc_mean="$(sed -n 's/^time: \([0-9.]*\) ms\/run.*/\1/p' <<<"$out")"
  hpc_min="$(sed -n 's/^time: .*min \([0-9.]*\) ms.*/\1/p' <<<"$out")"
  [ -n "$hpc_mean" ] || { echo "bench_ort: error: no time line from $exe:" >&2; echo "$out" >&2; exit 1; }
  "$py" - "$model" "$input" "$npy" "$threads" "$iters" "$hpc_mean" "$hpc_min" "$label" <<'EOF'
import sys, time
import numpy as np
import onnxruntime as ort
model, input_name, npy, threads, iters, hpc_mean, hpc_min, name = sys.argv[1:]
threads, iters = int(threads), int(iters)
hpc_mean, hpc_min = float(hpc_mean), float(hpc_min)
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
feed = {input_name: np.load(npy)}
sess.run(None, feed)  # warm-up
times = []
for _ in range(iters):
    t0 = time.perf_counter()
    sess.run(None, feed)
    times.append((time.perf_counter() - t0) * 1e3)
ort_mean, ort_min = sum(times) / len(times), min(times)
print("%-26s %12.3f %12.3f %12.3f %12.3f %9.2f" % (
    name, hpc_mean, hpc_min, ort_mean, ort_min, hpc_mean / ort_mean))
EOF
}

bench gpt2 "gpt2 (input_ids 1x64)" "$root/examples/gpt2.onnx" input_ids int64 1,64 0 512 \
  --input-shape input_ids=1,64
bench cnn "cnn (image 1x3x32x32)" "$root/examples/cnn.onnx" image float32 1,3,32,32 -1 1
