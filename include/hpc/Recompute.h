//===- Recompute.h - activation recomputation of a train step ----*- C++ -*-===//
//
// hpc-autodiff's recompute option: the forward values the backward pass reads
// are computed again right before the backward needs them, from a few kept
// ones, so the forward's copies die where the forward last reads them (Chen
// et al. 2016's checkpointing; Korthikanti et al. 2022's selective form).
//
//===----------------------------------------------------------------------===//

#ifndef HPC_RECOMPUTE_H
#define HPC_RECOMPUTE_H

#include "mlir/IR/Block.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <optional>

namespace hpc {

enum class RecomputeMode { None, Full, Selective };

/// "none", "full" or "selective"; nullopt for anything else.
std::optional<RecomputeMode> parseRecomputeMode(llvm::StringRef s);

struct RecomputeStats {
  int64_t checkpoints = 0;  // values kept at segment boundaries
  int64_t segments = 0;     // segments recomputed (the last one never is)
  int64_t clonedOps = 0;    // forward ops computed a second time
  int64_t freedBytes = 0;   // bytes of forward values no longer kept for the backward
};

/// Rewrites `body`, whose ops `forward` (in order) are the forward pass and
/// whose later ops the backward pass (hpc-autodiff's), so that the backward
/// reads recomputed copies of the forward activations it needs. Activations
/// are the values that depend on both a block argument (the batch) and one
/// of `params`. The forward is cut where one activation alone is live
/// (between transformer blocks, the residual stream), or one with others of
/// at most 1/16 of its size (batch statistics): those cut values are
/// the checkpoints, chosen greedily so that about sqrt(activations x cut
/// size) bytes of needed activations lie between two of them. `Full` keeps
/// only the checkpoints; `Selective` also keeps the results of products
/// with a weight (matmul, gemm, conv) and activations read twice by the
/// forward, recomputing the cheap rest (attention's scores and softmax,
/// norms, activation functions). The segment after the last checkpoint,
/// which the backward reads first, is never recomputed. Copies carry the
/// unit attribute `hpc.recomputed`, which also keeps CSE from merging them
/// back into the forward's values.
void recomputeActivations(mlir::Block &body, llvm::ArrayRef<mlir::Operation *> forward,
                          llvm::ArrayRef<mlir::Value> params, RecomputeMode mode,
                          RecomputeStats &stats);

} // namespace hpc

#endif // HPC_RECOMPUTE_H
