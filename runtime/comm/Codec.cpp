//===- Codec.cpp - int8 block quantization --------------------------------===//
//
// Written here rather than taken from a library: oneDNN's int8 reorders
// scale per tensor or per channel with a scale the caller supplies, not per
// block of a flat buffer with the block's own maximum, and the codec must
// round exactly the same on every rank. The loops are plain so that the
// compiler vectorizes them.
//
//===----------------------------------------------------------------------===//

#include "Codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hpcrt {
namespace comm {

size_t int8BlockBytes(size_t n, int64_t block) {
  size_t b = static_cast<size_t>(block);
  return n == 0 ? 0 : n + 4 * ((n + b - 1) / b);
}

void int8BlockEncode(const float *v, size_t n, int64_t block, char *out, float *error) {
  const size_t b = static_cast<size_t>(block), blocks = (n + b - 1) / b;
  char *scales = out;
  auto *q = reinterpret_cast<int8_t *>(out + 4 * blocks);
  for (size_t k = 0; k < blocks; ++k) {
    const size_t begin = k * b, end = std::min(n, begin + b);
    float top = 0;
    bool finite = true;
    for (size_t i = begin; i < end; ++i) {
      top = std::max(top, std::fabs(v[i]));
      finite = finite && std::isfinite(v[i]);
    }
    // A block with a NaN or an infinity decodes as NaN, so the loss
    // monitor sees the overflow (a clamp would hide it), and leaves no
    // error behind to poison the next steps. An all-zero block sends zeros.
    float scale = finite ? top / 127.0f : std::nanf("");
    float inverse = finite && scale > 0 ? 1.0f / scale : 0.0f;
    memcpy(scales + 4 * k, &scale, 4);
    for (size_t i = begin; i < end; ++i) {
      float r = finite ? std::nearbyint(v[i] * inverse) : 0.0f;
      r = std::min(127.0f, std::max(-127.0f, r));
      q[i] = static_cast<int8_t>(r);
      if (error)
        error[i] = finite ? v[i] - r * scale : 0.0f;
    }
  }
}

template <bool Add>
static void decode(const char *in, size_t n, int64_t block, float *out) {
  const size_t b = static_cast<size_t>(block), blocks = (n + b - 1) / b;
  const auto *q = reinterpret_cast<const int8_t *>(in + 4 * blocks);
  for (size_t k = 0; k < blocks; ++k) {
    float scale;
    memcpy(&scale, in + 4 * k, 4);
    const size_t begin = k * b, end = std::min(n, begin + b);
    for (size_t i = begin; i < end; ++i) {
      float x = static_cast<float>(q[i]) * scale;
      out[i] = Add ? out[i] + x : x;
    }
  }
}

void int8BlockDecode(const char *in, size_t n, int64_t block, float *out) {
  decode<false>(in, n, block, out);
}

void int8BlockDecodeAdd(const char *in, size_t n, int64_t block, float *acc) {
  decode<true>(in, n, block, acc);
}

} // namespace comm
} // namespace hpcrt
