//===- MicroBatches.cpp - a step's batch in micro-batches, gradients summed ===//
//
// hpc-micro-batches runs between hpc-autodiff and hpc-optimizer, on @main
// built for one micro-batch of b rows (loss and gradients returned). It
// makes @main take M x b rows and run the forward and backward pass M
// times, one micro-batch after the other, accumulating the gradients and
// the loss as means over the micro-batches: the optimizer that follows
// sees the gradients of the whole batch's mean loss, as gradient
// accumulation in PyTorch does, while only one micro-batch's activations
// are alive at a time (the memory plan frees each one's before the next
// starts). The ops that do not read the batch (weights, their transposes,
// constants) run once and are shared. A cross entropy weighs each
// micro-batch by its count of labels (lossWeight): in the seed its backward
// pass starts from (hpc-autodiff's hpc.loss_scale input), so that its
// gradients come out weighted and each costs one add a micro-batch (which
// hpc-fuse-epilogues moves into the weight gradient's gemm). State the step
// assigns is carried from one micro-batch to the next.
//
// With a `mesh` whose dp axis has G > 1 ranks (the mesh the step is then
// partitioned over) micro-batch m takes rows [m b/G, (m+1) b/G) of each of the G
// blocks of M b / G rows: the block a data-parallel rank holds, so each
// micro-batch stays split over the ranks the way the whole batch is and
// partitioning needs no exchange of rows.
//
// A gradient that sums the parts of two pipeline stages (a tied embedding:
// the lookup's part on the first stage, the head's on the last) is
// accumulated part by part and added once at the end, so that dist-pipeline
// sends the other stage's part once a step instead of once a micro-batch.
//
//===----------------------------------------------------------------------===//

#include "DistSharding.h"
#include "hpc/Passes.h"

#include "HPC/HPCBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace hpc {
#define GEN_PASS_DEF_HPCMICROBATCHES
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc;

namespace {

struct HPCMicroBatches : hpc::impl::HPCMicroBatchesBase<HPCMicroBatches> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (count < 1) {
      module.emitError() << "hpc-micro-batches: count must be at least 1, not " << int64_t(count);
      return signalPassFailure();
    }
    if (count == 1)
      return;
    int64_t groups = 1; // the dp ranks: blocks that each hold a piece of every micro-batch
    if (!mesh.empty()) {
      std::string error;
      FailureOr<dist::MeshAttr> parsed = dist::parseMesh(&getContext(), mesh, error);
      if (failed(parsed)) {
        module.emitError(error);
        return signalPassFailure();
      }
      if (int64_t dp = parsed->axisIndex("dp"); dp >= 0)
        groups = parsed->getSizes()[dp];
    }
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.getBody().empty()) {
      module.emitError("hpc-micro-batches needs a func.func @main with a body");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (failed(checkResults(func)))
      return signalPassFailure();

    // The batch: every argument of rank >= 1, each b rows.
    SmallVector<BlockArgument> batch;
    int64_t rows = -1;
    for (BlockArgument arg : body.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0)
        continue;
      if (rows >= 0 && type.getDimSize(0) != rows) {
        func.emitError() << "hpc-micro-batches: the inputs disagree on the batch: "
                         << rows << " and " << type.getDimSize(0)
                         << " rows (input " << arg.getArgNumber() << ")";
        return signalPassFailure();
      }
      rows = type.getDimSize(0);
      batch.push_back(arg);
    }
    if (batch.empty()) {
      func.emitError("hpc-micro-batches: @main has no batch input to split");
      return signalPassFailure();
    }
    if (rows % groups != 0) {
      func.emitError() << "hpc-micro-batches: a micro-batch of " << rows
                       << " rows does not split over " << groups
                       << " data-parallel ranks (the batch must be a multiple of "
                       << count * groups << ")";
      return signalPassFailure();
    }

    // The ops that read the batch, in order; dropout masks too, so that
    // each micro-batch draws its own.
    llvm::SetVector<Operation *> perBatch;
    llvm::DenseSet<Value> batchValues(batch.begin(), batch.end());
    // State a step assigns (running statistics) changes from one
    // micro-batch to the next: what reads it runs per micro-batch too.
    for (Operation &op : body.without_terminator())
      if (auto assign = dyn_cast<AssignOp>(op))
        batchValues.insert(assign.getTarget());
    // A micro-batch's weight goes into its backward pass's seed (a scalar)
    // rather than onto each of its gradients (a pass over every weight's
    // size per micro-batch): the backward is linear in its seed, so seeded
    // with the weight it computes the weighted gradients themselves.
    Value weightOfOne = lossWeight(ret);
    Value seed = weightOfOne ? backwardSeed(func, weightOfOne) : Value();
    llvm::DenseSet<Value> seeded; // the values the seed reaches
    if (seed) {
      batchValues.insert(seed);
      seeded.insert(seed);
    }
    int64_t streams = 0;
    for (Operation &op : body.without_terminator()) {
      if (auto mask = dyn_cast<DropoutMaskOp>(op))
        streams = std::max<int64_t>(streams, mask.getStream() + 1);
      bool reads = isa<DropoutMaskOp>(op) ||
                   llvm::any_of(op.getOperands(), [&](Value v) { return batchValues.count(v); });
      if (!reads)
        continue;
      perBatch.insert(&op);
      batchValues.insert(op.getResults().begin(), op.getResults().end());
      if (llvm::any_of(op.getOperands(), [&](Value v) { return seeded.count(v); }))
        seeded.insert(op.getResults().begin(), op.getResults().end());
    }

    // The arguments now hold the whole batch.
    SmallVector<Type> inputs(func.getArgumentTypes());
    for (BlockArgument arg : batch) {
      auto type = cast<RankedTensorType>(arg.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= count;
      arg.setType(type.clone(shape));
      inputs[arg.getArgNumber()] = arg.getType();
    }
    func.setType(FunctionType::get(&getContext(), inputs, func.getResultTypes()));

    // M copies, one after the other before the return, each on its rows.
    // Each result joins its running sum, weighted by the micro-batch's
    // share of the loss (lossWeight), right where the copy makes it: a
    // micro-batch's gradient dies as soon as it is added (no second set of
    // gradients alive at the end of a copy), and in the last micro-batch
    // each gradient's reduction can start while the backward goes on (the
    // overlap of dist-async-collectives, as in DDP).
    if (weightOfOne && !batchValues.count(weightOfOne))
      weightOfOne = {}; // a count that does not depend on the batch: equal weights
    OpBuilder b(ret);
    GraphBuilder g(b, func.getLoc());
    SmallVector<Value> results(ret.getOperands());
    llvm::DenseMap<Value, SmallVector<unsigned>> resultIndices;
    for (auto [i, r] : llvm::enumerate(results))
      if (batchValues.count(r))
        resultIndices[r].push_back(i);
    // Per result, the running sum of each of its parts (stageParts).
    SmallVector<SmallVector<Value, 2>> sums(results.size());
    Value weights;
    // State a micro-batch assigns (train mode's running statistics) is
    // what the next one reads, as the micro-batches' forward passes update
    // it one after the other in PyTorch; only the last one is written.
    llvm::MapVector<Value, Value> carried;
    for (int64_t m = 0; m < count; ++m) {
      IRMapping map;
      for (auto [state, value] : carried)
        map.map(state, value);
      for (BlockArgument arg : batch)
        map.map(arg, microBatch(g, arg, rows, groups, m));
      // Results made before this micro-batch's weight is known wait for it.
      SmallVector<unsigned> waiting;
      Value w;
      // Sums of two stages' parts, left unused by their parts' sums.
      SmallVector<Operation *> splitSums;
      auto accumulate = [&](unsigned i) {
        Value whole = map.lookup(results[i]);
        SmallVector<Value, 2> parts = stageParts(whole);
        if (parts.size() > 1)
          splitSums.push_back(whole.getDefiningOp());
        for (auto [k, v] : llvm::enumerate(parts)) {
          if (weightOfOne && !(seed && seeded.count(results[i])))
            v = g.mul(v, g.castTo(w, cast<RankedTensorType>(v.getType()).getElementType()));
          if (m == 0)
            sums[i].push_back(v);
          else
            sums[i][k] = g.add(sums[i][k], v);
        }
        if (m + 1 < count)
          return;
        // The mean, right after the last term: where the result's
        // reduction may start.
        Value sum = sums[i].front();
        for (Value part : llvm::drop_begin(sums[i]))
          sum = g.add(sum, part);
        auto type = cast<RankedTensorType>(results[i].getType());
        ret.setOperand(i, weights ? g.div(sum, g.castTo(weights, type.getElementType()))
                                  : g.scale(sum, 1.0 / double(count)));
      };
      for (Operation *op : perBatch) {
        if (auto assign = dyn_cast<AssignOp>(op); assign && m + 1 < count) {
          carried[assign.getTarget()] = map.lookupOrDefault(assign.getValue());
          continue;
        }
        Operation *copy = b.clone(*op, map);
        if (copy->hasAttr(kStageAttr))
          copy->setAttr(kMicroBatchAttr, b.getI64IntegerAttr(m));
        if (auto assign = dyn_cast<AssignOp>(copy))
          assign->setOperand(0, cast<AssignOp>(op).getTarget()); // the state itself
        if (auto mask = dyn_cast<DropoutMaskOp>(copy))
          mask.setStream(mask.getStream() + m * streams);
        if (weightOfOne && !w && (w = map.lookupOrNull(weightOfOne))) {
          weights = m == 0 ? w : g.add(weights, w);
          if (seed)
            map.map(seed, g.mul(seed, g.castTo(w, cast<RankedTensorType>(seed.getType())
                                                      .getElementType())));
          for (unsigned i : waiting)
            accumulate(i);
          waiting.clear();
        }
        for (Value r : op->getResults()) {
          auto it = resultIndices.find(r);
          if (it == resultIndices.end())
            continue;
          for (unsigned i : it->second) {
            if (weightOfOne && !w)
              waiting.push_back(i);
            else
              accumulate(i);
          }
        }
      }
      if (!waiting.empty()) {
        func.emitError("hpc-micro-batches: the loss's count of labels is not computed "
                       "in the micro-batch");
        return signalPassFailure();
      }
      for (Operation *op : splitSums)
        if (op->use_empty())
          op->erase();
    }
    if (!g.ok())
      return signalPassFailure();
    for (Operation *op : llvm::reverse(perBatch))
      op->erase();
    // For hpc-optimizer's train info (the runtime's `info` shows it).
    module->setAttr("hpc.micro_batches", b.getI64IntegerAttr(count));
  }

  /// The parts of a gradient to accumulate apart: {x, y} when it is x + y
  /// of two pipeline stages' values (the stage tags of dist-pipeline-stages
  /// and hpc-autodiff), else {v}. The parts have the sum's type, so the
  /// reassociation changes nothing but the rounding of the sum.
  static SmallVector<Value, 2> stageParts(Value v) {
    auto add = v.getDefiningOp<AddOp>();
    if (!add || add.getLhs().getType() != v.getType() || add.getRhs().getType() != v.getType())
      return {v};
    std::optional<int64_t> a = madeOn(add.getLhs(), kStageSearchDepth),
                           b = madeOn(add.getRhs(), kStageSearchDepth);
    if (!a || !b || *a == *b)
      return {v};
    return {add.getLhs(), add.getRhs()};
  }

  static constexpr int kStageSearchDepth = 8;

  /// The stage a value is made on: its op's stage tag, else (an op the
  /// tagging left out: the lookup's scatter, a transpose) the stage of its
  /// largest operand that has one, within `depth` ops (dist-pipeline's
  /// rule for the ops it places).
  static std::optional<int64_t> madeOn(Value v, int depth) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return std::nullopt;
    if (auto tag = def->getAttrOfType<IntegerAttr>(kStageAttr))
      return tag.getInt();
    if (depth == 0)
      return std::nullopt;
    SmallVector<Value> operands(def->getOperands());
    auto elements = [](Value x) {
      auto t = dyn_cast<RankedTensorType>(x.getType());
      return t && t.hasStaticShape() ? t.getNumElements() : 0;
    };
    llvm::stable_sort(operands, [&](Value x, Value y) { return elements(x) > elements(y); });
    for (Value x : operands)
      if (auto s = madeOn(x, depth - 1))
        return s;
    return std::nullopt;
  }

  /// Rows [m b, (m+1) b) of `arg`, or with G groups rows [m b/G, (m+1) b/G)
  /// of each of its G blocks.
  Value microBatch(GraphBuilder &g, Value arg, int64_t rows, int64_t G, int64_t m) {
    auto type = cast<RankedTensorType>(arg.getType());
    ArrayRef<int64_t> rest = type.getShape().drop_front();
    int64_t per = rows / G;
    // [G, M, b/G, rest...], the m-th of dimension 1, back to [b, rest...].
    SmallVector<int64_t> blocks{G, int64_t(count), per};
    llvm::append_range(blocks, rest);
    Value v = g.reshape(arg, blocks);
    SmallVector<int64_t> starts(blocks.size(), 0), ends(blocks), steps(blocks.size(), 1);
    starts[1] = m;
    ends[1] = m + 1;
    SmallVector<int64_t> sliced(blocks);
    sliced[1] = 1;
    OpBuilder &b = g.builder();
    v = SliceOp::create(b, arg.getLoc(), type.clone(sliced), v, b.getDenseI64ArrayAttr(starts),
                        b.getDenseI64ArrayAttr(ends), b.getDenseI64ArrayAttr(steps));
    SmallVector<int64_t> shape{rows};
    llvm::append_range(shape, rest);
    return g.reshape(v, shape);
  }

  /// The weight of a micro-batch in the step's loss: a cross entropy is
  /// the mean over the labels it counts (not -100), so micro-batch m
  /// weighs its count c_m and the step's loss and gradients are
  /// sum_m c_m x_m / sum_m c_m, the whole batch's mean even where ignored
  /// labels leave the micro-batches unequal counts. Null for a loss
  /// without a count (a mean squared error, an output): equal weights.
  static Value lossWeight(func::ReturnOp ret) {
    auto func = ret->getParentOfType<func::FuncOp>();
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (auto name = func.getResultAttrOfType<StringAttr>(i, "hpc.name");
          name && name.getValue() == "loss")
        return crossEntropyCount(ret.getOperand(i));
    return {};
  }

  /// The seed hpc-autodiff starts the backward pass from (its 0-d
  /// hpc.loss_scale input), where every op that reads it comes after the
  /// op that counts the micro-batch's labels (`count`), so that each
  /// micro-batch's copy of them can read the seed times its own count.
  /// Null otherwise (a seed autodiff made a constant): the gradients are
  /// weighted one by one.
  static Value backwardSeed(func::FuncOp func, Value count) {
    Operation *counted = count.getDefiningOp();
    if (!counted)
      return {};
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "hpc.name");
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!name || name.getValue() != "hpc.loss_scale" || !type || type.getRank() != 0 ||
          !isa<FloatType>(type.getElementType()))
        continue;
      for (Operation *user : arg.getUsers())
        if (user->getBlock() != counted->getBlock() || !counted->isBeforeInBlock(user))
          return {};
      return arg;
    }
    return {};
  }

  /// The results must be means over the batch that can be averaged: a 0-d
  /// float loss and gradients (hpc-autodiff's results).
  LogicalResult checkResults(func::FuncOp func) {
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[i]);
      if (!type || !isa<FloatType>(type.getElementType()))
        return func.emitError() << "hpc-micro-batches: result " << i
                                << " is not a float tensor (run it after hpc-autodiff)";
    }
    return success();
  }
};

} // namespace
