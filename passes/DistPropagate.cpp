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

/// Parses "dp=2,tp=4:intra" into a mesh.
FailureOr<MeshAttr> hpc::dist::parseMesh(MLIRContext *ctx, StringRef text, std::string &error) {
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

namespace {

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
  /// Values whose tp split is sequence parallelism's (along the sequence),
  /// not tensor parallelism's (along features or heads).
  llvm::DenseSet<Value> sequenceSplit;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // A pass instance runs on many modules (one PassManager): nothing of the
    // last run's values may survive into this one.
    meshAttr = {};
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
    if (ranksPerNode < 0) {
      module.emitError("ranks-per-node must be positive, not ") << int64_t(ranksPerNode);
      return signalPassFailure();
    }
    if (ranksPerNode > 0) {
      // Node-major: ranks [k*P, (k+1)*P) share node k, so a mesh larger than
      // a node must fill whole nodes.
      int64_t ranks = meshAttr.numDevices();
      if (ranks > ranksPerNode && ranks % ranksPerNode != 0) {
        module.emitError("the mesh's ") << ranks << " ranks do not fill nodes of "
                                        << int64_t(ranksPerNode) << " ranks";
        return signalPassFailure();
      }
      module->setAttr("dist.ranks_per_node",
                      IntegerAttr::get(IntegerType::get(ctx, 64), int64_t(ranksPerNode)));
    }
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func) {
      module.emitError("no func.func @main to shard");
      return signalPassFailure();
    }
    bool hasTP = meshAttr.axisIndex("tp") >= 0;
    if (sequenceParallel && !hasTP) {
      module.emitError("sequence-parallel splits the sequence over a tp axis, which the mesh "
                       "has not");
      return signalPassFailure();
    }
    if (presets && hasTP)
      hpc::unfuseSplitProjections(func, /*splitWeights=*/false);
    if (failed(propagate(func, hasTP && presets)))
      return signalPassFailure();
    // Tensor parallelism's training state (Megatron-LM's): a parameter
    // that every reader takes in one tp split is held in that split, with
    // its optimizer state, and updated there; the walk then runs again
    // from that seed. So is an expert's, split over ep.
    bool hasEP = meshAttr.axisIndex("ep") >= 0;
    if (presets && (hasTP || hasEP) && module->hasAttr("hpc.train") &&
        splitTensorParallelState(func)) {
      func.walk([](Operation *op) {
        op->removeAttr("dist.operand_shardings");
        op->removeAttr("dist.result_shardings");
      });
      if (failed(propagate(func, /*megatron=*/hasTP)))
        return signalPassFailure();
    }
  }

  /// Seeds and walks @main once, from nothing (a pass instance runs on
  /// many modules, and the tensor-parallel state walks twice).
  LogicalResult propagate(func::FuncOp func, bool megatron) {
    current.clear();
    weightDerived.clear();
    weightSeeds.clear();
    sequenceSplit.clear();
    if (failed(seed(func)))
      return failure();
    for (Operation &op : func.getBody().front())
      if (failed(visit(&op, megatron)))
        return failure();
    return success();
  }

  /// The sharding the readers of `v` (the walk's dist.operand_shardings;
  /// through transposes, permuted back) all asked for, when it is one split
  /// of one dimension over tp (or ep: an expert's); `except` (the update
  /// and what ZeRO put around it) are not readers.
  std::optional<Sharding> askedByReaders(Value v, ArrayRef<Operation *> except) {
    std::optional<Sharding> asked;
    auto agree = [&](const Sharding &s) {
      if (asked && !(*asked == s))
        return false;
      asked = s;
      return true;
    };
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (llvm::is_contained(except, user))
        continue;
      if (auto attrs = user->getAttrOfType<ArrayAttr>("dist.operand_shardings")) {
        if (!agree(Sharding::fromAttr(cast<ShardingAttr>(attrs[use.getOperandNumber()]))))
          return std::nullopt;
        continue;
      }
      // A transpose of a weight runs whole (weight-derived): what its
      // readers ask of it, permuted back, is asked of the weight.
      auto tr = dyn_cast<hpc::TransposeOp>(user);
      if (!tr)
        return std::nullopt;
      std::optional<Sharding> of = askedByReaders(tr.getResult(), {});
      if (!of)
        return std::nullopt;
      Sharding back = Sharding::replicated(of->dims.size());
      for (auto [i, p] : llvm::enumerate(tr.getPerm()))
        back.dims[p] = of->dims[i];
      if (!agree(back))
        return std::nullopt;
    }
    if (!asked || !asked->partial.empty())
      return std::nullopt;
    int64_t splitDims = 0;
    for (const auto &axes : asked->dims) {
      if (axes.empty())
        continue;
      ++splitDims;
      if (axes != std::vector<std::string>{"tp"} && axes != std::vector<std::string>{"ep"})
        return std::nullopt;
    }
    return splitDims == 1 ? asked : std::nullopt;
  }

  /// What dist-zero put around a ZeRO-1/2 update: this rank's rows of the
  /// parameter (`mine`, the update's operand 0), their gather back
  /// (`gathered`, which an hpc.assign writes into the parameter), the
  /// gradient's rows as the update reads them (`grad`) and the gradient
  /// where the backward pass finishes it (`raw`: whole, or rows under 2).
  struct ZeroRows {
    AnnotateOp mine, gathered, grad, raw;
    SmallVector<Operation *> assigns;
  };
  static std::optional<ZeroRows> zeroRowsOf(Operation *update, hpc::VariableOp var) {
    ZeroRows z;
    z.mine = update->getOperand(0).getDefiningOp<AnnotateOp>();
    z.grad = update->getOperand(1).getDefiningOp<AnnotateOp>();
    if (!z.mine || !z.grad || z.mine.getInput() != var.getResult())
      return std::nullopt;
    for (Operation *user : z.mine.getResult().getUsers())
      if (auto a = dyn_cast<AnnotateOp>(user))
        z.gathered = a;
    z.raw = rawGradient(z.grad.getInput()).getDefiningOp<AnnotateOp>();
    for (Operation *user : var.getResult().getUsers())
      if (isa<hpc::AssignOp>(user))
        z.assigns.push_back(user);
    if (!z.gathered || !z.raw || z.assigns.size() != 1)
      return std::nullopt;
    return z;
  }

  /// After a first walk: each parameter whose readers all take it in one tp
  /// split is held in that split from now on (dist.sharding on it and its
  /// optimizer state), its gradient reduced into it where the backward pass
  /// finishes it (over dp, as a piece), and the update applied to the
  /// piece. No gradient is gathered over tp and no rank updates another's
  /// piece. Under ZeRO-1/2 the dp rows are then rows of the piece (tp
  /// major): the state, the update's rows and the gradient's. ZeRO-3's
  /// parameters keep their dp rows. Whether any was split.
  bool splitTensorParallelState(func::FuncOp func) {
    MLIRContext *ctx = &getContext();
    struct Choice {
      Operation *update;
      Sharding piece;
      std::optional<ZeroRows> zero;
    };
    SmallVector<Choice> chosen;
    func.walk([&](Operation *update) {
      if (!isa<hpc::SGDUpdateOp, hpc::AdamWUpdateOp>(update))
        return;
      Value param = update->getOperand(0);
      if (auto mine = param.getDefiningOp<AnnotateOp>())
        param = mine.getInput();
      auto var = param.getDefiningOp<hpc::VariableOp>();
      if (!var || shardingOfVariable(var))
        return;
      std::optional<ZeroRows> zero;
      SmallVector<Operation *> except{update};
      if (update->hasAttr("dist.updates_shard")) {
        if (!(zero = zeroRowsOf(update, var)))
          return;
        except.append({zero->mine, zero->assigns.front()});
      }
      for (unsigned i : hpc::inPlaceOperands(update)) {
        if (i == 0 || i >= update->getNumOperands())
          continue;
        auto state = update->getOperand(i).getDefiningOp<hpc::VariableOp>();
        if (!state || state.getValue() || !update->getOperand(i).hasOneUse() ||
            (!zero && shardingOfVariable(state)))
          return;
      }
      std::optional<Sharding> piece = askedByReaders(var.getResult(), except);
      if (!piece)
        return;
      if (zero) {
        // The dp rows of the piece: its first dimension must divide.
        if (meshAttr.axisIndex("dp") < 0)
          return;
        auto type = cast<RankedTensorType>(var.getType());
        int64_t rows = type.getDimSize(0) / groupOf(meshAttr, piece->dims[0]);
        if (rows % groupOf(meshAttr, {"dp"}) != 0)
          return;
      }
      chosen.push_back({update, *piece, zero});
    });
    for (Choice &c : chosen) {
      Operation *update = c.update;
      ShardingAttr piece = c.piece.toAttr(ctx);
      Sharding rowsOfPiece = c.piece;
      rowsOfPiece.dims[0].push_back("dp");
      ShardingAttr rows = rowsOfPiece.toAttr(ctx);
      if (c.zero) {
        ZeroRows &z = *c.zero;
        z.mine.getInput().getDefiningOp()->setAttr("dist.sharding", piece);
        for (unsigned i : hpc::inPlaceOperands(update))
          if (i > 0 && i < update->getNumOperands())
            update->getOperand(i).getDefiningOp()->setAttr("dist.sharding", rows);
        bool rawInRows = !Sharding::fromAttr(z.raw.getSharding()).isReplicated();
        z.raw.setShardingAttr(rawInRows ? rows : piece);
        z.grad.setShardingAttr(rows);
        z.mine.setShardingAttr(rows);
        z.gathered.setShardingAttr(piece);
        // The gathered rows written into the parameter's piece, as they come.
        z.assigns.front()->setAttr("dist.updates_shard", UnitAttr::get(ctx));
        continue;
      }
      update->getOperand(0).getDefiningOp()->setAttr("dist.sharding", piece);
      for (unsigned i : hpc::inPlaceOperands(update))
        if (i > 0 && i < update->getNumOperands())
          update->getOperand(i).getDefiningOp()->setAttr("dist.sharding", piece);
      annotateUpdateGradient(update, piece, piece);
      update->setAttr("dist.updates_shard", UnitAttr::get(ctx));
    }
    return !chosen.empty();
  }

  LogicalResult seed(func::FuncOp func) {
    Block &body = func.getBody().front();
    // Weight-derived values: weights, training state, constants, and ops
    // only on those.
    for (Operation &op : body) {
      // A state variable a ZeRO stage sharded (dist-zero) is held in pieces.
      if (ShardingAttr s = shardingOfVariable(&op)) {
        current[op.getResult(0)] = Sharding::fromAttr(s);
        continue;
      }
      if (isa<hpc::WeightOp, hpc::ConstantOp, hpc::VariableOp>(op) ||
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
    func.walk([&](hpc::VariableOp v) { byName[v.getName()] = v.getResult(); });

    for (BlockArgument arg : body.getArguments()) {
      auto type = cast<RankedTensorType>(arg.getType());
      Sharding s = Sharding::replicated(type.getRank());
      std::vector<std::string> data = dataAxes(meshAttr);
      if (presets && !data.empty() && type.getRank() > 0 &&
          type.getDimSize(0) % groupOf(meshAttr, data) == 0)
        s.dims[0] = data;
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

  /// Dim `d` of `v` is an hpc.expand's broadcast: every rank can slice it
  /// for free, so it does not hold the op whole (the backward pass of a
  /// batch mean starts from such a broadcast of the loss's gradient).
  static bool isBroadcastDim(Value v, size_t d) {
    auto expand = v.getDefiningOp<hpc::ExpandOp>();
    if (!expand)
      return false;
    auto in = cast<RankedTensorType>(expand.getInput().getType());
    int64_t lead = int64_t(cast<RankedTensorType>(v.getType()).getRank()) - in.getRank();
    return int64_t(d) < lead || in.getDimSize(int64_t(d) - lead) == 1;
  }

  /// Whether `v`'s partial sums reach its users as such: a gemm with a C
  /// operand is reduced by dist-partition itself (it adds C once, after
  /// the reduction), so its users see the sum.
  static bool keepsPartial(Value v) {
    auto gemm = v.getDefiningOp<hpc::GemmOp>();
    return !(gemm && gemm.getC());
  }

  /// The axes a scatter-add into zeros leaves its result a partial sum
  /// over (see visit), if it may.
  std::optional<std::vector<std::string>> scatteredPartial(hpc::ScatterElementsOp scatter) {
    const Sharding *upd = incoming(scatter.getUpdates());
    const Sharding *idx = incoming(scatter.getIndices());
    if (!upd || !keepsPartial(scatter.getUpdates()))
      return std::nullopt;
    auto replicatedDims = [](const Sharding &s) {
      return llvm::all_of(s.dims, [](const auto &axes) { return axes.empty(); });
    };
    std::vector<std::string> axes;
    if (!upd->partial.empty() && replicatedDims(*upd) && (!idx || idx->isReplicated())) {
      axes = upd->partial;
    } else if (upd->partial.empty() && idx && *idx == *upd) {
      int64_t axis = scatter.getAxis();
      for (auto [d, on] : llvm::enumerate(upd->dims))
        if (!on.empty() && int64_t(d) != axis)
          return std::nullopt;
      axes = upd->dims[axis];
    }
    if (axes.empty())
      return std::nullopt;
    auto updates = cast<RankedTensorType>(scatter.getUpdates().getType());
    if (scatter.getType().getNumElements() <= updates.getNumElements())
      return axes;
    // Added to a partial sum over the same axes: reduced anyway.
    Value result = scatter.getResult();
    if (!result.hasOneUse())
      return std::nullopt;
    auto add = dyn_cast<hpc::AddOp>(*result.getUsers().begin());
    if (!add || add.getType() != result.getType())
      return std::nullopt;
    Value other = add->getOperand(0) == result ? add->getOperand(1) : add->getOperand(0);
    const Sharding *sum = incoming(other);
    if (!sum || other.getType() != result.getType() || !keepsPartial(other) ||
        sum->partial != axes || !replicatedDims(*sum))
      return std::nullopt;
    return axes;
  }

  /// The autodiff's weight gradient of a linear layer, reduce_sum over the
  /// batch dimensions of matmul(transpose(A), dY) (hpc-fuse-epilogues makes
  /// it one gemm with trans_a), in a train step, with neither operand split
  /// nor partial over tp, or split only along the sequence (which the
  /// product takes gathered).
  bool isWholeWeightGradient(Operation *op, bool sequence) {
    auto mm = dyn_cast<hpc::MatMulOp>(op);
    if (!mm || !op->getParentOfType<ModuleOp>()->hasAttr("hpc.train") ||
        !mm.getResult().hasOneUse() || !mm.getLhs().getDefiningOp<hpc::TransposeOp>())
      return false;
    auto sum = dyn_cast<hpc::ReduceSumOp>(*mm.getResult().getUsers().begin());
    int64_t rank = mm.getType().getRank();
    if (!sum || rank < 3 ||
        sum.getAxes() != ArrayRef<int64_t>(llvm::to_vector(llvm::seq<int64_t>(0, rank - 2))))
      return false;
    for (Value operand : op->getOperands()) {
      if (weightDerived.count(operand))
        return false;
      const Sharding *s = incoming(operand);
      if (!s || llvm::is_contained(s->partial, "tp"))
        return false;
      if (!(sequence && sequenceSplit.contains(operand)) &&
          llvm::any_of(s->dims, [](const auto &axes) { return llvm::is_contained(axes, "tp"); }))
        return false;
    }
    return true;
  }

  LogicalResult visit(Operation *op, bool megatron) {
    MLIRContext *ctx = &getContext();
    if (shardingOfVariable(op))
      return success(); // ZeRO state: seeded, partitioned in pieces
    if (auto annotate = dyn_cast<AnnotateOp>(op)) {
      Sharding s = Sharding::fromAttr(annotate.getSharding());
      op->setAttr("dist.operand_shardings", ArrayAttr::get(ctx, {s.toAttr(ctx)}));
      current[annotate.getResult()] = s;
      return success();
    }
    // Training state is replicated (every rank holds it whole): an update
    // (or an assign) takes its gradient (value) whole, summed over
    // data-parallel ranks and gathered over tensor-parallel ones, and every
    // rank applies it. Under ZeRO (dist-zero) its state arrives in dp
    // shards, and so do the parameter and gradient it was given: the update
    // takes them as they are, each rank updating its piece.
    if (!hpc::inPlaceOperands(op).empty()) {
      bool sharded = op->hasAttr("dist.updates_shard");
      SmallVector<Attribute> operandAttrs;
      for (Value v : op->getOperands()) {
        Sharding s = Sharding::replicated(cast<RankedTensorType>(v.getType()).getRank());
        if (const Sharding *in = incoming(v); sharded && in && in->partial.empty())
          s = *in;
        operandAttrs.push_back(s.toAttr(ctx));
      }
      op->setAttr("dist.operand_shardings", ArrayAttr::get(ctx, operandAttrs));
      op->setAttr("dist.result_shardings", ArrayAttr::get(ctx, {}));
      return success();
    }
    // A partial sum reshaped (or transposed) is a partial sum of the new
    // shape: the reduction waits for whoever needs the sum (a bias
    // gradient's rows, reduce-scattered under ZeRO-2, instead of
    // all-reduced first; a tied embedding's two gradients, added before one
    // all-reduce instead of reduced apart).
    if (isa<hpc::ReshapeOp, hpc::SqueezeOp, hpc::UnsqueezeOp, hpc::TransposeOp>(op)) {
      const Sharding *in = incoming(op->getOperand(0));
      if (in && !in->partial.empty() && keepsPartial(op->getOperand(0)) &&
          llvm::all_of(in->dims, [](const auto &axes) { return axes.empty(); })) {
        Sharding out = Sharding::replicated(
            cast<RankedTensorType>(op->getResult(0).getType()).getRank());
        out.partial = in->partial;
        // `in` points into `current`: read it before the insertion below,
        // which may move every entry.
        op->setAttr("dist.operand_shardings", ArrayAttr::get(ctx, {in->toAttr(ctx)}));
        op->setAttr("dist.result_shardings", ArrayAttr::get(ctx, {out.toAttr(ctx)}));
        current[op->getResult(0)] = out;
        return success();
      }
    }
    // A sum of partial sums is a partial sum: adding them before the
    // reduction saves one collective per term (a ZeRO-2 gradient norm adds
    // one partial sum of squares per gradient shard).
    if (isa<hpc::AddOp>(op)) {
      const Sharding *lhs = incoming(op->getOperand(0)), *rhs = incoming(op->getOperand(1));
      if (lhs && rhs && !lhs->partial.empty() && *lhs == *rhs &&
          keepsPartial(op->getOperand(0)) && keepsPartial(op->getOperand(1)) &&
          op->getOperand(0).getType() == op->getResult(0).getType() &&
          op->getOperand(1).getType() == op->getResult(0).getType()) {
        Attribute a = lhs->toAttr(ctx);
        Sharding sum = *lhs; // copied first: the insertion may move `*lhs`
        current[op->getResult(0)] = std::move(sum);
        op->setAttr("dist.operand_shardings", ArrayAttr::get(ctx, {a, a}));
        op->setAttr("dist.result_shardings", ArrayAttr::get(ctx, {a}));
        return success();
      }
    }
    // A partial sum times (or over) a scalar is a partial sum, the scalar
    // taken whole (reduced first where it is a partial sum itself: 4
    // bytes): micro-batches' gradients weighted by their share of the loss
    // (hpc-micro-batches) are summed before one reduction instead of each
    // reduced apart.
    if (isa<hpc::MulOp, hpc::DivOp>(op)) {
      Value result = op->getResult(0);
      for (unsigned i = 0; i < 2; ++i) {
        Value partial = op->getOperand(i), scalar = op->getOperand(1 - i);
        const Sharding *p = incoming(partial);
        if (!p || p->partial.empty() || !keepsPartial(partial) || p->dims.empty() ||
            partial.getType() != result.getType() ||
            cast<RankedTensorType>(scalar.getType()).getRank() != 0 ||
            (isa<hpc::DivOp>(op) && i == 1))
          continue;
        Sharding out = *p; // copied first: the insertion may move `*p`
        SmallVector<Attribute> operands(2);
        operands[i] = p->toAttr(ctx);
        operands[1 - i] = Sharding::replicated(0).toAttr(ctx);
        op->setAttr("dist.operand_shardings", ArrayAttr::get(ctx, operands));
        op->setAttr("dist.result_shardings", ArrayAttr::get(ctx, {out.toAttr(ctx)}));
        current[result] = std::move(out);
        return success();
      }
    }
    // A scatter-add into zeros whose contributions are spread over ranks
    // is a partial sum of the scattered result, scatter(0, i, sum_r u_r) =
    // sum_r scatter(0, i, u_r): when the updates are partial sums (the
    // indices whole), or when updates and indices are split alike along
    // the scatter axis only (each rank scatters its own entries: a token
    // embedding's rows). It is reduced after the scatter, so it joins a
    // gradient bucket instead of gathering the updates and indices to
    // every rank. Only where that moves no more bytes: the table is no
    // bigger than the updates (a table of more positions than the
    // sequence uses would move more bytes reduced whole), or it is added
    // to a partial sum that is reduced anyway (a tied embedding's table
    // gradient, one all-reduce for both).
    if (auto scatter = dyn_cast<hpc::ScatterElementsOp>(op);
        scatter && scatter.getReduction() == "add" && hpc::isZeroConstant(scatter.getInput())) {
      if (std::optional<std::vector<std::string>> axes = scatteredPartial(scatter)) {
        int64_t rank = scatter.getType().getRank();
        Sharding out = Sharding::replicated(rank);
        out.partial = *axes;
        const Sharding *idx = incoming(scatter.getIndices());
        const Sharding *upd = incoming(scatter.getUpdates());
        Attribute plain = Sharding::replicated(rank).toAttr(ctx);
        op->setAttr("dist.operand_shardings",
                    ArrayAttr::get(ctx, {plain, idx ? idx->toAttr(ctx) : plain,
                                         upd->toAttr(ctx)}));
        op->setAttr("dist.result_shardings", ArrayAttr::get(ctx, {out.toAttr(ctx)}));
        current[op->getResult(0)] = out;
        return success();
      }
    }
    auto ruleOp = dyn_cast<hpc::ShardingRuleInterface>(op);
    if (!ruleOp || (op->getNumResults() && weightDerived.count(op->getResult(0))))
      return success(); // weight-derived ops run whole on every rank
    hpc::ShardingRule rule = ruleOp.getShardingRule();
    std::vector<std::vector<std::string>> factorAxes(rule.factors.size());
    // Factors an activation operand already holds whole (complete, not a
    // broadcast): the op stays whole on them, so a split partner is gathered
    // once here instead of the result being gathered again by every later
    // op that needs it whole (a residual stream meeting an all-reduced
    // sublayer output).
    llvm::DenseSet<int64_t> heldWhole;
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      if (const Sharding *s = incoming(operand); s && s->partial.empty())
        for (auto [d, f] : llvm::enumerate(rule.operandDims[i]))
          if (f >= 0 && d < s->dims.size() && s->dims[d].empty() &&
              cast<RankedTensorType>(operand.getType()).getDimSize(d) == rule.factors[f].size &&
              !isBroadcastDim(operand, d))
            heldWhole.insert(f);
    llvm::StringSet<> used;
    auto assign = [&](int64_t f, const std::vector<std::string> &axes, bool evenIfWhole = false) {
      if (f < 0 || axes.empty() || !factorAxes[f].empty() ||
          (heldWhole.contains(f) && !evenIfWhole) ||
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
    // Sequence parallelism: a contraction takes a sequence-split operand
    // gathered over tp (Megatron-LM's all_gather before a column-parallel
    // product; a weight gradient's activation gathered alike), so tensor
    // parallelism decides its tp split; other ops follow it.
    bool sequence = megatron && sequenceParallel;
    bool followsSequence = false;
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      if (const Sharding *s = incoming(operand)) {
        bool split = sequence && sequenceSplit.contains(operand);
        for (auto [d, f] : llvm::enumerate(rule.operandDims[i])) {
          if (d >= s->dims.size())
            continue;
          std::vector<std::string> axes = s->dims[d];
          if (split && isContraction(op))
            llvm::erase(axes, "tp");
          // The sequence split stays (a whole partner, such as a sublayer
          // output tensor parallelism gathered, is sliced for free) rather
          // than the stream being gathered.
          assign(f, axes, /*evenIfWhole=*/split && !isContraction(op));
        }
        followsSequence |= split && !isContraction(op);
      }
    // Where the stream that tensor parallelism runs whole on every tp rank
    // starts (an op on graph inputs: the embedding) or is reduced (an op on
    // a row-parallel product's partial sum), it splits the sequence
    // instead: dimension 1 of a [batch, sequence, ...] result. Its whole
    // operands are sliced, which is free (unlike the gather that keeping a
    // factor whole avoids elsewhere), and its partial ones reduce-scattered.
    auto startsStream = [&](Value v) {
      if (isa<BlockArgument>(v))
        return true;
      const Sharding *s = incoming(v);
      return s && llvm::is_contained(s->partial, "tp") && keepsPartial(v);
    };
    if (sequence && !isContraction(op) && !used.contains("tp") && op->getNumResults() &&
        cast<RankedTensorType>(op->getResult(0).getType()).getRank() >= 3 &&
        llvm::any_of(op->getOperands(), startsStream)) {
      int64_t seq = rule.resultDims[0][1];
      if (seq >= 0 && factorAxes[seq].empty() &&
          rule.factors[seq].kind == hpc::FactorKind::Parallel &&
          rule.factors[seq].size % groupOf(meshAttr, {"tp"}) == 0) {
        factorAxes[seq] = {"tp"};
        used.insert("tp");
        followsSequence = true;
      }
    }
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
    // A weight gradient that every tp rank would compute whole from whole
    // operands (a tied LM head's: its logits are gathered for the loss, so
    // their gradient arrives whole on every rank): each rank computes its
    // columns, and a reader that needs the gradient whole gathers them.
    // The gather moves the [K, N] result once; the whole product costs
    // every rank 2 x rows x K x N FLOPs (rows: the tokens).
    if (megatron && !used.contains("tp") && isWholeWeightGradient(op, sequence)) {
      assign(rule.resultDims[0].back(), {"tp"}, /*evenIfWhole=*/true);
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
      if (followsSequence && llvm::any_of(s.dims, [](const auto &axes) {
            return llvm::is_contained(axes, "tp");
          }))
        sequenceSplit.insert(result);
      current[result] = s;
    }
    op->setAttr("dist.operand_shardings", ArrayAttr::get(ctx, operandAttrs));
    op->setAttr("dist.result_shardings", ArrayAttr::get(ctx, resultAttrs));
    return success();
  }
};

} // namespace
