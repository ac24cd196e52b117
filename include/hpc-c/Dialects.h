//===- hpc-c/Dialects.h - the hpc and dist dialects --------------*- C -*-===//
//
// Dialect handles of HPC-Opt's dialects, in upstream MLIR's style: a
// consumer inserts them into a registry (mlirDialectHandleInsertDialect) or
// loads them into a context (mlirDialectHandleLoadDialect). Compiles as C
// and C++. docs/embedding.md.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_C_DIALECTS_H
#define HPC_C_DIALECTS_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The hpc dialect (tensor graph ops): mlirGetDialectHandle__hpc__().
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(HPC, hpc);

/// The dist dialect (meshes, shardings, collectives):
/// mlirGetDialectHandle__dist__().
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Dist, dist);

#ifdef __cplusplus
}
#endif

#endif // HPC_C_DIALECTS_H
