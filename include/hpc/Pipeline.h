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
  Option<std::string> mesh{
      *this, "mesh",
      llvm::cl::desc("Partition over this mesh (dp=2,tp=2); empty: one rank")};
  ListOption<std::string> shard{
      *this, "shard", llvm::cl::desc("NAME=SPEC sharding seeds (with mesh)")};
  Option<bool> asyncCollectives{
      *this, "async-collectives",
      llvm::cl::desc("With mesh: start collectives early, wait at first use"),
      llvm::cl::init(false)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse GELU/SiLU/RMSNorm decompositions"),
                    llvm::cl::init(true)};
  Option<bool> weightPieces{
      *this, "weight-pieces",
      llvm::cl::desc("Store the weight pieces a rank reads (dist-weight-pieces) "
                     "instead of copying them on every run"),
      llvm::cl::init(true)};
};

/// hpc module -> LLVM dialect calling libhpcrt: simplify, fuse composite
/// ops, partition over the mesh (when one is given), plan memory and lower
/// (hpc-compile).
void buildCompilePipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// The distributed part alone: dist-propagate over `mesh` with the seeds,
/// then dist-partition (and dist-async-collectives when `asyncCollectives`).
void buildPartitionPipeline(mlir::OpPassManager &pm, llvm::StringRef mesh,
                            llvm::ArrayRef<std::string> shard,
                            bool asyncCollectives = false);

/// Registers the pipelines under their command-line names.
void registerPipelines();

} // namespace hpc

#endif // HPC_PIPELINE_H
