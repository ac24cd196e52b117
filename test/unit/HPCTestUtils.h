//===- HPCTestUtils.h - shared fixture of the hpc unit tests -----*- C++ -*-===//
//
// A GoogleTest fixture with an MLIRContext that has the hpc dialect loaded,
// a module to build ops into, and helpers to make operand values of a given
// type, to print types, and to collect the diagnostics the verifier emits.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_TEST_UNIT_HPCTESTUTILS_H
#define HPC_TEST_UNIT_HPCTESTUTILS_H

#include "HPC/HPCOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include "gtest/gtest.h"

#include <string>

namespace hpc_test {

/// Fixture: builds ops at the end of a fresh module.
class HPCTest : public ::testing::Test {
protected:
  HPCTest() : builder(&context), loc(builder.getUnknownLoc()) {
    context.loadDialect<hpc::HPCDialect>();
    module = mlir::ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
  }

  /// A ranked tensor type; use `dyn` for a dynamic dimension.
  mlir::RankedTensorType tensor(llvm::ArrayRef<int64_t> shape,
                                mlir::Type elementType = {}) {
    return mlir::RankedTensorType::get(
        shape, elementType ? elementType : builder.getF32Type());
  }

  /// An operand of the given type with no known value (an hpc.weight
  /// without data, as `--shapes-only` imports produce).
  mlir::Value value(llvm::ArrayRef<int64_t> shape, mlir::Type elementType = {}) {
    return hpc::WeightOp::create(builder, loc,
                                       tensor(shape, elementType), "w",
                                       mlir::ElementsAttr())
        .getResult();
  }

  /// An i64 constant of the given shape.
  mlir::Value i64Constant(llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<int64_t> values) {
    auto type = tensor(shape, builder.getI64Type());
    return hpc::ConstantOp::create(
               builder, loc, mlir::DenseIntElementsAttr::get(type, values))
        .getResult();
  }

  /// An f32 constant of the given shape.
  mlir::Value f32Constant(llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<float> values) {
    auto type = tensor(shape, builder.getF32Type());
    return hpc::ConstantOp::create(
               builder, loc, mlir::DenseFPElementsAttr::get(type, values))
        .getResult();
  }

  /// Runs the verifier on `op` and returns the text of every diagnostic it
  /// emits, one per line (empty when the op verifies).
  std::string verifyErrors(mlir::Operation *op) {
    std::string messages;
    mlir::ScopedDiagnosticHandler handler(
        &context, [&](mlir::Diagnostic &diag) {
          messages += diag.str() + "\n";
          return mlir::success();
        });
    (void)mlir::verify(op);
    return messages;
  }

  mlir::MLIRContext context;
  mlir::OpBuilder builder;
  mlir::Location loc;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  static constexpr int64_t dyn = mlir::ShapedType::kDynamic;
};

/// The printed form of a type or attribute, for readable EXPECT_EQs.
template <typename T> std::string str(T t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

using I64s = llvm::SmallVector<int64_t>;

} // namespace hpc_test

#endif // HPC_TEST_UNIT_HPCTESTUTILS_H
