//===- Optimizer.cpp - the optimizer step that closes a train step --------===//
//
// hpc-optimizer turns @main (loss + gradients, from hpc-autodiff) into a
// train step: the global gradient norm (and clipping), one in-place update
// op per parameter with its optimizer state as new zero-initialized
// variables, and the learning rate and step number as inputs. The module's
// `hpc.train` dictionary tells the runtime's train command how to drive it.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"

#include "HPC/HPCBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace hpc {
#define GEN_PASS_DEF_HPCOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc;

namespace {

/// A parsed --lr-schedule.
struct Schedule {
  std::string kind = "constant";
  int64_t warmup = 0, total = 0;
};

FailureOr<Schedule> parseSchedule(StringRef text, std::string &error) {
  Schedule s;
  auto [kind, rest] = text.split(':');
  s.kind = kind.str();
  if (kind == "constant" && rest.empty())
    return s;
  auto [w, t] = rest.split(',');
  if ((kind == "cosine" || kind == "linear") && !w.getAsInteger(10, s.warmup) &&
      !t.getAsInteger(10, s.total) && s.warmup >= 0 && s.total > s.warmup)
    return s;
  error = "--lr-schedule: expected constant, cosine:WARMUP,TOTAL or linear:WARMUP,TOTAL "
          "(0 <= WARMUP < TOTAL), got '" + text.str() + "'";
  return failure();
}

struct HPCOptimizer : hpc::impl::HPCOptimizerBase<HPCOptimizer> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.getBody().empty()) {
      module.emitError("hpc-optimizer needs a func.func @main with a body");
      return signalPassFailure();
    }
    if (failed(checkOptions(func)))
      return signalPassFailure();
    std::string error;
    auto schedule = parseSchedule(lrSchedule, error);
    if (failed(schedule)) {
      func.emitError(error);
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // The gradients hpc-autodiff returned, with their parameters.
    llvm::StringMap<VariableOp> params;
    for (VariableOp v : body.getOps<VariableOp>())
      params[v.getName()] = v;
    SmallVector<std::pair<VariableOp, Value>> updates;
    Value loss;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "hpc.name");
      auto of = func.getResultAttrOfType<StringAttr>(i, "hpc.gradient_of");
      if (name && name.getValue() == "loss")
        loss = ret.getOperand(i);
      if (!of)
        continue;
      VariableOp p = params.lookup(of.getValue());
      if (!p) {
        func.emitError("the gradient of '") << of.getValue() << "' has no parameter to update";
        return signalPassFailure();
      }
      updates.push_back({p, ret.getOperand(i)});
    }
    if (!loss || updates.empty()) {
      func.emitError("hpc-optimizer needs the loss and gradients of hpc-autodiff");
      return signalPassFailure();
    }

    OpBuilder b(ret);
    GraphBuilder g(b, func.getLoc());
    Value lrIn = addInput(func, RankedTensorType::get({}, b.getF32Type()), "hpc.lr");
    Value stepIn = addInput(func, RankedTensorType::get({}, b.getI64Type()), "hpc.step");

    // Global L2 norm of the gradients (before clipping), in f32.
    Value sumSq;
    for (auto &[p, grad] : updates) {
      auto all = llvm::to_vector(llvm::seq<int64_t>(0, shapeOf(grad).size()));
      Value s = g.castTo(g.op<ReduceSumSquareOp>({grad}, {g.i64s("axes", all),
                                                         g.boolean("keepdims", false)}),
                         b.getF32Type());
      sumSq = sumSq ? g.add(sumSq, s) : s;
    }
    Value norm = g.op<SqrtOp>({sumSq});
    // clip_grad_norm_ (g *= min(1, max_norm / (norm + 1e-6))), fused into
    // the updates; max_norm is the runtime's (an input, so that it may
    // change between steps: --clip-norm=auto, the conservative plan).
    SmallVector<Value> clip;
    if (clipNorm > 0 || clipNormAuto)
      clip = {norm, addInput(func, RankedTensorType::get({}, b.getF32Type()), "hpc.clip_norm")};

    double wd = weightDecay >= 0 ? double(weightDecay) : (optimizer == "adamw" ? 0.01 : 0.0);
    // A non-finite norm (a NaN or an infinity in any gradient, on any
    // rank: the norm is global) skips every update alike.
    Value guard = skipNonfinite ? norm : Value();
    for (auto &[p, grad] : updates) {
      double decay = excluded(p.getName()) ? 0.0 : wd;
      if (optimizer == "sgd") {
        SmallVector<Value> operands{p.getResult(), grad, lrIn};
        if (momentum != 0)
          operands.push_back(stateLike(body, p, "momentum_buffer"));
        if (guard)
          operands.push_back(guard);
        operands.append(clip.begin(), clip.end());
        g.make(SGDUpdateOp::getOperationName(), operands,
               {g.f64("momentum", momentum), g.boolean("nesterov", nesterov),
                g.f64("weight_decay", decay),
                b.getNamedAttr("operandSegmentSizes",
                               b.getDenseI32ArrayAttr({1, 1, 1, momentum != 0 ? 1 : 0,
                                                       guard ? 1 : 0, int32_t(clip.size())}))});
      } else {
        SmallVector<Value> operands{p.getResult(), grad, stateLike(body, p, "exp_avg"),
                                    stateLike(body, p, "exp_avg_sq"), lrIn, stepIn};
        if (guard)
          operands.push_back(guard);
        operands.append(clip.begin(), clip.end());
        g.make(AdamWUpdateOp::getOperationName(), operands,
               {g.f64("beta1", beta1), g.f64("beta2", beta2), g.f64("eps", eps),
                g.f64("weight_decay", decay),
                b.getNamedAttr("operandSegmentSizes",
                               b.getDenseI32ArrayAttr({1, 1, 1, 1, 1, 1, guard ? 1 : 0,
                                                       int32_t(clip.size())}))});
      }
    }
    if (!g.ok()) {
      func.emitError("the optimizer step does not build (a compiler bug)");
      return signalPassFailure();
    }

    SmallVector<Value> results{loss, norm};
    SmallVector<DictionaryAttr> attrs{named(b, "loss"), named(b, "grad_norm")};
    if (keepGradients)
      for (auto &[p, grad] : updates) {
        results.push_back(grad); // as hpc-autodiff returned it (clipping is in the updates)
        attrs.push_back(named(b, "grad." + p.getName().str()));
      }
    // Each routed mixture-of-experts layer's choices per expert
    // (hpc-route-experts), for the metrics.
    SmallVector<Attribute> moeLoads;
    func.walk([&](MoERouteOp route) {
      std::string name = "moe.load." + std::to_string(moeLoads.size());
      results.push_back(route.getLoad());
      attrs.push_back(named(b, name));
      moeLoads.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("output", b.getStringAttr(name)),
           b.getNamedAttr("capacity", b.getI64IntegerAttr(route.getCapacity()))}));
    });
    // The auxiliary balancing loss, apart (it is in the loss too): the
    // mean of the micro-batches' where hpc-micro-batches made copies.
    SmallVector<Value> balance;
    func.walk([&](Operation *op) {
      if (op->hasAttr(kBalanceLossAttr) && !op->hasAttr("hpc.recomputed"))
        balance.push_back(op->getResult(0));
    });
    if (!balance.empty()) {
      Value sum = balance.front();
      for (Value v : ArrayRef(balance).drop_front())
        sum = g.add(sum, v);
      results.push_back(g.castTo(g.scale(sum, 1.0 / double(balance.size())), b.getF32Type()));
      attrs.push_back(named(b, "moe.balance_loss"));
    }
    ret->setOperands(results);
    SmallVector<Type> types;
    for (Value r : results)
      types.push_back(r.getType());
    func.setType(b.getFunctionType(func.getArgumentTypes(), types));
    func.setAllResultAttrs(attrs);
    DictionaryAttr info = trainInfo(b, module, func, *schedule, wd);
    if (!moeLoads.empty() || !balance.empty()) {
      NamedAttrList withLoads(info);
      if (!moeLoads.empty())
        withLoads.set("moe_loads", b.getArrayAttr(moeLoads));
      if (!balance.empty())
        withLoads.set("moe_balance_loss_output", b.getStringAttr("moe.balance_loss"));
      info = withLoads.getDictionary(b.getContext());
    }
    module->setAttr("hpc.train", info);
  }

  LogicalResult checkOptions(func::FuncOp func) {
    if (optimizer != "sgd" && optimizer != "adamw")
      return func.emitError("--optimizer: expected sgd or adamw, got '") << optimizer << "'";
    if (!(lr > 0))
      return func.emitError("--lr must be positive, got ") << lr;
    if (momentum < 0 || (nesterov && momentum == 0))
      return func.emitError("--momentum must be >= 0 (and > 0 with --nesterov)");
    if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1 || eps < 0)
      return func.emitError("--beta1/--beta2 must be in [0, 1) and --eps >= 0");
    if (clipNorm < 0)
      return func.emitError("--clip-norm must not be negative");
    return success();
  }

  bool excluded(StringRef name) {
    return llvm::any_of(weightDecayExclude,
                        [&](const std::string &part) { return name.contains(part); });
  }

  /// The input named `name` (hpc-train-mode may have added "hpc.step"), or
  /// a new one.
  static Value addInput(func::FuncOp func, RankedTensorType type, StringRef name) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto n = func.getArgAttrOfType<StringAttr>(i, "hpc.name");
          n && n.getValue() == name && func.getArgument(i).getType() == type)
        return func.getArgument(i);
    unsigned index = func.getNumArguments();
    Builder b(func.getContext());
    (void)func.insertArgument(
        index, type, b.getDictionaryAttr(b.getNamedAttr("hpc.name", b.getStringAttr(name))),
        func.getLoc());
    return func.getArgument(index);
  }

  static DictionaryAttr named(Builder &b, StringRef name) {
    return b.getDictionaryAttr(b.getNamedAttr("hpc.name", b.getStringAttr(name)));
  }

  /// A zero-initialized optimizer state tensor of the parameter's type.
  static Value stateLike(Block &body, VariableOp p, StringRef suffix) {
    OpBuilder b(&body, body.begin());
    return VariableOp::create(b, p.getLoc(), p.getType(),
                              b.getStringAttr(p.getName() + "." + suffix), ElementsAttr(),
                              b.getStringAttr("optimizer"));
  }

  DictionaryAttr trainInfo(Builder &b, ModuleOp module, func::FuncOp func,
                           const Schedule &schedule, double wd) {
    SmallVector<NamedAttribute> opt{b.getNamedAttr("name", b.getStringAttr(optimizer)),
                                    b.getNamedAttr("lr", b.getF64FloatAttr(lr)),
                                    b.getNamedAttr("weight_decay", b.getF64FloatAttr(wd))};
    if (optimizer == "sgd") {
      opt.push_back(b.getNamedAttr("momentum", b.getF64FloatAttr(momentum)));
      opt.push_back(b.getNamedAttr("nesterov", b.getBoolAttr(nesterov)));
    } else {
      opt.push_back(b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)));
      opt.push_back(b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)));
      opt.push_back(b.getNamedAttr("eps", b.getF64FloatAttr(eps)));
    }
    if (clipNormAuto)
      opt.push_back(b.getNamedAttr("clip_norm_auto", b.getBoolAttr(true)));
    else if (clipNorm > 0)
      opt.push_back(b.getNamedAttr("clip_norm", b.getF64FloatAttr(clipNorm)));
    // The runtime counts the steps whose updates were skipped (a non-finite
    // grad_norm) and leaves them out of the optimizer's step count.
    opt.push_back(b.getNamedAttr("skip_nonfinite", b.getBoolAttr(skipNonfinite)));
    // The global batch: the first dim of the data inputs.
    int64_t batch = 1;
    for (BlockArgument arg : func.getArguments()) {
      auto t = cast<RankedTensorType>(arg.getType());
      if (t.getRank() > 0) {
        batch = t.getDimSize(0);
        break;
      }
    }
    SmallVector<NamedAttribute> info{
        b.getNamedAttr("optimizer", b.getDictionaryAttr(opt)),
        b.getNamedAttr("lr_schedule",
                       b.getDictionaryAttr({b.getNamedAttr("kind", b.getStringAttr(schedule.kind)),
                                            b.getNamedAttr("warmup", b.getI64IntegerAttr(schedule.warmup)),
                                            b.getNamedAttr("total", b.getI64IntegerAttr(schedule.total))})),
        b.getNamedAttr("batch", b.getI64IntegerAttr(batch))};
    if (auto micro = module->getAttrOfType<IntegerAttr>("hpc.micro_batches"))
      info.push_back(b.getNamedAttr("micro_batches", micro));
    if (auto loss = module->getAttrOfType<DictionaryAttr>("hpc.loss")) {
      info.push_back(b.getNamedAttr("loss", loss.get("kind")));
      if (Attribute input = loss.get("input"))
        info.push_back(b.getNamedAttr("labels", input));
    }
    return b.getDictionaryAttr(info);
  }
};

} // namespace
