//===- DistPartition.cpp - global program to per-rank SPMD program --------===//
//
// Walks @main in order, keeping for every global value its local value and
// current sharding. Before each op, every operand is resharded to what the
// op needs (see reshard below); the op then runs on local shapes, with its
// shape attributes (reshape/expand targets, slice ends, resize sizes)
// rewritten to the local result shape. Graph inputs arrive whole, outputs
// leave whole. Weight-derived values are computed whole on every rank and
// sliced locally where an op needs them split.
//
//===----------------------------------------------------------------------===//

#include "AddTrees.h"
#include "DistSharding.h"
#include "hpc/Target/ProgramPlan.h"
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

namespace hpc {
#define GEN_PASS_DEF_DISTPARTITION
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

struct Local {
  Value value;
  Sharding sharding;
};

struct DistPartition : hpc::impl::DistPartitionBase<DistPartition> {
  using Base::Base;

  MeshAttr mesh;
  llvm::DenseMap<Value, Local> locals;
  /// The piece a pipeline receive (dist-pipeline) brings, by its token.
  llvm::DenseMap<Value, Sharding> tokenShardings;
  int64_t bytesPerRank = 0;
  int64_t collectives = 0;

  StringAttr name(StringRef s) { return StringAttr::get(&getContext(), s); }

  ArrayAttr axesAttr(OpBuilder &b, const std::vector<std::string> &axes) {
    SmallVector<Attribute> a;
    for (const auto &s : axes)
      a.push_back(b.getStringAttr(s));
    return b.getArrayAttr(a);
  }

  /// Adds a new collective's traffic to the report.
  Value counted(Operation *collective) {
    bytesPerRank += bytesSentByRankZero(collective);
    ++collectives;
    return collective->getResult(0);
  }

  /// The plain all-reduce sum (no codec, one level) `v` is the result of,
  /// when `v` has no other reader: its reduction may move past that reader.
  static AllReduceOp soleSumReduction(Value v) {
    auto ar = v.getDefiningOp<AllReduceOp>();
    if (!ar || !v.hasOneUse() || ar.getReduction() != ReductionKind::sum ||
        ar.getCompressionAttr() || ar.getRanksPerNodeAttr() || ar.getFeedback() ||
        ar.getInput().getType() != v.getType())
      return {};
    return ar;
  }

  /// A sum of terms of which several are all-reduced on their own becomes
  /// one all-reduce of their local sum: the global gradient norm adds one
  /// square per parameter, and each parameter split over tp (or ZeRO's dp
  /// rows) contributes a partial sum that the walk above all-reduces where
  /// the chain adds it. On the benchmark GPT at tp=2 that was 9 scalar
  /// all-reduces one after another, each a round trip through the
  /// communication thread (~0.1 ms on 2 shared cores). The terms are
  /// summed in another order (float rounding only).
  void combineReducedSums(Block &body) {
    hpc::forEachAddTree(body, 2, [&](hpc::AddTree &tree) {
      // The all-reduced terms by their axes.
      llvm::MapVector<Attribute, SmallVector<AllReduceOp>> groups;
      for (Value v : tree.leaves)
        if (AllReduceOp ar = soleSumReduction(v))
          groups[ar.getAxes()].push_back(ar);
      llvm::SmallPtrSet<Operation *, 8> combined;
      for (auto &[axes, members] : groups)
        if (members.size() > 1)
          combined.insert(members.begin(), members.end());
      if (combined.empty())
        return;
      OpBuilder b(tree.root);
      Location loc = tree.root.getLoc();
      Type type = tree.root.getType();
      SmallVector<Value> terms;
      for (Value v : tree.leaves)
        if (!combined.contains(v.getDefiningOp()))
          terms.push_back(v);
      for (auto &[axes, members] : groups) {
        if (members.size() < 2)
          continue;
        SmallVector<Value> partials;
        for (AllReduceOp ar : members) {
          partials.push_back(ar.getInput());
          bytesPerRank -= bytesSentByRankZero(ar);
          --collectives;
        }
        Value partial = hpc::sumInOrder(b, loc, type, partials);
        auto one = cast<AllReduceOp>(b.clone(*members.front()));
        one->setOperand(0, partial);
        terms.push_back(counted(one));
      }
      hpc::replaceAddTree(tree, hpc::sumInOrder(b, loc, type, terms));
      for (Operation *ar : combined) // their users were the tree's adds
        ar->erase();
    });
  }

  /// A sum over dimensions of an all-reduced value that nothing else reads
  /// sums first and all-reduces the smaller result (the ranks' sum and the
  /// dimensions' commute). Under sequence parallelism a layer norm's bias
  /// gradient sums the tokens of an activation gradient still partial over
  /// tp, which its other reader (the norm's input gradient) takes
  /// reduce-scattered: the bias gradient's own all-reduce of the whole
  /// [b, s, h] becomes one of h elements (8 all-reduces of 512 KiB a step
  /// on the benchmark GPT at tp=2). Float rounding only.
  void sumBeforeReducing(Block &body) {
    SmallVector<hpc::ReduceSumOp> sums;
    body.walk([&](hpc::ReduceSumOp sum) { sums.push_back(sum); });
    for (hpc::ReduceSumOp sum : sums) {
      AllReduceOp ar = soleSumReduction(sum.getInput());
      if (!ar)
        continue;
      OpBuilder b(sum);
      auto local = cast<hpc::ReduceSumOp>(b.clone(*sum));
      local->setOperand(0, ar.getInput());
      auto reduced = cast<AllReduceOp>(b.clone(*ar));
      reduced->setOperand(0, local.getResult());
      reduced.getResult().setType(sum.getType());
      bytesPerRank -= bytesSentByRankZero(ar);
      --collectives;
      sum.getResult().replaceAllUsesWith(counted(reduced));
      sum.erase();
      ar.erase();
    }
  }

  /// Mesh axes some tensor is split (or partial) over.
  llvm::StringSet<> usedAxes;
  void noteAxes(const Sharding &s) {
    for (const auto &axes : s.dims)
      for (const auto &a : axes)
        usedAxes.insert(a);
    for (const auto &a : s.partial)
      usedAxes.insert(a);
  }

  /// Values already brought to a sharding: later uses that need the same
  /// sharding reuse them (a residual stream gathered once, not per use).
  llvm::DenseMap<std::pair<Value, Attribute>, Value> resharded;

  /// Brings `cur` (with sharding `from`) to sharding `to`, inserting
  /// collectives at the builder's position (or, with `reuse`, reusing an
  /// earlier result).
  Value reshard(OpBuilder &b, Location loc, Value cur, const Sharding &from,
                const Sharding &to, bool reuse = true) {
    noteAxes(to);
    if (from == to)
      return cur;
    if (!reuse)
      return emitReshard(b, loc, cur, from, to);
    std::pair<Value, Attribute> key{cur, to.toAttr(&getContext())};
    Value &done = resharded[key];
    if (!done)
      done = emitReshard(b, loc, cur, from, to);
    return done;
  }

  Value emitReshard(OpBuilder &b, Location loc, Value cur, Sharding from, const Sharding &to) {
    auto type = [&]() { return cast<RankedTensorType>(cur.getType()); };
    auto withDim = [&](int64_t d, int64_t size) {
      SmallVector<int64_t> shape(type().getShape());
      shape[d] = size;
      return RankedTensorType::get(shape, type().getElementType());
    };
    // 1. Pending reductions not kept: reduce_scatter into a dimension that
    // `to` splits over exactly those axes after the ones it is already
    // split over (dp rows into dp+tp rows: each rank scatters its block),
    // else all_reduce.
    std::vector<std::string> pending;
    for (const auto &a : from.partial)
      if (!llvm::is_contained(to.partial, a))
        pending.push_back(a);
    if (!pending.empty()) {
      int64_t g = groupOf(mesh, pending);
      int64_t scatterDim = -1;
      for (size_t d = 0; d < to.dims.size(); ++d) {
        std::vector<std::string> after = from.dims[d];
        after.insert(after.end(), pending.begin(), pending.end());
        if (to.dims[d] == after && type().getDimSize(d) % g == 0)
          scatterDim = d;
      }
      if (scatterDim >= 0) {
        auto out = withDim(scatterDim, type().getDimSize(scatterDim) / g);
        cur = counted(ReduceScatterOp::create(
            b, loc, out, cur, axesAttr(b, pending),
            ReductionKindAttr::get(&getContext(), ReductionKind::sum),
            b.getI64IntegerAttr(scatterDim), Attribute(), IntegerAttr(), Value()));
        from.dims[scatterDim] = to.dims[scatterDim];
      } else {
        cur = counted(AllReduceOp::create(
            b, loc, type(), cur, axesAttr(b, pending),
            ReductionKindAttr::get(&getContext(), ReductionKind::sum), Attribute(),
            IntegerAttr(), Value()));
      }
      from.partial.clear();
    }
    // 2. Trailing axes of one dimension's list moving to the end of
    // another's (a whole list into an unsplit dimension; expert
    // parallelism's ep from a group's rows to the experts and back) is one
    // all_to_all over them.
    auto startsWith = [](const std::vector<std::string> &list,
                         const std::vector<std::string> &prefix) {
      return prefix.size() <= list.size() &&
             std::equal(prefix.begin(), prefix.end(), list.begin());
    };
    for (size_t i = 0; i < from.dims.size(); ++i) {
      if (from.dims[i] == to.dims[i] || !startsWith(from.dims[i], to.dims[i]))
        continue;
      std::vector<std::string> moving(from.dims[i].begin() + to.dims[i].size(),
                                      from.dims[i].end());
      for (size_t j = 0; j < to.dims.size(); ++j) {
        std::vector<std::string> after = from.dims[j];
        after.insert(after.end(), moving.begin(), moving.end());
        if (j == i || to.dims[j] != after)
          continue;
        int64_t g = groupOf(mesh, moving);
        if (type().getDimSize(j) % g != 0)
          continue;
        SmallVector<int64_t> shape(type().getShape());
        shape[i] *= g;
        shape[j] /= g;
        cur = counted(AllToAllOp::create(
            b, loc, RankedTensorType::get(shape, type().getElementType()), cur,
            axesAttr(b, moving), b.getI64IntegerAttr(j), b.getI64IntegerAttr(i),
            Attribute()));
        from.dims[j] = to.dims[j];
        from.dims[i] = to.dims[i];
        break;
      }
    }
    // 3. Dimensions split differently: gather whole (or only over the
    // trailing axes where `to` keeps the leading ones: dp+tp rows into dp
    // rows), 4. then slice (only over the trailing axes where `to` adds
    // them: a tp piece into its dp rows, no gather).
    auto extends = [](const std::vector<std::string> &more,
                      const std::vector<std::string> &less) {
      return more.size() > less.size() && std::equal(less.begin(), less.end(), more.begin());
    };
    for (size_t d = 0; d < from.dims.size(); ++d) {
      if (from.dims[d].empty() || from.dims[d] == to.dims[d] || extends(to.dims[d], from.dims[d]))
        continue;
      std::vector<std::string> kept;
      if (to.dims[d].size() < from.dims[d].size() &&
          std::equal(to.dims[d].begin(), to.dims[d].end(), from.dims[d].begin()))
        kept = to.dims[d];
      std::vector<std::string> gathered(from.dims[d].begin() + kept.size(), from.dims[d].end());
      int64_t g = groupOf(mesh, gathered);
      cur = counted(AllGatherOp::create(b, loc, withDim(d, type().getDimSize(d) * g), cur,
                                        axesAttr(b, gathered), b.getI64IntegerAttr(d),
                                        Attribute()));
      from.dims[d] = kept;
    }
    for (size_t d = 0; d < to.dims.size(); ++d) {
      if (to.dims[d].empty() || from.dims[d] == to.dims[d])
        continue;
      std::vector<std::string> added(to.dims[d].begin() + from.dims[d].size(), to.dims[d].end());
      int64_t g = groupOf(mesh, added);
      cur = AllSliceOp::create(b, loc, withDim(d, type().getDimSize(d) / g), cur,
                               axesAttr(b, added), b.getI64IntegerAttr(d));
    }
    return cur;
  }

  RankedTensorType localType(RankedTensorType global, const Sharding &s) {
    SmallVector<int64_t> shape(global.getShape());
    for (size_t d = 0; d < shape.size() && d < s.dims.size(); ++d)
      shape[d] /= groupOf(mesh, s.dims[d]);
    return RankedTensorType::get(shape, global.getElementType());
  }

  LogicalResult partitionOp(Operation *op) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto operandAttr = op->getAttrOfType<ArrayAttr>("dist.operand_shardings");
    auto resultAttr = op->getAttrOfType<ArrayAttr>("dist.result_shardings");

    if (auto annotate = dyn_cast<AnnotateOp>(op)) {
      Local in = locals.lookup(annotate.getInput());
      Sharding to = Sharding::fromAttr(annotate.getSharding());
      // ZeRO-3's dist.regather: a gather of its own for this use (not the
      // one an earlier use made, which would keep the whole parameter alive
      // between), prefetched by dist-async-collectives.
      bool regather = annotate->hasAttr("dist.regather");
      Value local = reshard(b, loc, in.value, in.sharding, to, /*reuse=*/!regather);
      if (Operation *def = local.getDefiningOp(); regather && isa_and_nonnull<AllGatherOp>(def))
        def->setAttr("dist.prefetch", UnitAttr::get(&getContext()));
      locals[annotate.getResult()] = {local, to};
      return success();
    }
    // A pipeline stage's send and receive (dist-pipeline) move this rank's
    // piece of the value, as their `dist.sharding` says.
    if (isa<RecvStartOp, SendStartOp, WaitOp>(op)) {
      auto attr = op->getAttrOfType<ShardingAttr>("dist.sharding");
      if (auto recv = dyn_cast<RecvStartOp>(op)) {
        auto payload = cast<RankedTensorType>(cast<TokenType>(recv.getType()).getPayload());
        Sharding s = attr ? Sharding::fromAttr(attr) : Sharding::replicated(payload.getRank());
        recv.getResult().setType(TokenType::get(ctx, localType(payload, s)));
        tokenShardings[recv.getResult()] = s;
        noteAxes(s);
      } else if (auto send = dyn_cast<SendStartOp>(op)) {
        Local in = locals.lookup(send.getInput());
        if (!in.value)
          return op->emitOpError("operand 0 was not partitioned");
        auto type = cast<RankedTensorType>(send.getInput().getType());
        Sharding s = attr ? Sharding::fromAttr(attr) : Sharding::replicated(type.getRank());
        op->setOperand(0, reshard(b, loc, in.value, in.sharding, s));
      } else if (auto wait = cast<WaitOp>(op); wait.getResult()) {
        auto it = tokenShardings.find(wait.getToken());
        if (it == tokenShardings.end())
          return op->emitOpError("waits on a collective the partitioner did not see");
        wait.getResult().setType(
            cast<RankedTensorType>(cast<TokenType>(wait.getToken().getType()).getPayload()));
        locals[wait.getResult()] = {wait.getResult(), it->second};
      }
      op->removeAttr("dist.sharding");
      op->removeAttr("dist.operand_shardings");
      op->removeAttr("dist.result_shardings");
      return success();
    }
    if (ShardingAttr attr = shardingOfVariable(op)) {
      // ZeRO state: each rank holds (and checkpoints) only its piece.
      auto var = cast<hpc::VariableOp>(op);
      Sharding s = Sharding::fromAttr(attr);
      if (std::optional<ElementsAttr> value = var.getValue()) {
        // The whole initial value is stored once, piece after piece; each
        // rank's state starts from its piece. Pieces along dimension 0 (a
        // ZeRO-3 parameter's rows, a row-parallel weight) are that already;
        // along another (a column-parallel weight) they are rearranged.
        auto split = llvm::make_filter_range(llvm::seq<size_t>(0, s.dims.size()),
                                             [&](size_t d) { return !s.dims[d].empty(); });
        if (llvm::range_size(split) != 1)
          return op->emitOpError("a sharded variable with initial data must be split along "
                                 "one dimension");
        int64_t dim = *split.begin();
        auto type = cast<RankedTensorType>(var.getType());
        ElementsAttr whole = *value;
        if (llvm::any_of(type.getShape().take_front(dim), [](int64_t n) { return n != 1; })) {
          int64_t pieces = groupOf(mesh, s.dims[dim]);
          RankedTensorType local = localType(type, s);
          SmallVector<int64_t> majorShape(local.getShape());
          majorShape[0] *= pieces;
          auto majorType = RankedTensorType::get(majorShape, type.getElementType());
          // A splat stays a splat (dist-weight-pieces' pieceData does the same).
          if (auto dense = dyn_cast<DenseElementsAttr>(whole); dense && dense.isSplat()) {
            whole = dense.resizeSplat(majorType);
          } else {
            FailureOr<std::string> bytes = hpc::elementBytesOf(whole);
            if (failed(bytes) || type.getElementTypeBitWidth() % 8 != 0)
              return op->emitOpError("has initial data the compiler cannot split");
            std::string major = hpc::pieceMajorBytes(
                *bytes, type.getShape(), type.getElementTypeBitWidth() / 8, dim, pieces);
            whole = hpc::elementsFromBytes(majorType, var.getName(),
                                           ArrayRef<char>(major.data(), major.size()));
          }
          // Whoever reads the weights by name learns how (dist-weight-pieces' form).
          op->setAttr("dist.init_pieces_of",
                      b.getDictionaryAttr({b.getNamedAttr("shape", b.getDenseI64ArrayAttr(
                                                                       type.getShape())),
                                           b.getNamedAttr("dim", b.getI64IntegerAttr(dim))}));
        }
        op->setAttr("dist.global_value", whole);
        op->setAttr("dist.rank_rows", axesAttr(b, s.dims[dim]));
        var.removeValueAttr();
      }
      // Which mesh axes split each dimension: checkpoints record the global
      // slice each rank holds, so another plan can reshard them.
      SmallVector<Attribute> split;
      for (const std::vector<std::string> &axes : s.dims)
        split.push_back(axesAttr(b, axes));
      op->setAttr("dist.state_split", b.getArrayAttr(split));
      var.getResult().setType(localType(cast<RankedTensorType>(var.getType()), s));
      locals[var.getResult()] = {var.getResult(), s};
      noteAxes(s);
      op->removeAttr("dist.sharding");
      return success();
    }
    if (!operandAttr || !resultAttr) {
      // Weight-derived: whole on every rank, unchanged.
      for (Value r : op->getResults())
        locals[r] = {r, Sharding::replicated(cast<RankedTensorType>(r.getType()).getRank())};
      return success();
    }
    SmallVector<Sharding> results;
    for (Attribute a : resultAttr)
      results.push_back(Sharding::fromAttr(cast<ShardingAttr>(a)));
    // Operands to the shardings the op needs.
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      Local in = locals.lookup(operand);
      if (!in.value)
        return op->emitOpError("operand ") << i << " was not partitioned";
      Sharding need = Sharding::fromAttr(cast<ShardingAttr>(operandAttr[i]));
      // An optimizer update writes its state in place: a resharded copy
      // would take the update and lose it.
      if (llvm::is_contained(hpc::inPlaceOperands(op), i) && !(need == in.sharding))
        return op->emitOpError("would update a resharded copy of its state operand ")
               << i << "; only replicated training state (data parallelism) is supported";
      op->setOperand(i, reshard(b, loc, in.value, in.sharding, need));
    }
    op->removeAttr("dist.operand_shardings");
    op->removeAttr("dist.result_shardings");
    if (op->getNumResults() == 0)
      return success();

    // gemm adds beta*C after the contraction: with a split reduction, add it
    // once, after the partial sums are reduced.
    auto gemm = dyn_cast<hpc::GemmOp>(op);
    Value gemmC;
    if (gemm && gemm.getC() && !results[0].partial.empty()) {
      gemmC = gemm.getC();
      op->eraseOperand(2);
    }

    SmallVector<RankedTensorType> expected;
    for (auto [r, result] : llvm::enumerate(op->getResults()))
      expected.push_back(localType(cast<RankedTensorType>(result.getType()), results[r]));
    hpc::setLocalResultShape(op, expected[0].getShape());
    auto infer = dyn_cast<InferTypeOpInterface>(op);
    SmallVector<Type> inferred;
    if (!infer ||
        failed(infer.inferReturnTypes(ctx, loc, op->getOperands(), op->getRawDictionaryAttrs(),
                                      op->getPropertiesStorage(), op->getRegions(), inferred)))
      return op->emitOpError("cannot compute its local result types");
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      if (inferred[r] != expected[r])
        return op->emitOpError("local result type ")
               << inferred[r] << " differs from the planned " << expected[r];
      result.setType(inferred[r]);
      locals[result] = {result, results[r]};
      noteAxes(results[r]);
    }
    if (gemmC) {
      b.setInsertionPointAfter(op);
      Value reduced = reshard(b, loc, op->getResult(0), results[0],
                              Sharding{results[0].dims, {}});
      Sharding cSharding = results[0];
      cSharding.partial.clear();
      // C broadcasts: its own dims follow the result's trailing dims.
      auto ct = cast<RankedTensorType>(gemmC.getType());
      Sharding cNeed = Sharding::replicated(ct.getRank());
      for (int64_t d = 0; d < ct.getRank(); ++d) {
        int64_t r = 2 - ct.getRank() + d;
        if (ct.getDimSize(d) != 1)
          cNeed.dims[d] = cSharding.dims[r];
      }
      Local c = locals.lookup(gemmC);
      Value cLocal = reshard(b, loc, c.value, c.sharding, cNeed);
      Value sum = hpc::addGemmBias(b, loc, gemm, reduced, cLocal);
      op->getResult(0).replaceAllUsesExcept(sum, reduced.getDefiningOp());
      // Later ops now use `sum` directly; it is already local.
      locals[sum] = {sum, cSharding};
    }
    return success();
  }

  /// A train step's data inputs arrive split over dp (and ep): each
  /// data-parallel rank's train command reads only its rows of the global
  /// batch (the manifest's input shape says how many), instead of every
  /// rank reading the whole batch and slicing it.
  void splitBatchInputs(func::FuncOp func) {
    std::vector<std::string> data = dataAxes(mesh);
    if (data.empty())
      return;
    int64_t size = groupOf(mesh, data);
    SmallVector<Type> inputs;
    for (BlockArgument arg : func.getArguments()) {
      auto type = cast<RankedTensorType>(arg.getType());
      if (type.getRank() > 0 && type.getDimSize(0) % size == 0) {
        Sharding s = Sharding::replicated(type.getRank());
        s.dims[0] = data;
        arg.setType(localType(type, s));
        locals[arg] = {arg, s};
        noteAxes(s);
      }
      inputs.push_back(arg.getType());
    }
    func.setType(FunctionType::get(func.getContext(), inputs, func.getResultTypes()));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // A pass instance runs on many modules (one PassManager): nothing of the
    // last run's values may survive into this one.
    locals.clear();
    tokenShardings.clear();
    bytesPerRank = 0;
    collectives = 0;
    usedAxes.clear();
    resharded.clear();
    mesh = module->getAttrOfType<MeshAttr>("dist.mesh");
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!mesh || !func) {
      module.emitError("dist-partition needs a 'dist.mesh' module attribute and "
                       "func.func @main (run dist-propagate first)");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    for (BlockArgument arg : body.getArguments())
      locals[arg] = {arg, Sharding::replicated(cast<RankedTensorType>(arg.getType()).getRank())};
    if (module->hasAttr("hpc.train"))
      splitBatchInputs(func);
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        OpBuilder b(ret);
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          Local l = locals.lookup(v);
          auto rank = cast<RankedTensorType>(v.getType()).getRank();
          ret.setOperand(i, reshard(b, ret.getLoc(), l.value, l.sharding,
                                    Sharding::replicated(rank)));
        }
        continue;
      }
      if (failed(partitionOp(op)))
        return signalPassFailure();
    }
    // Annotations have done their work.
    for (Operation *op : ops)
      if (auto annotate = dyn_cast<AnnotateOp>(op)) {
        annotate.getResult().replaceAllUsesWith(locals.lookup(annotate.getResult()).value);
        annotate.erase();
      }
    sumBeforeReducing(body);
    combineReducedSums(body);
    module->setAttr("dist.bytes_per_rank",
                    IntegerAttr::get(IntegerType::get(&getContext(), 64), bytesPerRank));
    if (report) {
      llvm::errs() << "dist-partition: each rank sends " << bytesPerRank
                   << " bytes per step in " << collectives << " collectives on mesh "
                   << mesh << "\n";
      // An axis nothing is split over makes its ranks repeat each other's
      // work (a batch of 1 under dp, a model without weight contractions
      // under tp): correct, but worth knowing before launching them.
      // (A pipeline stage's pp axis splits stages, not tensors.)
      for (auto [name, size] : llvm::zip(mesh.getNames(), mesh.getSizes()))
        if (size > 1 && !usedAxes.contains(name.getValue()) && name.getValue() != "pp")
          llvm::errs() << "dist-partition: note: mesh axis '" << name.getValue()
                       << "' splits no tensor; its " << size
                       << " ranks compute the same values\n";
    }
  }
};

} // namespace
