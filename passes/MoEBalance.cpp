//===- MoEBalance.cpp - load balancing of routed expert layers ------------===//
//
// A router trained on the loss alone sends most tokens to a few experts
// (their buffers overflow, the others idle). Two remedies, on the routed
// layers hpc-route-experts builds, for a train step:
//
//  - bias (DeepSeek-V3's auxiliary-loss-free balancing): each layer keeps a
//    per-expert bias b (state, role "buffer", checkpointed as
//    "moe.bias.N"). The top-k choice is made on the router's logits + b
//    (probs + b when the router is no softmax), the gate weights stay the
//    probabilities of the chosen experts; at the end of each step
//    b += rate * sign(mean load - load), so an overloaded expert becomes
//    less likely to be chosen and an idle one more. The loss is unchanged.
//  - aux (Switch Transformer's auxiliary loss): the step's loss gains
//    alpha * E * sum_i f_i P_i per layer, f_i the fraction of the choices
//    expert i got (a count: no gradient) and P_i the mean router
//    probability of expert i; its gradient pushes the probabilities of the
//    busy experts down.
//
// Runs after hpc-append-loss (the step returns its loss) and before
// hpc-autodiff.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"

#include "HPC/HPCBuilder.h"
#include "HPC/HPCOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace hpc {
#define GEN_PASS_DEF_HPCMOEBALANCE
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc;

std::optional<double> hpc::parseMoEBalance(llvm::StringRef spec) {
  if (spec == "none")
    return 0.0;
  double rate = 0;
  if (!spec.consume_front("bias:") || spec.getAsDouble(rate) || !(rate > 0) ||
      !std::isfinite(rate))
    return std::nullopt;
  return rate;
}

namespace {

struct MoEBalance : hpc::impl::HPCMoEBalanceBase<MoEBalance> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.getBody().empty())
      return;
    if (biasRate < 0 || auxLoss < 0) {
      func.emitError() << "moe balancing rates must be >= 0 (bias " << biasRate << ", aux "
                       << auxLoss << ")";
      return signalPassFailure();
    }
    if (biasRate == 0 && auxLoss == 0)
      return;
    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    SmallVector<MoERouteOp> routes(body.getOps<MoERouteOp>());
    SmallVector<std::pair<MoERouteOp, TopKOp>> layers;
    for (MoERouteOp route : routes) {
      auto topk = route.getExperts().getDefiningOp<TopKOp>();
      if (!topk) {
        route.emitError("is not routed by a top_k: its experts cannot be balanced");
        return signalPassFailure();
      }
      layers.push_back({route, topk});
    }
    if (layers.empty()) {
      func.emitError("--moe-balance/--moe-aux-loss: the model has no routed "
                     "mixture-of-experts layer");
      return signalPassFailure();
    }
    Value aux;
    for (auto [i, layer] : llvm::enumerate(layers)) {
      auto [route, topk] = layer;
      if (auxLoss > 0)
        aux = addAux(aux, route, topk);
      if (biasRate > 0 && failed(biasRouting(body, ret, int64_t(i), route, topk)))
        return signalPassFailure();
    }
    if (aux) {
      // hpc-optimizer returns it apart (the metrics' moe_balance_loss).
      aux.getDefiningOp()->setAttr(kBalanceLossAttr, UnitAttr::get(&getContext()));
      if (failed(addToLoss(ret, aux)))
        return signalPassFailure();
    }
  }

  /// top_k on logits + b, the gates the chosen experts' probabilities, and
  /// b's update at the end of the step.
  LogicalResult biasRouting(Block &body, Operation *ret, int64_t index, MoERouteOp route,
                            TopKOp topk) {
    Value probs = topk.getInput();
    auto probsType = cast<RankedTensorType>(probs.getType());
    int64_t experts = route.getNumExperts();
    auto biasType = RankedTensorType::get({experts}, probsType.getElementType());
    OpBuilder b(&body, body.begin());
    auto zeros = cast<ElementsAttr>(DenseElementsAttr::get(biasType, 0.0f));
    Value bias = VariableOp::create(b, route.getLoc(), biasType,
                                    b.getStringAttr("moe.bias." + std::to_string(index)), zeros,
                                    b.getStringAttr("buffer"))
                     .getResult();
    b.setInsertionPoint(topk);
    GraphBuilder g(b, topk.getLoc());
    // The bias moves the router's logits when the probabilities are their
    // softmax (the same order, and a step of b means the same everywhere,
    // not less near a probability of 0 or 1).
    Value affinity = probs;
    if (auto softmax = probs.getDefiningOp<SoftmaxOp>())
      affinity = softmax.getInput();
    Value scores = g.add(affinity, bias);
    auto chosen = TopKOp::create(b, topk.getLoc(), topk.getValues().getType(),
                                 topk.getIndices().getType(), scores, topk.getKAttr(),
                                 topk.getAxisAttr(), topk.getLargestAttr(), topk.getSortedAttr());
    Value gates = g.op<GatherElementsOp>({probs, chosen.getIndices()},
                                         {g.i64("axis", topk.getAxis())});
    topk.getValues().replaceAllUsesWith(gates);
    topk.getIndices().replaceAllUsesWith(chosen.getIndices());
    topk.erase();
    // b += rate * sign(mean load - load): the step's loads are known once
    // it is routed; the next step chooses with the new bias.
    b.setInsertionPoint(ret);
    GraphBuilder end(b, route.getLoc());
    Value load = end.castTo(route.getLoad(), probsType.getElementType());
    Value mean = end.scale(end.reduceSum(load, {0}, true), 1.0 / double(experts));
    Value step = end.scale(end.op<SignOp>({end.sub(mean, load)}), biasRate);
    end.make(AssignOp::getOperationName(), {bias, end.add(bias, step)});
    if (!g.ok() || !end.ok())
      return route.emitOpError("bias balancing does not build (a compiler bug)");
    return success();
  }

  /// `sum` + alpha * E * sum_i f_i P_i of one layer.
  Value addAux(Value sum, MoERouteOp route, TopKOp topk) {
    OpBuilder b(route);
    b.setInsertionPointAfter(route);
    GraphBuilder g(b, route.getLoc());
    Value probs = topk.getInput(); // [tokens, experts]
    auto type = cast<RankedTensorType>(probs.getType());
    int64_t tokens = type.getDimSize(0), experts = type.getDimSize(1);
    int64_t choices = tokens * cast<RankedTensorType>(route.getExperts().getType()).getDimSize(1);
    Value fraction = g.scale(g.castTo(route.getLoad(), type.getElementType()),
                             1.0 / double(choices));
    Value meanProb = g.scale(g.reduceSum(probs, {0}, false), 1.0 / double(tokens));
    Value term = g.scale(g.reduceSum(g.mul(fraction, meanProb), {0}, false),
                         auxLoss * double(experts));
    return sum ? g.add(sum, term) : term;
  }

  /// The step's loss (its first result, hpc-append-loss's) plus `aux`.
  LogicalResult addToLoss(Operation *ret, Value aux) {
    if (ret->getNumOperands() < 1 ||
        cast<RankedTensorType>(ret->getOperand(0).getType()).getRank() != 0)
      return ret->emitError("--moe-aux-loss: the step returns no scalar loss");
    OpBuilder b(ret);
    GraphBuilder g(b, ret->getLoc());
    Value loss = ret->getOperand(0);
    ret->setOperand(0, g.add(loss, g.castTo(aux, cast<RankedTensorType>(loss.getType())
                                                      .getElementType())));
    return success(g.ok());
  }
};

} // namespace
