//===- Registration.cpp - C API of HPC-Opt's registration -----------------===//
//
// Implements hpc-c/Registration.h on hpc/InitAll.h, the registration point
// every tool shares, and the project's version.
//
//===----------------------------------------------------------------------===//

#include "hpc-c/Registration.h"

#include "hpc/Compile.h"
#include "hpc/InitAll.h"
#include "hpc/Target/Emit.h"

#include "mlir/CAPI/IR.h"
#include "mlir/IR/DialectRegistry.h"

#include <mutex>

void hpcRegisterAllDialects(MlirDialectRegistry registry) {
  mlir::DialectRegistry &r = *unwrap(registry);
  hpc::registerAllDialects(r);
  hpc::registerTargetTranslations(r);
}

void hpcRegisterAllPasses(void) {
  // MLIR's pipeline registry refuses a second registration of a name (a
  // fatal error in builds with assertions): register once per process.
  static std::once_flag once;
  std::call_once(once, [] { hpc::registerAllPasses(); });
}

const char *hpcGetVersion(void) { return hpc::version(); }
