//===- Registration.cpp - register dialects and passes --------------------===//
//
// Implements hpc/InitAll.h: the single place that lists what HPC-Opt adds to
// an MLIR tool.
//
//===----------------------------------------------------------------------===//

#include "hpc/InitAll.h"

#include "Dist/DistOps.h"
#include "hpc/Passes.h"
#include "hpc/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectRegistry.h"

void hpc::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<hpc::HPCDialect, hpc::dist::DistDialect, mlir::func::FuncDialect,
                  mlir::LLVM::LLVMDialect>();
}

void hpc::registerAllPasses() {
  registerHPCPasses();
  registerPipelines();
}
