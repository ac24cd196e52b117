//===- OpCost.h - analytic per-op cost estimates -----------------*- C++ -*-===//
//
// Floating-point operation counts of hpc ops from their static shapes. The
// strategy search's cost model builds on these; the summary pass reports them.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COSTMODEL_OPCOST_H
#define HPC_COSTMODEL_OPCOST_H

#include <cstdint>

namespace mlir {
class Operation;
} // namespace mlir

namespace hpc {

/// Forward FLOPs of one op (a multiply-add counts as 2); 0 for ops that only
/// move data, and for shapes that are not static.
int64_t estimateFlops(mlir::Operation *op);

} // namespace hpc

#endif // HPC_COSTMODEL_OPCOST_H
