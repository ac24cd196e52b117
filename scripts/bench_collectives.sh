#!/usr/bin/env bash
#===- scripts/bench_collectives.sh - runtime collectives vs MPI -----------===#
#
# Builds hpcrt-collective-bench and runs it under mpirun: bus bandwidth of
# each collective of libhpcrt's MPI communicator (ring all_reduce, ring
# reduce_scatter, ring all_gather, pairwise all_to_all, chain broadcast)
# against MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather,
# MPI_Alltoall and MPI_Bcast, f32, 1 KiB to 64 MiB, printed as a markdown
# table (busbw as nccl-tests define it). One process per rank, one thread.
#
#   scripts/bench_collectives.sh                  # 4 ranks, 1 KiB..64 MiB, x4
#   RANKS=2 scripts/bench_collectives.sh 1024 1048576 2
#
# HPC_BUILD_DIR (default build/) is the build tree; RANKS (default 4).
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HPC_BUILD_DIR:-$ROOT/build}"
RANKS="${RANKS:-4}"

flock /tmp/hpc-build.lock ninja -C "$BUILD" hpcrt-collective-bench >/dev/null

echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(mpirun --version | head -1)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n "$RANKS" \
  "$BUILD/bin/hpcrt-collective-bench" "$@"
