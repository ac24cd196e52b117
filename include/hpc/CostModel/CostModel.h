//===- CostModel.h - analytic cost of a training step ------------*- C++ -*-===//
//
// The cost model of hybrid-parallel training. A model is a sequence of layers
// (extracted from the hpc IR by ModelExtract.h, or built directly by tests);
// each layer carries per-sample figures: its matrix products, the memory
// traffic of its other kernels, parameters, activations saved for backward,
// and the tensor-parallel / expert-parallel communication it implies. A
// pipeline stage is a run of consecutive layers on `dp * tp` devices with one
// StageConfig; evaluateStage() gives its time per micro-batch, its time once
// per step, and its memory per device.
//
// The formulas (roofline GEMMs, alpha-beta collectives on a two-level
// topology, ZeRO memory, Korthikanti-style activation memory, 1F1B) are
// documented in docs/cost-model.md. Plain C++, no MLIR headers.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COSTMODEL_COSTMODEL_H
#define HPC_COSTMODEL_COSTMODEL_H

#include "hpc/CostModel/Cluster.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hpc {
namespace cost {

/// One matrix product of a layer, with per-sample dimensions
/// `[batch, m, k] x [batch, k, n]`.
struct Gemm {
  /// Which dimension tensor parallelism splits: none (replicated), the
  /// output columns (column-parallel linear), the reduction (row-parallel
  /// linear), or the batch (attention heads).
  enum class Split { None, N, K, Batch };
  double batch = 1, m = 1, k = 1, n = 1;
  /// The sample count multiplies `batch` (an activation x activation product
  /// such as attention scores) instead of `m` (a product with a weight).
  bool scalesBatch = false;
  Split split = Split::None;
  /// An expert-batched product: `batch` counts experts, which expert
  /// parallelism spreads over devices.
  bool expert = false;

  double flops() const { return 2 * batch * m * k * n; }
};

/// ZeRO-1/2's gathers of the updated rows share a gather while their pieces
/// (one rank's rows) add up to at most this many bytes (dist-bucket, without
/// --bucket-mb); a larger piece is gathered alone.
inline constexpr double kZeroGatherBucketBytes = 64 * 1024;

/// One parameter tensor of a layer.
struct ParamTensor {
  double elems = 0;
  bool tpSharded = false; ///< split over the TP group
  bool expert = false;    ///< an expert weight (split by ep)
  /// Of a tpSharded tensor: held whole on every TP rank in this compiler's
  /// step (a fused QKV projection's, a looked-up embedding's), though
  /// Megatron-LM holds its piece (TrainOptions::compiledLayout).
  bool tpWhole = false;
};

enum class LayerKind { Embedding, Block, MoE, Head, Other };
const char *layerKindName(LayerKind k);

/// One layer; every figure is per sample and for the forward pass, counted
/// in elements (the training dtype gives bytes).
struct Layer {
  std::string name;
  LayerKind kind = LayerKind::Other;
  /// Layers with equal classId have equal figures (repeated blocks); the
  /// search evaluates a run of them once.
  int classId = 0;
  std::vector<Gemm> gemms;
  double otherFlops = 0;             ///< FLOPs of the non-GEMM kernels
  double otherElemsReplicated = 0;   ///< elements read+written by non-GEMM
  double otherElemsSharded = 0;      ///< kernels; sharded ones split by tp
  double kernels = 0;                ///< kernel launches (forward)
  double paramsReplicated = 0;       ///< parameter elements every TP rank holds
  double paramsSharded = 0;          ///< split over the TP group
  double paramsExpertReplicated = 0; ///< expert weights, split by ep
  double paramsExpertSharded = 0;    ///< expert weights, split by ep and tp
  /// Parameter elements an earlier layer holds and this one reads too (a
  /// head tied to the token embedding); counted there, not in params().
  double paramsTied = 0;
  double savedReplicated = 0;        ///< activations kept for backward
  double savedSharded = 0;           ///<   (sharded: split by tp)
  double savedFp32 = 0;              ///< kept in fp32 (loss inputs), split by tp
  double inputElems = 0;             ///< the activation entering the layer
  double outputElems = 0;            ///< the activation leaving it
  double tpForwardAllReduce = 0;     ///< elements all-reduced over TP, forward
  double tpBackwardAllReduce = 0;    ///< and backward
  double tpForwardCollectives = 0;   ///< how many collectives those are
  double tpBackwardCollectives = 0;  ///<   (each pays the collective overhead)
  double paramTensors = 0;           ///< parameter tensors the layer holds
  /// Where this compiler's step differs from Megatron-LM's layout
  /// (TrainOptions::compiledLayout): dist-partition holds a parameter whole
  /// over TP unless its products all read it in one split, so a fused QKV
  /// projection (read through a three-way split) and an embedding (a lookup
  /// needs its table whole) stay whole, and the gradients of those its
  /// products compute in pieces are gathered over TP every micro-batch.
  double paramsTpWhole = 0;          ///< of paramsSharded: held whole
  double tpGradGatherElems = 0;      ///< parameter elements gathered over TP
  double tpGradGathers = 0;          ///<   in this many gathers
  /// Elements per sample of a TP-split graph result (the logits) that the
  /// compiled step gathers whole for the loss (Megatron-LM's
  /// vocabulary-parallel cross-entropy does not).
  double tpResultGather = 0;
  /// Elements per sample of a vocabulary-parallel lookup's all-reduce
  /// (Megatron-LM's; the compiled step looks up in the whole table).
  double tpLookupAllReduce = 0;
  double tpLookupCollectives = 0;
  /// Those tensors in the order the layer first reads them (extracted
  /// layers; a layer built by hand may give only the count).
  std::vector<ParamTensor> tensors;
  double moeAllToAll = 0;            ///< elements of one dispatch all-to-all
  int64_t numExperts = 0;            ///< > 0 for a mixture-of-experts layer
  int64_t tpDivisor = 0;             ///< tp must divide it (0: any tp)

  double gemmFlops() const;
  double params() const {
    return paramsReplicated + paramsSharded + paramsExpertReplicated +
           paramsExpertSharded;
  }
};

/// A model as the search sees it.
struct Model {
  std::string name;
  std::vector<Layer> layers;
  double tokensPerSample = 1; ///< sequence length (1 for non-sequence models)

  double params() const;
  double gemmFlopsPerSample() const;
  /// FLOPs per sample as Megatron-LM counts them for its TFLOP/s figures:
  /// forward + backward + recomputed forward of the GEMMs of every layer
  /// (4x forward), except the output head which is not recomputed (3x). For a
  /// GPT this is 96 s l h^2 (1 + s/(6h) + V/(16 l h)).
  double megatronFlopsPerSample() const;
};

enum class Optimizer { Adam, SGD };

/// What is trained and how.
struct TrainOptions {
  int64_t globalBatch = 1;       ///< samples per optimizer step
  DType dtype = DType::BF16;     ///< compute and storage type of activations
  Optimizer optimizer = Optimizer::Adam;
  bool overlapGradSync = true;   ///< gradient sync may hide under backward
  /// Price this compiler's step (Layer::paramsTpWhole and the fields after
  /// it) rather than Megatron-LM's layout, which the published runs used.
  bool compiledLayout = false;
  double memoryLimit = 0;        ///< usable bytes per device (0: the device's)
};

/// The per-stage choices. `dp * tp` devices run the stage; sp is Megatron
/// sequence parallelism over the TP group; ep (expert parallelism) splits the
/// DP group's ranks over experts; zero is the ZeRO stage (0-3).
struct StageConfig {
  int64_t dp = 1, tp = 1, ep = 1;
  int zero = 0;
  bool sp = false, recompute = false;

  bool operator==(const StageConfig &o) const {
    return dp == o.dp && tp == o.tp && ep == o.ep && zero == o.zero &&
           sp == o.sp && recompute == o.recompute;
  }
};

/// Where a stage sits in the pipeline, as far as its cost depends on it.
struct StagePlace {
  bool first = true, last = true;
  bool forwardCrossesNode = false;  ///< send to the next stage leaves the node
  bool backwardCrossesNode = false; ///< send to the previous stage leaves it
};

/// Cost of one stage: time per micro-batch, time once per step, memory.
struct StageCost {
  // Per micro-batch, seconds.
  double compute = 0;  ///< forward + backward (+ recomputation) kernels
  double weightGrad = 0; ///< of compute: the weight gradients (ZB-H1's W)
  double tpComm = 0;   ///< tensor/sequence-parallel collectives (not hidden)
  double moeComm = 0;  ///< expert-parallel all-to-alls
  double zeroComm = 0; ///< ZeRO-2/3 per-micro-batch collectives, exposed part
  double p2p = 0;      ///< pipeline sends
  double perMicroBatch = 0;
  // Once per step, seconds.
  double gradSync = 0;  ///< exposed data-parallel gradient synchronization
  double optimizer = 0; ///< the optimizer update
  double perStep = 0;
  // Memory per device, bytes.
  double weights = 0, grads = 0, optimizerStates = 0;
  double activationsPerMicroBatch = 0; ///< times the micro-batches in flight
  double workspace = 0; ///< recomputation working set, communication buffers
  double fixedMemory() const {
    return weights + grads + optimizerStates + workspace;
  }
  double memory(double inFlight) const {
    return fixedMemory() + activationsPerMicroBatch * inFlight;
  }
};

/// `count` consecutive layers of the class of `layers[layer]`.
struct LayerRun {
  int layer = 0;
  int count = 1;
};

/// Members of a communication group and how many of them share a node.
struct CommGroup {
  int64_t size = 1;
  int64_t perNode = 1;
};

/// Collective times (seconds) on `cluster`, alpha-beta per level: the best of
/// a hierarchical ring (intra-node reduce-scatter, inter-node ring,
/// intra-node all-gather) and a tree. `bytes` is the full buffer.
double allReduceTime(const ClusterSpec &cluster, double bytes, CommGroup g);
double allReduceRingTime(const ClusterSpec &cluster, double bytes, CommGroup g);
double allReduceTreeTime(const ClusterSpec &cluster, double bytes, CommGroup g);
double reduceScatterTime(const ClusterSpec &cluster, double bytes, CommGroup g);
double allGatherTime(const ClusterSpec &cluster, double bytes, CommGroup g);
/// `bytes` is what one device holds before the exchange.
double allToAllTime(const ClusterSpec &cluster, double bytes, CommGroup g);
double sendTime(const ClusterSpec &cluster, double bytes, bool crossesNode);
/// One pass of a flat ring (reduce-scatter or all-gather) that does not use
/// the hierarchy: every member moves (g-1)/g of the buffer over the slowest
/// link it spans. How ZeRO's per-micro-batch parameter gathers and gradient
/// reduce-scatters behave (docs/cost-model.md).
double flatRingPassTime(const ClusterSpec &cluster, double bytes, CommGroup g);

/// One gradient collective of a train step, in the order the backward pass
/// computes its operand: when that is and when its result is first needed
/// (seconds of compute into the step), and how big it is (bytes of the
/// full buffer).
struct GradientReady {
  double seconds = 0;
  double neededSeconds = 0;
  double bytes = 0;
};

/// The largest gradient bucket dist-bucket makes (PyTorch DDP's default).
constexpr double kMaxBucketBytes = 25 * 1024.0 * 1024.0;

/// A gradient bucket size and what the model predicts for it.
struct BucketChoice {
  double capBytes = 0;       ///< most bytes of one bucket
  int64_t buckets = 0;       ///< buckets the gradients fill
  double linkSeconds = 0;    ///< their collectives back to back
  double exposedSeconds = 0; ///< the compute thread waiting for them
};

/// The bucket size (from 256 KiB to 25 MiB, in steps of sqrt(2)) that
/// leaves the least communication exposed when `grads` are fused greedily
/// in their order into buckets of at most that size (as dist-bucket does:
/// a bucket also closes before a gradient ready after one of its members
/// is needed). Each bucket's all-reduce (reduce-scatter when
/// `reduceScatter`) over `g` starts once its last gradient is ready and
/// the link is free; the compute stalls where a bucket is needed before it
/// is done, and the stall delays everything after it. Each bucket also
/// costs two kernels (the concat and the split). Of sizes within 5% (or
/// 0.1 ms) of the least, the largest: fewer messages for what the model
/// leaves out.
BucketChoice chooseBucketBytes(const ClusterSpec &cluster, CommGroup g, bool reduceScatter,
                               const std::vector<GradientReady> &grads);

/// The groups of a stage of `dp * tp` devices placed on a contiguous,
/// aligned block, TP ranks innermost, then EP, then DP.
CommGroup tensorGroup(const ClusterSpec &c, const StageConfig &s);
CommGroup dataGroup(const ClusterSpec &c, const StageConfig &s);
CommGroup expertGroup(const ClusterSpec &c, const StageConfig &s);
CommGroup expertDataGroup(const ClusterSpec &c, const StageConfig &s);

/// Everything evaluateStage needs besides the stage itself.
struct CostContext {
  const Model *model = nullptr;
  const ClusterSpec *cluster = nullptr;
  TrainOptions options;

  double memoryLimit() const {
    return options.memoryLimit > 0 ? options.memoryLimit
                                   : cluster->device.usableMemory();
  }
};

/// Why a configuration cannot run a run of layers; nullptr when it can.
/// Checks tp against every layer's tpDivisor, ep against expert counts, and
/// that dp divides the micro-batch.
const char *stageConfigProblem(const CostContext &ctx,
                               const std::vector<LayerRun> &runs,
                               const StageConfig &cfg, int64_t microBatch);

/// Cost of running `runs` as one pipeline stage with `cfg`, micro-batches of
/// `microBatch` samples (the whole stage's, split over dp).
StageCost evaluateStage(const CostContext &ctx,
                        const std::vector<LayerRun> &runs,
                        const StageConfig &cfg, int64_t microBatch,
                        const StagePlace &place);

} // namespace cost
} // namespace hpc

#endif // HPC_COSTMODEL_COSTMODEL_H
