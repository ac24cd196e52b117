//===- GuardTest.cpp - the stability guard's decisions ---------------------===//
//
// The loss monitor's spike rule, the rollback window, --clip-norm=auto's
// statistic and HPC_FAULT's parsing and arming (runtime/driver/Guard.h,
// Faults.h), each on values whose answer is known by hand.
//
//===----------------------------------------------------------------------===//

#include "driver/Faults.h"
#include "driver/Guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

using namespace hpcrt::driver;

namespace {

TEST(LossMonitor, WithoutSpikeSigmaOnlyNonFiniteLossesDiverge) {
  GuardOptions o;
  LossMonitor m(o);
  for (int k = 0; k < 40; ++k)
    m.accept(1.0f);
  EXPECT_EQ(m.diverges(1000.0f), "");
  EXPECT_NE(m.diverges(NAN), "");
}

TEST(LossMonitor, ASpikeIsKSigmasAboveTheWindowsMean) {
  GuardOptions o;
  o.spikeWindow = 4;
  o.spikeSigma = 2;
  LossMonitor m(o);
  // Under half a window nothing is a spike; non-finite losses always are.
  EXPECT_EQ(m.diverges(100.0f), "");
  EXPECT_NE(m.diverges(NAN), "");
  EXPECT_NE(m.diverges(INFINITY), "");
  for (float l : {1.0f, 3.0f, 1.0f, 3.0f})
    m.accept(l);
  // Mean 2, sample deviation 2/sqrt(3) = 1.1547: the limit is 4.3094.
  EXPECT_EQ(m.diverges(4.30f), "");
  EXPECT_NE(m.diverges(4.32f), "");
  EXPECT_NE(m.diverges(4.32f).find("the mean 2 of the last 4"), std::string::npos);
  // The window keeps the last 4: after four 10s the limit is 10.2 (the
  // deviation counts as at least 1% of the mean).
  for (int k = 0; k < 4; ++k)
    m.accept(10.0f);
  EXPECT_EQ(m.diverges(10.19f), "");
  EXPECT_NE(m.diverges(10.21f), "");
  m.accept(NAN); // never enters the window
  EXPECT_EQ(m.diverges(10.19f), "");
}

TEST(RollbackCounter, CountsTheRollbacksOfTheLastWindow) {
  GuardOptions o;
  o.maxRollbacks = 3;
  o.rollbackWindow = 10;
  RollbackCounter c(o);
  EXPECT_FALSE(c.add(5));
  EXPECT_FALSE(c.add(12));
  EXPECT_FALSE(c.add(15)); // 5 left the window (15 - 10)
  EXPECT_TRUE(c.add(16));  // 12, 15, 16
  c.clear();
  EXPECT_FALSE(c.add(17));
}

TEST(ClipStats, WarmsUpThenClipsToMeanPlusThreeDeviations) {
  ClipStats s;
  for (int k = 0; k < ClipStats::kWarmup; ++k) {
    EXPECT_TRUE(std::isinf(s.threshold()));
    s.observe(k % 2 ? 3.0 : 1.0);
  }
  double limit = s.threshold();
  EXPECT_NEAR(limit, s.mean + 3 * std::sqrt(s.var), 1e-12);
  EXPECT_GT(limit, 2.0);
  EXPECT_LT(limit, 6.0);
  // A spike enters the statistic as the threshold, not as itself.
  ClipStats spiked = s, capped = s;
  spiked.observe(1000.0);
  capped.observe(limit);
  EXPECT_EQ(spiked.mean, capped.mean);
  EXPECT_EQ(spiked.var, capped.var);
  // Non-finite norms are not observed.
  ClipStats same = s;
  same.observe(NAN);
  EXPECT_EQ(same.count, s.count);
}

TEST(Faults, ParseArmAndFire) {
  Faults f("nan-grad@3,kill-rank@1:7,kill-node@1:9,hang-rank@2:4,loss-spike@5,"
           "crash-in-checkpoint@10,kill@11",
           0);
  EXPECT_TRUE(f.any());
  EXPECT_TRUE(f.fires(FaultKind::NanGrad, 3));
  EXPECT_FALSE(f.fires(FaultKind::NanGrad, 4));
  EXPECT_TRUE(f.fires(FaultKind::KillRank, 7, 1));
  EXPECT_FALSE(f.fires(FaultKind::KillRank, 7, 0));
  EXPECT_TRUE(f.fires(FaultKind::KillNode, 9, 3, 1));
  EXPECT_FALSE(f.fires(FaultKind::KillNode, 9, 1, 0));
  EXPECT_TRUE(f.fires(FaultKind::HangRank, 4, 2));
  EXPECT_TRUE(f.fires(FaultKind::LossSpike, 5));
  EXPECT_TRUE(f.fires(FaultKind::CrashInCheckpoint, 10));
  EXPECT_TRUE(f.fires(FaultKind::Kill, 11, 5));
  // A restarted job (attempt 1) parses them but never fires.
  Faults again("kill-rank@1:7", 1);
  EXPECT_FALSE(again.any());
  EXPECT_FALSE(again.fires(FaultKind::KillRank, 7, 1));
  EXPECT_TRUE(again.lists(FaultKind::KillRank));
  EXPECT_FALSE(Faults("", 0).any());
}

TEST(Faults, MalformedValuesAreOneLineErrors) {
  for (const char *bad : {"boom", "kill-rank@3", "nan-grad@0", "nan-grad@", "nan-grad", "kill@1,",
                          "hang-rank@x:3", "kill-node@1:-2"})
    EXPECT_THROW(Faults(bad, 0), std::exception) << bad;
}

} // namespace
