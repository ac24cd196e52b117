//===- HPCShardInterface.cpp - upstream ShardingInterface on hpc ops ------===//
//
// Upstream MLIR's shard dialect propagates and partitions through ops that
// implement shard::ShardingInterface: loop iterators plus one affine
// indexing map per operand and result, as a linalg.generic has them. An hpc
// ShardingRule carries the same information in factor form, so one model
// serves every hpc op:
//   - each factor is a loop (reduction factors are reduction loops, summed);
//   - a dimension that maps to no factor gets a loop of its own;
//   - loops that must not split (a factor that needs replication, a
//     dimension without a factor, a size the group does not divide) are
//     dropped from every sharding option, so upstream resharding gathers
//     those dimensions instead.
// Partitioning clones the op on its local operands, rewrites its shape
// attributes, checks the inferred local result type against the one the
// sharding implies, and finishes a split reduction with shard.all_reduce
// (a gemm's C is added once, after it). Weights and constants are computed
// whole and sliced with shard.all_slice, as dist-partition does.
//
//===----------------------------------------------------------------------===//

#include "HPC/HPCOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
namespace shd = mlir::shard;

namespace {

/// The loop form of an op's sharding rule.
struct Loops {
  SmallVector<utils::IteratorType> types;
  SmallVector<int64_t> sizes;
  SmallVector<bool> splittable;
  /// Operands first, then results.
  SmallVector<AffineMap> maps;
};

Loops loopsOf(Operation *op) {
  hpc::ShardingRule rule = cast<hpc::ShardingRuleInterface>(op).getShardingRule();
  Loops l;
  for (const auto &f : rule.factors) {
    l.types.push_back(f.kind == hpc::FactorKind::Reduction ? utils::IteratorType::reduction
                                                           : utils::IteratorType::parallel);
    l.sizes.push_back(f.size);
    l.splittable.push_back(f.kind != hpc::FactorKind::NeedsReplication);
  }
  SmallVector<SmallVector<int64_t>> loopsPerValue;
  auto add = [&](ValueRange values, ArrayRef<SmallVector<int64_t>> dims) {
    for (auto [v, ds] : llvm::zip_equal(values, dims)) {
      ArrayRef<int64_t> shape = cast<RankedTensorType>(v.getType()).getShape();
      SmallVector<int64_t> loops;
      for (auto [d, factor] : llvm::enumerate(ds)) {
        int64_t f = factor;
        if (f < 0) {
          f = l.types.size();
          l.types.push_back(utils::IteratorType::parallel);
          l.sizes.push_back(shape[d]);
          l.splittable.push_back(false);
        }
        loops.push_back(f);
      }
      loopsPerValue.push_back(loops);
    }
  };
  add(op->getOperands(), rule.operandDims);
  add(op->getResults(), rule.resultDims);
  MLIRContext *ctx = op->getContext();
  for (const auto &loops : loopsPerValue) {
    SmallVector<AffineExpr> exprs;
    for (int64_t f : loops)
      exprs.push_back(getAffineDimExpr(f, ctx));
    l.maps.push_back(AffineMap::get(l.types.size(), 0, exprs, ctx));
  }
  return l;
}

FlatSymbolRefAttr gridOf(ArrayRef<shd::Sharding> operands, ArrayRef<shd::Sharding> results) {
  for (ArrayRef<shd::Sharding> list : {operands, results})
    for (const shd::Sharding &s : list)
      if (s && s.getGridAttr())
        return s.getGridAttr();
  return {};
}

LogicalResult partitionHPCOp(Operation *op, ArrayRef<shd::Sharding> operandShardings,
                             ArrayRef<shd::Sharding> resultShardings, IRMapping &map,
                             SymbolTableCollection &symbols, OpBuilder &b) {
  Location loc = op->getLoc();
  FlatSymbolRefAttr gridName = gridOf(operandShardings, resultShardings);
  shd::GridOp grid = gridName ? shd::getGridOrNull(op, gridName, symbols) : nullptr;
  Operation *local = b.clone(*op, map);
  if (!grid)
    return success(); // no annotations: runs whole

  SmallVector<Type> expected;
  for (auto [result, sharding] : llvm::zip_equal(op->getResults(), resultShardings))
    expected.push_back(sharding ? shd::shardType(result.getType(), grid, sharding)
                                : result.getType());

  // Weights and constants: computed whole, each rank keeps its piece.
  if (op->getNumOperands() == 0) {
    for (auto [r, sharding] : llvm::enumerate(resultShardings)) {
      Value v = local->getResult(r);
      if (sharding)
        for (auto [d, axes] : llvm::enumerate(sharding.getSplitAxes()))
          if (!axes.empty())
            v = shd::AllSliceOp::create(b, loc, v, grid, axes.asArrayRef(), d);
      map.map(op->getResult(r), v);
    }
    return success();
  }

  Loops l = loopsOf(op);
  shd::ShardingArray loopAxes = shd::getGridAxisAssignmentForLoopIterators(
      operandShardings, resultShardings, l.types, l.maps);
  SmallVector<shd::GridAxis> reductionAxes = shd::getReductionGridAxes(l.types, loopAxes);

  auto gemm = dyn_cast<hpc::GemmOp>(op);
  Value gemmC;
  if (gemm && gemm.getC() && !reductionAxes.empty()) {
    gemmC = local->getOperand(2);
    local->eraseOperand(2);
  }
  if (!expected.empty())
    hpc::setLocalResultShape(local, cast<ShapedType>(expected[0]).getShape());
  SmallVector<Type> inferred;
  auto infer = dyn_cast<InferTypeOpInterface>(local);
  if (!infer || failed(infer.inferReturnTypes(op->getContext(), loc, local->getOperands(),
                                              local->getRawDictionaryAttrs(),
                                              local->getPropertiesStorage(),
                                              local->getRegions(), inferred)))
    return op->emitOpError("cannot compute its local result types");
  for (auto [r, type] : llvm::enumerate(inferred)) {
    if (type != expected[r])
      return op->emitOpError("local result type ")
             << type << " differs from the sharded type " << expected[r];
    local->getResult(r).setType(type);
  }
  for (auto [r, result] : llvm::enumerate(local->getResults())) {
    Value v = result;
    if (!reductionAxes.empty())
      v = shd::AllReduceOp::create(b, loc, v.getType(), grid.getSymName(), reductionAxes, v,
                                   shd::ReductionKind::Sum);
    if (gemmC)
      v = hpc::addGemmBias(b, loc, gemm, v, gemmC);
    map.map(op->getResult(r), v);
  }
  return success();
}

template <typename Op>
struct HPCShardingModel
    : shd::ShardingInterface::ExternalModel<HPCShardingModel<Op>, Op> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return loopsOf(op).types;
  }

  SmallVector<shd::ReductionKind> getReductionLoopIteratorKinds(Operation *op) const {
    SmallVector<shd::ReductionKind> kinds;
    for (utils::IteratorType t : loopsOf(op).types)
      if (t == utils::IteratorType::reduction)
        kinds.push_back(shd::ReductionKind::Sum);
    return kinds;
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const { return loopsOf(op).maps; }

  FailureOr<shd::ShardingOption> getShardingOption(Operation *op,
                                                   ArrayRef<shd::Sharding> operandShardings,
                                                   ArrayRef<shd::Sharding> resultShardings) const {
    FailureOr<shd::ShardingOption> option =
        shd::detail::defaultGetShardingOption(op, operandShardings, resultShardings);
    if (failed(option) || option->empty || !option->grid)
      return option;
    auto grid = SymbolTable::lookupNearestSymbolFrom<shd::GridOp>(op, option->grid);
    Loops l = loopsOf(op);
    for (auto [i, axes] : llvm::enumerate(option->shardingArray)) {
      if (axes.empty())
        continue;
      int64_t g = grid ? shd::collectiveProcessGroupSize(axes, grid) : 0;
      if (!l.splittable[i] || g <= 0 || l.sizes[i] % g != 0)
        axes.clear();
    }
    shd::removeTrailingEmptySubArray(option->shardingArray);
    return option;
  }

  LogicalResult partition(Operation *op, ArrayRef<Value>, ArrayRef<shd::Sharding> operandShardings,
                          ArrayRef<shd::Sharding> resultShardings, IRMapping &map,
                          SymbolTableCollection &symbols, OpBuilder &b) const {
    return partitionHPCOp(op, operandShardings, resultShardings, map, symbols, b);
  }
};

template <typename... Ops>
void attachModels(MLIRContext *ctx) {
  (
      [&] {
        if constexpr (Ops::template hasTrait<hpc::ShardingRuleInterface::Trait>())
          Ops::template attachInterface<HPCShardingModel<Ops>>(*ctx);
      }(),
      ...);
}

} // namespace

void hpc::registerShardingInterfaceModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, hpc::HPCDialect *) {
    attachModels<
#define GET_OP_LIST
#include "HPC/HPCOps.cpp.inc"
        >(ctx);
  });
}
