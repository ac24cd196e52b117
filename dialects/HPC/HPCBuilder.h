//===- HPCBuilder.h - build hpc ops with inferred result types -*- C++ -*-===//
//
// The passes that write new hpc graphs (hpc-autodiff's gradients, the loss and
// the optimizer) build many small ops; every hpc op infers its result types,
// so a builder only needs operands and attributes. GraphBuilder wraps an
// OpBuilder with one helper per op it uses and records the first op whose
// types do not infer (a bug in the caller, reported as a diagnostic).
//
//===----------------------------------------------------------------------===//

#ifndef HPC_DIALECT_HPC_HPCBUILDER_H
#define HPC_DIALECT_HPC_HPCBUILDER_H

#include "HPC/HPCOps.h"

#include "mlir/IR/Builders.h"

namespace hpc {

class GraphBuilder {
public:
  GraphBuilder(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  /// False once an op failed to infer its types (the failing op is reported).
  bool ok() const { return !failed_; }

  /// Any hpc op from operands and attributes (types inferred); null on failure.
  mlir::Operation *make(llvm::StringRef name, mlir::ValueRange operands,
                        llvm::ArrayRef<mlir::NamedAttribute> attrs = {});
  template <typename OpTy>
  mlir::Value op(mlir::ValueRange operands, llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    mlir::Operation *o = make(OpTy::getOperationName(), operands, attrs);
    return o ? o->getResult(0) : mlir::Value();
  }

  mlir::NamedAttribute attr(llvm::StringRef name, mlir::Attribute value) {
    return b.getNamedAttr(name, value);
  }
  mlir::NamedAttribute i64s(llvm::StringRef name, llvm::ArrayRef<int64_t> v) {
    return attr(name, b.getDenseI64ArrayAttr(v));
  }
  mlir::NamedAttribute i64(llvm::StringRef name, int64_t v) {
    return attr(name, b.getI64IntegerAttr(v));
  }
  mlir::NamedAttribute f64(llvm::StringRef name, double v) {
    return attr(name, b.getF64FloatAttr(v));
  }
  mlir::NamedAttribute boolean(llvm::StringRef name, bool v) {
    return attr(name, b.getBoolAttr(v));
  }

  // --- constants ---------------------------------------------------------
  /// A splat constant of `type` (float or integer element type).
  mlir::Value splat(mlir::RankedTensorType type, double value);
  /// A 0-d constant of the element type of `like`.
  mlir::Value scalarLike(mlir::Value like, double value);
  mlir::Value zerosLike(mlir::Value like);
  mlir::Value i64Tensor(llvm::ArrayRef<int64_t> values, llvm::ArrayRef<int64_t> shape);

  // --- elementwise -------------------------------------------------------
  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value div(mlir::Value a, mlir::Value c);
  mlir::Value neg(mlir::Value a);
  /// a * s for a scalar s (a 0-d constant of a's element type).
  mlir::Value scale(mlir::Value a, double s);
  mlir::Value where(mlir::Value cond, mlir::Value a, mlir::Value c);
  mlir::Value castTo(mlir::Value a, mlir::Type elementType);

  // --- shapes ------------------------------------------------------------
  mlir::Value reshape(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value a, llvm::ArrayRef<int64_t> perm);
  mlir::Value expand(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  mlir::Value reduceSum(mlir::Value a, llvm::ArrayRef<int64_t> axes, bool keepdims);
  /// Sums `g` (of a broadcast result's shape) down to `shape`, the shape of
  /// an operand that numpy-broadcast into it.
  mlir::Value unbroadcast(mlir::Value g, llvm::ArrayRef<int64_t> shape);

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
  bool failed_ = false;
};

/// The shape of a ranked tensor value.
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

/// Attaches the GradientInterface models of HPCGradients.cpp to the hpc ops.
void registerGradientModels(mlir::MLIRContext *context);

} // namespace hpc

#endif // HPC_DIALECT_HPC_HPCBUILDER_H
