//===- PipelineScheduleTest.cpp - pipeline schedules and their replay -----===//
//
// Every schedule runs each micro-batch's blocks once per chunk, in an order
// the data flow allows (a replay with any costs finishes); with equal
// stages the replayed bubble is the schedule's textbook one (GPipe and 1F1B
// (P-1)/(M+P-1), interleaved (P-1)/(V M+P-1)), ZB-H1's is below 1F1B's,
// and 1F1B keeps at most P-K micro-batches in flight on stage K.
//
//===----------------------------------------------------------------------===//

#include "hpc/PipelineSchedule.h"

#include "gtest/gtest.h"

#include <map>
#include <set>
#include <tuple>

using namespace hpc;

namespace {

PipelineSchedule parsed(const char *text) {
  PipelineSchedule s;
  std::string error;
  EXPECT_TRUE(parsePipelineSchedule(text, s, error)) << error;
  return s;
}

llvm::SmallVector<llvm::SmallVector<PipelineBlock>> lists(const PipelineSchedule &s,
                                                           int64_t ranks, int64_t micro) {
  llvm::SmallVector<llvm::SmallVector<PipelineBlock>> out;
  for (int64_t r = 0; r < ranks; ++r)
    out.push_back(pipelineBlocks(s, r, ranks, micro));
  return out;
}

/// Mean replayed bubble with F = B = 1 (and W = 1 under zb-h1, B = 2
/// otherwise: the same backward), nothing before or after the blocks.
double meanBubble(const char *schedule, int64_t ranks, int64_t micro) {
  PipelineSchedule s = parsed(schedule);
  bool zb = s.kind == PipelineSchedule::ZeroBubbleH1;
  auto cost = [&](int64_t, const PipelineBlock &b) {
    double chunk = 1.0 / double(s.chunks);
    return chunk * (b.phase == PipelineBlock::F ? 1.0 : b.phase == PipelineBlock::W ? 1.0
                                                    : zb                        ? 1.0
                                                                                : 2.0);
  };
  llvm::SmallVector<double> zeros(ranks, 0.0);
  PipelineReplay r = replayPipeline(lists(s, ranks, micro), s.chunks, micro, cost, zeros, zeros);
  EXPECT_EQ(int64_t(r.bubble.size()), ranks);
  double sum = 0;
  for (double b : r.bubble)
    sum += b;
  return sum / double(ranks);
}

TEST(PipelineSchedule, Parse) {
  PipelineSchedule s;
  std::string error;
  EXPECT_TRUE(parsePipelineSchedule("interleaved:3", s, error));
  EXPECT_EQ(s.kind, PipelineSchedule::Interleaved);
  EXPECT_EQ(s.chunks, 3);
  for (const char *bad : {"interleaved", "interleaved:1", "1f1b:2", "zb", ""})
    EXPECT_FALSE(parsePipelineSchedule(bad, s, error)) << bad;
}

TEST(PipelineSchedule, EveryBlockOnce) {
  for (const char *schedule : {"gpipe", "1f1b", "interleaved:2", "zb-h1"})
    for (int64_t ranks : {2, 4})
      for (int64_t micro : {4, 8}) {
        PipelineSchedule s = parsed(schedule);
        bool zb = s.kind == PipelineSchedule::ZeroBubbleH1;
        for (int64_t r = 0; r < ranks; ++r) {
          std::set<std::tuple<int64_t, int64_t, int>> seen;
          std::map<std::pair<int64_t, int64_t>, int> phaseDone;
          for (const PipelineBlock &b : pipelineBlocks(s, r, ranks, micro)) {
            EXPECT_TRUE(seen.insert({b.microBatch, b.chunk, b.phase}).second)
                << schedule << " rank " << r << " repeats a block";
            // On a rank: F before B before W of the same micro-batch and chunk.
            int &done = phaseDone[{b.microBatch, b.chunk}];
            EXPECT_EQ(done, int(b.phase)) << schedule;
            done = b.phase == PipelineBlock::B && !zb ? 3 : int(b.phase) + 1;
          }
          EXPECT_EQ(int64_t(seen.size()), micro * s.chunks * (zb ? 3 : 2)) << schedule;
        }
      }
}

TEST(PipelineSchedule, TextbookBubbles) {
  // P = 4, M = 8: GPipe and 1F1B 3/11, interleaved (V = 2) 3/19.
  EXPECT_NEAR(meanBubble("gpipe", 4, 8), 3.0 / 11.0, 1e-9);
  EXPECT_NEAR(meanBubble("1f1b", 4, 8), 3.0 / 11.0, 1e-9);
  EXPECT_NEAR(meanBubble("interleaved:2", 4, 8), 3.0 / 19.0, 1e-9);
  EXPECT_NEAR(meanBubble("1f1b", 2, 8), 1.0 / 9.0, 1e-9);
  // ZB-H1 fills the drain with weight gradients: at most half of 1F1B's.
  EXPECT_LT(meanBubble("zb-h1", 2, 8), 0.5 * meanBubble("1f1b", 2, 8));
  EXPECT_LT(meanBubble("zb-h1", 4, 8), 0.6 * meanBubble("1f1b", 4, 8));
}

TEST(PipelineSchedule, OneFOneBInFlight) {
  // Micro-batches whose forward ran and backward has not: at most P-K.
  for (int64_t ranks : {2, 4})
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t inFlight = 0, most = 0;
      for (const PipelineBlock &b : pipelineBlocks(parsed("1f1b"), r, ranks, 8)) {
        inFlight += b.phase == PipelineBlock::F ? 1 : -1;
        most = std::max(most, inFlight);
      }
      EXPECT_EQ(most, ranks - r);
    }
}

} // namespace
