//===- hpc-c/Registration.h - dialects and passes ----------------*- C -*-===//
//
// The C side of hpc/InitAll.h: what a consumer calls once so that a context
// knows HPC-Opt's dialects and mlirParsePassPipeline knows its passes and
// pipelines (hpc-compile, dist-partition, ...). Compiles as C and C++.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_C_REGISTRATION_H
#define HPC_C_REGISTRATION_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Appends the hpc and dist dialects, the upstream dialects they are used
/// with (func, tensor, llvm, shard), their interface models, and the LLVM IR
/// translations of the dialects a lowered module holds.
MLIR_CAPI_EXPORTED void hpcRegisterAllDialects(MlirDialectRegistry registry);

/// Registers every HPC-Opt pass and pass pipeline with MLIR's global
/// registry. Safe to call more than once, and from several threads.
MLIR_CAPI_EXPORTED void hpcRegisterAllPasses(void);

/// The project's version, "MAJOR.MINOR.PATCH" (CMake's project version); a
/// static string, not to be freed.
MLIR_CAPI_EXPORTED const char *hpcGetVersion(void);

#ifdef __cplusplus
}
#endif

#endif // HPC_C_REGISTRATION_H
