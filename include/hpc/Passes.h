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
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <optional>
#include <string>
#include <vector>

namespace hpc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The mesh ("dp=2,tp=4", "pp=2,dp=2"; "" for one device) of the plan
/// dist-search recorded on @main, when its stages all run the same data and
/// tensor parallelism and no expert parallelism (what dist-pipeline,
/// dist-propagate and dist-partition compile); failure otherwise.
mlir::FailureOr<std::string> planMesh(mlir::ModuleOp module);

/// The node that ends each pipeline stage but the last of that plan (the
/// --stage-boundaries that compile it); empty for one stage. Read on the
/// module dist-search ran on (its ops carry the plan's stages).
std::vector<std::string> planStageBoundaries(mlir::ModuleOp module);

/// Whether that plan's stages run Megatron-LM sequence parallelism over
/// their tp ranks (dist-propagate's sequence-parallel).
bool planSequenceParallel(mlir::ModuleOp module);

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

/// The pipeline schedule that plan's stages run (its `schedule`, as
/// --pipeline-schedule spells it; "1f1b" when it records none).
std::string planSchedule(mlir::ModuleOp module);

/// Pipeline tags: an op's stage (dist-pipeline-stages on the forward ops,
/// hpc-autodiff on their gradient ops), whether it is a gradient op
/// (hpc-autodiff), and which micro-batch's copy it is (hpc-micro-batches).
/// dist-pipeline reads them; a step without pipeline stages has none.
constexpr llvm::StringLiteral kStageAttr = "hpc.stage";
constexpr llvm::StringLiteral kBackwardAttr = "hpc.backward";
constexpr llvm::StringLiteral kMicroBatchAttr = "hpc.micro_batch";

/// A --mesh with a pp axis: its size (1 without one) and the mesh of the
/// other axes ("dp=2,pp=2,tp=2" -> 2, "dp=2,tp=2").
struct PipelineMesh {
  int64_t stages = 1;
  std::string rest;
};
PipelineMesh splitPipelineAxis(llvm::StringRef mesh);

/// The size of axis `name` in a --mesh text ("pp=2,dp=2,tp=2:intra"); 0
/// when the mesh has no such axis (or not as NAME=SIZE).
int64_t meshAxisSize(llvm::StringRef mesh, llvm::StringRef name);

/// The bias rate of a `--moe-balance` spelling: 0 for "none", R for
/// "bias:R" (R > 0); nullopt for anything else.
std::optional<double> parseMoEBalance(llvm::StringRef spec);

/// The mesh hpc-route-experts is given for a compile over `mesh`: one with
/// an ep axis (expert parallelism), or with a dp axis in a step of one
/// stage and one micro-batch (each dp rank then routes its own tokens into
/// buffers of its own); otherwise none (every rank routes the whole batch).
std::string routingMesh(llvm::StringRef mesh, int64_t microBatches);

/// Marks the op whose result is a train step's auxiliary balancing loss
/// (hpc-moe-balance's `--moe-aux-loss` term, already in the loss), which
/// hpc-optimizer returns as the output "moe.balance_loss".
constexpr llvm::StringLiteral kBalanceLossAttr = "hpc.moe_balance_loss";

/// split(projection) along the output features becomes one projection per
/// piece on pieces of the weight and bias (hpc-unfuse-split-projections):
/// static slices of them (`splitWeights` false; dist-weight-pieces stores
/// each as a weight of its own) or one hpc.split (a train step's weights:
/// the gradient is one concat).
void unfuseSplitProjections(mlir::func::FuncOp func, bool splitWeights);

/// The ONNX node name an op's location carries ("" when none).
std::string locationName(mlir::Location loc);

} // namespace hpc

#endif // HPC_PASSES_H
