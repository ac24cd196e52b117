//===- OpCost.cpp - analytic per-op FLOP counts and traffic ---------------===//
//
// Counts follow the usual conventions: a multiply-accumulate is 2 FLOPs,
// elementwise math 1 FLOP per output element, normalizations a handful per
// element. Data movement (reshape, transpose, gather, concat) costs no FLOPs.
// Traffic is every operand read once and every result written once; views
// (reshape, squeeze, unsqueeze) move nothing.
//
//===----------------------------------------------------------------------===//

#include "hpc/CostModel/OpCost.h"

#include "hpc/CostModel/Cluster.h"

#include "HPC/HPCOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

static int64_t elements(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? t.getNumElements() : 0;
}

/// FLOPs of a fused `activation` over `out` elements, as the standalone op
/// counts them below (relu 1 per element, the transcendental ones 4).
static int64_t activationFlops(StringRef activation, int64_t out) {
  if (activation == "none")
    return 0;
  return activation == "relu" ? out : 4 * out;
}

int64_t hpc::estimateFlops(Operation *op) {
  if (op->getNumResults() == 0)
    return 0;
  int64_t out = elements(op->getResult(0));
  return llvm::TypeSwitch<Operation *, int64_t>(op)
      .Case([&](hpc::MatMulOp m) {
        auto lhs = cast<RankedTensorType>(m.getLhs().getType());
        return 2 * out * lhs.getShape().back();
      })
      .Case([&](hpc::GemmOp g) {
        auto a = cast<RankedTensorType>(g.getA().getType());
        int64_t k = a.getDimSize(g.getTransA() ? 0 : 1);
        return 2 * out * k + (g.getC() ? out : 0) + activationFlops(g.getActivation(), out);
      })
      .Case([&](hpc::ConvOp c) {
        auto w = cast<RankedTensorType>(c.getWeight().getType());
        int64_t perOutput = w.getNumElements() / w.getDimSize(0);
        return 2 * out * perOutput + (c.getBias() ? out : 0) + (c.getResidual() ? out : 0) +
               activationFlops(c.getActivation(), out);
      })
      .Case([&](hpc::ConvTransposeOp c) {
        auto w = cast<RankedTensorType>(c.getWeight().getType());
        return 2 * elements(c.getInput()) * (w.getNumElements() / w.getDimSize(0));
      })
      .Case<hpc::SoftmaxOp, hpc::LogSoftmaxOp>([&](Operation *) { return 5 * out; })
      .Case<hpc::LayerNormOp, hpc::RMSNormOp>([&](Operation *) { return 8 * out; })
      .Case([&](hpc::LayerNormGradOp) { return 12 * out; })
      .Case([&](hpc::BatchNormOp) { return 2 * out; })
      .Case([&](hpc::ReduceSumSquareOp o) { return 2 * elements(o.getInput()); })
      .Case<hpc::ReduceSumOp, hpc::ReduceMeanOp, hpc::ReduceMaxOp,
            hpc::ReduceMinOp, hpc::ReduceProdOp, hpc::ArgMaxOp, hpc::ArgMinOp,
            hpc::GlobalAvgPoolOp, hpc::GlobalMaxPoolOp>(
          [&](Operation *o) { return elements(o->getOperand(0)); })
      .Case<hpc::MaxPoolOp, hpc::AvgPoolOp>([&](Operation *o) {
        auto k = o->getAttrOfType<DenseI64ArrayAttr>("kernel_shape");
        int64_t window = 1;
        for (int64_t d : k.asArrayRef())
          window *= d;
        return out * window;
      })
      .Case<hpc::GeluOp, hpc::SiluOp, hpc::SigmoidOp, hpc::TanhOp, hpc::ErfOp,
            hpc::ExpOp, hpc::LogOp, hpc::SoftplusOp>(
          [&](Operation *) { return 4 * out; })
      .Case([&](hpc::GeluGradOp) { return 10 * out; })
      .Case<hpc::AddOp, hpc::SubOp, hpc::MulOp, hpc::DivOp, hpc::PowOp,
            hpc::MaxOp, hpc::MinOp, hpc::ReluOp, hpc::SqrtOp, hpc::NegOp,
            hpc::AbsOp, hpc::ReciprocalOp, hpc::ClipOp, hpc::LeakyReluOp,
            hpc::EluOp, hpc::HardSigmoidOp, hpc::HardSwishOp, hpc::WhereOp,
            hpc::ResizeOp>([&](Operation *) { return out; })
      .Default([](Operation *) { return int64_t(0); });
}

static bool isView(Operation *op) { return hpc::isViewOp(op); }

int64_t hpc::estimateElementsMoved(Operation *op) {
  if (isView(op))
    return 0;
  int64_t n = 0;
  for (Value v : op->getOperands())
    n += elements(v);
  for (Value v : op->getResults())
    n += elements(v);
  return n;
}

int64_t hpc::estimateBytes(Operation *op) {
  if (isView(op))
    return 0;
  auto bytes = [](Value v) -> int64_t {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
      return 0;
    return t.getNumElements() *
           std::max<int64_t>(t.getElementTypeBitWidth() / 8, 1);
  };
  int64_t n = 0;
  for (Value v : op->getOperands())
    n += bytes(v);
  for (Value v : op->getResults())
    n += bytes(v);
  return n;
}

double hpc::estimateSeconds(Operation *op, const cost::ClusterSpec &c) {
  if (!isa<hpc::HPCDialect>(op->getDialect()) || isView(op) || op->getNumResults() == 0)
    return 0;
  const cost::Efficiency &eff = c.efficiency;
  double peak = c.device.peakFlops[int(cost::DType::FP32)];
  if (auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
      t && t.getElementType().isBF16() && c.device.peakFlops[int(cost::DType::BF16)] > 0)
    peak = c.device.peakFlops[int(cost::DType::BF16)];
  double flops = double(estimateFlops(op)), bytes = double(estimateBytes(op));
  double compute = peak > 0 ? flops / (peak * eff.matmul) : 0;
  double memory = c.device.memoryBandwidth > 0 ? bytes / (c.device.memoryBandwidth * eff.memory) : 0;
  return std::max(compute, memory) + eff.kernelOverhead;
}
