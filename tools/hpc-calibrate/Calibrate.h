//===- Calibrate.h - hpc-calibrate's measurements ---------------*- C++ -*-===//
//
// The seam between hpc-calibrate's driver (hpc-calibrate.cpp: flags, the
// re-exec under mpirun, the cluster file) and its two measuring halves:
// KernelBench.cpp times libhpcrt's kernels through their C entry points,
// CommBench.cpp the runtime's MPI communicators per topology level. Both
// halves include runtime headers (compiled with exceptions); this header is
// plain C++ so that the driver stays free of them. Results are the raw
// tables of hpc::cost::Calibration (Cluster.h).
//
//===----------------------------------------------------------------------===//

#ifndef HPC_CALIBRATE_CALIBRATE_H
#define HPC_CALIBRATE_CALIBRATE_H

#include "hpc/CostModel/Cluster.h"

#include <functional>
#include <string>
#include <vector>

namespace hpc {
namespace calibrate {

/// How much to measure.
struct RunOptions {
  bool quick = false; ///< few sizes and repetitions (tests)
  int threads = 1;    ///< kernel threads per rank
  /// More ranks x threads on this node than it has cores: the ranks take
  /// turns on them, as a training job's would.
  bool shared = false;
  /// When the ranks share the cores under mpirun, a barrier of every rank
  /// (empty otherwise): each kernel case starts at it, so that the ranks
  /// measure at once. A rank whose kernel then fails cannot leave the
  /// others waiting there: it ends the job (abortJob).
  std::function<void()> sync;
  std::function<void(const std::string &)> abortJob;
};

/// Times the runtime's kernels on this rank: GEMMs (f32 and bf16), the
/// convolutions, the memory-bound adds and the time of a tiny kernel call,
/// into `out.gemm`, `out.conv`, `out.memory` and `out.kernelOverhead`.
/// False and a one-line reason when a kernel fails.
bool measureKernels(const RunOptions &options, cost::Calibration &out,
                    std::string &error);

/// `out`: one f32 GEMM of [size, size] x [size, size] through hpcrt_matmul
/// on a context of its own (kept alive by the function; a kernel error is
/// an hpcrt::Error thrown from it). False and a reason when the context
/// cannot be made.
bool gemmWorkload(int64_t size, std::function<void()> &out, std::string &error);

/// This process's place in the job: the MPI world grouped into nodes by
/// host name, or one process without MPI when mpirun did not start it.
struct World {
  bool mpi = false;      ///< MPI_Init was called
  int rank = 0, size = 1;
  int nodes = 1;         ///< distinct host names
  int node = 0;          ///< this rank's node (order of first appearance)
  int localRank = 0;     ///< this rank's index among its node's ranks
  int ranksOnNode = 1;   ///< ranks on rank 0's node
  bool uniform = true;   ///< every node holds ranksOnNode ranks
  std::string host;      ///< rank 0's host name
  int threadLevel = 0;   ///< the MPI thread level MPI_Init_thread provided
};

/// Whether mpirun started this process (OMPI_COMM_WORLD_SIZE is set); the
/// world size it announces (1 otherwise).
bool underMpirun(int &worldSize, int &worldRank);

/// MPI_Init (under mpirun) and the node layout. False and a reason when
/// MPI fails.
bool startWorld(World &world, std::string &error);
/// MPI_Barrier over the world (nothing without MPI).
void barrier(const World &world);
/// Prints "hpc-calibrate: error: rank R: `message`" and ends the job
/// (MPI_Abort), as the runtime's collectives do.
[[noreturn]] void abortWorld(const World &world, const std::string &message);
/// MPI_Finalize (when MPI_Init was called).
void finishWorld(const World &world);
/// The lowest rank where `failed` is true, or -1 (collective).
int firstFailure(const World &world, bool failed);

/// Times every collective and send/recv of the runtime's MPI communicator
/// on each level the world has (intra-node: inside a node holding more than
/// one rank; inter-node: among the ranks of one local index when there are
/// several nodes), fitted to alpha + n / beta. Collective; the rows of rank
/// 0's groups land in `out` on rank 0. A failing rank prints its line and
/// aborts the job (MPI_Abort), as the runtime's collectives do.
void measureCollectives(const World &world, const RunOptions &options,
                        std::vector<cost::CollectiveTiming> &out);

/// How much of an all-reduce over the whole world hides under `compute`
/// (gemmWorkload's GEMMs) when the runtime's communication thread runs it
/// (comm/CommQueue.h), as a training step's asynchronous collectives do:
/// the GEMMs alone, the all-reduce alone, then both at once, each the
/// slowest rank's; the buffer is sized so that the all-reduce alone takes
/// about as long as the GEMMs. Collective; `out` on every rank. Nothing
/// with one rank (out.present stays false).
void measureOverlap(const World &world, const RunOptions &options,
                    const std::function<void()> &compute, cost::OverlapTiming &out);

/// Seconds a small all-reduce over the whole world costs when a step runs
/// it: started on the runtime's communication thread and waited for
/// between kernels (`kernel`, a small GEMM), less the kernel alone and the
/// same all-reduce called directly. What is left is the hand-off to the
/// thread and back, and on ranks that share cores the wait for a core
/// (the cost model's efficiency.collective_overhead_us). Collective; the
/// slowest rank's, on every rank; -1 with one rank.
double measureCollectiveOverhead(const World &world, const RunOptions &options,
                                 const std::function<void()> &kernel);

/// How much of a waiting rank's share of the cores goes to the ranks still
/// computing, where the ranks outnumber the cores (a pipeline stage waiting
/// for its input; the cost model's device.core_lending). The ranks pair up
/// (2k computes, 2k+1 waits) and the computing half times a loop of
/// `compute` of about 20 ms (10 with --quick) three ways: every rank
/// computing (`allS`), the partners asleep (`sleepS`: the cores are wholly
/// theirs), and the partners waiting in a receive through
/// the runtime's communication thread that the computing rank answers
/// after (`waitS`, a step's wait: a spin that yields, then sleeps). The
/// fraction is (all - wait) / ((1 - coreShare) x all) in [0, 1]: of the
/// gain whole cores would give, what waiting partners leave (`sleepS`
/// shows the cores' own shortfall). Collective; each time the slowest
/// computing rank's median over interleaved rounds.
struct CoreLending {
  double allS = 0, sleepS = 0, waitS = 0;
  double fraction = 1;
};
CoreLending measureCoreLending(const World &world, const RunOptions &options,
                               double coreShare, const std::function<void()> &compute);

} // namespace calibrate
} // namespace hpc

#endif // HPC_CALIBRATE_CALIBRATE_H
