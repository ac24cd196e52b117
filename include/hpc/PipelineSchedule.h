//===- PipelineSchedule.h - pipeline schedules -------------------*- C++ -*-===//
//
// The order in which a pipeline stage runs its micro-batches' forward,
// backward and weight-gradient blocks under each schedule: what
// dist-pipeline orders each stage's program by, and what a cost model of
// the bubble can replay.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PIPELINESCHEDULE_H
#define HPC_PIPELINESCHEDULE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace hpc {

/// A --pipeline-schedule value.
struct PipelineSchedule {
  enum Kind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 } kind = OneFOneB;
  int64_t chunks = 1;     ///< interleaved:V: each rank's model chunks (V)
  bool automatic = false; ///< auto: the cost model picks gpipe, 1f1b or zb-h1
};

/// The schedule's --pipeline-schedule spelling.
std::string pipelineScheduleName(const PipelineSchedule &schedule);

/// The schedules auto chooses among, in its order of preference on a tie
/// (fewer activations alive first): 1f1b, zb-h1, gpipe. dist-pipeline
/// replays them; dist-search costs them.
llvm::SmallVector<PipelineSchedule> automaticPipelineSchedules();

/// Parses auto | gpipe | 1f1b | interleaved:V (V >= 2) | zb-h1; false with
/// the reason in `error` for anything else.
bool parsePipelineSchedule(llvm::StringRef text, PipelineSchedule &out, std::string &error);

/// What a stage runs next: micro-batch `microBatch`'s forward (F), its
/// backward (B; under zb-h1 only the part that makes the input gradients
/// the stage before needs) or, under zb-h1, the rest of it, the weight
/// gradients (W); `chunk` is the model chunk (interleaved: the rank's
/// chunk-th virtual stage; 0 otherwise).
struct PipelineBlock {
  enum Phase { F, B, W } phase;
  int64_t microBatch, chunk;
};

/// The blocks rank `rank` of `ranks` pp ranks runs, in order, for
/// `microBatches` micro-batches (interleaved needs a multiple of `ranks`):
///  - gpipe: every F, then every B;
///  - 1f1b: ranks-1-rank F's, then one F and one B in turn, then the rest;
///  - interleaved:V: Megatron-LM's interleaved 1F1B over V chunks a rank;
///  - zb-h1: 1F1B's F's and B's, each W delayed by `rank` B's (Qi et al.'s
///    ZB-H1: the later stages, idle longest at the end of 1F1B, fill it
///    with their weight gradients).
llvm::SmallVector<PipelineBlock> pipelineBlocks(const PipelineSchedule &schedule, int64_t rank,
                                                int64_t ranks, int64_t microBatches);

/// The time each block takes: cost(rank, block) for the block's own
/// micro-batch, chunk and phase (an empty B, the first stage's, costs 0).
using PipelineBlockCost =
    llvm::function_ref<double(int64_t rank, const PipelineBlock &block)>;

/// What one step of `schedule` looks like when each block takes `cost` and
/// the stages wait for each other as the schedule's data flows (F of a
/// micro-batch after its F on the virtual stage before, B after its B on
/// the virtual stage after; sends take no time): `before` and `after` are
/// each rank's time before its first block and after its last (the work
/// outside the blocks: the weights' transposes, the optimizer).
struct PipelineReplay {
  double stepTime = 0;               ///< the last rank's end
  llvm::SmallVector<double> bubble;  ///< per rank: idle time / stepTime
};
PipelineReplay replayPipeline(llvm::ArrayRef<llvm::SmallVector<PipelineBlock>> lists,
                              int64_t chunks, int64_t microBatches, PipelineBlockCost cost,
                              llvm::ArrayRef<double> before, llvm::ArrayRef<double> after);

} // namespace hpc

#endif // HPC_PIPELINESCHEDULE_H
