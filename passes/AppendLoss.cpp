//===- AppendLoss.cpp - make @main return one scalar loss -----------------===//
//
// The first step of building a train step (docs/training.md): the loss the
// user names with --loss is appended to the forward graph and becomes @main's
// only result. Labels and targets become new graph inputs, so the runtime
// feeds them like any other data.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"

#include "HPC/HPCBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace hpc {
#define GEN_PASS_DEF_HPCAPPENDLOSS
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc;

namespace {

/// A parsed --loss: kind and the names it mentions.
struct LossSpec {
  std::string kind;
  SmallVector<std::string> names;
};

FailureOr<LossSpec> parseLoss(StringRef text, std::string &error) {
  auto [kind, rest] = text.split(':');
  LossSpec spec{kind.str(), {}};
  SmallVector<StringRef> parts;
  rest.split(parts, ',');
  for (StringRef p : parts)
    spec.names.push_back(p.trim().str());
  size_t want = kind == "output" ? 1 : (kind == "cross-entropy" || kind == "mse") ? 2 : 0;
  if (want == 0) {
    error = "--loss: unknown kind '" + kind.str() +
            "' (cross-entropy:LOGITS,LABELS, mse:OUT,TARGET or output:NAME)";
    return failure();
  }
  if (spec.names.size() != want || llvm::any_of(spec.names, [](auto &n) { return n.empty(); })) {
    error = "--loss=" + text.str() + ": expected " +
            (want == 1 ? std::string("output:NAME") : kind.str() + ":" +
                                                          (kind == "mse" ? "OUT,TARGET" : "LOGITS,LABELS"));
    return failure();
  }
  return spec;
}

std::string resultName(func::FuncOp func, unsigned i) {
  auto name = func.getResultAttrOfType<StringAttr>(i, "hpc.name");
  return name ? name.str() : "output" + std::to_string(i);
}

/// Mean cross entropy over the labels that are not -100 (F.cross_entropy).
Value crossEntropy(GraphBuilder &g, Value logits, Value labels) {
  int64_t axis = shapeOf(logits).size() - 1;
  Value ls = g.op<LogSoftmaxOp>({logits}, {g.i64("axis", axis)});
  Value valid = g.op<NotOp>({g.op<EqualOp>({labels, g.scalarLike(labels, -100)})});
  Value safe = g.where(valid, labels, g.zerosLike(labels));
  SmallVector<int64_t> idxShape(shapeOf(labels));
  idxShape.push_back(1);
  Value picked = g.op<GatherElementsOp>({ls, g.reshape(safe, idxShape)}, {g.i64("axis", axis)});
  Value weights = g.castTo(valid, cast<RankedTensorType>(logits.getType()).getElementType());
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, idxShape.size()));
  Value total = g.reduceSum(g.mul(g.reshape(picked, shapeOf(labels)), weights),
                            llvm::ArrayRef(all).drop_back(), false);
  Value count = g.reduceSum(weights, llvm::ArrayRef(all).drop_back(), false);
  return g.neg(g.div(total, count));
}

} // namespace

// Recognizes what crossEntropy builds: keep the two together.
Value hpc::crossEntropyCount(Value loss) {
  Operation *def = loss.getDefiningOp();
  if (!isa_and_nonnull<NegOp>(def))
    return {};
  auto div = def->getOperand(0).getDefiningOp<DivOp>();
  Value count = div ? div->getOperand(1) : Value();
  if (!count || !count.getDefiningOp<ReduceSumOp>() ||
      cast<RankedTensorType>(count.getType()).getRank() != 0)
    return {};
  return count;
}

namespace {

Value meanSquaredError(GraphBuilder &g, Value out, Value target) {
  Value d = g.sub(out, target);
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, shapeOf(out).size()));
  return g.op<ReduceMeanOp>({g.mul(d, d)}, {g.i64s("axes", all), g.boolean("keepdims", false)});
}

struct HPCAppendLoss : hpc::impl::HPCAppendLossBase<HPCAppendLoss> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.getBody().empty()) {
      module.emitError("hpc-append-loss needs a func.func @main with a body");
      return signalPassFailure();
    }
    std::string error;
    auto spec = parseLoss(loss, error);
    if (failed(spec)) {
      func.emitError(error);
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    auto findResult = [&](StringRef name) -> Value {
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (resultName(func, i) == name)
          return ret.getOperand(i);
      return {};
    };
    Value out = findResult(spec->names[0]);
    if (!out) {
      std::string list;
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        list += (list.empty() ? "'" : ", '") + resultName(func, i) + "'";
      func.emitError("--loss: no tensor '") << spec->names[0] << "' among @main's results ("
                                            << list << ")";
      return signalPassFailure();
    }
    auto outType = cast<RankedTensorType>(out.getType());
    if (!isa<FloatType>(outType.getElementType())) {
      func.emitError("--loss: '") << spec->names[0] << "' is " << outType
                                  << ", not a floating-point tensor";
      return signalPassFailure();
    }
    for (BlockArgument arg : func.getArguments())
      if (spec->names.size() > 1) {
        auto n = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "hpc.name");
        if (n && n.getValue() == spec->names[1]) {
          func.emitError("--loss: '") << spec->names[1]
                                      << "' is already an input of the model; name the "
                                         "labels or target input differently";
          return signalPassFailure();
        }
      }

    OpBuilder b(ret);
    GraphBuilder g(b, out.getLoc());
    Value lossValue;
    auto addInput = [&](RankedTensorType type, StringRef name) {
      unsigned index = func.getNumArguments();
      (void)func.insertArgument(index, type, b.getDictionaryAttr(b.getNamedAttr(
                                                 "hpc.name", b.getStringAttr(name))),
                                func.getLoc());
      return func.getArgument(index);
    };
    if (spec->kind == "cross-entropy") {
      if (outType.getRank() < 1) {
        func.emitError("--loss: cross-entropy logits '") << spec->names[0]
                                                         << "' must have a class dimension";
        return signalPassFailure();
      }
      auto labelsType =
          RankedTensorType::get(outType.getShape().drop_back(), b.getI64Type());
      lossValue = crossEntropy(g, out, addInput(labelsType, spec->names[1]));
    } else if (spec->kind == "mse") {
      lossValue = meanSquaredError(g, out, addInput(outType, spec->names[1]));
    } else {
      if (outType.getRank() != 0 && outType.getNumElements() != 1) {
        func.emitError("--loss=output:") << spec->names[0] << ": the loss must be a scalar, got "
                                         << outType;
        return signalPassFailure();
      }
      lossValue = g.reshape(out, {});
    }
    if (!g.ok()) {
      func.emitError("--loss: the loss does not build on '") << spec->names[0] << "'";
      return signalPassFailure();
    }
    // @main returns the loss alone; the forward outputs it does not need go.
    ret->setOperands(lossValue);
    SmallVector<Type> inputs(func.getArgumentTypes());
    func.setType(b.getFunctionType(inputs, {lossValue.getType()}));
    func.setAllResultAttrs(ArrayRef<DictionaryAttr>{
        b.getDictionaryAttr(b.getNamedAttr("hpc.name", b.getStringAttr("loss")))});
    // What the runtime's train command needs to know of the loss.
    SmallVector<NamedAttribute> info{b.getNamedAttr("kind", b.getStringAttr(spec->kind)),
                                     b.getNamedAttr("of", b.getStringAttr(spec->names[0]))};
    if (spec->names.size() > 1)
      info.push_back(b.getNamedAttr("input", b.getStringAttr(spec->names[1])));
    module->setAttr("hpc.loss", b.getDictionaryAttr(info));
  }
};

} // namespace
