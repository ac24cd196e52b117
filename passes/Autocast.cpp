//===- Autocast.cpp - products in bf16, everything else in f32 ------------===//
//
// hpc-autocast with precision=bf16 is PyTorch's CPU autocast decided at
// compile time: the products (matmul, gemm, conv, conv_transpose,
// conv_weight_grad) read bf16 operands, accumulate in f32 inside the kernel
// and write bf16, which is cast back to f32 at once, so every other op keeps
// computing in f32.
//
// Each value a product reads is cast once (a cache per value). Where the cast
// can happen at compile time it does: weights and constants become bf16 data
// (round to nearest even, as the runtime's casts), so inference stores the
// weights once in the precision the kernels read. A train step's parameters
// are hpc.variables, the fp32 master weights: they keep their type and are
// cast on every step. The pass runs after autodiff, so the backward products
// are cast as well and no bf16 op needs a gradient.
//
//===----------------------------------------------------------------------===//

#include "Bf16Data.h"

#include "hpc/Passes.h"

#include "Dist/DistOps.h"
#include "HPC/HPCBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace hpc {
#define GEN_PASS_DEF_HPCAUTOCAST
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

/// The products that compute in bf16.
bool isProduct(Operation *op) {
  return isa<hpc::MatMulOp, hpc::GemmOp, hpc::ConvOp, hpc::ConvTransposeOp,
             hpc::ConvWeightGradOp>(op);
}

/// A move of one result (hpc::movesDataOnly, a split aside): its bf16 clone
/// stands for its one result.
bool movesOne(Operation *op) { return hpc::movesDataOnly(op) && op->getNumResults() == 1; }

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

bool isF32Tensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

/// Whether autocast rewrites `product`: it has float operands, all of them
/// (and its result) f32.
bool castsProduct(Operation *product) {
  bool anyFloat = false;
  for (Value v : product->getOperands()) {
    if (!isFloatTensor(v))
      continue;
    if (!isF32Tensor(v))
      return false;
    anyFloat = true;
  }
  return anyFloat && product->getNumResults() == 1 && isF32Tensor(product->getResult(0));
}

/// The rewrite of one module: the bf16 value of every value a product reads,
/// built once.
class Autocaster {
public:
  explicit Autocaster(MLIRContext *ctx) : bf16(BFloat16Type::get(ctx)), f32(Float32Type::get(ctx)) {}

  /// Rewrites `product` to read bf16 and casts its result back to f32;
  /// false when an op does not infer its types (reported).
  bool rewrite(Operation *product);
  /// Erases what the rewrite left unread (f32 weights, constants, moves and
  /// casts only products read).
  void eraseDead();

  int64_t stored = 0, casts = 0;

private:
  Value bf16Of(Value v, Operation *product);
  Value makeBf16(Value v, Operation *product);
  bool castsCheaply(Value v);

  /// The op of `v`'s block that holds `product`: new values for `product`
  /// go right before it.
  static Operation *anchor(Value v, Operation *product) {
    return v.getParentBlock()->findAncestorOpInBlock(*product);
  }

  Type bf16, f32;
  llvm::DenseMap<Value, Value> cache;
  /// Ops whose result products no longer read (maybe nothing does).
  SmallVector<Operation *> bypassed;
};

bool Autocaster::rewrite(Operation *product) {
  SmallVector<Value> operands;
  for (Value v : product->getOperands()) {
    Value operand = isFloatTensor(v) ? bf16Of(v, product) : v;
    if (!operand)
      return false;
    operands.push_back(operand);
  }
  OpBuilder b(product);
  hpc::GraphBuilder g(b, product->getLoc());
  Operation *low = g.make(product->getName().getStringRef(), operands, product->getAttrs());
  if (!low)
    return false;
  b.setInsertionPointAfter(low);
  Value back = g.castTo(low->getResult(0), f32);
  product->getResult(0).replaceAllUsesWith(back);
  product->erase();
  bypassed.push_back(back.getDefiningOp());
  return true;
}

Value Autocaster::bf16Of(Value v, Operation *product) {
  if (Value known = cache.lookup(v))
    return known;
  Value made = makeBf16(v, product);
  if (made)
    cache[v] = made;
  return made;
}

/// Whether the bf16 of `v` needs no cast of its own at run time beyond one
/// that exists or must exist anyway.
bool Autocaster::castsCheaply(Value v) {
  if (cache.count(v))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (auto back = dyn_cast<hpc::CastOp>(def))
    return back.getInput().getType() == cast<RankedTensorType>(v.getType()).clone(bf16);
  if (isa<hpc::WeightOp, hpc::ConstantOp, hpc::VariableOp>(def))
    return true;
  return movesOne(def) && castsCheaply(def->getOperand(0));
}

Value Autocaster::makeBf16(Value v, Operation *product) {
  auto type = cast<RankedTensorType>(v.getType()).clone(bf16);
  Operation *def = v.getDefiningOp();
  // A product's result cast back to f32: its bf16 value is exact.
  if (auto back = dyn_cast_or_null<hpc::CastOp>(def); back && back.getInput().getType() == type) {
    bypassed.push_back(def);
    return back.getInput();
  }
  if (def && isa<hpc::WeightOp, hpc::ConstantOp>(def))
    if (Value data = hpc::storeAsBf16(def)) {
      ++stored;
      bypassed.push_back(def);
      return data;
    }
  OpBuilder b(anchor(v, product));
  hpc::GraphBuilder g(b, def ? def->getLoc() : product->getLoc());
  if (def && movesOne(def) && castsCheaply(def->getOperand(0))) {
    Value source = bf16Of(def->getOperand(0), product);
    if (!source)
      return {};
    Operation *moved = b.clone(*def);
    moved->setOperand(0, source);
    moved->getResult(0).setType(type);
    bypassed.push_back(def);
    return moved->getResult(0);
  }
  ++casts;
  return g.castTo(v, bf16);
}

void Autocaster::eraseDead() {
  // Moves of moves: erasing one frees the next, so sweep until none goes.
  llvm::DenseSet<Operation *> erased;
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation *op : bypassed) {
      if (erased.contains(op) || !op->use_empty() || !isMemoryEffectFree(op))
        continue;
      erased.insert(op);
      op->erase();
      changed = true;
    }
  }
}

struct HPCAutocast : hpc::impl::HPCAutocastBase<HPCAutocast> {
  using Base::Base;

  void runOnOperation() override {
    if (precision == hpc::Precision::FP32)
      return;
    ModuleOp module = getOperation();
    SmallVector<Operation *> products;
    module.walk([&](Operation *op) {
      if (isProduct(op) && castsProduct(op))
        products.push_back(op);
    });
    Autocaster caster(&getContext());
    for (Operation *product : products)
      if (!caster.rewrite(product))
        return signalPassFailure();
    caster.eraseDead();
    numProducts += products.size();
    numStored += caster.stored;
    numCasts += caster.casts;
    module->setAttr("hpc.precision",
                    StringAttr::get(&getContext(), hpc::stringifyPrecision(precision)));
  }
};

} // namespace
