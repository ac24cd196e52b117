//===- DistPropagate.cpp - complete shardings from seeds and presets ------===//
//
// A forward walk in program order. Each op's sharding rule maps operand and
// result dimensions to factors; the mesh axes of the operands' dimensions
// pick the axes of the factors (first come, first served; a factor that
// needs replication takes none), and the factors give the shardings the op
// needs of its operands and gives its results. Values computed only from
// weights are held whole by every rank, so they follow whatever their users
// need instead of imposing anything.
//
//===----------------------------------------------------------------------===//

#include "DistSharding.h"
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringExtras.h"

namespace hpc {
#define GEN_PASS_DEF_DISTPROPAGATE
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

/// Parses "dp=2,tp=4:intra" into a mesh.
FailureOr<MeshAttr> parseMesh(MLIRContext *ctx, StringRef text, std::string &error) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  SmallVector<TopologyLevel> levels;
  SmallVector<StringRef> parts;
  text.split(parts, ',', -1, false);
  for (StringRef part : parts) {
    auto [name, rest] = part.trim().split('=');
    auto [sizeText, levelText] = rest.split(':');
    int64_t size;
    if (name.empty() || sizeText.getAsInteger(10, size) || size <= 0) {
      error = "--mesh expects NAME=SIZE[:intra|:inter],... but got '" + part.str() + "'";
      return failure();
    }
    TopologyLevel level = (name == "tp" || name == "sp" || name == "ep")
                              ? TopologyLevel::intra_node
                              : TopologyLevel::inter_node;
    if (levelText == "intra")
      level = TopologyLevel::intra_node;
    else if (levelText == "inter")
      level = TopologyLevel::inter_node;
    else if (!levelText.empty()) {
      error = "--mesh axis '" + name.str() + "': level must be intra or inter, not '" +
              levelText.str() + "'";
      return failure();
    }
    for (StringAttr n : names)
      if (n.getValue() == name) {
        error = "--mesh names axis '" + name.str() + "' twice";
        return failure();
      }
    names.push_back(StringAttr::get(ctx, name));
    sizes.push_back(size);
    levels.push_back(level);
  }
  if (names.empty()) {
    error = "--mesh is empty";
    return failure();
  }
  return MeshAttr::get(ctx, names, sizes, levels);
}

/// Parses a --shard SPEC ("dp,-" or "dp+tp,-") for a tensor of `rank`.
FailureOr<Sharding> parseSpec(StringRef spec, int64_t rank, MeshAttr mesh,
                              std::string &error) {
  Sharding s;
  SmallVector<StringRef> dims;
  spec.split(dims, ',');
  if (int64_t(dims.size()) != rank) {
    error = "gives " + std::to_string(dims.size()) + " dimensions for a tensor of rank " +
            std::to_string(rank);
    return failure();
  }
  for (StringRef d : dims) {
    s.dims.emplace_back();
    d = d.trim();
    if (d == "-" || d.empty())
      continue;
    SmallVector<StringRef> axes;
    d.split(axes, '+');
    for (StringRef a : axes) {
      if (mesh.axisIndex(a.trim()) < 0) {
        error = "names mesh axis '" + a.trim().str() + "', which is not in the mesh";
        return failure();
      }
      s.dims.back().push_back(a.trim().str());
    }
  }
  return s;
}

bool isContraction(Operation *op) {
  return isa<hpc::MatMulOp, hpc::GemmOp, hpc::ConvOp, hpc::ConvTransposeOp>(op);
}

struct DistPropagate : hpc::impl::DistPropagateBase<DistPropagate> {
  using Base::Base;

  MeshAttr meshAttr;
  llvm::DenseMap<Value, Sharding> current;
  llvm::DenseSet<Value> weightDerived;
  /// Explicit --shard seeds for weights (adopted like activation shardings).
  llvm::DenseMap<Value, Sharding> weightSeeds;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (!mesh.empty()) {
      std::string error;
      auto m = parseMesh(ctx, mesh, error);
      if (failed(m)) {
        module.emitError(error);
        return signalPassFailure();
      }
      module->setAttr("dist.mesh", *m);
    }
    meshAttr = module->getAttrOfType<MeshAttr>("dist.mesh");
    if (!meshAttr) {
      module.emitError("dist-propagate needs a mesh: a 'dist.mesh' module "
                       "attribute or the mesh option (--mesh=dp=2,tp=2)");
      return signalPassFailure();
    }
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func) {
      module.emitError("no func.func @main to shard");
      return signalPassFailure();
    }
    bool hasTP = meshAttr.axisIndex("tp") >= 0;
    if (presets && hasTP)
      unfuseSplitProjections(func);
    if (failed(seed(func)))
      return signalPassFailure();
    for (Operation &op : func.getBody().front())
      if (failed(visit(&op, hasTP && presets)))
        return signalPassFailure();
  }

  /// split(matmul(x, W) [+ b]) along the output features, with W and b
  /// weights, becomes one projection per piece on slices of W and b.
  void unfuseSplitProjections(func::FuncOp func) {
    SmallVector<hpc::SplitOp> splits;
    func.walk([&](hpc::SplitOp op) { splits.push_back(op); });
    for (hpc::SplitOp split : splits) {
      auto type = cast<RankedTensorType>(split.getInput().getType());
      int64_t rank = type.getRank();
      int64_t axis = int64_t(split.getAxis()) < 0 ? int64_t(split.getAxis()) + rank
                                                 : int64_t(split.getAxis());
      if (axis != rank - 1 || !split.getInput().hasOneUse())
        continue;
      Value projected = split.getInput();
      hpc::AddOp add = projected.getDefiningOp<hpc::AddOp>();
      Value bias;
      hpc::MatMulOp matmul;
      if (add) {
        for (auto [a, b] : {std::pair(add.getLhs(), add.getRhs()),
                            std::pair(add.getRhs(), add.getLhs())}) {
          auto mm = a.getDefiningOp<hpc::MatMulOp>();
          auto bt = cast<RankedTensorType>(b.getType());
          if (mm && a.hasOneUse() && b.getDefiningOp<hpc::WeightOp>() &&
              bt.getRank() == 1 && bt.getDimSize(0) == type.getShape().back()) {
            matmul = mm;
            bias = b;
          }
        }
        if (!matmul)
          continue;
      } else {
        matmul = projected.getDefiningOp<hpc::MatMulOp>();
      }
      auto wt = matmul ? cast<RankedTensorType>(matmul.getRhs().getType()) : nullptr;
      if (!matmul || !matmul.getRhs().getDefiningOp<hpc::WeightOp>() || wt.getRank() != 2)
        continue;
      OpBuilder b(split);
      int64_t begin = 0;
      Location loc = split.getLoc();
      for (auto [i, size] : llvm::enumerate(split.getSizes())) {
        auto wSlice = hpc::SliceOp::create(
            b, loc, RankedTensorType::get({wt.getDimSize(0), size}, wt.getElementType()),
            matmul.getRhs(), b.getDenseI64ArrayAttr({0, begin}),
            b.getDenseI64ArrayAttr({wt.getDimSize(0), begin + size}),
            b.getDenseI64ArrayAttr({1, 1}));
        SmallVector<int64_t> outShape(cast<RankedTensorType>(matmul.getType()).getShape());
        outShape.back() = size;
        auto outType = RankedTensorType::get(outShape, wt.getElementType());
        Value piece = hpc::MatMulOp::create(b, loc, outType, matmul.getLhs(), wSlice);
        if (bias) {
          auto bSlice = hpc::SliceOp::create(
              b, loc, RankedTensorType::get({size}, wt.getElementType()), bias,
              b.getDenseI64ArrayAttr({begin}), b.getDenseI64ArrayAttr({begin + size}),
              b.getDenseI64ArrayAttr({1}));
          piece = add.getLhs() == matmul.getResult()
                      ? hpc::AddOp::create(b, loc, outType, piece, bSlice).getResult()
                      : hpc::AddOp::create(b, loc, outType, bSlice, piece).getResult();
        }
        split.getResult(i).replaceAllUsesWith(piece);
        begin += size;
      }
      split.erase();
      if (add)
        add.erase();
      matmul.erase();
    }
  }

  LogicalResult seed(func::FuncOp func) {
    Block &body = func.getBody().front();
    // Weight-derived values: weights, constants, and ops only on those.
    for (Operation &op : body) {
      if (isa<hpc::WeightOp, hpc::ConstantOp>(op) ||
          (op.getNumOperands() && isa<hpc::HPCDialect>(op.getDialect()) &&
           llvm::all_of(op.getOperands(), [&](Value v) { return weightDerived.count(v); })))
        for (Value r : op.getResults())
          weightDerived.insert(r);
    }
    llvm::StringMap<Value> byName;
    for (auto [i, arg] : llvm::enumerate(body.getArguments()))
      if (auto name = func.getArgAttrOfType<StringAttr>(i, "hpc.name"))
        byName[name.getValue()] = arg;
    func.walk([&](hpc::WeightOp w) { byName[w.getName()] = w.getResult(); });

    for (BlockArgument arg : body.getArguments()) {
      auto type = cast<RankedTensorType>(arg.getType());
      Sharding s = Sharding::replicated(type.getRank());
      int64_t dp = meshAttr.axisIndex("dp");
      if (presets && dp >= 0 && type.getRank() > 0 &&
          type.getDimSize(0) % meshAttr.getSizes()[dp] == 0)
        s.dims[0] = {"dp"};
      current[arg] = s;
    }
    for (const std::string &item : shard) {
      auto [name, spec] = StringRef(item).split('=');
      auto it = byName.find(name);
      if (it == byName.end())
        return getOperation().emitError("unknown tensor name in --shard: '")
               << name << "' (not a graph input or weight)";
      auto type = cast<RankedTensorType>(it->second.getType());
      std::string error;
      auto s = parseSpec(spec, type.getRank(), meshAttr, error);
      if (failed(s))
        return getOperation().emitError("--shard ") << name << ": " << error;
      if (failed(verifySharding([&] { return getOperation().emitError("--shard ") << name << ": "; },
                                s->toAttr(&getContext()), type, meshAttr)))
        return failure();
      if (weightDerived.count(it->second))
        weightSeeds[it->second] = *s;
      else
        current[it->second] = *s;
    }
    return success();
  }

  /// The sharding a value brings into an op (activations and seeded weights);
  /// null for free weight-derived values.
  const Sharding *incoming(Value v) {
    if (weightDerived.count(v)) {
      auto it = weightSeeds.find(v);
      return it == weightSeeds.end() ? nullptr : &it->second;
    }
    auto it = current.find(v);
    return it == current.end() ? nullptr : &it->second;
  }

  LogicalResult visit(Operation *op, bool megatron) {
    MLIRContext *ctx = &getContext();
    if (auto annotate = dyn_cast<AnnotateOp>(op)) {
      Sharding s = Sharding::fromAttr(annotate.getSharding());
      op->setAttr("dist.operand_shardings", ArrayAttr::get(ctx, {s.toAttr(ctx)}));
      current[annotate.getResult()] = s;
      return success();
    }
    auto ruleOp = dyn_cast<hpc::ShardingRuleInterface>(op);
    if (!ruleOp || weightDerived.count(op->getResult(0)))
      return success(); // weight-derived ops run whole on every rank
    hpc::ShardingRule rule = ruleOp.getShardingRule();
    std::vector<std::vector<std::string>> factorAxes(rule.factors.size());
    llvm::StringSet<> used;
    auto assign = [&](int64_t f, const std::vector<std::string> &axes) {
      if (f < 0 || axes.empty() || !factorAxes[f].empty() ||
          rule.factors[f].kind == hpc::FactorKind::NeedsReplication)
        return;
      for (const auto &a : axes)
        if (used.contains(a))
          return;
      if (rule.factors[f].size % groupOf(meshAttr, axes) != 0)
        return;
      factorAxes[f] = axes;
      for (const auto &a : axes)
        used.insert(a);
    };
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      if (const Sharding *s = incoming(operand))
        for (auto [d, f] : llvm::enumerate(rule.operandDims[i]))
          if (d < s->dims.size())
            assign(f, s->dims[d]);
    // Megatron: a contraction with a weight splits its reduction factor if
    // the activation arrives split there (row parallel), else its output
    // features (column parallel).
    if (megatron && isContraction(op) && !used.contains("tp") &&
        llvm::any_of(op->getOperands(), [&](Value v) { return weightDerived.count(v); })) {
      int64_t feature = -1;
      if (isa<hpc::MatMulOp>(op) && !rule.resultDims[0].empty())
        feature = rule.resultDims[0].back();
      else if (isa<hpc::GemmOp>(op))
        feature = rule.resultDims[0][1];
      else
        feature = rule.resultDims[0].size() > 1 ? rule.resultDims[0][1] : -1;
      assign(feature, {"tp"});
    }
    // Shardings the op needs of its operands and gives its results.
    SmallVector<Attribute> operandAttrs, resultAttrs;
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      Sharding s;
      for (int64_t f : rule.operandDims[i])
        s.dims.push_back(f < 0 ? std::vector<std::string>{} : factorAxes[f]);
      operandAttrs.push_back(s.toAttr(ctx));
    }
    std::vector<std::string> partial;
    for (auto [f, factor] : llvm::enumerate(rule.factors))
      if (factor.kind == hpc::FactorKind::Reduction)
        partial.insert(partial.end(), factorAxes[f].begin(), factorAxes[f].end());
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      Sharding s;
      for (int64_t f : rule.resultDims[r])
        s.dims.push_back(f < 0 ? std::vector<std::string>{} : factorAxes[f]);
      s.partial = partial;
      resultAttrs.push_back(s.toAttr(ctx));
      current[result] = s;
    }
    op->setAttr("dist.operand_shardings", ArrayAttr::get(ctx, operandAttrs));
    op->setAttr("dist.result_shardings", ArrayAttr::get(ctx, resultAttrs));
    return success();
  }
};

} // namespace
