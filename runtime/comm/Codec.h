//===- Codec.h - compressed reductions: int8 blocks -------------*- C++ -*-===//
//
// The codec of a compressed reduction (the compiler's #dist.int8_block<block
// = B>): each block of B f32 values travels as one f32 scale (the block's
// largest magnitude / 127) and one int8 per value, rounded to nearest. An
// encoded piece of n values is ceil(n / B) scales, then the n int8 values:
// int8BlockBytes(n, B) bytes, which hpc::dist::int8BlockBytes counts the
// same. Deterministic: the same values give bitwise the same bytes.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_CODEC_H
#define HPCRT_COMM_CODEC_H

#include <cstddef>
#include <cstdint>

namespace hpcrt {
namespace comm {

/// A reduction's compression: block 0 is none.
struct Compression {
  int64_t block = 0;         ///< values per f32 scale
  float *feedback = nullptr; ///< error-feedback state, read and written in place (null: none)
  size_t feedbackCount = 0;  ///< its values
};

/// n + 4 * ceil(n / block) (0 for n == 0).
size_t int8BlockBytes(size_t n, int64_t block);
/// Encodes v[0, n) into `out`; `error` (may be null) receives v - decoded.
void int8BlockEncode(const float *v, size_t n, int64_t block, char *out, float *error);
/// out[i] = q[i] * scale.
void int8BlockDecode(const char *in, size_t n, int64_t block, float *out);
/// acc[i] += q[i] * scale.
void int8BlockDecodeAdd(const char *in, size_t n, int64_t block, float *acc);

} // namespace comm
} // namespace hpcrt

#endif // HPCRT_COMM_CODEC_H
