#!/usr/bin/env bash
#===- setup-test-venv.sh - Python environment of the onnxruntime tests ----===#
#
# Creates build/test-venv (python3 -m venv with the default python3) holding
# numpy, onnx and onnxruntime from PyPI: the CPU reference that
# scripts/ort_compare.py and scripts/bench_ort.sh compare HPC-Opt with.
#
# Idempotent: when the venv exists and imports all three packages, it does
# nothing. Usage:
#
#   scripts/setup-test-venv.sh [VENV_DIR]      (default: build/test-venv)
#
# Prints the venv's python on its last line.
#
#===-----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/build/test-venv}"
python="${PYTHON:-python3}"
check='import numpy, onnx, onnxruntime, matplotlib'

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "setup-test-venv: $venv is ready"
  echo "$venv/bin/python"
  exit 0
fi

if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "setup-test-venv: error: $python has no venv/ensurepip module" \
       "(on Debian: apt-get install python3-venv)" >&2
  exit 1
fi

mkdir -p "$(dirname "$venv")"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --upgrade numpy onnx onnxruntime matplotlib
"$venv/bin/python" -c "$check"
"$venv/bin/python" -c 'import numpy, onnx, onnxruntime as ort; print("setup-test-venv: numpy", numpy.__version__, "onnx", onnx.__version__, "onnxruntime", ort.__version__)'
echo "$venv/bin/python"
