//===- AddTrees.h - sums of many terms, regrouped -----------------*- C++ -*-===//
//
// A sum of many terms is a chain of hpc.add ops: the global gradient norm
// adds one square per parameter. Where the terms live on different ranks
// (a parameter split over tp, a pipeline stage's parameters), each term
// would cross on its own where the chain adds it: dist-partition and
// dist-pipeline regroup such sums so that what crosses, crosses once.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PASSES_ADDTREES_H
#define HPC_PASSES_ADDTREES_H

#include "HPC/HPCOps.h"

#include "mlir/IR/Builders.h"

namespace hpc {

/// hpc.add ops of one type, whose operands have it too (no broadcast),
/// and whose inner adds have no user but their parent in the same block.
struct AddTree {
  AddOp root;                              ///< its result leaves the tree
  llvm::SmallVector<mlir::Value> leaves;   ///< the terms, in order
  llvm::SmallVector<mlir::Operation *> adds; ///< root first, each add before its operands
};

/// Calls `fn` on each add-tree of `block` with at least `minLeaves` terms,
/// in the order of their roots. Each tree is read when its turn comes, so
/// `fn` may rebuild it (replaceAddTree): a later tree that has an earlier
/// one's sum among its terms sees the new sum.
void forEachAddTree(mlir::Block &block, size_t minLeaves,
                    llvm::function_ref<void(AddTree &)> fn);

/// `terms` summed left to right with hpc.add at the builder's point (the
/// one term itself when there is one; null when none).
mlir::Value sumInOrder(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type,
                       llvm::ArrayRef<mlir::Value> terms);

/// Replaces the tree's root by `sum` and erases its adds.
void replaceAddTree(AddTree &tree, mlir::Value sum);

} // namespace hpc

#endif // HPC_PASSES_ADDTREES_H
