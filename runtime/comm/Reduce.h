//===- Reduce.h - elementwise reductions of the collectives -----*- C++ -*-===//
//
// The Reducer (MpiComm.h) of a dtype and a dist reduction kind: sum, max,
// min, prod accumulate in the element type (f16/bf16 through float, rounded
// back after every step); avg is sum followed by a division by the group
// size (integer division for integer types).
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_REDUCE_H
#define HPCRT_COMM_REDUCE_H

#include "MpiComm.h"

namespace hpcrt {
namespace comm {

/// dist.ReductionKind values, as the compiler encodes them.
enum class ReductionKind : int64_t { Sum = 0, Max = 1, Min = 2, Prod = 3, Avg = 4 };

/// "sum", "max", ...; "reduction(<v>)" when unknown.
std::string reductionName(int64_t kind);

/// The reducer of an element type (an hpcrt_dtype code) and a kind; throws
/// hpcrt::Error for an unknown kind or an unsupported combination (avg of
/// bool).
Reducer makeReducer(int dtype, int64_t kind);

} // namespace comm
} // namespace hpcrt

#endif // HPCRT_COMM_REDUCE_H
