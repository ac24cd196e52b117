//===- Codecs.h - the codecs' sizes, shared by compiler and runtime -*- C++ -*-===//
//
// What a compressed reduction puts on the wire depends on a few formulas
// that the compiler (hpc::dist::bytesSentByRank, the codec state it plans)
// and the runtime (comm/Codec, MpiComm) must compute alike, or the bytes
// the compiler reports and the runtime counts drift apart. They live here
// once, header-only, with no dependencies, included by both.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COMMON_CODECS_H
#define HPC_COMMON_CODECS_H

#include <cmath>
#include <cstdint>

namespace hpc {
namespace codecs {

/// Bytes of `n` values sent as int8 blocks of `block` values with one f32
/// scale each: n + 4 * ceil(n / block) (0 for n <= 0).
inline int64_t int8BlockBytes(int64_t n, int64_t block) {
  return n <= 0 ? 0 : n + 4 * ((n + block - 1) / block);
}

/// Bytes of one top-k pair on the wire: a u32 index and an f32 value.
constexpr int64_t kTopkPairBytes = 8;

/// The values top-k keeps of `m`: ceil(ratio * m), at least one and at most
/// m (0 for m <= 0). `ratio` in (0, 1]; both sides compute it from the same
/// double (the runtime reads it back from 17 significant digits).
inline int64_t topkCount(int64_t m, double ratio) {
  if (m <= 0)
    return 0;
  auto k = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(m)));
  return k < 1 ? 1 : (k > m ? m : k);
}

/// The most values one top-k piece may hold: its indices travel as u32.
constexpr int64_t kTopkMaxValues = int64_t(1) << 32;

} // namespace codecs
} // namespace hpc

#endif // HPC_COMMON_CODECS_H
