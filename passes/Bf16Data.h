//===- Bf16Data.h - f32 weights and constants stored as bf16 -----*- C++ -*-===//
//
// hpc-autocast and hpc-fuse-epilogues give bf16 products the data they read
// as bf16 weights or constants made at compile time, rounded as the
// runtime's f32 -> bf16 casts round (runtime/include/hpcrt.h), so data cast
// here equals data cast there.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PASSES_BF16DATA_H
#define HPC_PASSES_BF16DATA_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <cstdint>

namespace hpc {

/// The bf16 of an f32 given by its bits: round to nearest even; a NaN stays
/// a quiet NaN of its sign.
uint16_t bf16Bits(uint32_t f32);

/// A bf16 copy of the f32 `hpc.weight` or `hpc.constant` `op`, built right
/// after it: a weight keeps its name (and, from a --shapes-only import, has
/// no data), both keep their discardable attributes. Null when the data
/// cannot be read (a resource without its blob).
mlir::Value storeAsBf16(mlir::Operation *op);

/// Ops that only move the data of their one operand, with its element type
/// (reshape, transpose, squeeze, unsqueeze, slice, expand, split, a mesh
/// slice): a cast commutes with them, so they can move bf16 data instead.
bool movesDataOnly(mlir::Operation *op);

} // namespace hpc

#endif // HPC_PASSES_BF16DATA_H
