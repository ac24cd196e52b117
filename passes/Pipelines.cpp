//===- Pipelines.cpp - HPC-Opt pass pipelines -----------------------------===//

#include "hpc/Pipeline.h"
#include "hpc/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void hpc::buildCompilePipeline(mlir::OpPassManager &pm,
                               const CompileOptions &options) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (options.fuse)
    pm.addPass(createHPCFuseComposites());
  if (!options.mesh.empty())
    buildPartitionPipeline(pm, options.mesh, options.shard, options.asyncCollectives);
  // Weight pieces a per-rank program reads (and slices of weights in any
  // program) become stored data.
  if (options.weightPieces)
    pm.addPass(createDistWeightPieces());
  HPCLowerToRuntimeOptions lower;
  lower.weightsFile = options.weightsFile;
  lower.weightsName = options.weightsName;
  lower.modelName = options.modelName;
  pm.addPass(createHPCLowerToRuntime(lower));
}

void hpc::buildPartitionPipeline(mlir::OpPassManager &pm, llvm::StringRef mesh,
                                 llvm::ArrayRef<std::string> shard,
                                 bool asyncCollectives) {
  DistPropagateOptions propagate;
  propagate.mesh = mesh.str();
  propagate.shard = llvm::to_vector(shard);
  pm.addPass(createDistPropagate(propagate));
  pm.addPass(createDistPartition());
  // Collectives that undo each other (slice then gather) fold away.
  pm.addPass(mlir::createCanonicalizerPass());
  if (asyncCollectives)
    pm.addPass(createDistAsyncCollectives());
}

void hpc::registerPipelines() {
  mlir::PassPipelineRegistration<CompileOptions>(
      "hpc-compile",
      "Compile an hpc module to LLVM dialect calls of libhpcrt",
      buildCompilePipeline);
}
