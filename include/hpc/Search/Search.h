//===- Search.h - hybrid-parallel strategy search ----------------*- C++ -*-===//
//
// Finds the training plan with the least predicted step time: how the layer
// sequence is cut into pipeline stages, how many devices each stage gets,
// and per stage the data / tensor / sequence / expert parallel degrees, the
// ZeRO stage and recomputation; globally the micro-batch size. The objective
// is the step time of the cost model (CostModel.h) under the plan's
// pipeline schedule, for 1F1B and GPipe
//
//   J = sum_s t_s + max_s ((m - 1) * t_s + e_s)
//
// t_s: stage s's time per micro-batch, e_s: its time once per step (exposed
// gradient sync, optimizer), m: micro-batches per step; the other schedules
// change what each stage adds to the fill and drain and to its steady state
// (ScheduleModel), and what each stage holds in flight. Every stage has the
// same number of devices (a divisor or a multiple of a node); the plan uses
// as many devices as any feasible plan can, then minimizes J.
//
// searchDP() is the dynamic program (suffixes of the layer sequence x stages
// left, with Pareto sets of (sum t, max q)); searchExhaustive() enumerates
// every stage partition and minimizes the per-stage choices exactly;
// searchBruteForce() enumerates every plan of a tiny space. docs/search.md
// explains them and why they agree. Plain C++, no MLIR headers.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_SEARCH_SEARCH_H
#define HPC_SEARCH_SEARCH_H

#include "hpc/CostModel/CostModel.h"
#include "hpc/PipelineSchedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hpc {
namespace search {

using cost::CostContext;
using cost::StageConfig;
using cost::StageCost;

/// Limits on what the search may choose.
struct SearchSpace {
  std::vector<int> zeroStages = {0, 1, 2, 3};
  std::vector<bool> recompute = {false, true};
  bool allowSequenceParallel = true;
  bool allowExpertParallel = true;
  int64_t maxTP = 0;       ///< 0: no limit
  int64_t maxStages = 0;   ///< 0: no limit (at most one stage per layer)
  int64_t microBatch = 0;  ///< samples per micro-batch; 0: searched
  /// Every stage runs the same configuration (dp, tp, sp, ep, ZeRO stage,
  /// recomputation): what hpc-opt compiles, one mesh and one set of
  /// options for all stages (and expert parallelism only in a plan of one
  /// stage and one micro-batch, without ZeRO). Otherwise each stage
  /// chooses its own.
  bool uniformStages = false;
  /// Pipeline schedules a plan of several stages may run (the compiler's:
  /// dist-pipeline runs whichever the plan names); a one-stage plan runs its
  /// micro-batches one after the other whatever this says.
  std::vector<PipelineSchedule> schedules = {PipelineSchedule()};
};

/// How a pipeline schedule turns stage costs into the step time, in the
/// form J = sum_s fill_s + max_s steady_s that the dynamic program
/// minimizes exactly, and what each stage holds in flight. With F, B and W
/// a stage's forward, input-gradient and weight-gradient time per
/// micro-batch (t = F + B + W + communication), equal stages give
/// pipelineBlocks' schedules replayed (replayPipeline):
///  - gpipe, 1f1b: fill t, steady (m - 1) t + e: (m + S - 1) t + e;
///  - interleaved:V: each rank's V chunks send V times, t' = t + (V - 1)
///    p2p; fill t' / V, steady (m - 1/V) t' + e: m t' + (S - 1) t' / V + e;
///  - zb-h1 (m >= S): fill t - 2W, steady (m - 1) t + 2W + e: the bubble
///    (S - 1)(F + B - W) of Qi et al.; with fewer micro-batches than stages
///    the delayed W's have no bubble to fill, and it is costed as 1F1B.
struct ScheduleModel {
  PipelineSchedule schedule;
  int S = 1;       ///< stages
  int64_t m = 1;   ///< micro-batches per step
  /// The activations each stage holds at its peak, in micro-batches' worth
  /// (an interleaved chunk holds 1/V of them): replayed from the blocks the
  /// compiled stage runs, held from its F until its B (its W under zb-h1).
  std::vector<double> inFlight;

  /// One stage runs its micro-batches one after the other: 1F1B's model
  /// whatever `schedule` says.
  ScheduleModel(const PipelineSchedule &schedule, int S, int64_t m);
  /// Whether the schedule runs S stages of m micro-batches at all
  /// (interleaved needs m a multiple of S).
  bool runs() const;
  /// Whether a stage of `layers` layers can run it (interleaved: V chunks).
  bool fitsLayers(int layers) const;
  double fill(const StageCost &c) const;
  double steady(const StageCost &c) const;
  /// Each micro-batch's sends per stage (interleaved: one per chunk).
  double sends() const;
};

/// One pipeline stage of a plan.
struct StagePlan {
  int firstLayer = 0;  ///< layers [firstLayer, endLayer)
  int endLayer = 0;
  StageConfig config;
  StageCost cost;
  int64_t firstDevice = 0, numDevices = 0;
  double inFlight = 0;  ///< micro-batches whose activations it holds at its peak
  double memory = 0;    ///< bytes per device at the peak
};

/// A complete plan and its predicted performance.
struct Plan {
  bool valid = false;
  int64_t microBatch = 0;      ///< samples per micro-batch
  int64_t numMicroBatches = 0; ///< per step
  int64_t devicesPerStage = 0;
  int64_t devicesUsed = 0;
  std::vector<StagePlan> stages;
  PipelineSchedule schedule; ///< what the stages run (1f1b for one stage)

  double stepTime = 0;   ///< the objective J, seconds
  int bottleneck = 0;    ///< the stage attaining max_s (m-1) t_s + e_s
  double compute = 0;    ///< of the bottleneck stage: kernels + optimizer
  double exposedComm = 0;///<   communication not hidden under compute
  double bubble = 0;     ///<   pipeline fill and drain (J - its busy time)
  double peakMemory = 0; ///< max over stages, bytes per device
  double samplesPerSecond = 0, tokensPerSecond = 0;
  double mfu = 0;               ///< model FLOPs (3x forward GEMMs) / peak
  double tflopsPerDevice = 0;   ///< Megatron-LM's count, per device, TFLOP/s
};

/// Counters of a search run.
struct SearchStats {
  double seconds = 0;
  int64_t stageEvaluations = 0; ///< evaluateStage calls
  int64_t subproblems = 0;      ///< (shape, micro-batch) pairs searched
  int64_t frontEntries = 0;     ///< Pareto entries created by the DP
  int64_t partitions = 0;       ///< stage partitions (exhaustive)
  int64_t plans = 0;            ///< complete plans (brute force)
};

/// The step time of stages with times `t` (per micro-batch) and `e` (per
/// step), m micro-batches, computed in the one order every search uses:
/// t_0 + (t_1 + (... + (t_{S-1} + 0))) + max_s ((m-1) t_s + e_s).
double objective(const std::vector<double> &t, const std::vector<double> &e,
                 int64_t m);
/// The same sum of the stages' fill terms plus the largest steady term, in
/// that order: J under any ScheduleModel. Where the devices share their
/// node's cores (`coreShare` < 1, ClusterSpec's device.coreShare), a stage
/// that waits lends `coreLending` of its share to the others: a pipeline's
/// J shrinks towards the stages' own work (the largest steady term plus the
/// average fill term), no less than J at whole cores (coreShare x J); in
/// part when lent in part (docs/cost-model.md, "Shared cores").
double scheduleObjective(const std::vector<double> &fill,
                         const std::vector<double> &steady, double coreShare = 1,
                         double coreLending = 1);
/// (m - 1) * t + e, the stage's term of the max.
inline double stageQ(double t, double e, int64_t m) {
  return double(m - 1) * t + e;
}

/// Stage sizes the space allows on `cluster`: divisors of a node's device
/// count, and multiples of it up to the whole cluster.
std::vector<int64_t> stageSizes(const cost::ClusterSpec &cluster);
/// Configurations of a stage of `devices` devices, in tie-break order.
std::vector<StageConfig> stageConfigs(const CostContext &ctx,
                                      const SearchSpace &space,
                                      int64_t devices);
/// Micro-batch sizes (divisors of the global batch, or the fixed one).
std::vector<int64_t> microBatchSizes(const CostContext &ctx,
                                     const SearchSpace &space);
/// Placement facts of stage s of S stages of n devices each.
cost::StagePlace stagePlace(const cost::ClusterSpec &cluster, int s, int S,
                            int64_t n);

/// The dynamic program.
Plan searchDP(const CostContext &ctx, const SearchSpace &space,
              SearchStats *stats = nullptr);
/// Every partition of the layers into stages; per partition the exact best
/// per-stage choices (threshold sweep over max q). For small instances.
Plan searchExhaustive(const CostContext &ctx, const SearchSpace &space,
                      SearchStats *stats = nullptr);
/// Every plan, one by one (partition x configuration of every stage). Gives
/// up (returns an invalid plan, `tooLarge` set) beyond `maxPlans` plans.
Plan searchBruteForce(const CostContext &ctx, const SearchSpace &space,
                      int64_t maxPlans, bool &tooLarge,
                      SearchStats *stats = nullptr);

/// The least peak memory per device of any plan in the space (ignoring the
/// memory limit), bytes; infinity when the space has no plan at all.
double minimumMemory(const CostContext &ctx, const SearchSpace &space);
/// The same, by enumerating partitions (for tests).
double minimumMemoryExhaustive(const CostContext &ctx,
                               const SearchSpace &space);

/// A user-given plan: dp x tp devices per stage, pp stages with the repeated
/// layers split evenly (Megatron-LM style: leading non-repeated layers on the
/// first stage, trailing ones on the last). Knobs left at -1 are searched
/// (the same value for every stage).
struct MeshSpec {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t ep = -1;
  int64_t mbs = -1;  ///< samples per micro-batch per DP rank (Megatron's)
  int zero = -1;
  int sp = -1, recompute = -1;
};
/// Parses "dp=8,tp=8,pp=35[,ep=..][,mbs=..][,zero=..][,sp=0|1][,recompute=0|1]".
bool parseMesh(const std::string &text, MeshSpec &out, std::string &error);
/// Layer ranges of a Megatron-style split into pp stages.
bool megatronSplit(const cost::Model &model, int64_t pp,
                   std::vector<std::pair<int, int>> &ranges,
                   std::string &error);
/// Evaluates a mesh: the best plan with those degrees and split. On failure
/// `error` says why (and, when memory is the reason, how much it needs).
Plan evaluateMesh(const CostContext &ctx, const SearchSpace &space,
                  const MeshSpec &mesh, std::string &error);
/// The best Megatron-style plan: a grid over dp, tp, pp (dp*tp*pp = all
/// devices) and micro-batch size, uniform split, recomputation on or off,
/// no ZeRO, no sequence parallelism.
Plan gridSearchMegatron(const CostContext &ctx, const SearchSpace &space,
                        SearchStats *stats = nullptr);

/// Fills a plan's stage costs, memory, objective and metrics from its
/// stages' layer ranges and configurations.
void finalizePlan(const CostContext &ctx, Plan &plan);

/// Readable table of a plan (what dist-search prints on stderr).
std::string formatPlanTable(const CostContext &ctx, const Plan &plan,
                            const std::string &title);
/// The plan as JSON (the report file), with search statistics and an
/// optional baseline plan for comparison.
std::string planToJSON(const CostContext &ctx, const Plan &plan,
                       const SearchStats &stats, const std::string &method,
                       const Plan *baseline);

/// "80.0 GiB".
std::string formatBytes(double bytes);

} // namespace search
} // namespace hpc

#endif // HPC_SEARCH_SEARCH_H
