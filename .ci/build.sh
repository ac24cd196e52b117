#!/usr/bin/env bash
#===- .ci/build.sh - configure (once) and build HPC-Opt into build/ -------===#
#
# Configures build/ with CMake + Ninja (Release) when it is not configured
# yet, then builds everything, compiler and tests. ccache caches compiles in
# its default directory, so a machine's cache is reused across checkouts
# (CCACHE_BASEDIR makes the cache keys independent of where the repo lives).
# Builds in one tree are serialized with a lock file. HPC_BUILD_DIR selects
# another tree, HPC_CMAKE_ARGS adds CMake arguments to its first configure
# (e.g. -DHPC_SANITIZE=address,undefined, as .ci/sanitize.sh does), and
# HPC_NINJA_ARGS adds ninja arguments (targets, -j).
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${HPC_BUILD_DIR:-$ROOT/build}"
LOCK="${HPC_BUILD_LOCK:-/tmp/hpc-build.lock}"

export CCACHE_BASEDIR="$ROOT"
# The sanitized build compiles with -g1, and ccache hashes the working
# directory of a -g compile (it lands in the debug info): without this every
# fresh clone would rebuild build-asan cold. Reused objects then name the
# first clone's directory in their debug info, which the reports' file:line
# does not need.
export CCACHE_NOHASHDIR=1

locked() {
  if command -v flock >/dev/null 2>&1; then
    flock "$LOCK" "$@"
  else
    "$@"
  fi
}

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  locked cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "${launcher[@]}" ${HPC_CMAKE_ARGS:-}
fi
locked ninja -C "$BUILD_DIR" ${HPC_NINJA_ARGS:-}
