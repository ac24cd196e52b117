//===- CostModel.cpp - analytic cost of a pipeline stage ------------------===//
//
// Time: GEMMs on a soft roofline (compute at the calibrated fraction of peak
// plus operand traffic at the calibrated fraction of memory bandwidth), other
// kernels memory-bound, a fixed launch overhead per kernel; backward is twice
// forward, recomputation adds one forward. Collectives: alpha-beta per
// topology level, hierarchical ring or tree, whichever is faster. Memory:
// weights, gradients and optimizer states by ZeRO stage, activations kept for
// backward (or only the layer inputs under recomputation), and buffers.
// docs/cost-model.md states every formula.
//
//===----------------------------------------------------------------------===//

#include "hpc/CostModel/CostModel.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace hpc::cost;

const char *hpc::cost::layerKindName(LayerKind k) {
  switch (k) {
  case LayerKind::Embedding: return "embedding";
  case LayerKind::Block: return "block";
  case LayerKind::MoE: return "moe";
  case LayerKind::Head: return "head";
  case LayerKind::Other: return "other";
  }
  return "other";
}

double Layer::gemmFlops() const {
  double f = 0;
  for (const Gemm &g : gemms)
    f += g.flops();
  return f;
}

double Model::params() const {
  double p = 0;
  for (const Layer &l : layers)
    p += l.params();
  return p;
}

double Model::gemmFlopsPerSample() const {
  double f = 0;
  for (const Layer &l : layers)
    f += l.gemmFlops();
  return f;
}

double Model::megatronFlopsPerSample() const {
  double f = 0;
  for (const Layer &l : layers)
    f += (l.kind == LayerKind::Head ? 3 : 4) * l.gemmFlops();
  return f;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

namespace {

struct Levels {
  int64_t perNode; ///< members in one node
  int64_t nodes;   ///< nodes the group spans
};

Levels levels(CommGroup g) {
  int64_t p = std::clamp<int64_t>(g.perNode, 1, std::max<int64_t>(g.size, 1));
  return {p, std::max<int64_t>(g.size / p, 1)};
}

double bandwidth(const ClusterSpec &c, const LinkSpec &l) {
  return l.bandwidth * (&l == &c.interNode ? c.efficiency.networkInter
                                           : c.efficiency.network);
}

/// One reduce-scatter (or all-gather) pass of a hierarchical ring.
double ringHalf(const ClusterSpec &c, double bytes, CommGroup g) {
  Levels lv = levels(g);
  double t = 0;
  if (lv.perNode > 1) {
    double p = double(lv.perNode);
    t += (p - 1) / p * bytes / bandwidth(c, c.intraNode) +
         (p - 1) * c.intraNode.latency;
  }
  if (lv.nodes > 1) {
    double r = double(lv.nodes);
    double shard = bytes / double(lv.perNode);
    t += (r - 1) / r * shard / bandwidth(c, c.interNode) +
         (r - 1) * c.interNode.latency;
  }
  return t;
}

/// Time of one call measured at each size, interpolated between the sizes
/// (log-log), past the largest at the last interval's rate, below the
/// smallest its time.
double interpolate(const CollectiveTiming &t, double bytes) {
  const std::vector<int64_t> &n = t.sizes;
  const std::vector<double> &sec = t.seconds;
  size_t last = n.size() - 1;
  if (bytes > double(n[last])) {
    double rate = last > 0 && sec[last] > sec[last - 1]
                      ? (sec[last] - sec[last - 1]) / double(n[last] - n[last - 1])
                      : sec[last] / double(n[last]);
    return sec[last] + (bytes - double(n[last])) * rate;
  }
  if (bytes <= double(n[0]))
    return sec[0];
  size_t i = size_t(std::upper_bound(n.begin(), n.end(), int64_t(bytes)) - n.begin()) - 1;
  i = std::min(i, last - 1);
  double f = std::log(bytes / double(n[i])) / std::log(double(n[i + 1]) / double(n[i]));
  return std::exp(std::log(sec[i]) + f * (std::log(sec[i + 1]) - std::log(sec[i])));
}

/// A collective's time from hpc-calibrate's own measurement of `kind`
/// between nodes, for a group of one rank a node: what the link formula
/// (fitted to a ping-pong, one direction at a time) leaves out is in it:
/// both directions of a link busy at once (on the two-node cluster an
/// all-reduce of 16 MB takes 1.9x the formula's time), the runtime's
/// copies and reductions. A group of the measured size takes the measured
/// time; another size the formula's time times measured / formula at the
/// measured size. None without such a measurement: the formula alone.
template <typename Formula>
std::optional<double> measuredTime(const ClusterSpec &c, llvm::StringRef kind, double bytes,
                                   CommGroup g, Formula formula) {
  // Within a node the formula on the measured link predicts this project's
  // steps better (4 ranks on 2 cores: 10.7% mean error against 17.8% with
  // the tables, docs/benchmarks.md): its collectives share the cores, and
  // the tables measured them alone.
  Levels lv = levels(g);
  if (!c.calibration.present || lv.nodes < 2 || lv.perNode > 1)
    return std::nullopt;
  for (const CollectiveTiming &t : c.calibration.collectives) {
    if (t.level != "inter-node" || t.kind != kind || t.groupSize < 2 || t.sizes.empty() ||
        t.sizes.size() != t.seconds.size())
      continue;
    double measured = interpolate(t, bytes) * t.timeScale / c.efficiency.networkInter;
    if (t.groupSize == g.size)
      return measured;
    CommGroup at{t.groupSize, 1};
    double modeled = formula(bytes, at);
    if (!(modeled > 0))
      return std::nullopt;
    return formula(bytes, g) * measured / modeled;
  }
  return std::nullopt;
}

} // namespace

double hpc::cost::allReduceRingTime(const ClusterSpec &c, double bytes,
                                    CommGroup g) {
  if (g.size <= 1 || bytes <= 0)
    return 0;
  return 2 * ringHalf(c, bytes, g);
}

double hpc::cost::allReduceTreeTime(const ClusterSpec &c, double bytes,
                                    CommGroup g) {
  if (g.size <= 1 || bytes <= 0)
    return 0;
  Levels lv = levels(g);
  const LinkSpec &link = lv.nodes > 1 ? c.interNode : c.intraNode;
  double depth = std::ceil(std::log2(double(g.size)));
  return 2 * depth * link.latency + 2 * bytes / bandwidth(c, link);
}

double hpc::cost::allReduceTime(const ClusterSpec &c, double bytes,
                                CommGroup g) {
  if (g.size <= 1 || bytes <= 0)
    return 0;
  auto formula = [&](double n, CommGroup in) {
    return std::min(allReduceRingTime(c, n, in), allReduceTreeTime(c, n, in));
  };
  return measuredTime(c, "all_reduce", bytes, g, formula).value_or(formula(bytes, g));
}

double hpc::cost::reduceScatterTime(const ClusterSpec &c, double bytes,
                                    CommGroup g) {
  if (g.size <= 1 || bytes <= 0)
    return 0;
  auto formula = [&](double n, CommGroup in) { return ringHalf(c, n, in); };
  return measuredTime(c, "reduce_scatter", bytes, g, formula).value_or(formula(bytes, g));
}

double hpc::cost::allGatherTime(const ClusterSpec &c, double bytes,
                                CommGroup g) {
  if (g.size <= 1 || bytes <= 0)
    return 0;
  auto formula = [&](double n, CommGroup in) { return ringHalf(c, n, in); };
  return measuredTime(c, "all_gather", bytes, g, formula).value_or(formula(bytes, g));
}

double hpc::cost::allToAllTime(const ClusterSpec &c, double bytes,
                               CommGroup g) {
  if (g.size <= 1 || bytes <= 0)
    return 0;
  auto formula = [&](double b, CommGroup in) {
    Levels lv = levels(in);
    double n = double(in.size);
    double intra = double(lv.perNode - 1) / n * b;
    double inter = double(in.size - lv.perNode) / n * b;
    const LinkSpec &slow = lv.nodes > 1 ? c.interNode : c.intraNode;
    return intra / bandwidth(c, c.intraNode) +
           (inter > 0 ? inter / bandwidth(c, c.interNode) : 0) + (n - 1) * slow.latency;
  };
  return measuredTime(c, "all_to_all", bytes, g, formula).value_or(formula(bytes, g));
}

double hpc::cost::flatRingPassTime(const ClusterSpec &c, double bytes,
                                   CommGroup g) {
  if (g.size <= 1 || bytes <= 0)
    return 0;
  auto formula = [&](double b, CommGroup in) {
    Levels lv = levels(in);
    const LinkSpec &slow = lv.nodes > 1 ? c.interNode : c.intraNode;
    double n = double(in.size);
    return (n - 1) / n * b / bandwidth(c, slow) + (n - 1) * slow.latency;
  };
  // On one level a flat ring pass is what a reduce-scatter runs.
  return measuredTime(c, "reduce_scatter", bytes, g, formula).value_or(formula(bytes, g));
}

double hpc::cost::sendTime(const ClusterSpec &c, double bytes,
                           bool crossesNode) {
  if (bytes <= 0)
    return 0;
  const LinkSpec &link = crossesNode ? c.interNode : c.intraNode;
  return link.latency + bytes / bandwidth(c, link);
}

CommGroup hpc::cost::tensorGroup(const ClusterSpec &c, const StageConfig &s) {
  return {s.tp, std::min(s.tp, c.devicesPerNode)};
}

CommGroup hpc::cost::dataGroup(const ClusterSpec &c, const StageConfig &s) {
  int64_t G = c.devicesPerNode;
  return {s.dp, s.tp >= G ? 1 : std::min(s.dp, std::max<int64_t>(G / s.tp, 1))};
}

CommGroup hpc::cost::expertGroup(const ClusterSpec &c, const StageConfig &s) {
  return {s.ep, std::min(s.ep, dataGroup(c, s).perNode)};
}

CommGroup hpc::cost::expertDataGroup(const ClusterSpec &c,
                                     const StageConfig &s) {
  int64_t G = c.devicesPerNode;
  int64_t size = s.dp / s.ep;
  int64_t inner = s.tp * s.ep;
  return {size, inner >= G ? 1 : std::min(size, std::max<int64_t>(G / inner, 1))};
}

//===----------------------------------------------------------------------===//
// Stages
//===----------------------------------------------------------------------===//

const char *hpc::cost::stageConfigProblem(const CostContext &ctx,
                                          const std::vector<LayerRun> &runs,
                                          const StageConfig &cfg,
                                          int64_t microBatch) {
  if (cfg.dp < 1 || cfg.tp < 1 || cfg.ep < 1)
    return "degrees must be positive";
  if (microBatch % cfg.dp)
    return "dp does not divide the micro-batch";
  if (cfg.dp % cfg.ep)
    return "ep does not divide dp";
  if (cfg.sp && cfg.tp == 1)
    return "sequence parallelism needs tp > 1";
  if (cfg.zero > 0 && cfg.dp == 1)
    return "ZeRO needs dp > 1";
  bool experts = false;
  double params = 0;
  for (const LayerRun &r : runs) {
    const Layer &l = ctx.model->layers[r.layer];
    params += l.params() * double(r.count);
    if (l.tpDivisor > 0 && l.tpDivisor % cfg.tp)
      return "tp does not divide the layer's split dimensions";
    if (l.numExperts > 0) {
      experts = true;
      if (l.numExperts % cfg.ep)
        return "ep does not divide the expert count";
    }
  }
  if (cfg.ep > 1 && !experts)
    return "ep > 1 without expert layers";
  // A pipeline stage of no weights (a model's loss alone) does no work
  // worth a stage of its own, and the compiler cuts stages after ONNX
  // nodes, which such a stage may not have.
  if (params == 0 && ctx.model->params() > 0)
    return "the stage holds no parameters";
  return nullptr;
}

namespace {

/// Bytes per parameter of the optimizer states, and bytes the update touches.
double optimizerStateBytes(const TrainOptions &o) {
  bool mixed = dtypeBytes(o.dtype) < 4;
  if (o.optimizer == Optimizer::Adam)
    return mixed ? 12 : 8; // fp32 master copy (mixed only), m, v
  return mixed ? 8 : 4;    // fp32 master copy (mixed only), momentum
}

double optimizerTrafficBytes(const TrainOptions &o) {
  double eb = dtypeBytes(o.dtype);
  return (o.optimizer == Optimizer::Adam ? 24 : 16) + 2 * eb;
}

/// Forward time of one GEMM on one device.
double gemmTime(const CostContext &ctx, const Gemm &g, const StageConfig &cfg,
                double samples, double peak, double eb) {
  double B = g.batch, M = g.m, K = g.k, N = g.n;
  (g.scalesBatch ? B : M) *= samples;
  double tp = double(cfg.tp);
  switch (g.split) {
  case Gemm::Split::N: N /= tp; break;
  case Gemm::Split::K: K /= tp; break;
  case Gemm::Split::Batch: B /= tp; break;
  case Gemm::Split::None: break;
  }
  if (g.expert && cfg.ep > 1) {
    B /= double(cfg.ep);
    M *= double(cfg.ep);
  }
  const Efficiency &e = ctx.cluster->efficiency;
  double flops = 2 * B * M * K * N;
  double bytes = eb * B * (M * K + K * N + M * N);
  return flops / (peak * e.matmul) +
         bytes / (ctx.cluster->device.memoryBandwidth * e.memory);
}

/// How many gathers ZeRO-1/2's updated rows take in the compiled step:
/// dist-bucket packs the pieces (one rank's rows), in order, while they add
/// up to at most kZeroGatherBucketBytes, and gathers a larger one alone.
/// Expert pieces travel on their own group, so they pack apart. A layer
/// built with only a count of its tensors gathers each alone.
double zeroGatherCount(const CostContext &ctx, const std::vector<LayerRun> &runs,
                       const StageConfig &cfg, double eb) {
  struct Packer {
    double gathers = 0, open = -1; // bytes in the open bucket, -1: none
    void add(double bytes) {
      if (open < 0 || open + bytes > kZeroGatherBucketBytes) {
        ++gathers;
        open = bytes;
      } else {
        open += bytes;
      }
    }
  } dense, experts;
  double tp = double(cfg.tp), ep = double(cfg.ep);
  double dp = double(cfg.dp), edp = double(std::max<int64_t>(cfg.dp / cfg.ep, 1));
  for (const LayerRun &r : runs) {
    const Layer &l = ctx.model->layers[r.layer];
    if (l.tensors.empty()) {
      dense.gathers += double(r.count) * l.paramTensors;
      continue;
    }
    for (int i = 0; i < r.count; ++i)
      for (const ParamTensor &t : l.tensors) {
        bool split = t.tpSharded && !(t.tpWhole && ctx.options.compiledLayout);
        double piece = t.elems / (split ? tp : 1) * eb;
        if (t.expert)
          experts.add(piece / ep / edp);
        else
          dense.add(piece / dp);
      }
  }
  return dense.gathers + experts.gathers;
}

} // namespace

StageCost hpc::cost::evaluateStage(const CostContext &ctx,
                                   const std::vector<LayerRun> &runs,
                                   const StageConfig &cfg, int64_t microBatch,
                                   const StagePlace &place) {
  const ClusterSpec &c = *ctx.cluster;
  const TrainOptions &o = ctx.options;
  const Efficiency &eff = c.efficiency;
  double eb = dtypeBytes(o.dtype);
  double peak = c.device.peakFlops[int(o.dtype)];
  double memBw = c.device.memoryBandwidth * eff.memory;
  double samples = double(microBatch) / double(cfg.dp);
  double tp = double(cfg.tp), ep = double(cfg.ep);
  double spDiv = cfg.sp ? tp : 1;
  double passes = cfg.recompute ? 4 : 3; // forward, backward (2x), recompute
  CommGroup tpGroup = tensorGroup(c, cfg);
  CommGroup epGroup = expertGroup(c, cfg);
  // A collective (or send) the step makes also pays the hand-off to the
  // communication thread and back (hpc-calibrate's measured overhead).
  auto issued = [&](double seconds) { return seconds > 0 ? seconds + eff.collectiveOverhead : 0; };

  StageCost s;
  double forward = 0;          // forward kernels of the whole stage
  double denseParams = 0;      // per device, after TP / EP splits
  double expertParams = 0;
  double largestLayerParams = 0;
  double recomputeWorkingSet = 0;
  double largestTPBuffer = 0;
  CommGroup dpGroup = dataGroup(c, cfg);
  CommGroup edpGroup = expertDataGroup(c, cfg);
  // ZeRO-3's gather of the parameters, one layer at a time (the compiled
  // step's and DeepSpeed's message size).
  double zero3Pass = 0;
  double tiedParams = 0;
  double tpGradGather = 0; // the compiled layout's gradient gathers over tp
  for (const LayerRun &r : runs) {
    const Layer &l = ctx.model->layers[r.layer];
    double n = double(r.count);
    double fwd = 0;
    for (const Gemm &g : l.gemms) {
      double time = gemmTime(ctx, g, cfg, samples, peak, eb);
      fwd += time;
      // A product with a weight has a weight gradient of its own size; an
      // activation x activation product (attention) only input gradients.
      if (!g.scalesBatch)
        s.weightGrad += n * time;
    }
    fwd += (l.otherElemsReplicated / spDiv + l.otherElemsSharded / tp) *
           samples * eb / memBw;
    fwd += l.kernels * eff.kernelOverhead;
    forward += n * fwd;

    // Where the compiled step's layout differs from Megatron-LM's
    // (TrainOptions::compiledLayout, Layer::paramsTpWhole).
    bool compiled = o.compiledLayout;
    double lookup = compiled ? 0 : l.tpLookupAllReduce;
    double lookups = compiled ? 0 : l.tpLookupCollectives;
    if (cfg.tp > 1) {
      double fb = (l.tpForwardAllReduce + lookup) * samples * eb;
      double bb = l.tpBackwardAllReduce * samples * eb;
      auto collective = [&](double bytes) {
        return cfg.sp ? reduceScatterTime(c, bytes, tpGroup) +
                            allGatherTime(c, bytes, tpGroup)
                      : allReduceTime(c, bytes, tpGroup);
      };
      // Each collective at its own size (the bytes above add up several):
      // neither a link's latency nor a calibration table's time is linear
      // in the bytes.
      auto split = [](double bytes, double calls, auto time) {
        calls = std::max(1.0, calls);
        return calls * time(bytes / calls);
      };
      double forwardCalls = l.tpForwardCollectives + lookups;
      double fwdComm = split(fb, forwardCalls, collective);
      double bwdComm = split(bb, l.tpBackwardCollectives, collective);
      // Sequence parallelism keeps a column-parallel product's input split
      // along the sequence: the backward pass gathers it again for the
      // weight gradient (Megatron-LM's too, and the compiled step's).
      double regather =
          cfg.sp ? split(fb, forwardCalls,
                         [&](double bytes) { return allGatherTime(c, bytes, tpGroup); })
                 : 0;
      // The overhead is per collective.
      double each = cfg.sp ? 2 : 1;
      double calls = forwardCalls * each * (cfg.recompute ? 2 : 1) +
                     l.tpBackwardCollectives * each + (cfg.sp ? forwardCalls : 0);
      s.tpComm += n * (fwdComm * (cfg.recompute ? 2 : 1) + bwdComm + regather +
                       calls * eff.collectiveOverhead);
      if (compiled) {
        // The logits gathered whole for the loss; the gradients of the
        // parameters held whole gathered from their pieces (each micro-
        // batch, off the critical path: hidden below under the backward).
        double gathers = l.tpGradGathers;
        s.tpComm += n * issued(allGatherTime(c, l.tpResultGather * samples * eb, tpGroup));
        if (gathers > 0)
          tpGradGather += n * gathers *
                          issued(allGatherTime(c, l.tpGradGatherElems * eb / gathers, tpGroup));
      }
      largestTPBuffer = std::max(largestTPBuffer, std::max(fb, bb));
    }
    if (l.numExperts > 0 && cfg.ep > 1) {
      double bytes = l.moeAllToAll * samples * eb;
      // Dispatch and combine, in forward, backward and recomputation.
      s.moeComm += n * 2 * (cfg.recompute ? 3 : 2) *
                   issued(allToAllTime(c, bytes, epGroup));
    }

    double saved = (l.savedReplicated / spDiv + l.savedSharded / tp) *
                       samples * eb +
                   l.savedFp32 * samples * 4 / tp;
    if (cfg.recompute) {
      s.activationsPerMicroBatch += n * l.inputElems * samples * eb / spDiv;
      recomputeWorkingSet = std::max(recomputeWorkingSet, saved);
    } else {
      s.activationsPerMicroBatch += n * saved;
    }
    double whole = compiled ? l.paramsTpWhole : 0;
    double dense = l.paramsReplicated + whole + (l.paramsSharded - whole) / tp;
    double expert = (l.paramsExpertReplicated + l.paramsExpertSharded / tp) / ep;
    denseParams += n * dense;
    expertParams += n * expert;
    largestLayerParams = std::max(largestLayerParams, dense + expert);
    tiedParams += n * l.paramsTied;
    // The compiled step gathers each parameter tensor on its own.
    if (cfg.dp > 1 && cfg.zero >= 3)
      zero3Pass += n * (flatRingPassTime(c, dense * eb, dpGroup) +
                        flatRingPassTime(c, expert * eb, edpGroup) +
                        l.paramTensors * eff.collectiveOverhead);
  }
  s.compute = forward * passes;
  // The gradient gathers run beside the rest of the backward pass, as the
  // data-parallel gradient sync does.
  double backward = forward * (passes - 1);
  s.tpComm += o.overlapGradSync ? std::max(0.0, tpGradGather - eff.overlap * backward)
                                : tpGradGather;

  // Pipeline sends: the boundary activation (forward) and its gradient
  // (backward), split over the TP ranks (scatter/gather optimization).
  const Layer &firstLayer = ctx.model->layers[runs.front().layer];
  const Layer &lastLayer = ctx.model->layers[runs.back().layer];
  double outBytes = lastLayer.outputElems * samples * eb / tp;
  double inBytes = firstLayer.inputElems * samples * eb / tp;
  if (!place.last)
    s.p2p += issued(sendTime(c, outBytes, place.forwardCrossesNode));
  if (!place.first)
    s.p2p += issued(sendTime(c, inBytes, place.backwardCrossesNode));

  // Data parallelism and ZeRO.
  double gd = denseParams * eb, ge = expertParams * eb;
  // gather: ZeRO-1/2's updated rows, gathered back into the parameters
  // after the update; only the later updates run beside it (the backward
  // pass is over), as in the compiled step and DeepSpeed's.
  double perMicro = 0, sync = 0, gather = 0;
  // The compiled step gathers each updated parameter tensor on its own,
  // but for small pieces, which share a gather.
  double zeroGather =
      allGatherTime(c, gd, dpGroup) + allGatherTime(c, ge, edpGroup) +
      (cfg.dp > 1 && cfg.zero >= 1 && cfg.zero <= 2
           ? zeroGatherCount(ctx, runs, cfg, eb) * eff.collectiveOverhead
           : 0);
  if (cfg.dp > 1) {
    switch (cfg.zero) {
    case 0:
      sync = issued(allReduceTime(c, gd, dpGroup)) + issued(allReduceTime(c, ge, edpGroup));
      break;
    case 1:
      sync = issued(reduceScatterTime(c, gd, dpGroup)) +
             issued(reduceScatterTime(c, ge, edpGroup));
      gather = zeroGather;
      break;
    case 2:
      // Partitioned gradients are reduce-scattered every micro-batch.
      perMicro = issued(flatRingPassTime(c, gd, dpGroup)) +
                 issued(flatRingPassTime(c, ge, edpGroup));
      gather = zeroGather;
      break;
    default:
      // ZeRO-3 also gathers the parameters in forward, backward and
      // recomputation.
      perMicro = (cfg.recompute ? 4 : 3) * zero3Pass;
      break;
    }
  }
  s.zeroComm = o.overlapGradSync
                   ? std::max(0.0, perMicro - eff.overlap * s.compute)
                   : perMicro;
  double dpShard = double(cfg.dp), edpShard = double(cfg.dp / cfg.ep);
  double optimizerParams =
      cfg.zero >= 1 ? denseParams / dpShard + expertParams / edpShard
                    : denseParams + expertParams;
  s.optimizer = optimizerParams * optimizerTrafficBytes(o) / memBw;
  s.gradSync = o.overlapGradSync
                   ? std::max(0.0, sync - eff.overlap * backward) +
                         std::max(0.0, gather - eff.overlap * s.optimizer)
                   : sync + gather;

  // A weight this last stage shares with the first (a head tied to the
  // token embedding): dist-pipeline sends this stage's part of its summed
  // gradient to the first stage beside that stage's last backward pass,
  // and the whole gradient comes back after it, which this stage waits for.
  if (place.last && !place.first)
    s.gradSync += issued(sendTime(c, tiedParams * eb, place.backwardCrossesNode));

  s.perMicroBatch = s.compute + s.tpComm + s.moeComm + s.zeroComm + s.p2p;
  s.perStep = s.gradSync + s.optimizer;

  // Memory per device.
  double all = denseParams + expertParams;
  double shard = denseParams / dpShard + expertParams / edpShard;
  s.weights = (cfg.zero >= 3 ? shard : all) * eb;
  s.grads = (cfg.zero >= 2 ? shard : all) * eb;
  s.optimizerStates = (cfg.zero >= 1 ? shard : all) * optimizerStateBytes(o);
  s.workspace = recomputeWorkingSet + largestTPBuffer + 2 * (outBytes + inBytes);
  if (cfg.zero >= 3)
    s.workspace += 2 * largestLayerParams * eb; // gathered layer + prefetch
  if (cfg.dp > 1)
    s.workspace += 2 * std::min(all, 25e6) * eb; // gradient buckets
  return s;
}

BucketChoice hpc::cost::chooseBucketBytes(const ClusterSpec &c, CommGroup g, bool reduceScatter,
                                          const std::vector<GradientReady> &grads) {
  auto collective = [&](double bytes) {
    return reduceScatter ? reduceScatterTime(c, bytes, g) : allReduceTime(c, bytes, g);
  };
  struct Bucket {
    double ready = 0, needed = 0, bytes = 0;
  };
  auto simulate = [&](double cap) {
    // The greedy fill dist-bucket does.
    std::vector<Bucket> buckets;
    bool open = false;
    for (const GradientReady &r : grads) {
      if (open && (buckets.back().bytes + r.bytes > cap || r.seconds > buckets.back().needed))
        open = false;
      if (!open) {
        buckets.push_back({r.seconds, r.neededSeconds, 0});
        open = true;
      }
      Bucket &b = buckets.back();
      b.ready = std::max(b.ready, r.seconds);
      b.needed = std::min(b.needed, r.neededSeconds);
      b.bytes += r.bytes;
    }
    // The link as a queue in bucket order, the compute clock stalled by
    // every wait: events in compute time, a bucket's start before a wait
    // at the same time.
    std::vector<std::pair<double, int64_t>> events; // (time, bucket or ~bucket for a wait)
    for (size_t i = 0; i < buckets.size(); ++i) {
      events.push_back({buckets[i].ready, int64_t(i)});
      events.push_back({buckets[i].needed, ~int64_t(i)});
    }
    std::stable_sort(events.begin(), events.end(), [](const auto &a, const auto &b) {
      return a.first < b.first || (a.first == b.first && a.second >= 0 && b.second < 0);
    });
    BucketChoice out;
    out.capBytes = cap;
    out.buckets = int64_t(buckets.size());
    std::vector<double> done(buckets.size(), 0);
    double stall = 0, linkFree = 0;
    for (auto [t, e] : events) {
      if (e >= 0) {
        double seconds = collective(buckets[e].bytes) + c.efficiency.collectiveOverhead;
        linkFree = std::max(linkFree, t + stall) + seconds;
        done[e] = linkFree;
        out.linkSeconds += seconds;
      } else if (done[~e] > t + stall) {
        stall = done[~e] - t;
      }
    }
    out.exposedSeconds = stall + 2 * double(out.buckets) * c.efficiency.kernelOverhead;
    return out;
  };
  std::vector<BucketChoice> tried;
  constexpr double MiB = 1024.0 * 1024;
  for (double cap = MiB / 4; cap < kMaxBucketBytes; cap *= std::sqrt(2.0))
    tried.push_back(simulate(cap));
  tried.push_back(simulate(kMaxBucketBytes));
  double least = tried.front().exposedSeconds;
  for (const BucketChoice &b : tried)
    least = std::min(least, b.exposedSeconds);
  BucketChoice best = tried.front();
  for (const BucketChoice &b : tried)
    if (b.exposedSeconds <= least * 1.05 + 1e-4)
      best = b;
  return best;
}
