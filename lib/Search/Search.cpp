//===- Search.cpp - dynamic program, exhaustive and brute-force search ----===//
//
// The three searches share the definition of the space (stage shapes,
// configurations, micro-batch sizes, placement) and the stage costs (one
// cache of evaluateStage results per stage size and micro-batch size); they
// differ only in how they combine stages:
//
//  - searchDP: F(k, i) is the Pareto set of (sum t, max q) over ways to run
//    layers [i, L) as the last k stages; a stage [i, j) with option o extends
//    each entry (s, q) of F(k-1, j) to (t_o + s, max(q_o, q)). The answer is
//    min over F(S, 0) of s + q. Dominated entries cannot lead to a better
//    objective, since both terms only grow as stages are added. Under a
//    pipeline schedule other than 1F1B, t is the stage's fill term and q
//    its steady term (ScheduleModel); each schedule of the space is a
//    subproblem of its own.
//  - searchExhaustive: every partition; for a partition, every threshold Q
//    among the stages' q values, each stage independently takes its fastest
//    option with q <= Q. The tuple with the optimal objective is among those
//    (take Q = its max q: each stage's choice is no slower, max q no larger).
//  - searchBruteForce: every option of every stage of every partition.
//
// All three add stage times in the same order (scheduleObjective()), so the optima
// agree exactly, not just within rounding.
//
//===----------------------------------------------------------------------===//

#include "hpc/Search/Search.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>

using namespace hpc;
using namespace hpc::cost;
using namespace hpc::search;

static constexpr double kInf = std::numeric_limits<double>::infinity();

double hpc::search::objective(const std::vector<double> &t,
                              const std::vector<double> &e, int64_t m) {
  std::vector<double> q(t.size());
  for (size_t s = 0; s < t.size(); ++s)
    q[s] = stageQ(t[s], e[s], m);
  return scheduleObjective(t, q);
}

/// J from the S stages' fill terms summed (in scheduleObjective's order)
/// and their largest steady term. Stage times are at the shared rate where
/// the devices share their node's cores (coreShare c < 1, every device
/// computing): a stage idle in the pipeline's fill and drain lends the
/// fraction `lending` (l) of its share to the others. Lent wholly, the step
/// shrinks towards the stages' own work B (the largest steady term and an
/// average fill), no shorter than the schedule at whole cores (c x J); lent
/// in part, l of that gain. Nondecreasing in `sum` and `maxQ`, and never
/// below maxQ, which the searches' pruning and threshold argument need.
static double stepObjective(double sum, double maxQ, size_t S, double coreShare,
                            double lending) {
  double J = sum + maxQ;
  if (coreShare >= 1 || S < 2 || lending <= 0)
    return J;
  double B = sum / double(S) + maxQ;
  return std::max((1 - lending) * J + lending * B, (1 - lending * (1 - coreShare)) * J);
}

double hpc::search::scheduleObjective(const std::vector<double> &fill,
                                      const std::vector<double> &steady, double coreShare,
                                      double coreLending) {
  double sum = 0, maxQ = -kInf;
  for (size_t s = fill.size(); s-- > 0;)
    sum = fill[s] + sum;
  for (double q : steady)
    maxQ = std::max(maxQ, q);
  return stepObjective(sum, maxQ, fill.size(), coreShare, coreLending);
}

/// scheduleObjective on the cores of ctx's cluster.
static double objectiveOn(const CostContext &ctx, const std::vector<double> &fill,
                          const std::vector<double> &steady) {
  return scheduleObjective(fill, steady, ctx.cluster->device.coreShare,
                           ctx.cluster->device.coreLending);
}

//===----------------------------------------------------------------------===//
// Pipeline schedules
//===----------------------------------------------------------------------===//

ScheduleModel::ScheduleModel(const PipelineSchedule &given, int S, int64_t m)
    : schedule(S == 1 ? PipelineSchedule() : given), S(S), m(m), inFlight(size_t(S), 0.0) {
  if (!runs())
    return;
  double chunk = 1.0 / double(schedule.chunks);
  for (int s = 0; s < S; ++s) {
    double held = 0;
    for (const PipelineBlock &b : pipelineBlocks(schedule, s, S, m)) {
      bool frees = schedule.kind == PipelineSchedule::ZeroBubbleH1
                       ? b.phase == PipelineBlock::W
                       : b.phase == PipelineBlock::B;
      if (b.phase == PipelineBlock::F)
        held += chunk;
      else if (frees)
        held -= chunk;
      inFlight[size_t(s)] = std::max(inFlight[size_t(s)], held);
    }
  }
}

bool ScheduleModel::runs() const {
  return schedule.kind != PipelineSchedule::Interleaved || m % S == 0;
}

bool ScheduleModel::fitsLayers(int layers) const {
  return schedule.kind != PipelineSchedule::Interleaved || layers >= schedule.chunks;
}

double ScheduleModel::sends() const {
  return schedule.kind == PipelineSchedule::Interleaved ? double(schedule.chunks) : 1.0;
}

/// The stage's time per micro-batch with every chunk's sends.
static double withSends(const ScheduleModel &model, const StageCost &c) {
  return c.perMicroBatch + (model.sends() - 1) * c.p2p;
}

double ScheduleModel::fill(const StageCost &c) const {
  switch (schedule.kind) {
  case PipelineSchedule::Interleaved:
    return withSends(*this, c) / double(schedule.chunks);
  case PipelineSchedule::ZeroBubbleH1:
    if (m >= S)
      return c.perMicroBatch - 2 * c.weightGrad;
    [[fallthrough]];
  default:
    return c.perMicroBatch;
  }
}

double ScheduleModel::steady(const StageCost &c) const {
  switch (schedule.kind) {
  case PipelineSchedule::Interleaved:
    return (double(m) - 1.0 / double(schedule.chunks)) * withSends(*this, c) + c.perStep;
  case PipelineSchedule::ZeroBubbleH1:
    if (m >= S)
      return stageQ(c.perMicroBatch, c.perStep, m) + 2 * c.weightGrad;
    [[fallthrough]];
  default:
    return stageQ(c.perMicroBatch, c.perStep, m);
  }
}

/// The schedules S stages of m micro-batches can run (one stage: one model,
/// whatever the space allows; ScheduleModel makes it 1F1B's).
static std::vector<ScheduleModel> scheduleModels(const SearchSpace &space, int S,
                                                 int64_t m) {
  std::vector<ScheduleModel> models;
  if (S == 1) {
    models.emplace_back(PipelineSchedule(), S, m);
    return models;
  }
  for (const PipelineSchedule &schedule : space.schedules)
    if (ScheduleModel model(schedule, S, m); model.runs())
      models.push_back(std::move(model));
  return models;
}

//===----------------------------------------------------------------------===//
// The space
//===----------------------------------------------------------------------===//

std::vector<int64_t> hpc::search::stageSizes(const ClusterSpec &cluster) {
  std::vector<int64_t> sizes;
  int64_t G = cluster.devicesPerNode, N = cluster.numDevices();
  for (int64_t d = 1; d < G; ++d)
    if (G % d == 0)
      sizes.push_back(d);
  for (int64_t k = 1; k * G <= N; ++k)
    sizes.push_back(k * G);
  return sizes;
}

static bool hasExperts(const Model &m) {
  for (const Layer &l : m.layers)
    if (l.numExperts > 0)
      return true;
  return false;
}

std::vector<StageConfig> hpc::search::stageConfigs(const CostContext &ctx,
                                                   const SearchSpace &space,
                                                   int64_t devices) {
  std::vector<StageConfig> configs;
  int64_t G = ctx.cluster->devicesPerNode;
  bool experts = space.allowExpertParallel && hasExperts(*ctx.model);
  for (int64_t tp = 1; tp <= devices; ++tp) {
    if (devices % tp || (space.maxTP > 0 && tp > space.maxTP))
      continue;
    if (G % tp && tp % G) // TP groups must tile nodes
      continue;
    int64_t dp = devices / tp;
    for (int sp = 0; sp <= 1; ++sp) {
      if (sp && (tp == 1 || !space.allowSequenceParallel))
        continue;
      for (int64_t ep = 1; ep <= dp; ++ep) {
        if (dp % ep || (ep > 1 && !experts))
          continue;
        for (int zero : space.zeroStages) {
          if (zero > 0 && dp == 1)
            continue;
          // hpc-opt's ZeRO shards over the mesh's dp axis, not ep's.
          if (zero > 0 && ep > 1 && space.uniformStages)
            continue;
          for (bool rc : space.recompute) {
            StageConfig c;
            c.dp = dp;
            c.tp = tp;
            c.ep = ep;
            c.zero = zero;
            c.sp = sp;
            c.recompute = rc;
            configs.push_back(c);
          }
        }
      }
    }
  }
  return configs;
}

/// The configurations the stages of one plan choose from: all of them, or
/// under uniformStages one at a time (every stage runs the same one).
static std::vector<std::vector<StageConfig>>
configGroups(const CostContext &ctx, const SearchSpace &space, int64_t devices) {
  std::vector<StageConfig> all = stageConfigs(ctx, space, devices);
  if (!space.uniformStages)
    return {all};
  std::vector<std::vector<StageConfig>> groups;
  for (const StageConfig &c : all)
    groups.push_back({c});
  return groups;
}

std::vector<int64_t> hpc::search::microBatchSizes(const CostContext &ctx,
                                                  const SearchSpace &space) {
  int64_t B = ctx.options.globalBatch;
  if (space.microBatch > 0)
    return B % space.microBatch ? std::vector<int64_t>{}
                                : std::vector<int64_t>{space.microBatch};
  std::vector<int64_t> sizes;
  for (int64_t b = B; b >= 1; --b) // larger micro-batches first (tie-break)
    if (B % b == 0)
      sizes.push_back(b);
  return sizes;
}

cost::StagePlace hpc::search::stagePlace(const ClusterSpec &cluster, int s,
                                         int S, int64_t n) {
  int64_t G = cluster.devicesPerNode;
  auto crosses = [&](int a) { // boundary between stage a and a + 1
    return n >= G || ((int64_t(a) + 1) * n) % G == 0;
  };
  StagePlace p;
  p.first = s == 0;
  p.last = s == S - 1;
  p.forwardCrossesNode = !p.last && crosses(s);
  p.backwardCrossesNode = !p.first && crosses(s - 1);
  return p;
}

namespace {

/// Shapes (stages, devices per stage) grouped by the devices they use, most
/// first.
std::vector<std::vector<std::pair<int, int64_t>>>
shapeGroups(const CostContext &ctx, const SearchSpace &space) {
  int L = int(ctx.model->layers.size());
  int64_t N = ctx.cluster->numDevices();
  std::map<int64_t, std::vector<std::pair<int, int64_t>>, std::greater<>> byUse;
  for (int64_t n : stageSizes(*ctx.cluster))
    for (int S = 1; S <= L && int64_t(S) * n <= N; ++S)
      if (space.maxStages <= 0 || S <= space.maxStages)
        byUse[int64_t(S) * n].push_back({S, n});
  std::vector<std::vector<std::pair<int, int64_t>>> groups;
  for (auto &[use, shapes] : byUse) {
    std::sort(shapes.begin(), shapes.end()); // fewer stages first
    groups.push_back(shapes);
  }
  return groups;
}

/// One way to run a stage.
struct Option {
  StageConfig cfg;
  StageCost cost;
  double t = 0, e = 0;
};

/// Run-length structure of layer ranges, shared by all stage sizes.
class RangeKeys {
public:
  explicit RangeKeys(const Model &model) : L(int(model.layers.size())) {
    ids.assign(size_t(L) * (L + 1), -1);
    std::map<std::vector<int>, int> interned;
    for (int i = 0; i < L; ++i) {
      std::vector<int> key;
      std::vector<LayerRun> runs;
      for (int j = i + 1; j <= L; ++j) {
        int cls = model.layers[j - 1].classId;
        if (!runs.empty() && model.layers[runs.back().layer].classId == cls) {
          ++runs.back().count;
          ++key.back();
        } else {
          runs.push_back({j - 1, 1});
          key.push_back(cls);
          key.push_back(1);
        }
        auto [it, inserted] = interned.insert({key, int(runsById.size())});
        if (inserted)
          runsById.push_back(runs);
        ids[size_t(i) * (L + 1) + j] = it->second;
      }
    }
  }
  int id(int i, int j) const { return ids[size_t(i) * (L + 1) + j]; }
  const std::vector<LayerRun> &runs(int id) const { return runsById[id]; }

private:
  int L;
  std::vector<int> ids;
  std::vector<std::vector<LayerRun>> runsById;
};

/// Stage options for one stage size and micro-batch size.
class OptionCache {
public:
  OptionCache(const CostContext &ctx, const RangeKeys &keys,
              std::vector<StageConfig> configs, int64_t microBatch,
              SearchStats *stats, const SearchSpace &space)
      : ctx(ctx), keys(keys), configs(std::move(configs)),
        microBatch(microBatch), stats(stats), compiled(space.uniformStages) {}

  const std::vector<Option> &get(int i, int j, const StagePlace &p) {
    int id = keys.id(i, j);
    int64_t key = int64_t(id) * 16 + (p.first ? 1 : 0) + (p.last ? 2 : 0) +
                  (p.forwardCrossesNode ? 4 : 0) +
                  (p.backwardCrossesNode ? 8 : 0);
    auto it = cache.find(key);
    if (it != cache.end())
      return *it->second;
    auto options = std::make_unique<std::vector<Option>>();
    const std::vector<LayerRun> &runs = keys.runs(id);
    for (const StageConfig &cfg : configs) {
      if (stageConfigProblem(ctx, runs, cfg, microBatch))
        continue;
      // What hpc-opt compiles of expert parallelism: one stage of one
      // micro-batch (hpc-route-experts routes the whole step's batch).
      if (compiled && cfg.ep > 1 &&
          (!p.first || !p.last || microBatch != ctx.options.globalBatch))
        continue;
      Option o;
      o.cfg = cfg;
      o.cost = evaluateStage(ctx, runs, cfg, microBatch, p);
      o.t = o.cost.perMicroBatch;
      o.e = o.cost.perStep;
      options->push_back(o);
      if (stats)
        ++stats->stageEvaluations;
    }
    return *cache.emplace(key, std::move(options)).first->second;
  }

private:
  const CostContext &ctx;
  const RangeKeys &keys;
  std::vector<StageConfig> configs;
  int64_t microBatch;
  SearchStats *stats;
  bool compiled; ///< the plan is one hpc-opt compiles (SearchSpace::uniformStages)
  std::unordered_map<int64_t, std::unique_ptr<std::vector<Option>>> cache;
};

/// A chosen stage while a plan is being built.
struct Choice {
  int i, j;
  const Option *option;
};

Plan makePlan(const CostContext &ctx, const std::vector<Choice> &choices,
              int64_t microBatch, int64_t n, const PipelineSchedule &schedule) {
  Plan plan;
  plan.valid = true;
  plan.schedule = schedule;
  plan.microBatch = microBatch;
  plan.numMicroBatches = ctx.options.globalBatch / microBatch;
  plan.devicesPerStage = n;
  for (const Choice &c : choices) {
    StagePlan s;
    s.firstLayer = c.i;
    s.endLayer = c.j;
    s.config = c.option->cfg;
    plan.stages.push_back(s);
  }
  finalizePlan(ctx, plan);
  return plan;
}

double limitOf(const CostContext &ctx) { return ctx.memoryLimit(); }

void finishStats(SearchStats *stats,
                 std::chrono::steady_clock::time_point start) {
  if (stats)
    stats->seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
}

} // namespace

//===----------------------------------------------------------------------===//
// Dynamic program
//===----------------------------------------------------------------------===//

namespace {

struct Entry {
  double sum, maxQ;
  int j;                 // end of this stage
  const Option *option;  // this stage's option
  int child;             // index in F(k-1, j); -1 at the end
};

/// Keeps the Pareto-minimal entries (sum, maxQ), sorted by sum.
void paretoPrune(std::vector<Entry> &v) {
  std::stable_sort(v.begin(), v.end(), [](const Entry &a, const Entry &b) {
    return a.sum < b.sum || (a.sum == b.sum && a.maxQ < b.maxQ);
  });
  std::vector<Entry> kept;
  double bestQ = kInf;
  for (const Entry &e : v)
    if (e.maxQ < bestQ) {
      kept.push_back(e);
      bestQ = e.maxQ;
    }
  v.swap(kept);
}

/// Runs the DP for one (S, n, b, schedule); improves `best` / `bestChoices`.
void dpSubproblem(const CostContext &ctx, OptionCache &cache, int S,
                  int64_t n, const ScheduleModel &model, double &best,
                  std::vector<Choice> &bestChoices, SearchStats *stats) {
  int L = int(ctx.model->layers.size());
  double limit = limitOf(ctx);
  double share = ctx.cluster->device.coreShare, lending = ctx.cluster->device.coreLending;
  // F[k][i]: suffix [i, L) as the last k stages.
  std::vector<std::vector<std::vector<Entry>>> F(
      S + 1, std::vector<std::vector<Entry>>(L + 1));
  F[0][L].push_back({0.0, -kInf, L, nullptr, -1});
  struct Cand {
    double t, q;
    const Option *o;
  };
  std::vector<Cand> cands;
  for (int k = 1; k <= S; ++k) {
    int s = S - k;
    StagePlace place = stagePlace(*ctx.cluster, s, S, n);
    double inFlight = model.inFlight[size_t(s)];
    int iLo = k == S ? 0 : s, iHi = k == S ? 0 : L - k;
    for (int i = iLo; i <= iHi; ++i) {
      std::vector<Entry> &out = F[k][i];
      int jLo = k == 1 ? L : i + 1, jHi = k == 1 ? L : L - (k - 1);
      for (int j = jLo; j <= jHi; ++j) {
        const std::vector<Entry> &next = F[k - 1][j];
        if (next.empty() || !model.fitsLayers(j - i))
          continue;
        const std::vector<Option> &opts = cache.get(i, j, place);
        cands.clear();
        for (const Option &o : opts)
          if (o.cost.memory(inFlight) <= limit)
            cands.push_back({model.fill(o.cost), model.steady(o.cost), &o});
        if (cands.empty())
          continue;
        // Pareto-minimal options only.
        std::stable_sort(cands.begin(), cands.end(),
                         [](const Cand &a, const Cand &c) {
                           return a.t < c.t || (a.t == c.t && a.q < c.q);
                         });
        double bestQ = kInf;
        for (const Cand &c : cands) {
          if (!(c.q < bestQ))
            continue;
          bestQ = c.q;
          for (size_t x = 0; x < next.size(); ++x) {
            double sum = c.t + next[x].sum;
            double maxQ = std::max(c.q, next[x].maxQ);
            if (stepObjective(sum, maxQ, size_t(S), share, lending) >= best)
              continue;
            out.push_back({sum, maxQ, j, c.o, int(x)});
          }
        }
      }
      paretoPrune(out);
      if (stats)
        stats->frontEntries += int64_t(out.size());
    }
  }
  const std::vector<Entry> &root = F[S][0];
  int bestIdx = -1;
  for (size_t x = 0; x < root.size(); ++x) {
    double J = stepObjective(root[x].sum, root[x].maxQ, size_t(S), share, lending);
    if (J < best) {
      best = J;
      bestIdx = int(x);
    }
  }
  if (bestIdx < 0)
    return;
  bestChoices.clear();
  int i = 0, idx = bestIdx;
  for (int k = S; k >= 1; --k) {
    const Entry &e = F[k][i][idx];
    bestChoices.push_back({i, e.j, e.option});
    i = e.j;
    idx = e.child;
  }
}

} // namespace

Plan hpc::search::searchDP(const CostContext &ctx, const SearchSpace &space,
                           SearchStats *stats) {
  auto start = std::chrono::steady_clock::now();
  RangeKeys keys(*ctx.model);
  std::vector<int64_t> batches = microBatchSizes(ctx, space);
  Plan plan;
  for (const auto &group : shapeGroups(ctx, space)) {
    double best = kInf;
    std::vector<Choice> bestChoices;
    int64_t bestB = 0, bestN = 0;
    PipelineSchedule bestSchedule;
    // The best plan's choices point into its options: keep that cache.
    std::unique_ptr<OptionCache> bestCache;
    for (auto [S, n] : group) {
      for (const std::vector<StageConfig> &configs : configGroups(ctx, space, n))
      for (int64_t b : batches) {
        auto cache = std::make_unique<OptionCache>(ctx, keys, configs, b, stats, space);
        bool improved = false;
        for (const ScheduleModel &model :
             scheduleModels(space, S, ctx.options.globalBatch / b)) {
          double before = best;
          std::vector<Choice> choices;
          dpSubproblem(ctx, *cache, S, n, model, best, choices, stats);
          if (stats)
            ++stats->subproblems;
          if (best < before) {
            bestChoices = choices;
            bestSchedule = model.schedule;
            bestB = b;
            bestN = n;
            improved = true;
          }
        }
        if (improved)
          bestCache = std::move(cache);
      }
    }
    if (best < kInf) {
      plan = makePlan(ctx, bestChoices, bestB, bestN, bestSchedule);
      break;
    }
  }
  finishStats(stats, start);
  return plan;
}

//===----------------------------------------------------------------------===//
// Exhaustive enumeration of partitions
//===----------------------------------------------------------------------===//

namespace {

/// Calls f(bounds) for every way to cut [0, L) into S non-empty ranges;
/// bounds has S + 1 entries.
template <typename F>
void forEachPartition(int L, int S, F &&f) {
  std::vector<int> bounds(S + 1);
  bounds[0] = 0;
  bounds[S] = L;
  auto rec = [&](auto &self, int s) -> void {
    if (s == S) {
      f(bounds);
      return;
    }
    // Stage s - 1 ends at bounds[s]; leave a layer for each later stage.
    for (int cut = bounds[s - 1] + 1; cut <= L - (S - s); ++cut) {
      bounds[s] = cut;
      self(self, s + 1);
    }
  };
  if (S == 1)
    f(bounds);
  else
    rec(rec, 1);
}

} // namespace

Plan hpc::search::searchExhaustive(const CostContext &ctx,
                                   const SearchSpace &space,
                                   SearchStats *stats) {
  auto start = std::chrono::steady_clock::now();
  RangeKeys keys(*ctx.model);
  int L = int(ctx.model->layers.size());
  double limit = limitOf(ctx);
  std::vector<int64_t> batches = microBatchSizes(ctx, space);
  Plan plan;
  for (const auto &group : shapeGroups(ctx, space)) {
    double best = kInf;
    std::vector<Choice> bestChoices;
    int64_t bestB = 0, bestN = 0;
    PipelineSchedule bestSchedule;
    std::unique_ptr<OptionCache> bestCache;
    for (auto [S, n] : group) {
      for (const std::vector<StageConfig> &configs : configGroups(ctx, space, n))
      for (int64_t b : batches) {
        auto owned = std::make_unique<OptionCache>(ctx, keys, configs, b, stats, space);
        OptionCache &cache = *owned;
        int64_t m = ctx.options.globalBatch / b;
        double before = best;
        for (const ScheduleModel &model : scheduleModels(space, S, m))
        forEachPartition(L, S, [&](const std::vector<int> &bounds) {
          if (stats)
            ++stats->partitions;
          for (int s = 0; s < S; ++s)
            if (!model.fitsLayers(bounds[s + 1] - bounds[s]))
              return;
          // Per stage: feasible options sorted by q, with the fastest option
          // among each prefix.
          struct Stage {
            std::vector<double> q;
            std::vector<const Option *> fastest;
          };
          std::vector<Stage> stages(S);
          std::vector<double> allQ;
          for (int s = 0; s < S; ++s) {
            StagePlace place = stagePlace(*ctx.cluster, s, S, n);
            double inFlight = model.inFlight[size_t(s)];
            std::vector<std::pair<double, const Option *>> byQ;
            for (const Option &o : cache.get(bounds[s], bounds[s + 1], place))
              if (o.cost.memory(inFlight) <= limit)
                byQ.push_back({model.steady(o.cost), &o});
            if (byQ.empty())
              return;
            std::stable_sort(byQ.begin(), byQ.end(),
                             [](const auto &a, const auto &c) {
                               return a.first < c.first;
                             });
            const Option *fast = nullptr;
            for (auto &[q, o] : byQ) {
              if (!fast || model.fill(o->cost) < model.fill(fast->cost))
                fast = o;
              stages[s].q.push_back(q);
              stages[s].fastest.push_back(fast);
              allQ.push_back(q);
            }
          }
          std::sort(allQ.begin(), allQ.end());
          allQ.erase(std::unique(allQ.begin(), allQ.end()), allQ.end());
          std::vector<double> fill(S), steady(S);
          std::vector<const Option *> chosen(S);
          for (double Q : allQ) {
            if (Q >= best)
              break; // J >= max q >= Q
            bool ok = true;
            for (int s = 0; s < S && ok; ++s) {
              auto &st = stages[s];
              auto it = std::upper_bound(st.q.begin(), st.q.end(), Q);
              if (it == st.q.begin()) {
                ok = false;
                break;
              }
              chosen[s] = st.fastest[size_t(it - st.q.begin()) - 1];
              fill[s] = model.fill(chosen[s]->cost);
              steady[s] = model.steady(chosen[s]->cost);
            }
            if (!ok)
              continue;
            double J = objectiveOn(ctx, fill, steady);
            if (J < best) {
              best = J;
              bestChoices.clear();
              for (int s = 0; s < S; ++s)
                bestChoices.push_back({bounds[s], bounds[s + 1], chosen[s]});
              bestB = b;
              bestN = n;
              bestSchedule = model.schedule;
            }
          }
        });
        if (best < before)
          bestCache = std::move(owned);
      }
    }
    if (best < kInf) {
      plan = makePlan(ctx, bestChoices, bestB, bestN, bestSchedule);
      break;
    }
  }
  finishStats(stats, start);
  return plan;
}

//===----------------------------------------------------------------------===//
// Brute force
//===----------------------------------------------------------------------===//

Plan hpc::search::searchBruteForce(const CostContext &ctx,
                                   const SearchSpace &space, int64_t maxPlans,
                                   bool &tooLarge, SearchStats *stats) {
  auto start = std::chrono::steady_clock::now();
  tooLarge = false;
  RangeKeys keys(*ctx.model);
  int L = int(ctx.model->layers.size());
  double limit = limitOf(ctx);
  std::vector<int64_t> batches = microBatchSizes(ctx, space);
  int64_t plans = 0;
  Plan plan;
  for (const auto &group : shapeGroups(ctx, space)) {
    double best = kInf;
    std::vector<Choice> bestChoices;
    int64_t bestB = 0, bestN = 0;
    PipelineSchedule bestSchedule;
    std::unique_ptr<OptionCache> bestCache;
    for (auto [S, n] : group) {
      for (const std::vector<StageConfig> &configs : configGroups(ctx, space, n))
      for (int64_t b : batches) {
        auto owned = std::make_unique<OptionCache>(ctx, keys, configs, b, stats, space);
        OptionCache &cache = *owned;
        int64_t m = ctx.options.globalBatch / b;
        double before = best;
        for (const ScheduleModel &model : scheduleModels(space, S, m))
        forEachPartition(L, S, [&](const std::vector<int> &bounds) {
          if (tooLarge)
            return;
          for (int s = 0; s < S; ++s)
            if (!model.fitsLayers(bounds[s + 1] - bounds[s]))
              return;
          std::vector<std::vector<const Option *>> opts(S);
          for (int s = 0; s < S; ++s) {
            StagePlace place = stagePlace(*ctx.cluster, s, S, n);
            for (const Option &o : cache.get(bounds[s], bounds[s + 1], place))
              opts[s].push_back(&o);
            if (opts[s].empty())
              return;
          }
          std::vector<size_t> idx(S, 0);
          std::vector<double> fill(S), steady(S);
          while (true) {
            if (++plans > maxPlans) {
              tooLarge = true;
              return;
            }
            bool fits = true;
            for (int s = 0; s < S; ++s) {
              const Option *o = opts[s][idx[s]];
              fits &= o->cost.memory(model.inFlight[size_t(s)]) <= limit;
              fill[s] = model.fill(o->cost);
              steady[s] = model.steady(o->cost);
            }
            if (fits) {
              double J = objectiveOn(ctx, fill, steady);
              if (J < best) {
                best = J;
                bestChoices.clear();
                for (int s = 0; s < S; ++s)
                  bestChoices.push_back(
                      {bounds[s], bounds[s + 1], opts[s][idx[s]]});
                bestB = b;
                bestN = n;
                bestSchedule = model.schedule;
              }
            }
            int s = S - 1;
            while (s >= 0 && ++idx[s] == opts[s].size())
              idx[s--] = 0;
            if (s < 0)
              break;
          }
        });
        if (best < before)
          bestCache = std::move(owned);
        if (tooLarge)
          break;
      }
      if (tooLarge)
        break;
    }
    if (tooLarge)
      break;
    if (best < kInf) {
      plan = makePlan(ctx, bestChoices, bestB, bestN, bestSchedule);
      break;
    }
  }
  if (stats)
    stats->plans = plans;
  finishStats(stats, start);
  return tooLarge ? Plan() : plan;
}

//===----------------------------------------------------------------------===//
// Least memory
//===----------------------------------------------------------------------===//

double hpc::search::minimumMemory(const CostContext &ctx,
                                  const SearchSpace &space) {
  RangeKeys keys(*ctx.model);
  int L = int(ctx.model->layers.size());
  double best = kInf;
  for (const auto &group : shapeGroups(ctx, space))
    for (auto [S, n] : group) {
      for (const std::vector<StageConfig> &configs : configGroups(ctx, space, n))
      for (int64_t b : microBatchSizes(ctx, space)) {
        OptionCache cache(ctx, keys, configs, b, nullptr, space);
        int64_t m = ctx.options.globalBatch / b;
        for (const ScheduleModel &model : scheduleModels(space, S, m)) {
        // G[k][i]: least max memory running [i, L) as the last k stages.
        std::vector<std::vector<double>> G(S + 1,
                                           std::vector<double>(L + 1, kInf));
        G[0][L] = -kInf;
        for (int k = 1; k <= S; ++k) {
          int s = S - k;
          StagePlace place = stagePlace(*ctx.cluster, s, S, n);
          double inFlight = model.inFlight[size_t(s)];
          int iLo = k == S ? 0 : s, iHi = k == S ? 0 : L - k;
          for (int i = iLo; i <= iHi; ++i) {
            int jLo = k == 1 ? L : i + 1, jHi = k == 1 ? L : L - (k - 1);
            for (int j = jLo; j <= jHi; ++j) {
              if (G[k - 1][j] == kInf || !model.fitsLayers(j - i))
                continue;
              for (const Option &o : cache.get(i, j, place))
                G[k][i] = std::min(G[k][i], std::max(o.cost.memory(inFlight),
                                                     G[k - 1][j]));
            }
          }
        }
        best = std::min(best, G[S][0]);
        }
      }
    }
  return best;
}

double hpc::search::minimumMemoryExhaustive(const CostContext &ctx,
                                            const SearchSpace &space) {
  RangeKeys keys(*ctx.model);
  int L = int(ctx.model->layers.size());
  double best = kInf;
  for (const auto &group : shapeGroups(ctx, space))
    for (auto [S, n] : group) {
      for (const std::vector<StageConfig> &configs : configGroups(ctx, space, n))
      for (int64_t b : microBatchSizes(ctx, space)) {
        OptionCache cache(ctx, keys, configs, b, nullptr, space);
        int64_t m = ctx.options.globalBatch / b;
        for (const ScheduleModel &model : scheduleModels(space, S, m))
        forEachPartition(L, S, [&](const std::vector<int> &bounds) {
          double worst = -kInf;
          for (int s = 0; s < S; ++s) {
            if (!model.fitsLayers(bounds[s + 1] - bounds[s]))
              return;
            StagePlace place = stagePlace(*ctx.cluster, s, S, n);
            double least = kInf;
            for (const Option &o : cache.get(bounds[s], bounds[s + 1], place))
              least = std::min(least, o.cost.memory(model.inFlight[size_t(s)]));
            worst = std::max(worst, least);
          }
          best = std::min(best, worst);
        });
      }
    }
  return best;
}

//===----------------------------------------------------------------------===//
// Given meshes and the Megatron-style grid
//===----------------------------------------------------------------------===//

bool hpc::search::parseMesh(const std::string &text, MeshSpec &out,
                            std::string &error) {
  MeshSpec m;
  bool haveDp = false, haveTp = false, havePp = false;
  llvm::SmallVector<llvm::StringRef> items;
  llvm::StringRef(text).split(items, ',', -1, /*KeepEmpty=*/false);
  if (items.empty()) {
    error = "mesh '" + text + "': expected KEY=VALUE,... (dp, tp, pp, ep, "
            "mbs, zero, sp, recompute)";
    return false;
  }
  for (llvm::StringRef item : items) {
    auto [key, value] = item.trim().split('=');
    int64_t v = 0;
    if (value.empty() || value.getAsInteger(10, v) || v < 0) {
      error = "mesh '" + text + "': '" + item.str() +
              "' is not KEY=N with N a non-negative integer";
      return false;
    }
    auto positive = [&](int64_t &field, bool *seen) {
      if (v < 1) {
        error = "mesh '" + text + "': " + key.str() + " must be >= 1";
        return false;
      }
      field = v;
      if (seen)
        *seen = true;
      return true;
    };
    auto flag = [&](int &field) {
      if (v > 1) {
        error = "mesh '" + text + "': " + key.str() + " must be 0 or 1";
        return false;
      }
      field = int(v);
      return true;
    };
    bool ok;
    if (key == "dp")
      ok = positive(m.dp, &haveDp);
    else if (key == "tp")
      ok = positive(m.tp, &haveTp);
    else if (key == "pp")
      ok = positive(m.pp, &havePp);
    else if (key == "ep")
      ok = positive(m.ep, nullptr);
    else if (key == "mbs")
      ok = positive(m.mbs, nullptr);
    else if (key == "zero") {
      ok = v <= 3;
      m.zero = int(v);
      if (!ok)
        error = "mesh '" + text + "': zero must be 0, 1, 2 or 3";
    } else if (key == "sp")
      ok = flag(m.sp);
    else if (key == "recompute")
      ok = flag(m.recompute);
    else {
      error = "mesh '" + text + "': unknown key '" + key.str() +
              "' (expected dp, tp, pp, ep, mbs, zero, sp, recompute)";
      return false;
    }
    if (!ok)
      return false;
  }
  (void)haveDp;
  (void)haveTp;
  (void)havePp;
  out = m;
  return true;
}

bool hpc::search::megatronSplit(const Model &model, int64_t pp,
                                std::vector<std::pair<int, int>> &ranges,
                                std::string &error) {
  int L = int(model.layers.size());
  int first = -1, last = -1;
  for (int i = 0; i < L; ++i) {
    LayerKind k = model.layers[i].kind;
    if (k == LayerKind::Block || k == LayerKind::MoE) {
      if (first < 0)
        first = i;
      last = i;
    }
  }
  if (first < 0) { // no repeated blocks: split all layers evenly
    first = 0;
    last = L - 1;
  }
  int blocks = last - first + 1;
  if (pp > blocks) {
    error = "pp=" + std::to_string(pp) + " exceeds the " +
            std::to_string(blocks) + " layers that can be split";
    return false;
  }
  ranges.clear();
  int base = int(blocks / pp), extra = int(blocks % pp);
  int begin = 0, cursor = first;
  for (int s = 0; s < pp; ++s) {
    cursor += base + (s < extra ? 1 : 0);
    int end = s == pp - 1 ? L : cursor;
    ranges.push_back({begin, end});
    begin = end;
  }
  return true;
}

namespace {

const char *const kBatchProblem = "dp does not divide the micro-batch";

/// The best uniform-knob plan with fixed ranges and degrees; knobs < 0 free.
Plan bestUniform(const CostContext &ctx, const SearchSpace &space,
                 const std::vector<std::pair<int, int>> &ranges, int64_t dp,
                 int64_t tp, const MeshSpec &knobs, double &leastMemory,
                 std::string &problem) {
  int S = int(ranges.size());
  int64_t n = dp * tp;
  double limit = limitOf(ctx);
  Plan best;
  best.stepTime = kInf;
  leastMemory = kInf;
  std::vector<int64_t> batches;
  if (knobs.mbs > 0)
    batches.push_back(knobs.mbs * dp);
  else
    batches = microBatchSizes(ctx, space);
  for (int64_t b : batches) {
    if (ctx.options.globalBatch % b) {
      problem = "the micro-batch (" + std::to_string(b) +
                " samples) does not divide the global batch";
      continue;
    }
    int64_t m = ctx.options.globalBatch / b;
    for (const ScheduleModel &model : scheduleModels(space, S, m))
    for (const StageConfig &cfg : stageConfigs(ctx, space, n)) {
      if (cfg.tp != tp || cfg.dp != dp)
        continue;
      if ((knobs.ep >= 0 && cfg.ep != knobs.ep) ||
          (knobs.zero >= 0 && cfg.zero != knobs.zero) ||
          (knobs.sp >= 0 && int(cfg.sp) != knobs.sp) ||
          (knobs.recompute >= 0 && int(cfg.recompute) != knobs.recompute))
        continue;
      std::vector<double> fill(S), steady(S);
      double worst = 0;
      bool valid = true;
      for (int s = 0; s < S && valid; ++s) {
        if (!model.fitsLayers(ranges[s].second - ranges[s].first)) {
          problem = "a stage has fewer layers than " + pipelineScheduleName(model.schedule) +
                    " has chunks";
          valid = false;
          break;
        }
        std::vector<LayerRun> runs;
        for (int l = ranges[s].first; l < ranges[s].second; ++l) {
          if (!runs.empty() &&
              ctx.model->layers[runs.back().layer].classId ==
                  ctx.model->layers[l].classId)
            ++runs.back().count;
          else
            runs.push_back({l, 1});
        }
        if (const char *why = stageConfigProblem(ctx, runs, cfg, b)) {
          // Prefer a structural reason over a micro-batch size that only
          // some candidate sizes have.
          if (problem.empty() || std::string(why) != kBatchProblem)
            problem = why;
          valid = false;
          break;
        }
        StageCost c = evaluateStage(ctx, runs, cfg, b,
                                    stagePlace(*ctx.cluster, s, S, n));
        fill[s] = model.fill(c);
        steady[s] = model.steady(c);
        worst = std::max(worst, c.memory(model.inFlight[size_t(s)]));
      }
      if (!valid)
        continue;
      leastMemory = std::min(leastMemory, worst);
      if (worst > limit)
        continue;
      double J = objectiveOn(ctx, fill, steady);
      if (J < best.stepTime) {
        best = Plan();
        best.valid = true;
        best.stepTime = J;
        best.schedule = model.schedule;
        best.microBatch = b;
        best.numMicroBatches = m;
        best.devicesPerStage = n;
        for (int s = 0; s < S; ++s) {
          StagePlan sp;
          sp.firstLayer = ranges[s].first;
          sp.endLayer = ranges[s].second;
          sp.config = cfg;
          best.stages.push_back(sp);
        }
      }
    }
  }
  if (best.valid)
    finalizePlan(ctx, best);
  return best;
}

} // namespace

Plan hpc::search::evaluateMesh(const CostContext &ctx, const SearchSpace &space,
                               const MeshSpec &mesh, std::string &error) {
  const ClusterSpec &c = *ctx.cluster;
  int64_t n = mesh.dp * mesh.tp;
  int64_t need = n * mesh.pp;
  if (need > c.numDevices()) {
    error = "mesh dp=" + std::to_string(mesh.dp) + ",tp=" +
            std::to_string(mesh.tp) + ",pp=" + std::to_string(mesh.pp) +
            " needs " + std::to_string(need) + " devices; the cluster has " +
            std::to_string(c.numDevices());
    return Plan();
  }
  int64_t G = c.devicesPerNode;
  if (G % mesh.tp && mesh.tp % G) {
    error = "mesh tp=" + std::to_string(mesh.tp) +
            " does not tile nodes of " + std::to_string(G) + " devices";
    return Plan();
  }
  if (G % n && n % G) {
    error = "mesh dp*tp=" + std::to_string(n) +
            " devices per stage do not tile nodes of " + std::to_string(G) +
            " devices";
    return Plan();
  }
  std::vector<std::pair<int, int>> ranges;
  if (!megatronSplit(*ctx.model, mesh.pp, ranges, error))
    return Plan();
  SearchSpace relaxed = space;
  relaxed.maxTP = 0;
  if (mesh.zero >= 0)
    relaxed.zeroStages = {mesh.zero};
  if (mesh.recompute >= 0)
    relaxed.recompute = {mesh.recompute == 1};
  relaxed.allowSequenceParallel = true;
  relaxed.allowExpertParallel = true;
  double leastMemory = kInf;
  std::string problem;
  Plan plan = bestUniform(ctx, relaxed, ranges, mesh.dp, mesh.tp, mesh, leastMemory,
                          problem);
  if (plan.valid)
    return plan;
  if (leastMemory < kInf)
    error = "the mesh does not fit: it needs at least " +
            formatBytes(leastMemory) + " per device, " +
            formatBytes(ctx.memoryLimit()) + " are usable";
  else
    error = "the mesh has no valid configuration" +
            (problem.empty() ? std::string() : ": " + problem);
  return Plan();
}

Plan hpc::search::gridSearchMegatron(const CostContext &ctx,
                                     const SearchSpace &space,
                                     SearchStats *stats) {
  auto start = std::chrono::steady_clock::now();
  const ClusterSpec &c = *ctx.cluster;
  int64_t N = c.numDevices(), G = c.devicesPerNode;
  std::vector<int64_t> sizes = stageSizes(c);
  // Megatron-LM's own knobs only: no ZeRO (or the least ZeRO stage the
  // space allows), no sequence parallelism; recomputation on or off.
  SearchSpace grid = space;
  grid.zeroStages = {*std::min_element(space.zeroStages.begin(),
                                       space.zeroStages.end())};
  grid.allowSequenceParallel = false;
  grid.schedules = {PipelineSchedule()}; // Megatron-LM's 1F1B
  Plan best;
  best.stepTime = kInf;
  for (int64_t tp = 1; tp <= N; ++tp) {
    if (N % tp || (G % tp && tp % G) || (space.maxTP > 0 && tp > space.maxTP))
      continue;
    for (int64_t pp = 1; tp * pp <= N; ++pp) {
      if (N % (tp * pp) ||
          (space.maxStages > 0 && pp > space.maxStages))
        continue;
      int64_t dp = N / (tp * pp);
      if (std::find(sizes.begin(), sizes.end(), dp * tp) == sizes.end())
        continue;
      std::vector<std::pair<int, int>> ranges;
      std::string error;
      if (!megatronSplit(*ctx.model, pp, ranges, error))
        continue;
      MeshSpec knobs;
      double least;
      std::string problem;
      Plan p = bestUniform(ctx, grid, ranges, dp, tp, knobs, least, problem);
      if (stats)
        ++stats->subproblems;
      if (p.valid && p.stepTime < best.stepTime)
        best = p;
    }
  }
  finishStats(stats, start);
  return best.valid ? best : Plan();
}

//===----------------------------------------------------------------------===//
// Plans
//===----------------------------------------------------------------------===//

void hpc::search::finalizePlan(const CostContext &ctx, Plan &plan) {
  const ClusterSpec &c = *ctx.cluster;
  int S = int(plan.stages.size());
  int64_t m = plan.numMicroBatches;
  int64_t n = plan.devicesPerStage;
  ScheduleModel model(plan.schedule, S, m);
  std::vector<double> fill(S), steady(S);
  plan.peakMemory = 0;
  for (int s = 0; s < S; ++s) {
    StagePlan &sp = plan.stages[s];
    std::vector<LayerRun> runs;
    for (int l = sp.firstLayer; l < sp.endLayer; ++l) {
      if (!runs.empty() && ctx.model->layers[runs.back().layer].classId ==
                               ctx.model->layers[l].classId)
        ++runs.back().count;
      else
        runs.push_back({l, 1});
    }
    sp.cost = evaluateStage(ctx, runs, sp.config, plan.microBatch,
                            stagePlace(c, s, S, n));
    sp.firstDevice = int64_t(s) * n;
    sp.numDevices = n;
    sp.inFlight = model.inFlight[size_t(s)];
    sp.memory = sp.cost.memory(sp.inFlight);
    plan.peakMemory = std::max(plan.peakMemory, sp.memory);
    fill[s] = model.fill(sp.cost);
    steady[s] = model.steady(sp.cost);
  }
  plan.devicesUsed = n * S;
  plan.stepTime = objectiveOn(ctx, fill, steady);
  int b = 0;
  for (int s = 1; s < S; ++s)
    if (steady[s] > steady[b])
      b = s;
  plan.bottleneck = b;
  const StageCost &bc = plan.stages[b].cost;
  double M = double(m);
  plan.compute = M * bc.compute + bc.optimizer;
  plan.exposedComm =
      M * (bc.tpComm + bc.moeComm + bc.zeroComm + model.sends() * bc.p2p) + bc.gradSync;
  // On shared cores the bottleneck stage runs part of its work on the
  // cores its idle neighbours lend (stepObjective): its parts, at the
  // shared rate, may then exceed the step, and are scaled into it.
  double busy = plan.compute + plan.exposedComm;
  if (busy > plan.stepTime) {
    plan.compute *= plan.stepTime / busy;
    plan.exposedComm *= plan.stepTime / busy;
  }
  plan.bubble = std::max(0.0, plan.stepTime - plan.compute - plan.exposedComm);
  double B = double(ctx.options.globalBatch);
  plan.samplesPerSecond = B / plan.stepTime;
  plan.tokensPerSecond = plan.samplesPerSecond * ctx.model->tokensPerSample;
  double peak = c.device.peakFlops[int(ctx.options.dtype)];
  double devices = double(plan.devicesUsed);
  plan.mfu = 3 * ctx.model->gemmFlopsPerSample() * B /
             (plan.stepTime * devices * peak);
  plan.tflopsPerDevice = ctx.model->megatronFlopsPerSample() * B /
                         (plan.stepTime * devices) / 1e12;
}
