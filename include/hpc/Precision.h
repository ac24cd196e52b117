//===- Precision.h - the precision products compute in -----------*- C++ -*-===//
//
// `--precision`, the hpc-autocast pass's option and the hpc-compile
// pipeline's option name the same choice; its names are written once here.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PRECISION_H
#define HPC_PRECISION_H

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace hpc {

/// What the products (matmul, gemm, conv, conv_transpose, conv_weight_grad)
/// read and write: fp32 as the model says, or bf16 with every other op in
/// f32 (PyTorch's CPU autocast).
enum class Precision { FP32, BF16 };

/// "fp32" or "bf16".
inline llvm::StringRef stringifyPrecision(Precision p) {
  return p == Precision::BF16 ? "bf16" : "fp32";
}

/// The precision named `name`; none for a name that is not fp32 or bf16.
inline std::optional<Precision> parsePrecision(llvm::StringRef name) {
  if (name == "fp32")
    return Precision::FP32;
  if (name == "bf16")
    return Precision::BF16;
  return std::nullopt;
}

} // namespace hpc

#endif // HPC_PRECISION_H
