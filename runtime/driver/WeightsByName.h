//===- WeightsByName.h - a plan's weights from named tensors ----*- C++ -*-===//
//
// `run --weights FILE` (and `train --weights FILE`) with a file whose tensors
// are named by the model's initializers (`train --save`, or any safetensors
// file of whole tensors) rather than the binary's own weights file. The
// binary's own file says how its plan stores each weight: its header names
// every entry (a whole initializer, a slice `<name>[a:b,c:d]`, a piece-major
// entry with `pieces_of.<name>` metadata, a constant `const.N`) with its
// dtype, shape and data offsets. The data section the plan expects is built
// from FILE's whole tensors: copied, cut out, or rearranged into pieces.
// Constants, and integer or bool weights FILE lacks (masks, index tables:
// never trained), come from the binary's own file. A bf16 or f16 weight of
// the plan (`--precision=bf16`) takes FILE's f32 tensor, rounded to nearest
// even once, so an f32 training run's weights serve a bf16 binary. Every
// other mismatch is one
// hpcrt::Error naming the tensor and the file.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_WEIGHTSBYNAME_H
#define HPCRT_DRIVER_WEIGHTSBYNAME_H

#include "../core/Context.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hpcrt::driver {

/// Whether the safetensors file at `path` is to be read by name: its
/// __metadata__ has no "hpc_hash" (a compiled plan's weights file always
/// has one, and must then be the binary's own). A file that cannot be read
/// or parsed is not: the hash-checked path reports it.
bool isByNameWeights(const std::string &path);

/// What laying out a by-name file did.
struct ByNameReport {
  size_t fromFile = 0; ///< entries built from the file's tensors
  size_t fromOwn = 0;  ///< entries taken from the binary's own file
  size_t narrowed = 0; ///< of fromFile, f32 tensors rounded to bf16/f16
  /// The file's tensors that no entry of the plan reads.
  std::vector<std::string> unused;
  /// Bytes mapped while laying out (both files), on top of the result.
  uint64_t mappedBytes = 0;
};

/// Loads the binary's own weights file `ownPath` (hash-checked), builds the
/// data section of its plan from the tensors of `path` (see the file
/// comment) and hands it to `ctx` (Context::adoptWeightsData).
ByNameReport loadWeightsByName(Context &ctx, const std::string &ownPath,
                               const std::string &path);

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_WEIGHTSBYNAME_H
