#!/usr/bin/env bash
#===- .ci/install-deps.sh - install the Debian packages HPC-Opt needs -----===#
#
# Installs, with apt-get, whichever of the packages below is not installed yet;
# does nothing (and touches no package list) when all are. Runs as root, or
# through sudo when not root. Debian bookworm.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache g++ python3
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libonnx-testdata python3-onnx
  protobuf-compiler libprotobuf-dev
  libgtest-dev
  libopenblas-dev libdnnl-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  iproute2 util-linux
  python3-numpy python3-venv
  clang-14 libclang-rt-14-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: not root and no sudo; install these packages: ${missing[*]}" >&2
    exit 1
  fi
  SUDO=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
