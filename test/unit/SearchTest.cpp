//===- SearchTest.cpp - the strategy search against exhaustive checkers ---===//
//
// The dynamic program must find exactly the optimum of the space that the
// exhaustive checker enumerates (every partition of the layers into stages,
// per partition the exact best stage choices), which in turn must agree with
// plain brute force on tiny instances. Instances are random: up to 12 layers
// and 16 devices, repeated and non-uniform layers, mixture-of-experts
// layers, restricted and full knob sets, with and without a memory limit.
//
//===----------------------------------------------------------------------===//

#include "hpc/Search/Search.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace hpc::cost;
using namespace hpc::search;

namespace {

struct Instance {
  ClusterSpec cluster;
  Model model;
  TrainOptions options;
  SearchSpace space;
  bool limited = false;
  bool hasMoE = false;
};

double uniform(std::mt19937_64 &rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
int64_t pick(std::mt19937_64 &rng, std::vector<int64_t> v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}
bool coin(std::mt19937_64 &rng, double p = 0.5) {
  return std::bernoulli_distribution(p)(rng);
}

Layer randomLayer(std::mt19937_64 &rng, bool moe) {
  Layer l;
  int gemms = int(pick(rng, {1, 2, 3, 4}));
  for (int i = 0; i < gemms; ++i) {
    Gemm g;
    g.scalesBatch = coin(rng, 0.3);
    g.batch = double(pick(rng, {1, 2, 4, 8}));
    g.m = double(pick(rng, {16, 128, 512, 2048}));
    g.k = double(pick(rng, {64, 256, 1024, 4096}));
    g.n = double(pick(rng, {64, 256, 1024, 4096}));
    g.split = Gemm::Split(pick(rng, {0, 1, 2, 3}));
    l.gemms.push_back(g);
  }
  l.otherElemsReplicated = uniform(rng, 0, 1e6);
  l.otherElemsSharded = uniform(rng, 0, 4e6);
  l.kernels = double(pick(rng, {1, 5, 20, 60}));
  l.paramsReplicated = uniform(rng, 0, 1e6);
  l.paramsSharded = uniform(rng, 0, 3e8);
  l.savedReplicated = uniform(rng, 0, 2e7);
  l.savedSharded = uniform(rng, 0, 8e7);
  l.savedFp32 = coin(rng, 0.2) ? uniform(rng, 0, 5e7) : 0;
  l.inputElems = uniform(rng, 1e3, 4e6);
  l.outputElems = uniform(rng, 1e3, 4e6);
  l.tpForwardAllReduce = coin(rng, 0.7) ? uniform(rng, 0, 8e6) : 0;
  l.tpBackwardAllReduce = coin(rng, 0.7) ? uniform(rng, 0, 8e6) : 0;
  l.tpDivisor = pick(rng, {0, 0, 1, 2, 4, 8, 12, 16});
  l.kind = LayerKind::Block;
  if (moe) {
    l.kind = LayerKind::MoE;
    l.numExperts = pick(rng, {2, 4, 8});
    Gemm g;
    g.batch = double(l.numExperts);
    g.m = 256;
    g.k = 1024;
    g.n = 4096;
    g.expert = true;
    g.split = coin(rng) ? Gemm::Split::N : Gemm::Split::None;
    l.gemms.push_back(g);
    l.paramsExpertSharded = uniform(rng, 1e7, 4e8);
    l.paramsExpertReplicated = uniform(rng, 0, 1e6);
    l.moeAllToAll = uniform(rng, 1e5, 4e6);
  }
  return l;
}

Instance randomInstance(std::mt19937_64 &rng, int maxLayers, int maxDevices) {
  Instance in;
  ClusterSpec &c = in.cluster;
  c.name = "random";
  std::vector<int64_t> perNode;
  for (int64_t g : {1, 2, 4, 8})
    if (g <= maxDevices)
      perNode.push_back(g);
  c.devicesPerNode = pick(rng, perNode);
  c.nodes = std::uniform_int_distribution<int64_t>(
      1, maxDevices / c.devicesPerNode)(rng);
  c.device.kind = "random-device";
  c.device.peakFlops[int(DType::BF16)] = uniform(rng, 100e12, 1000e12);
  c.device.memoryBandwidth = uniform(rng, 1e12, 5e12);
  c.device.memoryBytes = 1e15;
  c.intraNode = {"intra", uniform(rng, 50e9, 500e9), uniform(rng, 1e-6, 2e-5)};
  c.interNode = {"inter", uniform(rng, 2e9, 100e9), uniform(rng, 2e-6, 5e-5)};
  c.efficiency.matmul = uniform(rng, 0.4, 0.9);
  c.efficiency.memory = uniform(rng, 0.5, 0.9);
  c.efficiency.network = uniform(rng, 0.5, 0.9);
  c.efficiency.kernelOverhead = uniform(rng, 0, 1e-5);
  c.efficiency.overlap = double(pick(rng, {0, 1, 2})) / 2;

  int L = int(std::uniform_int_distribution<int>(1, maxLayers)(rng));
  if (coin(rng, 0.25))
    L = maxLayers;
  int pattern = int(pick(rng, {0, 1, 2}));
  std::vector<Layer> classes;
  int numClasses = int(pick(rng, {1, 2, 3, 4}));
  bool moe = coin(rng, 0.3);
  for (int i = 0; i < numClasses; ++i)
    classes.push_back(randomLayer(rng, moe && i == 1));
  for (int i = 0; i < L; ++i) {
    int cls;
    if (pattern == 0) // arbitrary classes
      cls = int(std::uniform_int_distribution<int>(0, numClasses - 1)(rng));
    else if (pattern == 1) // embedding, repeated blocks, head
      cls = i == 0 ? 0 : i == L - 1 ? std::min(numClasses - 1, 2)
                                    : std::min(numClasses - 1, 1);
    else // alternating dense / MoE
      cls = numClasses > 1 ? i % 2 : 0;
    Layer l = classes[cls];
    l.classId = cls;
    l.name = "layer" + std::to_string(i);
    if (pattern == 1 && i == 0 && L > 1)
      l.kind = LayerKind::Embedding;
    if (pattern == 1 && i == L - 1 && L > 2)
      l.kind = LayerKind::Head;
    in.hasMoE |= l.numExperts > 0;
    in.model.layers.push_back(l);
  }
  // Layers of one class must be identical (the search relies on it).
  for (Layer &l : in.model.layers)
    l.kind = classes[l.classId].kind == LayerKind::MoE ? LayerKind::MoE
                                                       : l.kind;
  in.model.tokensPerSample = double(pick(rng, {1, 128, 2048}));

  in.options.globalBatch = pick(rng, {1, 2, 3, 4, 6, 8, 12, 16, 24, 32});
  in.options.dtype = DType::BF16;
  in.options.optimizer = coin(rng, 0.8) ? Optimizer::Adam : Optimizer::SGD;
  in.options.overlapGradSync = coin(rng, 0.7);

  SearchSpace &s = in.space;
  s.zeroStages.clear();
  for (int z = 0; z < 4; ++z)
    if (coin(rng, 0.6))
      s.zeroStages.push_back(z);
  if (s.zeroStages.empty())
    s.zeroStages.push_back(0);
  int rc = int(pick(rng, {0, 1, 2}));
  s.recompute = rc == 0 ? std::vector<bool>{false, true}
                : rc == 1 ? std::vector<bool>{false}
                          : std::vector<bool>{true};
  s.allowSequenceParallel = coin(rng, 0.6);
  s.allowExpertParallel = coin(rng, 0.7);
  s.maxTP = pick(rng, {0, 0, 1, 2, 4});
  s.maxStages = pick(rng, {0, 0, 0, 2, 3, 5});
  if (coin(rng, 0.15)) {
    std::vector<int64_t> divisors;
    for (int64_t b = 1; b <= in.options.globalBatch; ++b)
      if (in.options.globalBatch % b == 0)
        divisors.push_back(b);
    s.microBatch = pick(rng, divisors);
  }
  return in;
}

CostContext contextOf(const Instance &in) {
  CostContext ctx;
  ctx.model = &in.model;
  ctx.cluster = &in.cluster;
  ctx.options = in.options;
  return ctx;
}

/// Sets a memory limit around the least memory any plan needs: sometimes
/// below it (no plan fits), usually above.
void maybeLimit(std::mt19937_64 &rng, Instance &in) {
  CostContext ctx = contextOf(in);
  double least = minimumMemory(ctx, in.space);
  if (!std::isfinite(least) || !coin(rng, 0.6))
    return;
  in.limited = true;
  in.options.memoryLimit = least * uniform(rng, 0.9, 1.8);
}

/// Checks a plan's internal consistency: memory within the limit, the
/// objective recomputed from its stages.
void checkPlan(const CostContext &ctx, const Plan &plan) {
  ASSERT_TRUE(plan.valid);
  std::vector<double> t, e;
  int64_t devices = 0;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan &sp = plan.stages[s];
    EXPECT_LE(sp.memory, ctx.memoryLimit());
    EXPECT_EQ(sp.config.dp * sp.config.tp, plan.devicesPerStage);
    EXPECT_EQ(sp.firstLayer, s == 0 ? 0 : plan.stages[s - 1].endLayer);
    t.push_back(sp.cost.perMicroBatch);
    e.push_back(sp.cost.perStep);
    devices += sp.numDevices;
  }
  EXPECT_EQ(plan.stages.back().endLayer, int(ctx.model->layers.size()));
  EXPECT_EQ(devices, plan.devicesUsed);
  EXPECT_LE(plan.devicesUsed, ctx.cluster->numDevices());
  EXPECT_EQ(objective(t, e, plan.numMicroBatches), plan.stepTime);
  EXPECT_EQ(plan.microBatch * plan.numMicroBatches, ctx.options.globalBatch);
  EXPECT_NEAR(plan.compute + plan.exposedComm + plan.bubble, plan.stepTime,
              1e-9 * plan.stepTime);
}

} // namespace

TEST(SearchTest, DPEqualsExhaustiveOnRandomInstances) {
  std::mt19937_64 rng(20240611);
  int compared = 0, withLimit = 0, withoutLimit = 0, infeasible = 0,
      moe = 0, twelveLayers = 0, sixteenDevices = 0, pipelined = 0,
      mixedConfigs = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    Instance in = randomInstance(rng, 12, 16);
    maybeLimit(rng, in);
    CostContext ctx = contextOf(in);
    Plan dp = searchDP(ctx, in.space);
    Plan ex = searchExhaustive(ctx, in.space);
    ASSERT_EQ(dp.valid, ex.valid) << "trial " << trial;
    ++compared;
    (in.limited ? withLimit : withoutLimit) += 1;
    moe += in.hasMoE;
    twelveLayers += in.model.layers.size() == 12;
    sixteenDevices += in.cluster.numDevices() == 16;
    if (!dp.valid) {
      ++infeasible;
      continue;
    }
    // The same optimum, exactly (both add stage times in one order).
    EXPECT_EQ(dp.stepTime, ex.stepTime) << "trial " << trial;
    EXPECT_EQ(dp.devicesUsed, ex.devicesUsed) << "trial " << trial;
    checkPlan(ctx, dp);
    checkPlan(ctx, ex);
    pipelined += dp.stages.size() > 1;
    for (const StagePlan &s : dp.stages)
      if (!(s.config == dp.stages[0].config)) {
        ++mixedConfigs;
        break;
      }
  }
  // The instances cover what the acceptance criterion asks for.
  EXPECT_GE(compared, 1000);
  EXPECT_GE(withLimit, 300);
  EXPECT_GE(withoutLimit, 300);
  EXPECT_GE(infeasible, 20);
  EXPECT_GE(moe, 150);
  EXPECT_GE(twelveLayers, 200);
  EXPECT_GE(sixteenDevices, 60);
  EXPECT_GE(pipelined, 300);
  EXPECT_GE(mixedConfigs, 40);
  std::printf("compared %d (limit %d, none %d, infeasible %d, moe %d, "
              "12 layers %d, 16 devices %d, pipelined %d, mixed stage "
              "configs %d)\n",
              compared, withLimit, withoutLimit, infeasible, moe, twelveLayers,
              sixteenDevices, pipelined, mixedConfigs);
}

TEST(SearchTest, ExhaustiveEqualsBruteForceOnTinyInstances) {
  std::mt19937_64 rng(7);
  int compared = 0;
  for (int trial = 0; trial < 1500 && compared < 400; ++trial) {
    Instance in = randomInstance(rng, 5, 4);
    maybeLimit(rng, in);
    CostContext ctx = contextOf(in);
    bool tooLarge = false;
    Plan bf = searchBruteForce(ctx, in.space, 300000, tooLarge);
    if (tooLarge)
      continue;
    Plan ex = searchExhaustive(ctx, in.space);
    Plan dp = searchDP(ctx, in.space);
    ASSERT_EQ(bf.valid, ex.valid) << "trial " << trial;
    ASSERT_EQ(bf.valid, dp.valid) << "trial " << trial;
    ++compared;
    if (!bf.valid)
      continue;
    EXPECT_EQ(bf.stepTime, ex.stepTime) << "trial " << trial;
    EXPECT_EQ(bf.stepTime, dp.stepTime) << "trial " << trial;
  }
  EXPECT_GE(compared, 400);
}

TEST(SearchTest, MinimumMemoryMatchesExhaustiveAndBoundsFeasibility) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 60; ++trial) {
    Instance in = randomInstance(rng, 8, 16);
    CostContext ctx = contextOf(in);
    double dpLeast = minimumMemory(ctx, in.space);
    double exLeast = minimumMemoryExhaustive(ctx, in.space);
    EXPECT_EQ(dpLeast, exLeast) << "trial " << trial;
    if (!std::isfinite(dpLeast))
      continue;
    // Exactly the least memory: a plan fits, a byte less and none does.
    in.options.memoryLimit = dpLeast;
    ctx = contextOf(in);
    EXPECT_TRUE(searchDP(ctx, in.space).valid) << "trial " << trial;
    in.options.memoryLimit = dpLeast * (1 - 1e-12);
    ctx = contextOf(in);
    EXPECT_FALSE(searchDP(ctx, in.space).valid) << "trial " << trial;
  }
}

TEST(SearchTest, ObjectiveIsOneF1BWithBubble) {
  // S equal stages of time t, m micro-batches: (m + S - 1) t + e, i.e. a
  // bubble of (S - 1) / m relative to the busy time.
  for (int S : {1, 2, 4, 8})
    for (int64_t m : {1, 4, 16, 64}) {
      std::vector<double> t(S, 0.5), e(S, 0.25);
      EXPECT_DOUBLE_EQ(objective(t, e, m), double(m + S - 1) * 0.5 + 0.25);
    }
  // Unequal stages: the slowest one sets the steady state.
  EXPECT_DOUBLE_EQ(objective({1, 3, 2}, {0, 0, 0}, 10), 6 + 9 * 3);
  // A stage with a large per-step term can be the bottleneck.
  EXPECT_DOUBLE_EQ(objective({1, 1}, {0, 100}, 10), 2 + 109);
}

TEST(SearchTest, GridSearchIsNeverBetter) {
  std::mt19937_64 rng(3);
  int compared = 0;
  for (int trial = 0; trial < 80; ++trial) {
    Instance in = randomInstance(rng, 12, 16);
    in.space.microBatch = 0;
    CostContext ctx = contextOf(in);
    Plan grid = gridSearchMegatron(ctx, in.space);
    if (!grid.valid)
      continue;
    Plan dp = searchDP(ctx, in.space);
    ASSERT_TRUE(dp.valid);
    EXPECT_LE(dp.stepTime, grid.stepTime) << "trial " << trial;
    ++compared;
  }
  EXPECT_GE(compared, 30);
}

TEST(SearchTest, StageSizesAndPlacement) {
  ClusterSpec c;
  ASSERT_TRUE(c.nodes == 1);
  std::string error;
  ASSERT_TRUE(clusterFromPreset("dgx-a100-80g:4", c, error)) << error;
  EXPECT_EQ(stageSizes(c), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32}));
  // Stages of 4 devices: two per node; boundaries 1|2 and 3|4 leave a node.
  StagePlace p1 = stagePlace(c, 1, 8, 4);
  EXPECT_TRUE(p1.forwardCrossesNode);
  EXPECT_FALSE(p1.backwardCrossesNode);
  StagePlace p2 = stagePlace(c, 2, 8, 4);
  EXPECT_FALSE(p2.forwardCrossesNode);
  EXPECT_TRUE(p2.backwardCrossesNode);
  StagePlace last = stagePlace(c, 7, 8, 4);
  EXPECT_TRUE(last.last);
  EXPECT_FALSE(last.forwardCrossesNode);
  // Whole-node stages: every boundary leaves a node.
  EXPECT_TRUE(stagePlace(c, 0, 2, 16).forwardCrossesNode);
}

TEST(SearchTest, MeshParsing) {
  MeshSpec m;
  std::string error;
  ASSERT_TRUE(parseMesh("dp=8,tp=8,pp=35", m, error)) << error;
  EXPECT_EQ(m.dp, 8);
  EXPECT_EQ(m.tp, 8);
  EXPECT_EQ(m.pp, 35);
  EXPECT_EQ(m.mbs, -1);
  ASSERT_TRUE(parseMesh("tp=2,mbs=4,zero=1,sp=1,recompute=0", m, error));
  EXPECT_EQ(m.dp, 1);
  EXPECT_EQ(m.mbs, 4);
  EXPECT_EQ(m.zero, 1);
  EXPECT_EQ(m.sp, 1);
  EXPECT_EQ(m.recompute, 0);
  EXPECT_FALSE(parseMesh("dp=8,xp=2", m, error));
  EXPECT_NE(error.find("unknown key 'xp'"), std::string::npos) << error;
  EXPECT_FALSE(parseMesh("dp=0", m, error));
  EXPECT_NE(error.find("dp must be >= 1"), std::string::npos) << error;
  EXPECT_FALSE(parseMesh("zero=4", m, error));
  EXPECT_FALSE(parseMesh("dp=two", m, error));
}
