//===- hpc-c/Compile.h - the compile flow ------------------------*- C -*-===//
//
// Compiles an imported hpc module into a runtime executable, as
// `hpc-opt model.onnx -o model.bin` does (hpc::compileToExecutable,
// hpc/Compile.h). Compiles as C and C++.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_C_COMPILE_H
#define HPC_C_COMPILE_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Compiles `module` (as hpcImportONNXFile returns it) and writes the
/// executable at `outputPath`, its weights beside it (OUTPUT.safetensors
/// unless `weights-file` says otherwise). `options` is the textual form of
/// the hpc-compile pipeline's options, as in
/// "builtin.module(hpc-compile{OPTIONS})": for example "" (one rank),
/// "mesh=dp=2", "train=true loss=mse:y,t optimizer=adamw".
///
/// The module is lowered in place. On failure (a malformed or inconsistent
/// option string, a module the pipeline cannot compile, an unwritable output
/// path) returns a failure and reports error diagnostics on the module's
/// context (for a null module, a failure alone); the process is never
/// ended. llvm::cl's option parser may also print its own message to stderr
/// for a malformed option value.
MLIR_CAPI_EXPORTED MlirLogicalResult
hpcCompileToExecutable(MlirModule module, MlirStringRef outputPath,
                       MlirStringRef options);

#ifdef __cplusplus
}
#endif

#endif // HPC_C_COMPILE_H
