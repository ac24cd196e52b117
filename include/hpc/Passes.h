//===- Passes.h - HPC-Opt passes ---------------------------------*- C++ -*-===//
//
// Declarations of every HPC-Opt pass (generated from passes/Passes.td) and
// their registration.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PASSES_H
#define HPC_PASSES_H

#include "HPC/HPCOps.h"
#include "hpc/Precision.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace hpc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The mesh ("dp=2,tp=4"; "" for one device) of the plan dist-search
/// recorded on @main, when it is one stage of data and tensor parallelism
/// (what dist-propagate and dist-partition compile); failure otherwise.
mlir::FailureOr<std::string> planMesh(mlir::ModuleOp module);

/// The ZeRO stage of that plan's stage (0 when it has none).
int64_t planZero(mlir::ModuleOp module);

/// Whether that plan's stage recomputes activations (the cost model's
/// recomputation keeps each layer's input: hpc-autodiff's recompute=full).
bool planRecompute(mlir::ModuleOp module);

/// The count of labels that `loss`, a cross entropy hpc-append-loss built
/// (-(sum of the picked log-probabilities) / count), divides by: a 0-d
/// value; null for any other loss (a mean squared error, an output).
mlir::Value crossEntropyCount(mlir::Value loss);

/// The micro-batches a step of that plan runs (its num_micro_batches; 1
/// when the plan records none): hpc-micro-batches' count.
int64_t planMicroBatches(mlir::ModuleOp module);

} // namespace hpc

#endif // HPC_PASSES_H
