#!/usr/bin/env bash
#===- bench_ort.sh - latency of compiled models against onnxruntime -------===#
#
# Measures, in one run on one machine, the latency of
#
#   examples/gpt2.onnx   input_ids int64 [1, 64]
#   examples/cnn.onnx    image f32 [1, 3, 32, 32]
#
# compiled by hpc-opt and run by onnxruntime (CPU execution provider,
# intra-op threads T, inter-op 1, default graph optimizations) on the same
# inputs with the same thread count. Each model is measured in R rounds;
# a round runs the executable (`./model.bin run --warmup 1 --iters N --threads
# T`: the mean and min it prints over its N timed runs, after one untimed run
# that faults in the mapped weights and the arena) and then N
# timed onnxruntime runs (after 10 warm-up runs when the session is made) of
# one session, back to back, so both see the same load. Prints each round
# and, per model, the medians over the rounds: hpc mean, hpc min, ort mean,
# ort min, and the ratio hpc/ort of the means (with its range over the
# rounds).
#
#   scripts/bench_ort.sh [--threads T] [--iters N] [--rounds R] [--hpc-opt PATH]
#
# T defaults to nproc, N to 200, R to 5. onnxruntime comes from
# build/test-venv (scripts/setup-test-venv.sh, run first when it is missing).
#
#===-----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads="$(nproc)"
iters=200
rounds=5
hpc_opt="$root/build/bin/hpc-opt"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --hpc-opt) hpc_opt="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "bench_ort: error: unknown option '$1'" >&2; exit 1 ;;
  esac
done
[ -x "$hpc_opt" ] || { echo "bench_ort: error: no hpc-opt at $hpc_opt" >&2; exit 1; }

py="$("$root/scripts/setup-test-venv.sh" | tail -n 1)"
work="$(mktemp -d -t hpc-bench-ort-XXXXXX)"
trap 'rm -rf "$work"' EXIT

cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo "machine: $(nproc) cores, $cpu, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "threads: $threads (both), runs per round: $iters, rounds: $rounds"
echo "onnxruntime: $("$py" -c 'import onnxruntime; print(onnxruntime.__version__)')"

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
  "$py" - "$model" "$exe" "$input" "$npy" "$threads" "$iters" "$rounds" "$label" \
      "$work/$name-out" <<'EOF'
import re, statistics, subprocess, sys, time
import numpy as np
import onnxruntime as ort
model, exe, input_name, npy, threads, iters, rounds, label, outdir = sys.argv[1:]
threads, iters, rounds = int(threads), int(iters), int(rounds)
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
feed = {input_name: np.load(npy)}
for _ in range(10):  # warm-up
    sess.run(None, feed)
rows = []
for r in range(rounds):
    out = subprocess.run([exe, "run", "--input", f"{input_name}={npy}", "--output-dir", outdir,
                          "--warmup", "1", "--iters", str(iters), "--threads", str(threads)],
                         capture_output=True, text=True)
    m = re.search(r"^time: ([0-9.]+) ms/run .*min ([0-9.]+) ms", out.stdout, re.M)
    if out.returncode != 0 or not m:
        sys.exit(f"bench_ort: error: no time line from {exe}:\n{out.stdout}{out.stderr}")
    hpc_mean, hpc_min = float(m.group(1)), float(m.group(2))
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    ort_mean, ort_min = sum(times) / len(times), min(times)
    rows.append((hpc_mean, hpc_min, ort_mean, ort_min, hpc_mean / ort_mean))
    print("  %-24s round %d: hpc mean %.3f min %.3f | ort mean %.3f min %.3f | hpc/ort %.2f"
          % (label, r + 1, hpc_mean, hpc_min, ort_mean, ort_min, hpc_mean / ort_mean),
          flush=True)
med = [statistics.median(row[i] for row in rows) for i in range(5)]
ratios = [row[4] for row in rows]
print("%-26s %10.3f %10.3f %10.3f %10.3f %9.2f   (%.2f-%.2f)" % (
    label, med[0], med[1], med[2], med[3], med[4], min(ratios), max(ratios)), flush=True)
EOF
}

printf '%-26s %10s %10s %10s %10s %9s   %s\n' model "hpc ms" "hpc min" "ort ms" "ort min" \
  "hpc/ort" "(range)"
bench gpt2 "gpt2 (input_ids 1x64)" "$root/examples/gpt2.onnx" input_ids int64 1,64 0 512 \
  --input-shape input_ids=1,64
bench cnn "cnn (image 1x3x32x32)" "$root/examples/cnn.onnx" image float32 1,3,32,32 -1 1
