//===- DistCompress.cpp - gradient reductions compressed across nodes -----===//
//
// The network between nodes is the scarce link of a data-parallel step: in
// two levels (dist-hierarchical) each node still sends its whole gradient
// across, once. This pass gives the gradient reductions whose cross-node
// hop is their own a codec (#dist.int8_block: 1 byte a value and one f32
// scale a block, 0.254x of f32 at 256-value blocks) and, with error
// feedback, the state that carries each rank's rounding error into the
// next step, so that the compressed gradients sum to the true ones over
// time (1-bit Adam's and ZeRO++'s argument). The runtime's MpiComm runs
// the codec; the bytes are counted by hpc::dist::bytesSentByRank, as the
// runtime sends them.
//
//===----------------------------------------------------------------------===//

#include "Dist/DistOps.h"
#include "HPC/HPCOps.h"
#include "hpc/CostModel/Cluster.h"
#include "hpc/CostModel/CostModel.h"
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace hpc {
#define GEN_PASS_DEF_DISTCOMPRESS
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

/// Whether `v` reaches an optimizer update as its gradient through ops
/// that only move, split or scale it (a bucket's split, reshapes, the
/// clipping product): then its reduction is a gradient's, which error
/// feedback may round (a loss or a norm must stay exact).
bool reachesUpdateAsGradient(Value v, llvm::SmallPtrSetImpl<Operation *> &seen) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<hpc::SGDUpdateOp, hpc::AdamWUpdateOp>(user) && use.getOperandNumber() == 1)
      return true;
    if (!isa<hpc::SplitOp, hpc::ReshapeOp, hpc::TransposeOp, hpc::SliceOp, hpc::MulOp,
             hpc::ConcatOp, AllGatherOp, WaitOp>(user) ||
        !seen.insert(user).second)
      continue;
    for (Value r : user->getResults())
      if (reachesUpdateAsGradient(r, seen))
        return true;
  }
  return false;
}

struct DistCompress : hpc::impl::DistCompressBase<DistCompress> {
  using DistCompressBase::DistCompressBase;

  /// Why `op` cannot be compressed ("" when it can): its values, and its
  /// cross-node hop with `perNode` ranks a node (0: no nodes known).
  static std::string notCompressible(Operation *op, int64_t perNode, int64_t blockSize) {
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    auto kind = op->getAttrOfType<ReductionKindAttr>("reduction").getValue();
    if (!type.getElementType().isF32())
      return "not f32";
    if (kind != ReductionKind::sum && kind != ReductionKind::avg)
      return "not a sum";
    if (op->getAttr("compression"))
      return "already compressed";
    if (type.getNumElements() < blockSize)
      return "smaller than a block";
    llvm::SmallPtrSet<Operation *, 16> seen;
    if (!reachesUpdateAsGradient(op->getResult(0), seen))
      return "not a gradient";
    if (perNode <= 0 || op->hasAttr("ranks_per_node"))
      return "";
    // A flat reduction: its ring is the cross-node hop only when no two
    // members share a node.
    MeshAttr mesh = lookupMesh(op);
    SmallVector<int64_t> axes;
    for (StringRef a : axisNames(op->getAttrOfType<ArrayAttr>("axes")))
      axes.push_back(mesh.axisIndex(a));
    for (int64_t r = 0, n = mesh.numDevices(); r < n; ++r) {
      SmallVector<int64_t> members = groupWorldRanks(mesh, axes, r);
      llvm::SmallDenseSet<int64_t> nodes;
      for (int64_t w : members)
        if (!nodes.insert(w / perNode).second)
          return "flat over ranks that share a node (compress after dist-hierarchical)";
      if (nodes.size() < 2)
        return "within one node";
    }
    return "";
  }

  /// Whether any rank sends some of `op`'s bytes to another node.
  static bool crossesNodes(Operation *op, int64_t perNode) {
    for (int64_t r = 0, n = lookupMesh(op).numDevices(); r < n; ++r)
      if (bytesSentByRank(op, r, perNode).acrossNodes > 0)
        return true;
    return false;
  }

  /// Link time (seconds) of `bytes` across nodes in `messages` messages.
  static double linkTime(const hpc::cost::ClusterSpec &c, double bytes, int64_t messages) {
    if (bytes <= 0)
      return 0;
    return hpc::cost::sendTime(c, bytes, true) + double(messages - 1) * c.interNode.latency;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode != "auto" && mode != "none" && mode != "int8") {
      module.emitError() << "dist-compress: mode '" << mode
                         << "' is not one of auto, none, int8";
      return signalPassFailure();
    }
    if (block < 1 || block > (int64_t(1) << 24)) {
      module.emitError() << "dist-compress: block " << block << " is not in [1, 16777216]";
      return signalPassFailure();
    }
    hpc::cost::ClusterSpec clusterSpec;
    bool haveCluster = !cluster.empty();
    if (haveCluster) {
      std::string error;
      if (!hpc::cost::parseClusterSpec(cluster, clusterSpec, error)) {
        module.emitError() << "dist-compress: " << error;
        return signalPassFailure();
      }
    }
    auto perNodeAttr = module->getAttrOfType<IntegerAttr>("dist.ranks_per_node");
    int64_t perNode = perNodeAttr ? perNodeAttr.getInt() : 0;
    // With no nodes known every reduction's group is its hop: count its
    // bytes "across" as if every rank were a node.
    int64_t countPerNode = perNode > 0 ? perNode : 1;
    SentBytes before = bytesSentByAllRanksIn(module, countPerNode);

    SmallVector<Operation *> candidates;
    int64_t reductions = 0;
    std::string firstReason;
    module.walk([&](Operation *op) {
      if (!isa<AllReduceOp, ReduceScatterOp>(op))
        return;
      if (!crossesNodes(op, countPerNode))
        return;
      ++reductions;
      std::string why = notCompressible(op, perNode, block);
      if (why.empty())
        candidates.push_back(op);
      else if (firstReason.empty())
        firstReason = why;
    });
    if (mode == "int8" && candidates.empty()) {
      module.emitError() << "dist-compress: --compress=int8 found no gradient reduction across "
                            "nodes to compress ("
                         << (reductions ? "the first: " + firstReason
                                        : std::string("the program reduces nothing across "
                                                      "nodes: compile a train step with a "
                                                      "dp axis of the mesh on several nodes"))
                         << ")";
      return signalPassFailure();
    }

    Builder b(&getContext());
    auto codec = Int8BlockAttr::get(&getContext(), block);
    double compressedTime = 0, uncompressedTime = 0, codecTime = 0;
    int64_t feedbackBytes = 0, made = 0;
    std::string declined;
    for (Operation *op : candidates) {
      SentBytes flat = bytesSentByRank(op, 0, countPerNode);
      int64_t messages = 0;
      {
        MeshAttr mesh = lookupMesh(op);
        std::optional<uint64_t> p;
        if (auto a = op->getAttrOfType<IntegerAttr>("ranks_per_node"))
          p = a.getInt();
        std::optional<TwoLevels> levels =
            p ? twoLevels(mesh, axisNames(op->getAttrOfType<ArrayAttr>("axes")), int64_t(*p))
              : std::nullopt;
        int64_t G = levels ? levels->nodes
                           : groupSize(mesh, axisNames(op->getAttrOfType<ArrayAttr>("axes")));
        messages = (isa<AllReduceOp>(op) ? 2 : 1) * (G - 1);
      }
      op->setAttr("compression", codec);
      SentBytes squeezed = bytesSentByRank(op, 0, countPerNode);
      // The codec's memory traffic per value of the hop: the residual read
      // and written, the value read, its int8 written, the pieces decoded
      // and summed, and the same again for an all-reduce's gather.
      int64_t hopValues = errorFeedbackElements(op);
      double codecSeconds =
          haveCluster ? 30.0 * double(hopValues) /
                            (clusterSpec.device.memoryBandwidth * clusterSpec.efficiency.memory)
                      : 0;
      double before = haveCluster ? linkTime(clusterSpec, double(flat.acrossNodes), messages) : 0;
      double after =
          haveCluster ? linkTime(clusterSpec, double(squeezed.acrossNodes), messages) : 0;
      bool take = mode == "int8" || (mode == "auto" && haveCluster && after + codecSeconds < before);
      if (!take) {
        op->removeAttr("compression");
        if (declined.empty())
          declined = mode == "none"     ? "--compress=none"
                     : !haveCluster     ? "auto without --cluster: no link figures to weigh the codec against"
                                        : "the cost model predicts the codec slower than the link time it saves";
        continue;
      }
      ++made;
      uncompressedTime += before;
      compressedTime += after;
      codecTime += codecSeconds;
      if (!errorFeedback)
        continue;
      // The residual: this rank's own, planned in the state region.
      auto func = op->getParentOfType<func::FuncOp>();
      OpBuilder vb(&func.getBody().front(), func.getBody().front().begin());
      auto type = RankedTensorType::get({hopValues}, b.getF32Type());
      Value state = hpc::VariableOp::create(
          vb, op->getLoc(), type, vb.getStringAttr("dist.error_feedback." + std::to_string(made - 1)),
          ElementsAttr(), vb.getStringAttr("error_feedback"));
      if (auto ar = dyn_cast<AllReduceOp>(op))
        ar.getFeedbackMutable().assign(state);
      else
        cast<ReduceScatterOp>(op).getFeedbackMutable().assign(state);
      feedbackBytes += 4 * hopValues;
    }
    compressedReductions = made;
    SentBytes now = bytesSentByAllRanksIn(module, countPerNode);
    std::string why = made                ? ""
                      : !declined.empty() ? " (" + declined + ")"
                      : reductions        ? " (the first: " + firstReason + ")"
                                          : " (nothing is reduced across nodes)";
    llvm::errs() << llvm::formatv(
        "dist-compress: {0} of {1} reductions across nodes compressed (int8 blocks "
        "of {2}, error feedback {3}){4}; per step the ranks send {5} bytes across nodes "
        "(uncompressed: {6}), error-feedback state {7} bytes a rank",
        made, reductions, block.getValue(), errorFeedback ? "on" : "off", why, now.acrossNodes,
        before.acrossNodes, feedbackBytes);
    if (haveCluster && made)
      llvm::errs() << llvm::formatv("; predicted hop time {0:E2} s compressed vs {1:E2} s "
                                    "(codec {2:E2} s)",
                                    compressedTime + codecTime, uncompressedTime, codecTime);
    llvm::errs() << "\n";
    auto i64 = IntegerType::get(&getContext(), 64);
    if (perNode > 0) {
      module->setAttr("dist.bytes_across_nodes", IntegerAttr::get(i64, now.acrossNodes));
      module->setAttr("dist.bytes_within_nodes",
                      IntegerAttr::get(i64, now.total - now.acrossNodes));
    }
    module->setAttr("dist.error_feedback_bytes", IntegerAttr::get(i64, feedbackBytes));
    if (module->hasAttr("dist.bytes_per_rank"))
      module->setAttr("dist.bytes_per_rank", IntegerAttr::get(i64, bytesSentByRankZeroIn(module)));
  }
};

} // namespace
