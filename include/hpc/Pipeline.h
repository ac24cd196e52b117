//===- Pipeline.h - HPC-Opt pass pipelines -----------------------*- C++ -*-===//
//
// Pipelines as plain functions, so other compilers can build them into their
// own pass managers, and under a command-line name for hpc-opt.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PIPELINE_H
#define HPC_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace hpc {

struct CompileOptions : mlir::PassPipelineOptions<CompileOptions> {
  Option<std::string> weightsFile{
      *this, "weights-file",
      llvm::cl::desc("Write the weights (safetensors) to this path")};
  Option<std::string> weightsName{
      *this, "weights-name",
      llvm::cl::desc("Weights file name recorded for the runtime")};
  Option<std::string> modelName{*this, "model-name",
                                llvm::cl::desc("Model name for the manifest")};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse GELU/SiLU/RMSNorm decompositions"),
                    llvm::cl::init(true)};
};

/// hpc module -> LLVM dialect calling libhpcrt: simplify, fuse composite
/// ops, plan memory and lower (hpc-compile).
void buildCompilePipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// Registers the pipelines under their command-line names.
void registerPipelines();

} // namespace hpc

#endif // HPC_PIPELINE_H
