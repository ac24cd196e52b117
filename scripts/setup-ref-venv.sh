#!/usr/bin/env bash
#===- setup-ref-venv.sh - Python environment of the training references ---===#
#
# Creates build/ref-venv (python3 -m venv with the default python3) holding
# torch, torchvision, transformers, numpy, onnx and onnxruntime from PyPI: what
# scripts/make_train_refs.py needs to rebuild the test models in PyTorch and
# record reference training trajectories under test/models/train/, and what
# scripts/bench_train.py needs (torchvision's ResNet-18). The test
# suite itself never needs this venv: the references are committed, and
# scripts/compare_train_refs.py uses numpy only.
#
# torch's PyPI wheel pulls its CUDA dependency wheels (several GB); only the
# CPU is used. Versions are pinned to the ones the committed references were
# made with (override with REF_TORCH=... etc. to try others). torchvision
# 0.29.2 is the newest release the package index here offers; it requires
# torch >= 2.14 and works with 2.15 (its C++ ops load).
#
# Idempotent: when the venv exists and imports all packages, it does nothing.
# Usage:
#
#   scripts/setup-ref-venv.sh [VENV_DIR]      (default: build/ref-venv)
#
# Prints the venv's python on its last line.
#
#===-----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/build/ref-venv}"
python="${PYTHON:-python3}"
check='import numpy, onnx, onnxruntime, torch, torchvision, transformers'

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "setup-ref-venv: $venv is ready"
  echo "$venv/bin/python"
  exit 0
fi

if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "setup-ref-venv: error: $python has no venv/ensurepip module" \
       "(on Debian: apt-get install python3-venv)" >&2
  exit 1
fi

mkdir -p "$(dirname "$venv")"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "torch==${REF_TORCH:-2.15.0}" \
  "torchvision==${REF_TORCHVISION:-0.29.2}" \
  "transformers==${REF_TRANSFORMERS:-5.24.0}" \
  "onnx==${REF_ONNX:-1.23.2}" \
  "onnxruntime==${REF_ORT:-1.31.1}" \
  "numpy==${REF_NUMPY:-2.4.6}"
"$venv/bin/python" -c "$check"
"$venv/bin/python" -c 'import numpy, onnx, onnxruntime as ort, torch, torchvision, transformers as t; print("setup-ref-venv: torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", t.__version__, "numpy", numpy.__version__, "onnx", onnx.__version__, "onnxruntime", ort.__version__)'
echo "$venv/bin/python"
