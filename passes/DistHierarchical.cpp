//===- DistHierarchical.cpp - reductions across nodes in two levels -------===//
//
// A flat ring over a group that spans nodes sends every byte of the ring
// over the network wherever a node's last member passes to the next node's
// first: on 2 nodes of 2 ranks, a ring all-reduce of S bytes puts 1.5 S on
// each node's network link. In two levels (the ranks laid node-major, the
// module's dist.ranks_per_node) the node's members first reduce-scatter
// over the node's own links, each member's 1/L part is reduced across the
// nodes among the members at the same place on each node, and the node
// all-gathers the result: S per node on the network, and the network ring
// has N, not N*L, steps. This pass marks the reductions that run so (their
// `ranks_per_node` attribute; the runtime's MpiComm runs them) and reports
// the bytes each level carries.
//
//===----------------------------------------------------------------------===//

#include "Dist/DistOps.h"
#include "hpc/CostModel/Cluster.h"
#include "hpc/CostModel/CostModel.h"
#include "hpc/Passes.h"

#include "llvm/Support/FormatVariadic.h"

namespace hpc {
#define GEN_PASS_DEF_DISTHIERARCHICAL
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

struct DistHierarchical : hpc::impl::DistHierarchicalBase<DistHierarchical> {
  using DistHierarchicalBase::DistHierarchicalBase;

  /// Whether the cost model of `cluster` predicts two levels faster than
  /// the flat ring for a reduction of `bytes` (the operand) over a group
  /// of `levels`; `scatter`: a reduce-scatter, which also packs its
  /// operand by node once (a copy at memory bandwidth).
  static bool twoLevelsPay(const hpc::cost::ClusterSpec &cluster, double bytes, bool scatter,
                           TwoLevels levels) {
    hpc::cost::CommGroup g{levels.nodes * levels.perNode, levels.perNode};
    double flat = hpc::cost::flatRingPassTime(cluster, bytes, g);
    if (scatter) {
      double pack = 2 * bytes / (cluster.device.memoryBandwidth * cluster.efficiency.memory);
      return hpc::cost::reduceScatterTime(cluster, bytes, g) + pack < flat;
    }
    return hpc::cost::allReduceRingTime(cluster, bytes, g) < 2 * flat;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode != "auto" && mode != "on" && mode != "off") {
      module.emitError() << "dist-hierarchical: mode '" << mode
                         << "' is not one of auto, on, off";
      return signalPassFailure();
    }
    auto perNodeAttr = module->getAttrOfType<IntegerAttr>("dist.ranks_per_node");
    if (!perNodeAttr) {
      if (mode == "on") {
        module.emitError() << "dist-hierarchical: two-level reductions need the ranks laid "
                              "on nodes (the module's dist.ranks_per_node; compile with "
                              "--cluster)";
        return signalPassFailure();
      }
      return;
    }
    int64_t perNode = perNodeAttr.getInt();
    hpc::cost::ClusterSpec clusterSpec;
    bool haveCluster = !cluster.empty();
    if (haveCluster) {
      std::string error;
      if (!hpc::cost::parseClusterSpec(cluster, clusterSpec, error)) {
        module.emitError() << "dist-hierarchical: " << error;
        return signalPassFailure();
      }
    }
    SentBytes flat = bytesSentByAllRanksIn(module, perNode);
    int64_t spanning = 0, made = 0;
    Builder b(&getContext());
    module.walk([&](Operation *op) {
      if (!isa<AllReduceOp, AllReduceStartOp, ReduceScatterOp, ReduceScatterStartOp>(op))
        return;
      MeshAttr mesh = lookupMesh(op);
      auto axes = op->getAttrOfType<ArrayAttr>("axes");
      std::optional<TwoLevels> levels = twoLevels(mesh, axisNames(axes), perNode);
      if (!levels)
        return;
      ++spanning;
      if (op->hasAttr("ranks_per_node")) {
        ++made;
        return;
      }
      bool scatter = isa<ReduceScatterOp, ReduceScatterStartOp>(op);
      // Without a cluster's figures, two levels wherever they apply: the
      // node's own links carry what the network no longer does.
      bool take = mode == "on" ||
                  (mode == "auto" &&
                   (!haveCluster ||
                    twoLevelsPay(clusterSpec, double(bytesOf(op->getOperand(0).getType())),
                                 scatter, *levels)));
      if (!take)
        return;
      op->setAttr("ranks_per_node", b.getI64IntegerAttr(perNode));
      ++made;
    });
    SentBytes now = bytesSentByAllRanksIn(module, perNode);
    llvm::errs() << llvm::formatv(
        "dist-hierarchical: {0} of {1} reductions across nodes in two levels (nodes of {2} "
        "ranks); per step the ranks send {3} bytes within nodes and {4} across nodes (flat: "
        "{5} across)\n",
        made, spanning, perNode, now.total - now.acrossNodes, now.acrossNodes,
        flat.acrossNodes);
    twoLevelReductions = made;
    auto i64 = IntegerType::get(&getContext(), 64);
    module->setAttr("dist.bytes_across_nodes", IntegerAttr::get(i64, now.acrossNodes));
    module->setAttr("dist.bytes_within_nodes",
                    IntegerAttr::get(i64, now.total - now.acrossNodes));
    if (module->hasAttr("dist.bytes_per_rank"))
      module->setAttr("dist.bytes_per_rank",
                      IntegerAttr::get(i64, bytesSentByRankZeroIn(module)));
  }
};

} // namespace
