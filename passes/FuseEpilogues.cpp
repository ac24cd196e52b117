//===- FuseEpilogues.cpp - bias and activation into gemm and conv ---------===//
//
// The compiler decides which elementwise work a contraction kernel does in
// its epilogue; the runtime only obeys the ops' attributes. Two rewrites, in
// this order, on every function:
//
// 1. hpc.add(hpc.matmul(A, W), b) with W 2-D and b a vector over the output
//    features becomes one hpc.gemm with C = b, between reshapes (views) that
//    flatten A's leading dimensions and restore them.
// 2. An activation (hpc.relu, hpc.gelu, hpc.sigmoid, hpc.tanh, hpc.silu) of
//    an hpc.gemm or hpc.conv, directly or through one hpc.reshape, becomes
//    the product's `activation`.
//
// An intermediate value is fused away only when its one use is the op that
// absorbs it, so values another op still reads (a backward pass reads the
// pre-activation) keep their own storage.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace hpc {
#define GEN_PASS_DEF_HPCFUSEEPILOGUES
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

RankedTensorType rankedOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

/// Whether `v` is a static float tensor.
bool isStaticFloat(Value v) {
  RankedTensorType t = rankedOf(v);
  return t && t.hasStaticShape() && isa<FloatType>(t.getElementType());
}

/// Whether `bias` is a vector over the last dimension, of size `n`: shape [n]
/// or [1, ..., 1, n].
bool isFeatureVector(Value bias, int64_t n) {
  ArrayRef<int64_t> shape = rankedOf(bias).getShape();
  return !shape.empty() && shape.back() == n &&
         llvm::all_of(shape.drop_back(), [](int64_t d) { return d == 1; });
}

/// `v` reshaped to `shape` (itself when it has that shape already).
Value reshapeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  RankedTensorType t = rankedOf(v);
  if (t.getShape() == shape)
    return v;
  auto type = RankedTensorType::get(shape, t.getElementType());
  return hpc::ReshapeOp::create(b, loc, type, v, b.getDenseI64ArrayAttr(shape));
}

/// The matmul and bias of `add` when it is a bias add the gemm epilogue can
/// do: `add(matmul(A, W), b)` in either operand order, the matmul's result
/// used only here, W 2-D, A at least 2-D, b a vector over W's columns, and
/// the add's result type the matmul's.
std::optional<std::pair<hpc::MatMulOp, Value>> matchMatMulBias(hpc::AddOp add) {
  for (auto [product, bias] : {std::pair(add.getLhs(), add.getRhs()),
                               std::pair(add.getRhs(), add.getLhs())}) {
    auto mm = product.getDefiningOp<hpc::MatMulOp>();
    if (!mm || !product.hasOneUse() || add.getType() != mm.getType())
      continue;
    Value a = mm.getLhs(), w = mm.getRhs();
    if (!isStaticFloat(a) || !isStaticFloat(w) || !isStaticFloat(bias) ||
        !isStaticFloat(mm.getResult()))
      continue;
    if (rankedOf(w).getRank() != 2 || rankedOf(a).getRank() < 2 ||
        rankedOf(bias).getElementType() != rankedOf(a).getElementType())
      continue;
    if (!isFeatureVector(bias, rankedOf(w).getDimSize(1)))
      continue;
    return std::pair(mm, bias);
  }
  return std::nullopt;
}

/// add(matmul(A, W), b) -> reshape(gemm(reshape(A), W, reshape(b))).
void fuseMatMulBias(hpc::AddOp add, hpc::MatMulOp mm, Value bias) {
  OpBuilder b(add);
  Location loc = b.getFusedLoc({mm.getLoc(), add.getLoc()});
  Value a = mm.getLhs(), w = mm.getRhs();
  ArrayRef<int64_t> aShape = rankedOf(a).getShape();
  int64_t rows = 1;
  for (int64_t d : aShape.drop_back())
    rows *= d;
  int64_t n = rankedOf(w).getDimSize(1);
  Value a2 = reshapeTo(b, loc, a, {rows, aShape.back()});
  Value c = reshapeTo(b, loc, bias, {n});
  auto gemm = hpc::GemmOp::create(b, loc, a2, w, c, APFloat(1.0), APFloat(1.0),
                                  /*trans_a=*/false, /*trans_b=*/false, "none");
  Value out = reshapeTo(b, loc, gemm.getResult(), mm.getType().getShape());
  add.getResult().replaceAllUsesWith(out);
  add.erase();
  mm.erase();
}

/// The gemm or conv with no activation yet whose result `v` is, with `v`
/// used only by the activation; null otherwise.
Operation *unactivatedProduct(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  Operation *def = v.getDefiningOp();
  if (auto gemm = dyn_cast_or_null<hpc::GemmOp>(def))
    return gemm.getActivation() == "none" ? def : nullptr;
  if (auto conv = dyn_cast_or_null<hpc::ConvOp>(def))
    return conv.getActivation() == "none" ? def : nullptr;
  return nullptr;
}

/// act(product) or act(reshape(product)) -> product {activation}; false
/// when `act` does not have that form.
bool fuseActivation(Operation *act, StringRef activation) {
  Value x = act->getOperand(0);
  if (act->getResult(0).getType() != x.getType())
    return false;
  Operation *product = unactivatedProduct(x);
  if (!product)
    if (auto reshape = x.getDefiningOp<hpc::ReshapeOp>(); reshape && x.hasOneUse())
      product = unactivatedProduct(reshape.getInput());
  if (!product)
    return false;
  Builder b(act->getContext());
  product->setAttr("activation", b.getStringAttr(activation));
  product->setLoc(b.getFusedLoc({product->getLoc(), act->getLoc()}));
  act->getResult(0).replaceAllUsesWith(x);
  act->erase();
  return true;
}

struct FuseEpilogues : hpc::impl::HPCFuseEpiloguesBase<FuseEpilogues> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      SmallVector<hpc::AddOp> adds;
      func.walk([&](hpc::AddOp add) { adds.push_back(add); });
      for (hpc::AddOp add : adds) {
        if (auto match = matchMatMulBias(add)) {
          fuseMatMulBias(add, match->first, match->second);
          ++numBiases;
        }
      }
      // After the bias adds, so act(add(matmul)) becomes one gemm.
      SmallVector<std::pair<Operation *, StringRef>> acts;
      func.walk([&](Operation *op) {
        if (std::optional<StringRef> activation = hpc::epilogueActivationOf(op))
          acts.push_back({op, *activation});
      });
      for (auto [act, activation] : acts)
        if (fuseActivation(act, activation))
          ++numActivations;
    }
  }
};

} // namespace
