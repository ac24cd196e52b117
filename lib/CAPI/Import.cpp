//===- Import.cpp - C API of the ONNX importer ----------------------------===//
//
// Implements hpc-c/Import.h on hpc::importONNXFile: the shape list is split
// into hpc::parseInputShape's entries, and every error becomes one error
// diagnostic on the context, located at the model's path.
//
//===----------------------------------------------------------------------===//

#include "hpc-c/Import.h"

#include "hpc/Import/ONNXImporter.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

MlirModule hpcImportONNXFile(MlirContext context, MlirStringRef path,
                             MlirStringRef inputShapes, bool shapesOnly) {
  mlir::MLIRContext *ctx = unwrap(context);
  llvm::StringRef file = unwrap(path);
  auto fail = [&](const std::string &message) {
    mlir::emitError(mlir::FileLineColLoc::get(ctx, file, 0, 0)) << message;
    return MlirModule{nullptr};
  };

  hpc::ImportOptions options;
  options.shapesOnly = shapesOnly;
  llvm::SmallVector<llvm::StringRef> entries;
  unwrap(inputShapes).split(entries, ';', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef entry : entries) {
    std::string error;
    if (!hpc::parseInputShape(entry.trim().str(), options, error))
      return fail("input shape '" + entry.str() + "': " + error);
  }

  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      hpc::importONNXFile(*ctx, file.str(), options, error);
  if (!module)
    return fail(error.empty() ? "cannot import the model" : error);
  return wrap(module.release());
}
