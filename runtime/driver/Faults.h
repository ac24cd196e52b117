//===- Faults.h - HPC_FAULT: the fault injection of the tests ---*- C++ -*-===//
//
// The failures the stability guard and hpc-launch must survive, made on
// purpose: HPC_FAULT (environment) lists them, comma-separated; each fires
// once, at its step, and only in a job's first attempt (HPC_ATTEMPT unset or
// 0: a restarted job runs clean). Unset, nothing here has any effect.
//
//   nan-grad@STEP             the step's gradients are NaN (the backward is
//                             seeded with a NaN loss scale; the loss stays
//                             finite): gradient flow control skips it
//   loss-spike@STEP           every parameter is multiplied by -4 before the
//                             step (a corrupted state): the loss monitor sees
//                             the spike
//   kill@STEP                 every rank raises SIGKILL during the step
//   kill-rank@RANK:STEP       that rank does
//   kill-node@NODE:STEP       every rank on that node does (nodes numbered
//                             by their lowest rank: node 0 holds rank 0)
//   hang-rank@RANK:STEP       that rank stops during the step (sleeps; no
//                             heartbeat, its peers wait in the next collective)
//   crash-in-checkpoint@STEP  every rank raises SIGKILL while it writes the
//                             checkpoint of that step (its shard half written,
//                             before the directory is published)
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_FAULTS_H
#define HPCRT_DRIVER_FAULTS_H

#include <cstdint>
#include <string>
#include <vector>

namespace hpcrt::driver {

enum class FaultKind { NanGrad, LossSpike, Kill, KillRank, KillNode, HangRank, CrashInCheckpoint };

struct Fault {
  FaultKind kind;
  int64_t step = 0;
  int64_t where = -1; ///< the rank or node of kill-rank, kill-node, hang-rank
};

/// The faults of one process: parsed from HPC_FAULT and HPC_ATTEMPT, then
/// asked at each point where one may fire.
class Faults {
public:
  /// Parses `spec` (HPC_FAULT's value); `attempt` is HPC_ATTEMPT's (faults
  /// are checked in every attempt but armed only in attempt 0). Throws
  /// hpcrt::Error, one line, on a malformed value.
  Faults() = default;
  Faults(const std::string &spec, int64_t attempt);
  /// From the environment.
  static Faults fromEnvironment();

  /// Whether a fault of `kind` fires at `step` on this rank (`rank`, on
  /// node `node`).
  bool fires(FaultKind kind, int64_t step, int rank = 0, int node = 0) const;
  bool any() const { return armed_ && !faults_.empty(); }
  /// Whether HPC_FAULT lists a fault of `kind` (armed or not).
  bool lists(FaultKind kind) const;

  /// SIGKILL for this process (stdout flushed first).
  [[noreturn]] static void killSelf();
  /// Sleeps until killed.
  [[noreturn]] static void hang();

private:
  std::vector<Fault> faults_;
  bool armed_ = false;
};

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_FAULTS_H
