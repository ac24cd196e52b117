//===- Relayouts.h - looking through re-layouts of a collective's result -*- C++ -*-===//
//
// A partitioned program reshapes (and transposes) a reduced gradient right
// after its collective, to the shape its optimizer update wants at the end
// of the step. Where a collective's result is first really needed, and so
// how late it may be waited for or fused with others (dist-async-collectives,
// dist-bucket), looks through those re-layouts: views (hpc::isViewOp),
// transposes and splits (a bucket's pieces) of the one value, which may
// always move later with it.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PASSES_RELAYOUTS_H
#define HPC_PASSES_RELAYOUTS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SetVector.h"

namespace hpc {

/// The ops of `block` that only re-lay out `v`, transitively: views
/// (reshape, ...), transposes and splits.
llvm::SetVector<mlir::Operation *> relayoutsOf(mlir::Value v, mlir::Block *block);

/// The first op of `block` that uses `v` or a result of `chain` and is not
/// in `chain`; null when nothing does. `outside` is set when a user lies
/// outside the block (then nothing should move).
mlir::Operation *firstRealUse(mlir::Value v, mlir::Block *block,
                              const llvm::SetVector<mlir::Operation *> &chain, bool &outside);

/// Moves the ops of `chain` that come before `after` to just before `at`
/// (after `after`, before `at`), keeping their order.
void moveRelayouts(const llvm::SetVector<mlir::Operation *> &chain, mlir::Operation *after,
                   mlir::Operation *at);

} // namespace hpc

#endif // HPC_PASSES_RELAYOUTS_H
