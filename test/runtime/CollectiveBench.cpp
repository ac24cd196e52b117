//===- CollectiveBench.cpp - runtime collectives against MPI's own ---------===//
//
// Bus bandwidth of each collective of the runtime's MPI communicator
// (runtime/comm/MpiComm: ring all-reduce, ring reduce-scatter, ring
// all-gather, pairwise all-to-all, chain broadcast) against the same MPI
// call made directly (MPI_Allreduce, MPI_Reduce_scatter_block,
// MPI_Allgather, MPI_Alltoall, MPI_Bcast), f32, on every rank of the world
// (a one-axis mesh), at sizes from 1 KiB to 64 MiB. Run under mpirun;
// scripts/bench_collectives.sh does.
//
// Sizes and bandwidths follow nccl-tests (PERFORMANCE.md): size is the
// all_reduce/broadcast buffer, the whole gathered output of all_gather, the
// whole input of reduce_scatter, and the send buffer of all_to_all;
// algbw = size / time; busbw = algbw * 2(n-1)/n (all_reduce), * (n-1)/n
// (all_gather, reduce_scatter, all_to_all), * 1 (broadcast). time is the
// mean over the timed iterations of the slowest rank.
//
// With RANKS_PER_NODE (the ranks laid node-major on nodes of that many,
// as on the two-node cluster), all_reduce and reduce_scatter are also timed
// in two levels (MpiComm's TwoLevel: within each node, then across), with
// MPI's same call beside them.
//
// usage: mpirun -n N hpcrt-collective-bench [MIN_BYTES [MAX_BYTES [FACTOR [RANKS_PER_NODE]]]]
//
//===----------------------------------------------------------------------===//

#include "comm/MpiComm.h"
#include "comm/Reduce.h"
#include "core/Context.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace hpcrt;
using namespace hpcrt::comm;

namespace {

struct Result {
  double seconds = 0; ///< per call
  double busbw = 0; ///< GB/s
};

template <typename F> double timeIt(int iters, F &&f) {
  f(); // warm-up
  f();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    f();
  double t = (MPI_Wtime() - t0) / iters, slowest = 0;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

std::string human(size_t bytes) {
  char b[32];
  if (bytes >= (1u << 20))
    snprintf(b, sizeof b, "%zu MiB", bytes >> 20);
  else
    snprintf(b, sizeof b, "%zu KiB", bytes >> 10);
  return b;
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t minBytes = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1024;
  size_t maxBytes = argc > 2 ? strtoull(argv[2], nullptr, 10) : size_t(64) << 20;
  size_t factor = argc > 3 ? strtoull(argv[3], nullptr, 10) : 4;
  int64_t perNode = argc > 4 ? strtoll(argv[4], nullptr, 10) : 0;
  if (minBytes < 4 * static_cast<size_t>(n) || factor < 2) {
    if (rank == 0)
      fprintf(stderr, "hpcrt-collective-bench: MIN_BYTES must be >= 4 * ranks, FACTOR >= 2\n");
    MPI_Finalize();
    return 1;
  }
  int failures = 0;
  try {
    MpiComm comm({{"x", n, "intra_node"}}, MPI_COMM_WORLD);
    const Group &g = comm.group({0});
    Reducer sum = makeReducer(HPCRT_F32, 0);
    const double nn = n;
    if (rank == 0) {
      printf("ranks: %d, f32, time = mean of the slowest rank, busbw as nccl-tests\n", n);
      printf("| size | collective | runtime us | runtime busbw GB/s | MPI us | MPI busbw GB/s | "
             "runtime/MPI busbw |\n");
      printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    }
    for (size_t size = minBytes; size <= maxBytes; size *= factor) {
      // Whole multiples of n elements, so every collective's pieces are equal.
      size_t count = size / 4 / n * n;
      size_t bytes = count * 4, piece = count / n;
      std::vector<float> a(count), b(count), c(count);
      for (size_t i = 0; i < count; ++i)
        a[i] = static_cast<float>((i + rank) % 7);
      int iters = static_cast<int>(std::clamp<size_t>((size_t(256) << 20) / std::max<size_t>(bytes, 1) / 8,
                                                      5, 200));
      struct Row {
        const char *name;
        double factor;
        Result rt, mpi;
        bool same = true;
      };
      std::vector<Row> rows = {{"all_reduce", 2 * (nn - 1) / nn},
                               {"reduce_scatter", (nn - 1) / nn},
                               {"all_gather", (nn - 1) / nn},
                               {"all_to_all", (nn - 1) / nn},
                               {"broadcast", 1.0}};
      // Correctness once: the runtime's result equals MPI's (exact sums).
      auto agree = [&](const float *x, const float *y, size_t k) {
        return memcmp(x, y, k * 4) == 0;
      };
      {
        memcpy(b.data(), a.data(), bytes);
        comm.allReduce(b.data(), count, sum, g);
        MPI_Allreduce(a.data(), c.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        rows[0].same = agree(b.data(), c.data(), count);
        comm.reduceScatter(a.data(), b.data(), piece, sum, g);
        MPI_Reduce_scatter_block(a.data(), c.data(), static_cast<int>(piece), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
        rows[1].same = agree(b.data(), c.data(), piece);
        comm.allGather(a.data(), b.data(), piece * 4, g);
        MPI_Allgather(a.data(), static_cast<int>(piece), MPI_FLOAT, c.data(), static_cast<int>(piece),
                      MPI_FLOAT, MPI_COMM_WORLD);
        rows[2].same = agree(b.data(), c.data(), count);
        comm.allToAll(a.data(), b.data(), piece * 4, g);
        MPI_Alltoall(a.data(), static_cast<int>(piece), MPI_FLOAT, c.data(), static_cast<int>(piece),
                     MPI_FLOAT, MPI_COMM_WORLD);
        rows[3].same = agree(b.data(), c.data(), count);
        memcpy(b.data(), a.data(), bytes);
        memcpy(c.data(), a.data(), bytes);
        comm.broadcast(b.data(), bytes, 0, g);
        MPI_Bcast(c.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
        rows[4].same = agree(b.data(), c.data(), count);
      }
      // The runtime's kernels: all_reduce and broadcast copy x to y first.
      rows[0].rt.seconds = timeIt(iters, [&] {
        memcpy(b.data(), a.data(), bytes);
        comm.allReduce(b.data(), count, sum, g);
      });
      rows[0].mpi.seconds = timeIt(iters, [&] {
        MPI_Allreduce(a.data(), c.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      });
      rows[1].rt.seconds = timeIt(iters, [&] { comm.reduceScatter(a.data(), b.data(), piece, sum, g); });
      rows[1].mpi.seconds = timeIt(iters, [&] {
        MPI_Reduce_scatter_block(a.data(), c.data(), static_cast<int>(piece), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
      });
      rows[2].rt.seconds = timeIt(iters, [&] { comm.allGather(a.data(), b.data(), piece * 4, g); });
      rows[2].mpi.seconds = timeIt(iters, [&] {
        MPI_Allgather(a.data(), static_cast<int>(piece), MPI_FLOAT, c.data(), static_cast<int>(piece),
                      MPI_FLOAT, MPI_COMM_WORLD);
      });
      rows[3].rt.seconds = timeIt(iters, [&] { comm.allToAll(a.data(), b.data(), piece * 4, g); });
      rows[3].mpi.seconds = timeIt(iters, [&] {
        MPI_Alltoall(a.data(), static_cast<int>(piece), MPI_FLOAT, c.data(), static_cast<int>(piece),
                     MPI_FLOAT, MPI_COMM_WORLD);
      });
      rows[4].rt.seconds = timeIt(iters, [&] {
        memcpy(b.data(), a.data(), bytes);
        comm.broadcast(b.data(), bytes, 0, g);
      });
      rows[4].mpi.seconds = timeIt(iters, [&] {
        MPI_Bcast(c.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
      });
      if (perNode > 0) {
        Communicator &two = comm.communicator({0}, perNode);
        rows.push_back({"all_reduce (2 levels)", 2 * (nn - 1) / nn});
        rows.push_back({"reduce_scatter (2 levels)", (nn - 1) / nn});
        Row &ar = rows[rows.size() - 2], &rs = rows.back();
        two.allReduce(a.data(), b.data(), count, HPCRT_F32, 0);
        MPI_Allreduce(a.data(), c.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        ar.same = agree(b.data(), c.data(), count);
        two.reduceScatter(a.data(), b.data(), piece, HPCRT_F32, 0);
        MPI_Reduce_scatter_block(a.data(), c.data(), static_cast<int>(piece), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
        rs.same = agree(b.data(), c.data(), piece);
        ar.rt.seconds = timeIt(iters, [&] { two.allReduce(a.data(), b.data(), count, HPCRT_F32, 0); });
        ar.mpi = rows[0].mpi;
        rs.rt.seconds =
            timeIt(iters, [&] { two.reduceScatter(a.data(), b.data(), piece, HPCRT_F32, 0); });
        rs.mpi = rows[1].mpi;
      }
      for (Row &r : rows) {
        int mine = r.same ? 0 : 1, any = 0;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any)
          ++failures;
        r.rt.busbw = bytes / r.rt.seconds / 1e9 * r.factor;
        r.mpi.busbw = bytes / r.mpi.seconds / 1e9 * r.factor;
        if (rank == 0)
          printf("| %s | %s | %.1f | %.3f | %.1f | %.3f | %.2f%s |\n", human(bytes).c_str(), r.name,
                 r.rt.seconds * 1e6, r.rt.busbw, r.mpi.seconds * 1e6, r.mpi.busbw, r.rt.busbw / r.mpi.busbw,
                 any ? " (RESULTS DIFFER)" : "");
      }
      fflush(stdout);
    }
  } catch (const std::exception &e) {
    fprintf(stderr, "hpcrt-collective-bench: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return failures ? 1 : 0;
}
