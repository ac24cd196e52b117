//===- Dialects.cpp - C API of the hpc and dist dialects ------------------===//
//
// Implements hpc-c/Dialects.h: the dialect handles, as upstream's
// MLIR_DEFINE_CAPI_DIALECT_REGISTRATION makes them.
//
//===----------------------------------------------------------------------===//

#include "hpc-c/Dialects.h"

#include "Dist/DistOps.h"
#include "HPC/HPCOps.h"

#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(HPC, hpc, hpc::HPCDialect)
MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Dist, dist, hpc::dist::DistDialect)
