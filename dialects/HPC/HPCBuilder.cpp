//===- HPCBuilder.cpp - build hpc ops with inferred result types ----------===//
//
// GraphBuilder (HPCBuilder.h): ops are created detached first so that their
// attributes take their property form, their result types are inferred, and
// then the real op is inserted at the builder's insertion point.
//
//===----------------------------------------------------------------------===//

#include "HPC/HPCBuilder.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace hpc;

Operation *GraphBuilder::make(StringRef name, ValueRange operands,
                              ArrayRef<NamedAttribute> attrs) {
  MLIRContext *ctx = b.getContext();
  OperationName opName(name, ctx);
  auto *iface = opName.getInterface<InferTypeOpInterface>();
  SmallVector<Type> types;
  if (iface) {
    Operation *probe =
        Operation::create(loc, opName, {}, operands, NamedAttrList(attrs), nullptr, {}, 0);
    LogicalResult inferred =
        iface->inferReturnTypes(ctx, loc, operands, probe->getRawDictionaryAttrs(),
                                probe->getPropertiesStorage(), {}, types);
    probe->destroy();
    if (failed(inferred)) {
      failed_ = true;
      return nullptr;
    }
  }
  Operation *op = Operation::create(loc, opName, types, operands, NamedAttrList(attrs),
                                    nullptr, {}, 0);
  b.insert(op);
  return op;
}

Value GraphBuilder::splat(RankedTensorType type, double value) {
  Type elt = type.getElementType();
  Attribute a;
  if (auto f = dyn_cast<FloatType>(elt))
    a = DenseElementsAttr::get(type, FloatAttr::get(f, value));
  else
    a = DenseElementsAttr::get(type, IntegerAttr::get(elt, int64_t(value)));
  return ConstantOp::create(b, loc, llvm::cast<ElementsAttr>(a));
}

Value GraphBuilder::scalarLike(Value like, double value) {
  auto t = llvm::cast<RankedTensorType>(like.getType());
  return splat(RankedTensorType::get({}, t.getElementType()), value);
}

Value GraphBuilder::zerosLike(Value like) {
  return splat(llvm::cast<RankedTensorType>(like.getType()), 0.0);
}

Value GraphBuilder::i64Tensor(ArrayRef<int64_t> values, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, b.getI64Type());
  return ConstantOp::create(b, loc, llvm::cast<ElementsAttr>(DenseElementsAttr::get(type, values)));
}

Value GraphBuilder::add(Value a, Value c) { return op<AddOp>({a, c}); }
Value GraphBuilder::sub(Value a, Value c) { return op<SubOp>({a, c}); }
Value GraphBuilder::mul(Value a, Value c) { return op<MulOp>({a, c}); }
Value GraphBuilder::div(Value a, Value c) { return op<DivOp>({a, c}); }
Value GraphBuilder::neg(Value a) { return op<NegOp>({a}); }
Value GraphBuilder::scale(Value a, double s) { return mul(a, scalarLike(a, s)); }
Value GraphBuilder::where(Value cond, Value a, Value c) { return op<WhereOp>({cond, a, c}); }
Value GraphBuilder::castTo(Value a, Type elementType) {
  if (llvm::cast<RankedTensorType>(a.getType()).getElementType() == elementType)
    return a;
  return op<CastOp>({a}, {attr("to", TypeAttr::get(elementType))});
}

Value GraphBuilder::reshape(Value a, ArrayRef<int64_t> shape) {
  if (shapeOf(a) == shape)
    return a;
  return op<ReshapeOp>({a}, {i64s("shape", shape)});
}

Value GraphBuilder::transpose(Value a, ArrayRef<int64_t> perm) {
  return op<TransposeOp>({a}, {i64s("perm", perm)});
}

Value GraphBuilder::expand(Value a, ArrayRef<int64_t> shape) {
  if (shapeOf(a) == shape)
    return a;
  return op<ExpandOp>({a}, {i64s("shape", shape)});
}

Value GraphBuilder::reduceSum(Value a, ArrayRef<int64_t> axes, bool keepdims) {
  if (axes.empty())
    return a;
  return op<ReduceSumOp>({a}, {i64s("axes", axes), boolean("keepdims", keepdims)});
}

Value GraphBuilder::unbroadcast(Value g, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> out = shapeOf(g);
  if (out == shape)
    return g;
  int64_t lead = int64_t(out.size()) - int64_t(shape.size());
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < int64_t(out.size()); ++d)
    if (d < lead || (shape[d - lead] == 1 && out[d] != 1))
      axes.push_back(d);
  return reshape(reduceSum(g, axes, /*keepdims=*/true), shape);
}
