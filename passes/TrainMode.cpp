//===- TrainMode.cpp - batch norm on batch statistics for training --------===//
//
// hpc-train-mode: a train step in PyTorch's train mode normalizes each batch
// with its own statistics and keeps the running statistics as state, and
// its dropouts drop: each multiplies by a mask drawn from a counter-based
// generator keyed by a seed in the state and the step number. The
// statistics are sums scaled by the global count (not means), so that a
// data-parallel partition sums them over ranks like any reduction over the
// batch, and hpc-autodiff differentiates through the composite.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"

#include "HPC/HPCBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace hpc {
#define GEN_PASS_DEF_HPCTRAINMODE
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc;

namespace {

/// A running statistic's state: the weight becomes a variable (role
/// "buffer"); a value of any other kind is not kept.
Value runningState(Value v) {
  auto w = v.getDefiningOp<WeightOp>();
  if (!w || !w.getValue())
    return {};
  OpBuilder b(w);
  auto var = VariableOp::create(b, w.getLoc(), w.getType(), w.getNameAttr(), w.getValueAttr(),
                                b.getStringAttr("buffer"));
  w.getResult().replaceAllUsesWith(var.getResult());
  w.erase();
  return var.getResult();
}

struct HPCTrainMode : hpc::impl::HPCTrainModeBase<HPCTrainMode> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.getBody().empty())
      return;
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    SmallVector<BatchNormOp> norms(body.getOps<BatchNormOp>());
    for (BatchNormOp bn : norms)
      if (failed(rewrite(bn, ret)))
        return signalPassFailure();
    SmallVector<DropoutOp> drops(body.getOps<DropoutOp>());
    int64_t stream = 0;
    Value seedState, stepInputValue;
    for (DropoutOp d : drops) {
      if (d.getRatio().convertToDouble() == 0) {
        d.getResult().replaceAllUsesWith(d.getInput());
        d.erase();
        continue;
      }
      if (!seedState) {
        seedState = rngSeed(body);
        stepInputValue = stepInput(func);
      }
      OpBuilder b(d);
      GraphBuilder g(b, d.getLoc());
      Value mask = DropoutMaskOp::create(b, d.getLoc(), d.getType(), seedState, stepInputValue,
                                         d.getRatioAttr(), b.getI64IntegerAttr(stream++));
      Value y = g.mul(d.getInput(), mask);
      if (!g.ok())
        return signalPassFailure();
      d.getResult().replaceAllUsesWith(y);
      d.erase();
    }
  }

  /// The random generator's seed: a 0-d i64 state tensor (checkpointed),
  /// initialized from the pass's `seed`.
  Value rngSeed(Block &body) {
    OpBuilder b(&body, body.begin());
    auto type = RankedTensorType::get({}, b.getI64Type());
    auto init = cast<ElementsAttr>(DenseElementsAttr::get(type, int64_t(seed)));
    return VariableOp::create(b, body.getParentOp()->getLoc(), type,
                              b.getStringAttr("hpc.rng_seed"), init, b.getStringAttr("rng"))
        .getResult();
  }

  /// The step number input "hpc.step" (hpc-optimizer reuses it).
  static Value stepInput(func::FuncOp func) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto n = func.getArgAttrOfType<StringAttr>(i, "hpc.name"); n && n == "hpc.step")
        return func.getArgument(i);
    Builder b(func.getContext());
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(index, RankedTensorType::get({}, b.getI64Type()),
                              b.getDictionaryAttr(b.getNamedAttr("hpc.name",
                                                                 b.getStringAttr("hpc.step"))),
                              func.getLoc());
    return func.getArgument(index);
  }

  LogicalResult rewrite(BatchNormOp bn, Operation *ret) {
    OpBuilder b(bn);
    GraphBuilder g(b, bn.getLoc());
    Value x = bn.getInput();
    ArrayRef<int64_t> xs = shapeOf(x);
    SmallVector<int64_t> axes{0}, pshape(xs.size(), 1);
    int64_t count = xs[0];
    for (int64_t d = 2; d < int64_t(xs.size()); ++d) {
      axes.push_back(d);
      count *= xs[d];
    }
    pshape[1] = xs[1];
    auto perChannel = [&](Value v) { return g.reshape(v, pshape); };
    Value mean = g.scale(g.reduceSum(x, axes, true), 1.0 / double(count));
    Value xc = g.sub(x, mean);
    Value var = g.scale(g.reduceSum(g.mul(xc, xc), axes, true), 1.0 / double(count));
    Value eps = g.scalarLike(x, bn.getEpsilon().convertToDouble());
    Value rstd = g.op<ReciprocalOp>({g.op<SqrtOp>({g.add(var, eps)})});
    Value y = g.add(g.mul(g.mul(xc, rstd), perChannel(bn.getScale())), perChannel(bn.getBias()));
    if (!g.ok())
      return bn.emitOpError("does not build in train mode (a compiler bug)");
    bn.getResult().replaceAllUsesWith(y);

    // Running statistics, updated at the end of the step.
    double m = bn.getMomentum().convertToDouble();
    Value runningMean = runningState(bn.getMean()), runningVar = runningState(bn.getVariance());
    bn.erase();
    b.setInsertionPoint(ret);
    GraphBuilder end(b, y.getLoc());
    auto update = [&](Value running, Value batch, double unbias) {
      if (!running)
        return;
      Value stat = end.reshape(batch, shapeOf(running));
      Value kept = end.scale(running, m);
      Value next = end.add(kept, end.scale(stat, (1 - m) * unbias));
      end.make(AssignOp::getOperationName(), {running, next});
    };
    update(runningMean, mean, 1.0);
    update(runningVar, var, count > 1 ? double(count) / double(count - 1) : 1.0);
    return success(end.ok());
  }
};

} // namespace
