//===- FuseComposites.cpp - GELU, SiLU and RMSNorm from their decompositions ===//
//
// Exporters decompose GELU, SiLU and RMSNorm into elementwise chains. Each
// matcher here flattens a product tree (mul ops whose intermediate results
// have no other use) into its factors and checks them as a multiset, so every
// operand order an exporter may pick matches the same way.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace hpc {
#define GEN_PASS_DEF_HPCFUSECOMPOSITES
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

/// The value of a splat floating-point constant, if `v` is one.
std::optional<double> splatValue(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

bool isConstant(Value v, double expected) {
  auto c = splatValue(v);
  return c && std::fabs(*c - expected) <= 1e-4 * std::max(1.0, std::fabs(expected));
}

/// Factors of a product tree rooted at `v`; inner mul ops are flattened only
/// when their result feeds nothing else (so fusing does not duplicate work).
void collectFactors(Value v, SmallVectorImpl<Value> &factors, bool root = true) {
  auto mul = v.getDefiningOp<hpc::MulOp>();
  if (mul && (root || v.hasOneUse())) {
    collectFactors(mul.getLhs(), factors, false);
    collectFactors(mul.getRhs(), factors, false);
    return;
  }
  factors.push_back(v);
}

/// Removes from `factors` the first one satisfying `pred`; false if none.
template <typename Pred>
bool takeFactor(SmallVectorImpl<Value> &factors, Pred pred) {
  for (auto *it = factors.begin(); it != factors.end(); ++it) {
    if (pred(*it)) {
      factors.erase(it);
      return true;
    }
  }
  return false;
}

/// Operands of a commutative add, with `pred` tried on either side for the
/// first; returns the other.
template <typename Pred>
Value addOther(Value v, Pred pred) {
  auto add = v.getDefiningOp<hpc::AddOp>();
  if (!add)
    return {};
  if (pred(add.getLhs()))
    return add.getRhs();
  if (pred(add.getRhs()))
    return add.getLhs();
  return {};
}

/// Whether `v` is `x / sqrt(2)` or `x * (1/sqrt(2))`.
bool isScaledBySqrtHalf(Value v, Value x) {
  if (auto div = v.getDefiningOp<hpc::DivOp>())
    return div.getLhs() == x && isConstant(div.getRhs(), std::sqrt(2.0));
  SmallVector<Value> f;
  collectFactors(v, f);
  return f.size() == 2 &&
         ((f[0] == x && isConstant(f[1], M_SQRT1_2)) ||
          (f[1] == x && isConstant(f[0], M_SQRT1_2)));
}

/// Whether `v` is x^3 (pow or x*x*x).
bool isCube(Value v, Value x) {
  if (auto pow = v.getDefiningOp<hpc::PowOp>())
    return pow.getLhs() == x && isConstant(pow.getRhs(), 3.0);
  SmallVector<Value> f;
  collectFactors(v, f);
  return f.size() == 3 && llvm::all_of(f, [&](Value y) { return y == x; });
}

/// Whether `v` is sqrt(2/pi) * (x + 0.044715 * x^3), in any order.
bool isTanhArgument(Value v, Value x) {
  SmallVector<Value> f;
  collectFactors(v, f);
  if (f.size() != 2 || !takeFactor(f, [](Value y) { return isConstant(y, std::sqrt(2.0 / M_PI)); }))
    return false;
  Value cubic = addOther(f[0], [&](Value y) { return y == x; });
  if (!cubic)
    return false;
  SmallVector<Value> g;
  collectFactors(cubic, g);
  if (g.size() == 2)
    return takeFactor(g, [](Value y) { return isConstant(y, 0.044715); }) && isCube(g[0], x);
  // 0.044715 * x * x * x flattened into one product.
  return g.size() == 4 && takeFactor(g, [](Value y) { return isConstant(y, 0.044715); }) &&
         llvm::all_of(g, [&](Value y) { return y == x; });
}

/// 0.5 * x * (1 + erf(x/sqrt2)) or 0.5 * x * (1 + tanh(...)).
struct FuseGelu : OpRewritePattern<hpc::MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(hpc::MulOp op, PatternRewriter &rewriter) const override {
    SmallVector<Value> f;
    collectFactors(op.getResult(), f);
    if (f.size() != 3 || !takeFactor(f, [](Value v) { return isConstant(v, 0.5); }))
      return failure();
    for (int xi = 0; xi < 2; ++xi) {
      Value x = f[xi], onePlus = f[1 - xi];
      if (x.getType() != op.getType())
        continue;
      Value inner = addOther(onePlus, [](Value v) { return isConstant(v, 1.0); });
      if (!inner || !onePlus.hasOneUse() || !inner.hasOneUse())
        continue;
      StringRef approx;
      if (auto erf = inner.getDefiningOp<hpc::ErfOp>(); erf && isScaledBySqrtHalf(erf.getInput(), x))
        approx = "none";
      else if (auto tanh = inner.getDefiningOp<hpc::TanhOp>(); tanh && isTanhArgument(tanh.getInput(), x))
        approx = "tanh";
      else
        continue;
      rewriter.replaceOpWithNewOp<hpc::GeluOp>(op, x, rewriter.getStringAttr(approx));
      return success();
    }
    return failure();
  }
};

/// x * sigmoid(x).
struct FuseSilu : OpRewritePattern<hpc::MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(hpc::MulOp op, PatternRewriter &rewriter) const override {
    for (auto [a, b] : {std::pair(op.getLhs(), op.getRhs()), std::pair(op.getRhs(), op.getLhs())}) {
      auto sig = b.getDefiningOp<hpc::SigmoidOp>();
      if (sig && sig.getInput() == a && a.getType() == op.getType() && b.hasOneUse()) {
        rewriter.replaceOpWithNewOp<hpc::SiluOp>(op, a);
        return success();
      }
    }
    return failure();
  }
};

/// The x and epsilon of sqrt(mean(x^2 over trailing axes) + eps), and the
/// first normalized axis.
struct RmsDenominator {
  Value x;
  double epsilon;
  int64_t axis;
};

std::optional<RmsDenominator> matchRmsDenominator(Value s) {
  auto sqrt = s.getDefiningOp<hpc::SqrtOp>();
  if (!sqrt)
    return std::nullopt;
  std::optional<double> eps;
  Value meanValue = addOther(sqrt.getInput(), [&](Value v) {
    eps = splatValue(v);
    return eps.has_value();
  });
  auto mean = meanValue ? meanValue.getDefiningOp<hpc::ReduceMeanOp>() : nullptr;
  if (!mean || !mean.getKeepdims())
    return std::nullopt;
  Value sq = mean.getInput(), x;
  if (auto pow = sq.getDefiningOp<hpc::PowOp>(); pow && isConstant(pow.getRhs(), 2.0))
    x = pow.getLhs();
  else if (auto mul = sq.getDefiningOp<hpc::MulOp>(); mul && mul.getLhs() == mul.getRhs())
    x = mul.getLhs();
  if (!x)
    return std::nullopt;
  // The axes must be exactly the trailing dimensions.
  auto rank = cast<RankedTensorType>(x.getType()).getRank();
  ArrayRef<int64_t> axes = mean.getAxes();
  if (axes.empty() || axes.back() != rank - 1 ||
      int64_t(axes.size()) != rank - axes.front())
    return std::nullopt;
  return RmsDenominator{x, *eps, axes.front()};
}

/// scale * (x * 1/sqrt(..)) and its spellings.
struct FuseRmsNorm : OpRewritePattern<hpc::MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(hpc::MulOp op, PatternRewriter &rewriter) const override {
    SmallVector<Value> f;
    collectFactors(op.getResult(), f);
    // Find the denominator: 1/s, reciprocal(s), or a factor x / s.
    std::optional<RmsDenominator> den;
    Value divided;
    for (Value v : f) {
      if (auto div = v.getDefiningOp<hpc::DivOp>()) {
        if (isConstant(div.getLhs(), 1.0))
          den = matchRmsDenominator(div.getRhs());
        else if ((den = matchRmsDenominator(div.getRhs())))
          divided = div.getLhs();
      } else if (auto rec = v.getDefiningOp<hpc::ReciprocalOp>()) {
        den = matchRmsDenominator(rec.getInput());
      }
      if (den) {
        f.erase(llvm::find(f, v));
        break;
      }
    }
    if (!den)
      return failure();
    if (divided) {
      if (divided != den->x)
        return failure();
    } else if (!takeFactor(f, [&](Value v) { return v == den->x; })) {
      return failure();
    }
    if (f.size() != 1)
      return failure();
    Value scale = f[0];
    auto xType = cast<RankedTensorType>(den->x.getType());
    if (op.getType() != xType)
      return failure();
    auto scaleType = dyn_cast<RankedTensorType>(scale.getType());
    if (!scaleType || scaleType.getElementType() != xType.getElementType() ||
        scaleType.getRank() > xType.getRank() - den->axis)
      return failure();
    // The scale must only vary along normalized dimensions.
    ArrayRef<int64_t> normalized = xType.getShape().drop_front(den->axis);
    SmallVector<int64_t> broadcast;
    if (failed(hpc::detail::broadcastShapes(scaleType.getShape(), normalized, broadcast)) ||
        ArrayRef<int64_t>(broadcast) != normalized)
      return failure();
    rewriter.replaceOpWithNewOp<hpc::RMSNormOp>(
        op, den->x, scale, rewriter.getI64IntegerAttr(den->axis),
        rewriter.getF64FloatAttr(den->epsilon));
    return success();
  }
};

struct FuseComposites : hpc::impl::HPCFuseCompositesBase<FuseComposites> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGelu, FuseSilu, FuseRmsNorm>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
