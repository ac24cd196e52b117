//===- hpc-c/Import.h - the ONNX importer ------------------------*- C -*-===//
//
// Imports an ONNX model into a module of the hpc dialect (a func.func @main
// with static shapes), as hpc-opt does with a .onnx or .onnxtxt input.
// Compiles as C and C++.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_C_IMPORT_H
#define HPC_C_IMPORT_H

#include <stdbool.h>

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Imports the model at `path` (.onnx with optional external data, or
/// .onnxtxt) into a new module in `context`. `inputShapes` gives static
/// shapes to inputs with dynamic dimensions, "NAME=D0,D1;NAME2=D0" (or
/// empty). With `shapesOnly`, no weight data is read: parameters come out as
/// hpc.weight ops without value.
///
/// On error (an unreadable or invalid model, a malformed `inputShapes`)
/// returns a null module (mlirModuleIsNull) and reports an error diagnostic
/// on `context`, located at `path`; nothing is printed otherwise and the
/// process is never ended.
MLIR_CAPI_EXPORTED MlirModule hpcImportONNXFile(MlirContext context,
                                                MlirStringRef path,
                                                MlirStringRef inputShapes,
                                                bool shapesOnly);

#ifdef __cplusplus
}
#endif

#endif // HPC_C_IMPORT_H
