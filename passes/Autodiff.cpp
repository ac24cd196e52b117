//===- Autodiff.cpp - reverse-mode gradients of @main's loss --------------===//
//
// hpc-autodiff: finds the trainable weights (float hpc.weights that reach the
// loss through a differentiable path, except buffers and frozen names), turns
// them into state (hpc.variable), and appends the backward pass: the ops of
// the forward graph are visited in reverse and each builds its operands'
// gradients through GradientInterface. Gradients of a value used several
// times are summed. @main then returns the loss and one gradient per
// trainable weight.
//
//===----------------------------------------------------------------------===//

#include "hpc/Recompute.h"
#include "hpc/Passes.h"

#include "Dist/DistOps.h"
#include "HPC/HPCBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

namespace hpc {
#define GEN_PASS_DEF_HPCAUTODIFF
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc;

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// Buffers are recognised by their use: a weight read only as batch-norm
/// running statistics is not a parameter.
bool isBuffer(WeightOp w) {
  return !w->use_empty() && llvm::all_of(w->getUses(), [](OpOperand &use) {
    return isa<BatchNormOp>(use.getOwner()) && use.getOperandNumber() >= 3;
  });
}

/// The values that depend on `seeds` (forward) and that the loss depends on
/// (backward): the ones that need a gradient.
llvm::DenseSet<Value> activeValues(Block &body, ArrayRef<Value> seeds, Value loss) {
  llvm::DenseSet<Value> varying(seeds.begin(), seeds.end()), useful{loss}, active;
  for (Operation &op : body)
    if (llvm::any_of(op.getOperands(), [&](Value v) { return varying.contains(v); }))
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          varying.insert(r);
  // Gradients flow only along float values: a weight that reaches the loss
  // only through a comparison or an index has none.
  for (Operation &op : llvm::reverse(body))
    if (llvm::any_of(op.getResults(), [&](Value r) { return useful.contains(r); }))
      for (Value v : op.getOperands())
        if (isFloatTensor(v))
          useful.insert(v);
  for (Value v : varying)
    if (useful.contains(v) && isFloatTensor(v))
      active.insert(v);
  return active;
}

struct HPCAutodiff : hpc::impl::HPCAutodiffBase<HPCAutodiff> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.getBody().empty()) {
      module.emitError("hpc-autodiff needs a func.func @main with a body");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = findLoss(func, ret);
    if (!loss)
      return signalPassFailure();

    // Candidates: float weights, not frozen, not buffers; the float inputs
    // with wrt-inputs.
    llvm::StringSet<> frozen;
    for (const std::string &name : freeze)
      frozen.insert(name);
    llvm::StringSet<> weightNames;
    SmallVector<Value> seeds;
    SmallVector<std::string> seedNames;
    for (auto w : llvm::make_early_inc_range(body.getOps<WeightOp>())) {
      weightNames.insert(w.getName());
      if (isFloatTensor(w.getResult()) && !frozen.contains(w.getName()) && !isBuffer(w)) {
        seeds.push_back(w.getResult());
        seedNames.push_back(w.getName().str());
      }
    }
    for (const std::string &name : freeze)
      if (!weightNames.contains(name)) {
        func.emitError("--freeze: no weight named '") << name << "'";
        return signalPassFailure();
      }
    if (wrtInputs)
      for (BlockArgument arg : func.getArguments())
        if (isFloatTensor(arg)) {
          seeds.push_back(arg);
          auto n = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "hpc.name");
          seedNames.push_back(n ? n.str() : "input" + std::to_string(arg.getArgNumber()));
        }

    llvm::DenseSet<Value> active = activeValues(body, seeds, loss);
    SmallVector<std::pair<Value, std::string>> trainable;
    for (auto [v, name] : llvm::zip(seeds, seedNames))
      if (active.contains(v))
        trainable.push_back({v, name});
    if (trainable.empty()) {
      func.emitError("no trainable parameters: no floating-point weight reaches the loss "
                     "through a differentiable path");
      return signalPassFailure();
    }
    if (failed(checkDifferentiable(body, active)))
      return signalPassFailure();

    std::optional<RecomputeMode> mode = parseRecomputeMode(recompute);
    if (!mode) {
      func.emitError("recompute must be none, full or selective, got '") << recompute << "'";
      return signalPassFailure();
    }
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(&op);
    SmallVector<Value> grads;
    // The gradient models read this while the backward is built
    // (hpc::kComposedGradientsAttr, HPCGradients.cpp).
    if (!fusedGradients)
      module->setAttr(hpc::kComposedGradientsAttr, UnitAttr::get(module.getContext()));
    LogicalResult built = buildBackward(body, ret, loss, active, trainable, grads);
    module->removeAttr(hpc::kComposedGradientsAttr);
    if (failed(built))
      return signalPassFailure();
    numTrainable = trainable.size();
    // Before the weights become variables: `forward` holds their ops.
    if (*mode != RecomputeMode::None) {
      SmallVector<Value> params;
      for (auto &[v, name] : trainable)
        params.push_back(v);
      RecomputeStats stats;
      recomputeActivations(body, forward, params, *mode, stats);
      llvm::errs() << "hpc-autodiff: recompute=" << recompute << ": ";
      if (*mode == RecomputeMode::Full)
        llvm::errs() << stats.checkpoints << " checkpoints, ";
      llvm::errs() << stats.segments << " segments recomputed ("
                   << stats.clonedOps << " forward ops computed again), "
                   << stats.freedBytes << " bytes of activations not kept for the backward\n";
      module->setAttr("hpc.recompute", OpBuilder(module).getStringAttr(recompute));
    }

    if (printTrainable) {
      int64_t elements = 0;
      for (auto &[v, name] : trainable)
        elements += cast<RankedTensorType>(v.getType()).getNumElements();
      llvm::outs() << "trainable: " << trainable.size() << " tensors, " << elements
                   << " elements\n";
      for (auto &[v, name] : trainable)
        llvm::outs() << "  " << name << " " << v.getType() << "\n";
    }

    // Trainable weights become state; @main returns the loss and gradients.
    OpBuilder b(func.getContext());
    for (auto &[v, name] : trainable)
      if (auto w = v.getDefiningOp<WeightOp>()) {
        b.setInsertionPoint(w);
        auto var = VariableOp::create(b, w.getLoc(), w.getType(), w.getNameAttr(),
                                      w.getValueAttr(), b.getStringAttr("param"));
        w.getResult().replaceAllUsesWith(var.getResult());
        w.erase();
      }
    SmallVector<Value> results{loss};
    results.append(grads);
    ret->setOperands(results);
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    for (Value r : results)
      types.push_back(r.getType());
    attrs.push_back(b.getDictionaryAttr(b.getNamedAttr("hpc.name", b.getStringAttr("loss"))));
    for (auto &[v, name] : trainable)
      attrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("hpc.name", b.getStringAttr("grad." + name)),
           b.getNamedAttr("hpc.gradient_of", b.getStringAttr(name))}));
    func.setType(b.getFunctionType(func.getArgumentTypes(), types));
    func.setAllResultAttrs(attrs);
  }

  /// The 0-d float result named "loss".
  Value findLoss(func::FuncOp func, func::ReturnOp ret) {
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "hpc.name");
      if (!name || name.getValue() != "loss")
        continue;
      Value v = ret.getOperand(i);
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getRank() != 0 || !isa<FloatType>(t.getElementType())) {
        func.emitError("the loss must be a 0-d floating-point tensor, got ") << t;
        return {};
      }
      return v;
    }
    func.emitError("@main has no result named \"loss\" (give --loss)");
    return {};
  }

  /// Every op that carries a gradient must have one; all are reported.
  LogicalResult checkDifferentiable(Block &body, const llvm::DenseSet<Value> &active) {
    bool ok = true;
    for (Operation &op : body) {
      if (isa<WeightOp, VariableOp, ConstantOp>(op) || isa<func::ReturnOp>(op))
        continue;
      bool carries = llvm::any_of(op.getResults(), [&](Value r) { return active.contains(r); });
      if (carries && !isa<GradientInterface, dist::AnnotateOp>(op)) {
        op.emitError() << "'" << op.getName() << "' has no gradient (it is on a path from a "
                       << "trainable weight to the loss)";
        ok = false;
      }
    }
    return success(ok);
  }

  /// The input hpc.loss_scale (a new 0-d f32 argument), as the loss's type.
  static Value lossScale(Block &body, GraphBuilder &g, Value loss) {
    auto func = cast<func::FuncOp>(body.getParentOp());
    Builder b(func.getContext());
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(
        index, RankedTensorType::get({}, b.getF32Type()),
        b.getDictionaryAttr(b.getNamedAttr("hpc.name", b.getStringAttr("hpc.loss_scale"))),
        func.getLoc());
    Value scale = func.getArgument(index);
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (lossType.getElementType() != b.getF32Type())
      scale = g.castTo(scale, lossType.getElementType());
    return scale;
  }

  LogicalResult buildBackward(Block &body, func::ReturnOp ret, Value loss,
                              const llvm::DenseSet<Value> &active,
                              ArrayRef<std::pair<Value, std::string>> trainable,
                              SmallVectorImpl<Value> &grads) {
    OpBuilder b(ret);
    GraphBuilder g(b, loss.getLoc());
    llvm::DenseMap<Value, Value> gradOf;
    gradOf[loss] = lossScaleInput ? lossScale(body, g, loss) : g.scalarLike(loss, 1.0);
    auto accumulate = [&](Value v, Value d) {
      Value &slot = gradOf[v];
      slot = slot ? GraphBuilder(b, d.getLoc()).add(slot, d) : d;
    };
    SmallVector<Operation *> forward;
    for (Operation &op : body)
      if (&op != ret.getOperation())
        forward.push_back(&op);
    int64_t before = std::distance(body.begin(), body.end());
    for (Operation *op : llvm::reverse(forward)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(active.contains(r) ? gradOf.lookup(r) : Value());
        any |= bool(resultGrads.back());
      }
      if (!any)
        continue;
      // A sharding constraint (hpc-route-experts' expert-parallel layout)
      // holds for the gradient too: the backward pass moves it alike.
      if (auto annotate = dyn_cast<dist::AnnotateOp>(op)) {
        accumulate(annotate.getInput(),
                   dist::AnnotateOp::create(b, annotate.getLoc(), resultGrads[0].getType(),
                                            resultGrads[0], annotate.getSharding()));
        continue;
      }
      // Leaves (weights, the seeds) have no operands to differentiate.
      auto iface = dyn_cast<GradientInterface>(op);
      if (!iface)
        continue;
      SmallVector<Value> operandGrads;
      // A pipeline stage's gradient ops run on its stage (dist-pipeline).
      Attribute stage = op->getAttr(kStageAttr);
      auto tagSince = [&](Operation *last) {
        if (stage)
          for (Operation *made = last->getNextNode(); made != ret.getOperation();
               made = made->getNextNode()) {
            made->setAttr(kStageAttr, stage);
            made->setAttr(kBackwardAttr, b.getUnitAttr());
          }
      };
      Operation *last = ret->getPrevNode();
      if (failed(iface.buildGradients(b, resultGrads, operandGrads)))
        return failure();
      tagSince(last);
      for (auto [v, d] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!d || !active.contains(v))
          continue;
        if (d.getType() != v.getType())
          return op->emitOpError("gradient type ")
                 << d.getType() << " does not match operand type " << v.getType()
                 << " (a compiler bug)";
        last = ret->getPrevNode();
        accumulate(v, d);
        tagSince(last);
      }
    }
    for (auto &[v, name] : trainable) {
      Value d = gradOf.lookup(v);
      grads.push_back(d ? d : g.zerosLike(v));
    }
    numGradientOps = std::distance(body.begin(), body.end()) - before;
    return success(g.ok());
  }
};

} // namespace
