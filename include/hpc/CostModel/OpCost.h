//===- OpCost.h - analytic per-op cost estimates -----------------*- C++ -*-===//
//
// Floating-point operation counts and memory traffic of hpc ops from their
// static shapes. The strategy search's cost model builds on these; the
// summary pass reports them.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COSTMODEL_OPCOST_H
#define HPC_COSTMODEL_OPCOST_H

#include <cstdint>

namespace mlir {
class Operation;
} // namespace mlir

namespace hpc {
namespace cost {
struct ClusterSpec;
} // namespace cost

/// Forward FLOPs of one op (a multiply-add counts as 2); 0 for ops that only
/// move data, and for shapes that are not static.
int64_t estimateFlops(mlir::Operation *op);

/// Tensor elements one op reads (operands) plus writes (results); 0 for
/// shapes that are not static. Views (reshape, squeeze, unsqueeze) move
/// nothing.
int64_t estimateElementsMoved(mlir::Operation *op);

/// The same in bytes at the IR's element types (i1 counts as one byte).
int64_t estimateBytes(mlir::Operation *op);

/// Seconds one hpc op takes on a device of `cluster` (roofline: its FLOPs
/// at the peak of its result's element type, or its bytes at the memory
/// bandwidth, whichever is longer, each at the cluster's efficiency, plus
/// the per-kernel overhead). 0 for views and for ops of other dialects
/// (collectives: the link, not the device).
double estimateSeconds(mlir::Operation *op, const cost::ClusterSpec &cluster);

} // namespace hpc

#endif // HPC_COSTMODEL_OPCOST_H
