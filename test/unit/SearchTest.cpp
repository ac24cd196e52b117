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
  s.uniformStages = coin(rng, 0.2);
  // Pipeline schedules: 1F1B alone (the default), or a random set.
  if (coin(rng, 0.5)) {
    s.schedules.clear();
    for (const char *name : {"1f1b", "zb-h1", "gpipe", "interleaved:2"})
      if (coin(rng, 0.5)) {
        hpc::PipelineSchedule schedule;
        std::string error;
        hpc::parsePipelineSchedule(name, schedule, error);
        s.schedules.push_back(schedule);
      }
    if (s.schedules.empty())
      s.schedules.push_back(hpc::PipelineSchedule());
  }
  if (coin(rng, 0.15)) {
    std::vector<int64_t> divisors;
    for (int64_t b = 1; b <= in.options.globalBatch; ++b)
      if (in.options.globalBatch % b == 0)
        divisors.push_back(b);
    s.microBatch = pick(rng, divisors);
  }
  // Devices that share their node's cores (more ranks than cores).
  if (coin(rng, 0.3)) {
    in.cluster.device.coreShare = uniform(rng, 0.2, 0.9);
    in.cluster.device.coreLending = coin(rng, 0.3) ? 1 : uniform(rng, 0, 1);
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
/// objective recomputed from its stages under its schedule, a schedule the
/// space allows.
void checkPlan(const CostContext &ctx, const SearchSpace &space, const Plan &plan) {
  ASSERT_TRUE(plan.valid);
  int S = int(plan.stages.size());
  ScheduleModel model(plan.schedule, S, plan.numMicroBatches);
  std::vector<double> t, e, fill, steady;
  int64_t devices = 0;
  for (int s = 0; s < S; ++s) {
    const StagePlan &sp = plan.stages[size_t(s)];
    EXPECT_LE(sp.memory, ctx.memoryLimit());
    EXPECT_EQ(sp.config.dp * sp.config.tp, plan.devicesPerStage);
    EXPECT_EQ(sp.firstLayer, s == 0 ? 0 : plan.stages[size_t(s) - 1].endLayer);
    EXPECT_TRUE(model.fitsLayers(sp.endLayer - sp.firstLayer));
    EXPECT_EQ(sp.inFlight, model.inFlight[size_t(s)]);
    t.push_back(sp.cost.perMicroBatch);
    e.push_back(sp.cost.perStep);
    fill.push_back(model.fill(sp.cost));
    steady.push_back(model.steady(sp.cost));
    devices += sp.numDevices;
  }
  EXPECT_EQ(plan.stages.back().endLayer, int(ctx.model->layers.size()));
  if (space.uniformStages) {
    for (const StagePlan &sp : plan.stages)
      EXPECT_TRUE(sp.config == plan.stages[0].config);
  }
  EXPECT_EQ(devices, plan.devicesUsed);
  EXPECT_LE(plan.devicesUsed, ctx.cluster->numDevices());
  EXPECT_EQ(scheduleObjective(fill, steady, ctx.cluster->device.coreShare,
                              ctx.cluster->device.coreLending),
            plan.stepTime);
  if (S > 1) {
    EXPECT_TRUE(model.runs());
    EXPECT_TRUE(llvm::any_of(space.schedules, [&](const hpc::PipelineSchedule &x) {
      return x.kind == plan.schedule.kind && x.chunks == plan.schedule.chunks;
    }));
  }
  // 1F1B and GPipe: the textbook objective.
  if (ctx.cluster->device.coreShare >= 1 &&
      (S == 1 || plan.schedule.kind == hpc::PipelineSchedule::OneFOneB ||
       plan.schedule.kind == hpc::PipelineSchedule::GPipe)) {
    EXPECT_EQ(objective(t, e, plan.numMicroBatches), plan.stepTime);
  }
  EXPECT_EQ(plan.microBatch * plan.numMicroBatches, ctx.options.globalBatch);
  EXPECT_NEAR(plan.compute + plan.exposedComm + plan.bubble, plan.stepTime,
              1e-9 * plan.stepTime);
}

} // namespace

TEST(SearchTest, DPEqualsExhaustiveOnRandomInstances) {
  std::mt19937_64 rng(20240611);
  int compared = 0, withLimit = 0, withoutLimit = 0, infeasible = 0,
      moe = 0, twelveLayers = 0, sixteenDevices = 0, pipelined = 0,
      mixedConfigs = 0, otherSchedules = 0, sharedCores = 0;
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
    checkPlan(ctx, in.space, dp);
    checkPlan(ctx, in.space, ex);
    pipelined += dp.stages.size() > 1;
    sharedCores += dp.stages.size() > 1 && in.cluster.device.coreShare < 1;
    otherSchedules += dp.stages.size() > 1 &&
                      dp.schedule.kind != hpc::PipelineSchedule::OneFOneB;
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
  EXPECT_GE(otherSchedules, 50);
  EXPECT_GE(sharedCores, 80);
  std::printf("compared %d (limit %d, none %d, infeasible %d, moe %d, "
              "12 layers %d, 16 devices %d, pipelined %d, mixed stage "
              "configs %d, zb-h1/gpipe/interleaved plans %d, pipelines on shared "
              "cores %d)\n",
              compared, withLimit, withoutLimit, infeasible, moe, twelveLayers,
              sixteenDevices, pipelined, mixedConfigs, otherSchedules, sharedCores);
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

TEST(SearchTest, ObjectiveOnSharedCores) {
  // 4 equal stages of 1F1B, 4 micro-batches of 1: 7 at whole cores, of
  // which each stage is busy 4.
  std::vector<double> fill(4, 1.0), steady(4, 3.0);
  EXPECT_DOUBLE_EQ(scheduleObjective(fill, steady), 7);
  EXPECT_DOUBLE_EQ(scheduleObjective(fill, steady, 1), 7);
  // Half a core each: the idle stages' halves go to the busy ones, whose
  // own work (4, at the shared rate) bounds the step.
  EXPECT_DOUBLE_EQ(scheduleObjective(fill, steady, 0.5), 4);
  // Nearly whole cores: the schedule's length at full speed still binds.
  EXPECT_DOUBLE_EQ(scheduleObjective(fill, steady, 0.9), 0.9 * 7);
  // One stage has no bubble to lend: unchanged.
  EXPECT_DOUBLE_EQ(scheduleObjective({2}, {5}, 0.25), 7);
  // Unequal stages: the largest steady term and the average fill.
  EXPECT_DOUBLE_EQ(scheduleObjective({1, 2}, {3, 6}, 0.5), 7.5);
  // Lent in part (waiting ranks spin before they sleep): that part of the
  // gain, 7 - 0.5 x (7 - 4); nothing lent, nothing gained.
  EXPECT_DOUBLE_EQ(scheduleObjective(fill, steady, 0.5, 0.5), 5.5);
  EXPECT_DOUBLE_EQ(scheduleObjective(fill, steady, 0.5, 0), 7);
  // One micro-batch: the stages never run at once, so only whole cores
  // for the one computing shorten the step: 0.75 x 8 with half lent.
  EXPECT_DOUBLE_EQ(scheduleObjective({4, 4}, {0, 0}, 0.5, 0.5), 6);
  EXPECT_DOUBLE_EQ(scheduleObjective({4, 4}, {0, 0}, 0.5, 1), 4);
}

TEST(SearchTest, ScheduleModelsAreTheReplayedSchedules) {
  // Equal stages of F = 1, B = 1, W = 0.5 per micro-batch (t = 2.5; under
  // interleaved:V each chunk a V-th of it) and 0.25 once per step: the
  // model's J is the step time of the compiler's block order replayed,
  // and its in-flight counts are the textbook ones.
  const double F = 1, B = 1, W = 0.5, e = 0.25;
  StageCost c;
  c.compute = c.perMicroBatch = F + B + W;
  c.weightGrad = W;
  c.perStep = c.optimizer = e;
  int checked = 0;
  for (const char *name : {"gpipe", "1f1b", "interleaved:2", "zb-h1"})
    for (int S : {2, 4})
      for (int64_t m : {int64_t(S), int64_t(2 * S), int64_t(8)}) {
        hpc::PipelineSchedule schedule;
        std::string error;
        ASSERT_TRUE(hpc::parsePipelineSchedule(name, schedule, error));
        ScheduleModel model(schedule, S, m);
        ASSERT_TRUE(model.runs()) << name;
        bool zb = schedule.kind == hpc::PipelineSchedule::ZeroBubbleH1;
        double V = double(schedule.chunks);
        llvm::SmallVector<llvm::SmallVector<hpc::PipelineBlock>> lists;
        for (int r = 0; r < S; ++r)
          lists.push_back(hpc::pipelineBlocks(schedule, r, S, m));
        auto cost = [&](int64_t, const hpc::PipelineBlock &b) {
          double whole = b.phase == hpc::PipelineBlock::F   ? F
                         : b.phase == hpc::PipelineBlock::W ? W
                         : zb                               ? B
                                                            : B + W;
          return whole / V;
        };
        llvm::SmallVector<double> before(S, 0.0), after(S, e);
        hpc::PipelineReplay replay =
            hpc::replayPipeline(lists, schedule.chunks, m, cost, before, after);
        std::vector<double> fill(S, model.fill(c)), steady(S, model.steady(c));
        EXPECT_NEAR(scheduleObjective(fill, steady), replay.stepTime, 1e-9)
            << name << " S=" << S << " m=" << m;
        for (int s = 0; s < S; ++s) {
          double expected = schedule.kind == hpc::PipelineSchedule::GPipe
                                ? double(m)
                                : double(std::min<int64_t>(S - s, m));
          if (zb)
            expected = double(std::min<int64_t>(S, m)); // W's delayed by s B's
          if (schedule.kind != hpc::PipelineSchedule::Interleaved)
            EXPECT_EQ(model.inFlight[size_t(s)], expected) << name << " stage " << s;
          else // Megatron-LM: more than 1F1B's on the first stage, a chunk's worth
            EXPECT_GE(model.inFlight[size_t(s)], double(std::min<int64_t>(S - s, m)));
        }
        ++checked;
      }
  EXPECT_EQ(checked, 24);
  // zb-h1 fills 1F1B's bubble (S - 1) t down to (S - 1)(F + B - W).
  ScheduleModel one(hpc::PipelineSchedule(), 4, 8);
  hpc::PipelineSchedule zbh1;
  zbh1.kind = hpc::PipelineSchedule::ZeroBubbleH1;
  ScheduleModel zb(zbh1, 4, 8);
  std::vector<double> t1(4, one.fill(c)), q1(4, one.steady(c));
  std::vector<double> t2(4, zb.fill(c)), q2(4, zb.steady(c));
  EXPECT_DOUBLE_EQ(scheduleObjective(t1, q1) - scheduleObjective(t2, q2), 3 * 2 * W);
  // Interleaving needs micro-batches a multiple of the stages.
  hpc::PipelineSchedule v2;
  v2.kind = hpc::PipelineSchedule::Interleaved;
  v2.chunks = 2;
  EXPECT_FALSE(ScheduleModel(v2, 4, 6).runs());
  EXPECT_FALSE(ScheduleModel(v2, 4, 8).fitsLayers(1));
  EXPECT_TRUE(ScheduleModel(v2, 4, 8).fitsLayers(2));
}

TEST(SearchTest, GridSearchIsNeverBetter) {
  std::mt19937_64 rng(3);
  int compared = 0;
  for (int trial = 0; trial < 80; ++trial) {
    Instance in = randomInstance(rng, 12, 16);
    in.space.microBatch = 0;
    // Megatron-LM's grid runs 1F1B whatever the space allows.
    in.space.schedules = {hpc::PipelineSchedule()};
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
