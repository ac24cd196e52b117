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
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

void hpc::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<hpc::HPCDialect, hpc::dist::DistDialect, mlir::func::FuncDialect,
                  mlir::LLVM::LLVMDialect, mlir::shard::ShardDialect,
                  mlir::tensor::TensorDialect>();
  // Upstream --sharding-propagation / --shard-partition work on hpc ops.
  hpc::registerShardingInterfaceModels(registry);
}

void hpc::registerAllPasses() {
  registerHPCPasses();
  registerPipelines();
}
