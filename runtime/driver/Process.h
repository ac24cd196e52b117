//===- Process.h - the process model every command shares -------*- C++ -*-===//
//
// What `run` and `train` share about the process a model executable is: its
// name for `<prog>: error: ...` lines, the launcher's view of the job before
// MPI starts, and MpiRun, which starts MPI for a program with a mesh, checks
// the world size, builds the communicators and makes the ranks agree on
// errors after every phase (the lowest failing rank prints its one line and
// every rank exits 1). Every wait on another rank is bounded by
// --peer-timeout (comm/PeerWait.h). Without a mesh no MPI function is
// called. Backend-neutral: it knows the context and the communicator, not
// the kernels.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_PROCESS_H
#define HPCRT_DRIVER_PROCESS_H

#include "../comm/CommQueue.h"
#include "../comm/MpiComm.h"
#include "../core/Context.h"

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hpcrt::driver {

/// The executable's name, for `<prog>: error: ...` lines.
extern std::string progName;

/// Ends the process with `code` after the message (if any) was printed.
struct QuietExit {
  int code;
};

/// The rank the launcher gave this process, read before MPI_Init (0 when
/// not launched by mpirun), so that an error every rank meets before MPI
/// starts is printed once.
int launcherRank();

/// The number of processes the launcher started (1 when not launched by
/// mpirun), read without MPI.
int launcherSize();

/// The compiled program this process runs: the binary's one program, or in
/// a pipeline binary (hpcrt.h, "Pipeline programs") its pp stage's, picked
/// by the launcher's rank (fails when the ranks do not split into the stages).
/// A compiled program's entry point (hpc_program_run and its kin).
using ProgramRun = void (*)(hpcrt_ctx *);

struct CompiledProgram {
  const char *manifest = nullptr;
  ProgramRun run = nullptr;
  /// The stability guard's conservative plan (null when the binary has none).
  const char *conservativeManifest = nullptr;
  ProgramRun conservativeRun = nullptr;
  int stage = 0, stages = 1;
  std::vector<const char *> manifests; ///< every stage's (a pipeline binary)
};
const CompiledProgram &compiledProgram();

/// What names the plan (checkpoints' plan hash): the manifest, or every
/// stage's manifest in stage order.
std::string compiledPlanText();

/// The model's parameters (elements of every "param" state tensor, whole,
/// each name once over the pipeline's stages): what hpc-opt's --report
/// calls model.parameters. Parses every stage's manifest: call it once.
int64_t compiledParameterCount();

/// --peer-timeout's value: seconds, a positive number (fails naming `flag`).
double parsePeerTimeout(const std::string &flag, const std::string &v);
/// HPCRT_PEER_TIMEOUT when set (seconds), else comm::kDefaultPeerTimeoutS.
double peerTimeoutFromEnv();

/// MPI for the run of a program with a mesh: started by start(), finished
/// (buffered sends completed, communicators freed, MPI_Finalize) when it
/// goes out of scope.
struct MpiRun {
  bool active = false;
  int rank = 0, size = 1;
  /// --peer-timeout in seconds, set before start() (0: HPCRT_PEER_TIMEOUT,
  /// else comm::kDefaultPeerTimeoutS).
  double peerTimeout = 0;
  int localRanks = 1; ///< ranks on this node
  int node = 0;       ///< this node's number (nodes in the order of their lowest rank)
  std::unique_ptr<comm::MpiComm> comm;
  /// The asynchronous ops' communication thread (threaded when MPI allows
  /// calls from one thread at a time, whichever it is).
  std::unique_ptr<comm::CommQueue> queue;

  MpiRun() = default;
  MpiRun(const MpiRun &) = delete;
  MpiRun &operator=(const MpiRun &) = delete;
  ~MpiRun();

  /// MPI_Init, the world-size check against the mesh (rank 0 prints the
  /// error line, every rank exits 1), the communicators, and the placement
  /// check (checkPlacement).
  void start(Context &ctx);

  /// comm::placementError for the manifest's ranks_per_node and every
  /// rank's node (the lowest world rank on it): on an error rank 0 prints
  /// the line and every rank exits 1.
  void checkPlacement(int64_t perNode, const std::vector<uint64_t> &nodeOf);

  /// Runs f on every rank; if it threw on any rank, the lowest failing rank
  /// prints its error and every rank exits 1. Without MPI, f runs as is.
  /// f must not call collectives (a rank that failed early skips them).
  template <typename F> void step(F &&f) {
    step(std::forward<F>(f), [] {});
  }
  /// step(), running `cleanup` on every rank before exiting when any rank
  /// failed (without MPI: when f threw, before the error goes on).
  template <typename F, typename G> void step(F &&f, G &&cleanup) {
    std::string error;
    try {
      f();
    } catch (const std::bad_alloc &) {
      error = "out of memory";
    } catch (const std::exception &e) {
      if (!active) {
        cleanup();
        throw;
      }
      error = e.what();
    }
    if (!active && !error.empty()) {
      cleanup();
      fail(error);
    }
    if (active && anyFailed(!error.empty()))
      cleanup();
    agree(error);
  }

  /// Every rank passes its error ("" when none); see step().
  void agree(const std::string &error);
  /// Whether any rank passes true (collective; false without MPI).
  bool anyFailed(bool mine);

  /// Threads per rank when neither --threads nor OMP_NUM_THREADS says:
  /// the cores divided among the ranks on this node.
  int threadsPerRank() const;

  // --- small collectives of the driver (no-ops without MPI) --------------
  void barrier();
  /// Rank 0's `text`, on every rank.
  std::string broadcast(const std::string &text);
  /// Every rank's `values` (the same count on every rank), concatenated in
  /// rank order, on every rank.
  std::vector<uint64_t> allGather(const std::vector<uint64_t> &values);
  /// The largest of every rank's `value`.
  uint64_t maxOver(uint64_t value);
};

/// Maps the program's weights file: `override` (--weights) or the manifest's
/// file name, resolved against the executable's directory unless absolute.
/// An `override` without __metadata__.hpc_hash is read by name and laid out
/// for the plan (WeightsByName.h; the launcher's rank 0 warns about tensors
/// it does not use). `verbose` prints the path to stderr. Returns the bytes
/// mapped only while loading (0 when the weights are used in place).
uint64_t loadWeights(Context &ctx, const std::string &override, bool verbose);

/// The setup run (Context::beginSetup): the compiled program called once
/// after prepare() so that every stateful kernel makes its primitive and
/// the scratchpad is allocated before the first run. A kernel that fails
/// here leaves its error in the context. `run`: another program of the
/// binary (the conservative plan's) instead of the compiled one.
void setupKernels(Context &ctx, ProgramRun run = nullptr);

/// One run of the compiled program: hpc_program_run, then the end of its
/// asynchronous communication (an error of it becomes the context's). A
/// kernel error stays in the context; finishRun() reports it. `run` as for
/// setupKernels.
void runProgram(Context &ctx, MpiRun &mpi, ProgramRun run = nullptr);
/// After runProgram: completes the buffered sends and makes the ranks agree
/// on the context's error (the lowest failing rank prints it; every rank
/// exits 1).
void finishRun(Context &ctx, MpiRun &mpi);

/// Every rank's communication per `unit` (a run, a train step) from `stats`
/// counted over `units` of them: bytes sent, operations, bytes to another
/// node, three values a rank in rank order (collective under MPI).
std::vector<uint64_t> gatherCommPer(MpiRun &mpi, const comm::CommStats &stats, uint64_t units);
/// Prints (the caller is rank 0) `comm: rank R sent B bytes in K collectives
/// per UNIT (C across nodes)` for each rank of `perRank` (gatherCommPer's),
/// then the compiler's bytes_per_rank and bytes_across_nodes against them
/// where the manifest has them.
void printCommPer(const Context &ctx, const std::vector<uint64_t> &perRank, const char *unit);

/// Writes the kernels' Chrome trace (`run --trace`, `train --trace`): the
/// context's events, or under MPI every rank's (pid = rank, start times
/// relative to `t0Us`, the barrier before the first run), by rank 0.
/// Collective under MPI; `verbose` prints where it went.
void writeTrace(Context &ctx, MpiRun &mpi, const std::string &path, double t0Us,
                bool verbose);

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_PROCESS_H
