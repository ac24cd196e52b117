//===- TrainOptions.h - the flags of `./model train` ------------*- C++ -*-===//
//
// The command line of the train command, parsed and checked on its own
// (which flags need which others), before the program's manifest is
// consulted.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_TRAINOPTIONS_H
#define HPCRT_DRIVER_TRAINOPTIONS_H

#include "Data.h"
#include "Guard.h"
#include "Schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hpcrt::driver {

struct TrainOptions {
  DataArgs data;             ///< --data NAME=FILE ..., --tokens FILE
  DataArgs eval;             ///< --eval-data NAME=FILE ..., --eval-tokens FILE
  int64_t steps = 0;         ///< --steps N: the last step of the run
  std::string metrics;       ///< --metrics FILE.jsonl
  std::string ckptDir;       ///< --ckpt-dir DIR
  int64_t ckptEvery = 0;     ///< --ckpt-every K (0: only after the last step)
  int64_t ckptKeep = 3;      ///< --ckpt-keep K
  bool resume = false;       ///< --resume
  std::string resumeFrom;    ///< --resume-from DIR/step-N
  std::string save;          ///< --save FILE.safetensors
  std::string saveOnnx;      ///< --save-onnx FILE.onnx
  std::string onnx;          ///< --onnx MODEL.onnx (the source of --save-onnx)
  int64_t logEvery = 10;     ///< --log-every K
  int64_t threads = 0;       ///< --threads T
  double peerTimeout = 0;    ///< --peer-timeout S (0: HPCRT_PEER_TIMEOUT or 300)
  bool haveLr = false;       ///< --lr F given
  double lr = 0;
  bool haveSchedule = false; ///< --lr-schedule given
  LrSchedule schedule;
  int64_t evalEvery = 0;     ///< --eval-every K
  int64_t evalBatches = 1;   ///< --eval-batches K
  int64_t profileEvery = 0;  ///< --profile-every K: a profile line in the metrics
  std::string initWeights;   ///< --init-weights FILE.safetensors
  std::string dumpDir;       ///< --dump-outputs DIR
  std::vector<int64_t> dumpSteps; ///< --dump-steps 1,20
  std::string weights;       ///< --weights FILE (as for run)
  std::string trace;         ///< --trace FILE.json: the kernels of every step
  bool verbose = false;      ///< --verbose
  GuardOptions guard;        ///< --on-divergence, --spike-*, --snapshot-every, ...
  bool conservativePlan = false; ///< --conservative-plan: every step on it
};

/// Parses argv[2..] of `./model train` (throws hpcrt::Error, one line).
TrainOptions parseTrainOptions(int argc, char **argv);

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_TRAINOPTIONS_H
