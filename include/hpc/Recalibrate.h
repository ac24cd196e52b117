//===- Recalibrate.h - the cost model fitted to a measured run --*- C++ -*-===//
//
// `hpc-opt --cluster=C --recalibrate=METRICS.jsonl[@STEP]` (issue 17's
// re-planning): a binary compiled with a cluster carries the cost model's
// prediction of its step (the manifest's "prediction"); `train` writes it
// beside the measured parts of the step (--profile-every lines and the
// summary). The compiler reads one such line and scales the model's compute
// and communication times so that the plan that ran predicts what it
// measured (hpc::cost::scaleClusterSpec), then plans again on the scaled
// model. docs/cost-model.md, "Recalibration from a run".
//
//===----------------------------------------------------------------------===//

#ifndef HPC_RECALIBRATE_H
#define HPC_RECALIBRATE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace hpc {

/// The step's parts, in the names of the report's plan.prediction and of
/// the metrics: step_time_s, compute_s, exposed_comm_s, bubble_s.
constexpr int kStepParts = 4;
extern const char *const kStepPartNames[kStepParts];

/// One measured step of a run and the prediction its binary holds.
struct MeasuredRun {
  std::string file;
  int64_t step = -1; ///< the profile line's step; -1: the run's summary
  double measured[kStepParts] = {};
  double predicted[kStepParts] = {};
  /// The scales the prediction was made with (1 unless that binary came
  /// from a recalibration itself).
  double computeScale = 1, networkScale = 1, latencyScale = 1;
  std::string cluster; ///< the cluster the binary was planned for
  /// The binary's plan as dist-search's `mesh` spec ("dp=2,tp=1,pp=1,
  /// zero=1,sp=0,recompute=0,mbs=4") and its pipeline schedule, so that it
  /// can be costed again on the recalibrated model ("" when not recorded).
  std::string plan, schedule;
  std::string host;    ///< the CPU the run measured on
  int64_t parameters = -1;
};

/// Reads `spec`, "METRICS.jsonl" (its last profile line, else its summary)
/// or "METRICS.jsonl@STEP" (the profile line of STEP). False and a one-line
/// reason in `error` when the file cannot be read, holds no such line, or
/// the line has no prediction (a binary compiled without a cluster).
bool readMeasuredRun(llvm::StringRef spec, MeasuredRun &run, std::string &error);

/// The compute and network scales under which the run's plan predicts its
/// measured compute and exposed communication (each relative to the plain
/// cluster; a part predicted or measured as zero keeps its scale).
void recalibrationScales(const MeasuredRun &run, double &compute, double &network);

} // namespace hpc

#endif // HPC_RECALIBRATE_H
