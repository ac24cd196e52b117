//===- PipelineSchedule.cpp - pipeline schedules and their replay ---------===//
//
// The block order of each pipeline schedule (include/hpc/PipelineSchedule.h):
// dist-pipeline orders each stage's program by it, and replays it with the
// cost model's block times to predict each stage's bubble.
//
//===----------------------------------------------------------------------===//

#include "hpc/PipelineSchedule.h"

#include <algorithm>
#include <vector>

using namespace llvm;
using namespace hpc;

std::string hpc::pipelineScheduleName(const PipelineSchedule &schedule) {
  switch (schedule.kind) {
  case PipelineSchedule::GPipe:
    return "gpipe";
  case PipelineSchedule::OneFOneB:
    return "1f1b";
  case PipelineSchedule::Interleaved:
    return "interleaved:" + std::to_string(schedule.chunks);
  case PipelineSchedule::ZeroBubbleH1:
    return "zb-h1";
  }
  return "";
}

SmallVector<PipelineSchedule> hpc::automaticPipelineSchedules() {
  SmallVector<PipelineSchedule> out;
  for (auto kind : {PipelineSchedule::OneFOneB, PipelineSchedule::ZeroBubbleH1,
                    PipelineSchedule::GPipe}) {
    out.emplace_back();
    out.back().kind = kind;
  }
  return out;
}

bool hpc::parsePipelineSchedule(StringRef text, PipelineSchedule &out, std::string &error) {
  auto [kind, parameter] = text.split(':');
  bool hasParameter = text.contains(':');
  out = PipelineSchedule();
  if (!hasParameter && kind == "auto")
    out.automatic = true;
  else if (!hasParameter && kind == "gpipe")
    out.kind = PipelineSchedule::GPipe;
  else if (!hasParameter && kind == "1f1b")
    out.kind = PipelineSchedule::OneFOneB;
  else if (!hasParameter && kind == "zb-h1")
    out.kind = PipelineSchedule::ZeroBubbleH1;
  else if (kind == "interleaved") {
    int64_t v = 0;
    if (!hasParameter || parameter.getAsInteger(10, v) || v < 2) {
      error = "--pipeline-schedule=interleaved:V needs V >= 2 model chunks a rank, not '" +
              text.str() + "'";
      return false;
    }
    out.kind = PipelineSchedule::Interleaved;
    out.chunks = v;
  } else {
    error = "--pipeline-schedule must be auto, gpipe, 1f1b, interleaved:V or zb-h1, not '" +
            text.str() + "'";
    return false;
  }
  return true;
}

SmallVector<PipelineBlock> hpc::pipelineBlocks(const PipelineSchedule &schedule, int64_t rank,
                                               int64_t ranks, int64_t micro) {
  using P = PipelineBlock;
  SmallVector<PipelineBlock> blocks;
  // Without zb-h1 a backward is one block, its ops in the order autodiff
  // made them (the input gradient comes last, as in PyTorch).
  auto backward = [&](int64_t m, int64_t chunk) { blocks.push_back({P::B, m, chunk}); };
  switch (schedule.kind) {
  case PipelineSchedule::GPipe:
    for (int64_t m = 0; m < micro; ++m)
      blocks.push_back({P::F, m, 0});
    for (int64_t m = 0; m < micro; ++m)
      backward(m, 0);
    return blocks;
  case PipelineSchedule::Interleaved: {
    // Megatron-LM: the micro-batches in groups of `ranks`, each group
    // through chunk 0, then chunk 1, ...; the backwards through the chunks
    // in reverse. Warm up with what the later ranks and chunks need.
    const int64_t v = schedule.chunks, total = micro * v;
    auto at = [&](int64_t k, bool reverse) {
      int64_t group = k / (ranks * v), within = k % (ranks * v);
      int64_t chunk = within / ranks;
      return std::pair<int64_t, int64_t>{group * ranks + within % ranks,
                                         reverse ? v - 1 - chunk : chunk};
    };
    int64_t warmup = std::min((ranks - rank - 1) * 2 + (v - 1) * ranks, total);
    int64_t f = 0, b = 0;
    auto forward = [&] {
      auto [m, c] = at(f++, false);
      blocks.push_back({P::F, m, c});
    };
    auto back = [&] {
      auto [m, c] = at(b++, true);
      backward(m, c);
    };
    while (f < warmup)
      forward();
    while (f < total) {
      forward();
      back();
    }
    while (b < total)
      back();
    return blocks;
  }
  case PipelineSchedule::OneFOneB:
  case PipelineSchedule::ZeroBubbleH1: {
    // 1F1B: warm up with the forwards the later stages need before the
    // first backward comes back, then alternate, then drain.
    const bool zb = schedule.kind == PipelineSchedule::ZeroBubbleH1;
    int64_t warmup = std::min(ranks - 1 - rank, micro);
    int64_t f = 0, b = 0, w = 0;
    auto back = [&] {
      blocks.push_back({P::B, b++, 0});
      // zb-h1: each W waits for the `rank` B's after its own.
      while (zb && w < b - rank)
        blocks.push_back({P::W, w++, 0});
    };
    while (f < warmup)
      blocks.push_back({P::F, f++, 0});
    while (f < micro) {
      blocks.push_back({P::F, f++, 0});
      back();
    }
    while (b < micro)
      back();
    while (zb && w < micro)
      blocks.push_back({P::W, w++, 0});
    return blocks;
  }
  }
  return blocks;
}

namespace {

/// When the stage before (F) or after (B) finishes micro-batch m's block
/// on virtual stage vs: end times, -1 while not run.
struct BlockClock {
  int64_t stagesInAll;
  std::vector<double> fEnd, bEnd;
  BlockClock(int64_t micro, int64_t stagesInAll)
      : stagesInAll(stagesInAll), fEnd(micro * stagesInAll, -1),
        bEnd(micro * stagesInAll, -1) {}
  /// The end of what `blk` on virtual stage vs waits for: 0 for nothing,
  /// -1 while that has not run.
  double dependency(const PipelineBlock &blk, int64_t vs) const {
    if (blk.phase == PipelineBlock::F && vs > 0)
      return fEnd[blk.microBatch * stagesInAll + vs - 1];
    if (blk.phase == PipelineBlock::B && vs + 1 < stagesInAll)
      return bEnd[blk.microBatch * stagesInAll + vs + 1];
    return 0;
  }
  void done(const PipelineBlock &blk, int64_t vs, double end) {
    if (blk.phase == PipelineBlock::F)
      fEnd[blk.microBatch * stagesInAll + vs] = end;
    if (blk.phase == PipelineBlock::B)
      bEnd[blk.microBatch * stagesInAll + vs] = end;
  }
};

} // namespace

PipelineReplay hpc::replayPipeline(ArrayRef<SmallVector<PipelineBlock>> lists, int64_t chunks,
                                   int64_t micro, PipelineBlockCost cost,
                                   ArrayRef<double> before, ArrayRef<double> after) {
  const int64_t ranks = lists.size();
  BlockClock deps(micro, ranks * chunks);
  std::vector<size_t> next(ranks, 0);
  std::vector<double> clock(before.begin(), before.end()), busy(before.begin(), before.end());
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t r = 0; r < ranks; ++r)
      for (; next[r] < lists[r].size(); ++next[r], moved = true) {
        const PipelineBlock &blk = lists[r][next[r]];
        int64_t vs = blk.chunk * ranks + r;
        double dep = deps.dependency(blk, vs);
        if (dep < 0)
          break;
        double d = cost(r, blk);
        clock[r] = std::max(clock[r], dep) + d;
        busy[r] += d;
        deps.done(blk, vs, clock[r]);
      }
  }
  PipelineReplay out;
  for (int64_t r = 0; r < ranks; ++r) {
    clock[r] += after[r];
    busy[r] += after[r];
    out.stepTime = std::max(out.stepTime, clock[r]);
  }
  for (int64_t r = 0; r < ranks; ++r)
    out.bubble.push_back(out.stepTime > 0 ? (out.stepTime - busy[r]) / out.stepTime : 0);
  return out;
}

