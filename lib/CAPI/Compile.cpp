//===- Compile.cpp - C API of the compile flow ----------------------------===//
//
// Implements hpc-c/Compile.h: parses the hpc-compile pipeline's textual
// options into hpc::CompileOptions and runs hpc::compileToExecutable, which
// checks them. Every error is a diagnostic on the module's
// context and a failure result.
//
//===----------------------------------------------------------------------===//

#include "hpc-c/Compile.h"

#include "hpc/Compile.h"
#include "hpc/Pipeline.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

MlirLogicalResult hpcCompileToExecutable(MlirModule module,
                                         MlirStringRef outputPath,
                                         MlirStringRef options) {
  if (mlirModuleIsNull(module))
    return mlirLogicalResultFailure();
  mlir::ModuleOp op = unwrap(module);
  llvm::StringRef text = unwrap(options);

  // The parser reports to `message`; a malformed value of an llvm::cl
  // option is also printed to stderr by llvm::cl itself.
  hpc::CompileOptions compileOptions;
  std::string message;
  llvm::raw_string_ostream os(message);
  if (mlir::failed(compileOptions.parseFromString(text, os))) {
    llvm::StringRef reason = llvm::StringRef(message).trim();
    mlir::InFlightDiagnostic diag = op.emitError()
                                    << "invalid hpc-compile options '" << text
                                    << "'";
    if (!reason.empty())
      diag << ": " << reason;
    return mlirLogicalResultFailure();
  }

  // The flow checks the options' combinations first (verifyCompileOptions).
  return wrap(hpc::compileToExecutable(op, compileOptions, unwrap(outputPath)));
}
