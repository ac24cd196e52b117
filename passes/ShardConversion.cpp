//===- ShardConversion.cpp - dist <-> upstream shard dialect --------------===//
//
// convert-dist-to-shard and convert-shard-to-dist (see Passes.td). The two
// dialects name the same things differently: a #dist.mesh names its axes,
// a shard.grid numbers them; a #dist.sharding is an attribute with partial
// axes, a shard sharding is an SSA value without; dist.annotate constrains
// a value, shard.shard annotates a definition or (annotate_for_users) a use.
//
//===----------------------------------------------------------------------===//

#include "DistSharding.h"
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace hpc {
#define GEN_PASS_DEF_CONVERTDISTTOSHARD
#define GEN_PASS_DEF_CONVERTSHARDTODIST
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;
namespace shd = mlir::shard;

namespace {

constexpr StringLiteral kGridName = "mesh";
constexpr StringLiteral kMeshAttr = "dist.mesh";

bool isRankedNonScalar(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() > 0;
}

shd::ReductionKind toShard(ReductionKind k) {
  switch (k) {
  case ReductionKind::sum:
    return shd::ReductionKind::Sum;
  case ReductionKind::max:
    return shd::ReductionKind::Max;
  case ReductionKind::min:
    return shd::ReductionKind::Min;
  case ReductionKind::prod:
    return shd::ReductionKind::Product;
  case ReductionKind::avg:
    return shd::ReductionKind::Average;
  }
  llvm_unreachable("every dist reduction has a shard counterpart");
}

std::optional<ReductionKind> toDist(shd::ReductionKind k) {
  switch (k) {
  case shd::ReductionKind::Sum:
    return ReductionKind::sum;
  case shd::ReductionKind::Max:
    return ReductionKind::max;
  case shd::ReductionKind::Min:
    return ReductionKind::min;
  case shd::ReductionKind::Product:
    return ReductionKind::prod;
  case shd::ReductionKind::Average:
    return ReductionKind::avg;
  default:
    return std::nullopt;
  }
}

//===----------------------------------------------------------------------===//
// dist -> shard
//===----------------------------------------------------------------------===//

struct DistToShard : hpc::impl::ConvertDistToShardBase<DistToShard> {
  using Base::Base;

  MeshAttr mesh;
  FlatSymbolRefAttr grid;

  SmallVector<shd::GridAxis> gridAxes(ArrayRef<std::string> names) {
    SmallVector<shd::GridAxis> axes;
    for (const std::string &n : names)
      axes.push_back(shd::GridAxis(mesh.axisIndex(n)));
    return axes;
  }
  SmallVector<shd::GridAxis> gridAxes(ArrayAttr names) {
    SmallVector<shd::GridAxis> axes;
    for (Attribute n : names)
      axes.push_back(shd::GridAxis(mesh.axisIndex(cast<StringAttr>(n).getValue())));
    return axes;
  }

  /// One shard.sharding per distinct sharding, at the top of the function.
  llvm::DenseMap<Attribute, Value> shardings;
  Block *entry = nullptr;

  /// The shard.sharding for the dimensions of `s` (partial axes dropped).
  Value shardingValue(Location loc, const Sharding &s) {
    SmallVector<shd::GridAxesAttr> split;
    for (const auto &axes : s.dims)
      split.push_back(shd::GridAxesAttr::get(&getContext(), gridAxes(axes)));
    while (split.size() > 1 && split.back().empty())
      split.pop_back();
    if (split.empty())
      split.push_back(shd::GridAxesAttr::get(&getContext(), ArrayRef<shd::GridAxis>{}));
    Attribute key = shd::GridAxesArrayAttr::get(&getContext(), split);
    Value &value = shardings[key];
    if (!value) {
      OpBuilder b = OpBuilder::atBlockBegin(entry);
      for (Operation &op : *entry)
        if (isa<shd::ShardingOp>(op))
          b.setInsertionPointAfter(&op);
      value = shd::ShardingOp::create(b, loc, grid, split).getResult();
    }
    return value;
  }

  Value annotate(OpBuilder &b, Location loc, Value v, const Sharding &s, bool forUsers) {
    return shd::ShardOp::create(b, loc, v, shardingValue(loc, s), forUsers).getResult();
  }

  /// Shardings of the definition annotations written so far.
  llvm::DenseMap<Value, Sharding> defined;

  /// Annotates the definition of `v`; every other use goes through it.
  void annotateDefinition(Value v, const Sharding &s) {
    if (!isRankedNonScalar(v))
      return;
    OpBuilder b(&getContext());
    Value sharding = shardingValue(v.getLoc(), s);
    // A graph input is annotated after the shardings at the top.
    if (isa<BlockArgument>(v))
      b.setInsertionPointAfter(sharding.getDefiningOp());
    else
      b.setInsertionPointAfterValue(v);
    Value annotated = shd::ShardOp::create(b, v.getLoc(), v, sharding, false).getResult();
    v.replaceAllUsesExcept(annotated, annotated.getDefiningOp());
    defined[annotated] = s;
  }

  /// Annotates a use of `v` with the sharding `need`. Upstream resharding
  /// takes one step per shard.shard (drop or add the last axis of one
  /// dimension, or move it), so when `v`'s definition sharding is known
  /// the use gets a chain: first drop axes until every dimension's axes are
  /// a prefix of the target's, then add the missing ones.
  Value annotateUse(OpBuilder &b, Location loc, Value v, const Sharding &need) {
    auto it = defined.find(v);
    if (it != defined.end()) {
      Sharding cur = it->second;
      cur.partial.clear();
      auto step = [&]() { v = annotate(b, loc, v, cur, /*forUsers=*/true); };
      for (size_t d = 0; d < cur.dims.size(); ++d)
        while (!llvm::ArrayRef(need.dims[d]).take_front(cur.dims[d].size())
                    .equals(cur.dims[d])) {
          cur.dims[d].pop_back();
          if (!(cur == need))
            step();
        }
      for (size_t d = 0; d < cur.dims.size(); ++d)
        while (cur.dims[d].size() < need.dims[d].size()) {
          cur.dims[d].push_back(need.dims[d][cur.dims[d].size()]);
          if (!(cur == need))
            step();
        }
    }
    return annotate(b, loc, v, need, /*forUsers=*/true);
  }

  /// The shard counterpart of a dist collective; failure (after an error)
  /// when there is none.
  FailureOr<Value> convertCollective(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Type type = op->getNumResults() ? op->getResult(0).getType() : Type();
    // Upstream shard has no codecs: a compressed reduction would silently
    // become an exact one.
    if (op->getAttr("compression"))
      return op->emitOpError("is compressed; the shard dialect has no compressed collectives"),
             failure();
    if (auto o = dyn_cast<AllReduceOp>(op))
      return Value(shd::AllReduceOp::create(b, loc, type, kGridName, gridAxes(o.getAxes()),
                                            o.getInput(), toShard(o.getReduction())));
    if (auto o = dyn_cast<ReduceScatterOp>(op))
      return Value(shd::ReduceScatterOp::create(b, loc, type, kGridName, gridAxes(o.getAxes()),
                                                o.getInput(), toShard(o.getReduction()),
                                                APInt(64, o.getDim())));
    if (auto o = dyn_cast<AllGatherOp>(op))
      return Value(shd::AllGatherOp::create(b, loc, type, kGridName, gridAxes(o.getAxes()),
                                            o.getInput(), APInt(64, o.getDim())));
    if (auto o = dyn_cast<AllToAllOp>(op))
      return Value(shd::AllToAllOp::create(b, loc, type, kGridName, gridAxes(o.getAxes()),
                                           o.getInput(), APInt(64, o.getSplitDim()),
                                           APInt(64, o.getConcatDim())));
    if (auto o = dyn_cast<AllSliceOp>(op))
      return Value(shd::AllSliceOp::create(b, loc, type, kGridName, gridAxes(o.getAxes()),
                                           o.getInput(), APInt(64, o.getDim())));
    if (auto o = dyn_cast<BroadcastOp>(op)) {
      // dist numbers the root within the group, shard gives its coordinates.
      SmallVector<shd::GridAxis> axes = gridAxes(o.getAxes());
      SmallVector<int64_t> root(axes.size());
      int64_t index = o.getRoot();
      for (int64_t i = int64_t(axes.size()) - 1; i >= 0; --i) {
        int64_t size = mesh.getSizes()[axes[i]];
        root[i] = index % size;
        index /= size;
      }
      return Value(shd::BroadcastOp::create(b, loc, type, kGridName, axes, o.getInput(), root,
                                            ValueRange{}));
    }
    op->emitOpError("has no counterpart in the shard dialect")
        << (isa<SendOp, RecvOp>(op) ? " (shard addresses peers by absolute grid position)"
                                    : "");
    return failure();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // A pass instance runs on many modules (one PassManager): nothing of the
    // last run's values may survive into this one.
    mesh = {};
    grid = {};
    shardings.clear();
    entry = nullptr;
    defined.clear();
    if (annotations != "all" && annotations != "inputs") {
      module.emitError("convert-dist-to-shard: annotations must be 'all' or 'inputs', not '")
          << annotations << "'";
      return signalPassFailure();
    }
    bool all = annotations == "all";
    // A global program carries shardings; a per-rank one (after
    // dist-partition) only collectives, which translate one to one.
    bool global = false;
    module.walk([&](Operation *op) {
      global |= isa<AnnotateOp>(op) || op->hasAttr("dist.operand_shardings");
    });
    mesh = module->getAttrOfType<MeshAttr>(kMeshAttr);
    if (!mesh) {
      module.emitError("convert-dist-to-shard needs a 'dist.mesh' module attribute "
                       "(run dist-propagate first)");
      return signalPassFailure();
    }
    if (module.lookupSymbol(kGridName)) {
      module.emitError("convert-dist-to-shard: the module already has a symbol named '")
          << kGridName << "'";
      return signalPassFailure();
    }
    OpBuilder b(ctx);
    b.setInsertionPointToStart(module.getBody());
    auto gridOp = shd::GridOp::create(b, module.getLoc(), kGridName, mesh.getSizes());
    gridOp->setAttr(kMeshAttr, mesh);
    grid = FlatSymbolRefAttr::get(ctx, kGridName);

    WalkResult walk = module.walk([&](func::FuncOp func) -> WalkResult {
      if (func.isExternal())
        return WalkResult::advance();
      Block &body = func.getBody().front();
      entry = &body;
      shardings.clear();
      defined.clear();
      // Values that enter the computation: graph inputs, and weights and
      // what is computed from them alone (ops without shardings).
      llvm::DenseSet<Value> entering;
      for (BlockArgument arg : body.getArguments()) {
        entering.insert(arg);
        if (!global)
          continue;
        annotateDefinition(arg, Sharding::replicated(
                                    isRankedNonScalar(arg)
                                        ? cast<RankedTensorType>(arg.getType()).getRank()
                                        : 0));
        for (Operation *user : arg.getUsers())
          entering.insert(user->getResult(0));
      }
      SmallVector<Operation *> ops;
      for (Operation &op : body)
        if (!isa<shd::ShardOp, shd::ShardingOp>(op))
          ops.push_back(&op);
      for (Operation *op : ops)
        if (isa<hpc::HPCDialect>(op->getDialect()) &&
            !op->hasAttr("dist.operand_shardings"))
          for (Value r : op->getResults())
            entering.insert(r);

      for (Operation *op : ops) {
        OpBuilder ob(op);
        Location loc = op->getLoc();
        if (auto a = dyn_cast<AnnotateOp>(op)) {
          Sharding s = Sharding::fromAttr(a.getSharding());
          if (!s.partial.empty()) {
            a.emitOpError("has partial axes, which shard shardings cannot express");
            return WalkResult::interrupt();
          }
          Value annotated = annotate(ob, loc, a.getInput(), s, /*forUsers=*/false);
          defined[annotated] = s;
          a.getResult().replaceAllUsesWith(annotated);
          a.erase();
          continue;
        }
        if (auto ret = dyn_cast<func::ReturnOp>(op)) {
          if (!global)
            continue;
          for (OpOperand &operand : ret->getOpOperands())
            if (isRankedNonScalar(operand.get()))
              operand.set(annotateUse(
                  ob, loc, operand.get(),
                  Sharding::replicated(cast<RankedTensorType>(operand.get().getType()).getRank())));
          continue;
        }
        if (isa<DistDialect>(op->getDialect())) {
          FailureOr<Value> converted = convertCollective(op);
          if (failed(converted))
            return WalkResult::interrupt();
          op->getResult(0).replaceAllUsesWith(*converted);
          op->erase();
          continue;
        }
        if (!global)
          continue;
        auto operandAttr = op->getAttrOfType<ArrayAttr>("dist.operand_shardings");
        auto resultAttr = op->getAttrOfType<ArrayAttr>("dist.result_shardings");
        op->removeAttr("dist.operand_shardings");
        op->removeAttr("dist.result_shardings");
        if (operandAttr && resultAttr) {
          for (OpOperand &operand : op->getOpOperands()) {
            Value v = operand.get();
            if (!isRankedNonScalar(v) || (!all && !entering.contains(v)))
              continue;
            Sharding need =
                Sharding::fromAttr(cast<ShardingAttr>(operandAttr[operand.getOperandNumber()]));
            operand.set(annotateUse(ob, loc, v, need));
          }
        }
        if (!all)
          continue;
        for (OpResult r : op->getResults()) {
          if (!isRankedNonScalar(r))
            continue;
          Sharding s = resultAttr ? Sharding::fromAttr(
                                        cast<ShardingAttr>(resultAttr[r.getResultNumber()]))
                                  : Sharding::replicated(
                                        cast<RankedTensorType>(r.getType()).getRank());
          annotateDefinition(r, s);
        }
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    module->removeAttr(kMeshAttr);
  }
};

//===----------------------------------------------------------------------===//
// shard -> dist
//===----------------------------------------------------------------------===//

struct ShardToDist : hpc::impl::ConvertShardToDistBase<ShardToDist> {
  MeshAttr mesh;

  ArrayAttr axesAttr(ArrayRef<shd::GridAxis> axes) {
    SmallVector<Attribute> names;
    for (shd::GridAxis a : axes)
      names.push_back(mesh.getNames()[a]);
    return ArrayAttr::get(&getContext(), names);
  }

  MeshAttr meshOf(shd::GridOp g) {
    if (auto m = g->getAttrOfType<MeshAttr>(kMeshAttr))
      if (m.getSizes() == g.getShape())
        return m;
    SmallVector<StringAttr> names;
    SmallVector<TopologyLevel> levels;
    for (size_t i = 0; i < g.getShape().size(); ++i) {
      names.push_back(StringAttr::get(&getContext(), "a" + std::to_string(i)));
      levels.push_back(TopologyLevel::inter_node);
    }
    return MeshAttr::get(&getContext(), names, g.getShape(), levels);
  }

  FailureOr<ShardingAttr> shardingOf(shd::ShardOp op) {
    auto def = op.getSharding().getDefiningOp<shd::ShardingOp>();
    if (!def)
      return op.emitOpError("needs its sharding from a shard.sharding op");
    if (!def.getStaticHaloSizes().empty() || !def.getDynamicHaloSizes().empty() ||
        !def.getStaticShardedDimsOffsets().empty() ||
        !def.getDynamicShardedDimsOffsets().empty())
      return op.emitOpError("has halos or explicit shard offsets, which dist shardings "
                            "cannot express");
    int64_t rank = cast<RankedTensorType>(op.getType()).getRank();
    Sharding s = Sharding::replicated(rank);
    for (auto [d, axes] : llvm::enumerate(def.getSplitAxes().getAxes())) {
      if (int64_t(d) >= rank)
        return op.emitOpError("splits dimension ") << d << " of a rank-" << rank << " tensor";
      for (shd::GridAxis a : axes.asArrayRef())
        s.dims[d].push_back(mesh.getNames()[a].str());
    }
    return s.toAttr(&getContext());
  }

  FailureOr<Value> convert(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    MLIRContext *ctx = &getContext();
    auto kind = [&](shd::ReductionKind k) -> FailureOr<ReductionKindAttr> {
      if (auto d = toDist(k))
        return ReductionKindAttr::get(ctx, *d);
      return op->emitOpError("reduction '") << shd::stringifyReductionKind(k)
                                            << "' has no dist counterpart";
    };
    auto dim = [&](const APInt &v) { return b.getI64IntegerAttr(v.getSExtValue()); };
    if (auto o = dyn_cast<shd::ShardOp>(op)) {
      auto s = shardingOf(o);
      if (failed(s))
        return failure();
      return Value(AnnotateOp::create(b, loc, o.getType(), o.getSrc(), *s));
    }
    if (auto o = dyn_cast<shd::AllReduceOp>(op)) {
      auto k = kind(o.getReduction());
      if (failed(k))
        return failure();
      return Value(AllReduceOp::create(b, loc, o.getType(), o.getInput(),
                                       axesAttr(o.getGridAxes()), *k, Attribute(),
                                       IntegerAttr(), Value()));
    }
    if (auto o = dyn_cast<shd::ReduceScatterOp>(op)) {
      auto k = kind(o.getReduction());
      if (failed(k))
        return failure();
      return Value(ReduceScatterOp::create(b, loc, o.getType(), o.getInput(),
                                           axesAttr(o.getGridAxes()), *k,
                                           dim(o.getScatterAxis()), Attribute(),
                                           IntegerAttr(), Value()));
    }
    if (auto o = dyn_cast<shd::AllGatherOp>(op))
      return Value(AllGatherOp::create(b, loc, o.getType(), o.getInput(),
                                       axesAttr(o.getGridAxes()), dim(o.getGatherAxis()),
                                       Attribute()));
    if (auto o = dyn_cast<shd::AllToAllOp>(op))
      return Value(AllToAllOp::create(b, loc, o.getType(), o.getInput(),
                                      axesAttr(o.getGridAxes()), dim(o.getSplitAxis()),
                                      dim(o.getConcatAxis()), Attribute()));
    if (auto o = dyn_cast<shd::AllSliceOp>(op))
      return Value(AllSliceOp::create(b, loc, o.getType(), o.getInput(),
                                      axesAttr(o.getGridAxes()), dim(o.getSliceAxis())));
    if (auto o = dyn_cast<shd::BroadcastOp>(op)) {
      if (!o.getRootDynamic().empty())
        return o.emitOpError("has a dynamic root, which dist cannot express");
      int64_t root = 0;
      for (auto [a, c] : llvm::zip_equal(o.getGridAxes(), o.getRoot()))
        root = root * mesh.getSizes()[a] + c;
      return Value(BroadcastOp::create(b, loc, o.getType(), o.getInput(),
                                       axesAttr(o.getGridAxes()), b.getI64IntegerAttr(root),
                                       Attribute()));
    }
    return op->emitOpError("has no counterpart in the dist dialect");
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<shd::GridOp> grids;
    module.walk([&](shd::GridOp g) { grids.push_back(g); });
    SmallVector<Operation *> shardOps;
    module.walk([&](Operation *op) {
      if (isa<shd::ShardDialect>(op->getDialect()) && !isa<shd::GridOp, shd::ShardingOp>(op))
        shardOps.push_back(op);
    });
    if (grids.empty())
      return; // shard ops verify that their grid exists: nothing to do
    if (grids.size() > 1) {
      grids[1].emitOpError("is a second grid; convert-shard-to-dist handles one per module");
      return signalPassFailure();
    }
    shd::GridOp g = grids.front();
    if (llvm::any_of(g.getShape(), ShapedType::isDynamic)) {
      g.emitOpError("has a dynamic size, which a dist mesh cannot have");
      return signalPassFailure();
    }
    mesh = meshOf(g);
    module->setAttr(kMeshAttr, mesh);
    for (Operation *op : shardOps) {
      FailureOr<Value> converted = convert(op);
      if (failed(converted))
        return signalPassFailure();
      op->getResult(0).replaceAllUsesWith(*converted);
      op->erase();
    }
    // Casts upstream resharding inserts between equal static types.
    module.walk([](tensor::CastOp cast) {
      if (cast.getSource().getType() == cast.getType()) {
        cast.replaceAllUsesWith(cast.getSource());
        cast.erase();
      }
    });
    module.walk([](shd::ShardingOp s) {
      if (s->use_empty())
        s.erase();
    });
    g.erase();
  }
};

} // namespace
