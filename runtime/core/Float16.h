//===- Float16.h - f16 and bf16 to and from float ----------------*- C++ -*-===//
//
// The two 16-bit float formats of the ABI (HPCRT_F16, IEEE half; HPCRT_BF16,
// bfloat16), stored as their bits: conversions to float, and from float with
// round-to-nearest-even (NaN stays NaN). Shared by the kernels and by the
// core's summaries of outputs.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CORE_FLOAT16_H
#define HPCRT_CORE_FLOAT16_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace hpcrt {

inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  uint32_t bits;
  if (e == 0) {
    float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31)
    bits = sign | 0x7f800000u | (m << 13);
  else
    bits = sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (a > 0x7f800000u ? 0x7e00 : 0x7c00));
  if (a >= 0x477ff000u) // rounds to infinity
    return static_cast<uint16_t>(sign | 0x7c00);
  if (a < 0x38800000u) { // half subnormal or zero
    float af;
    memcpy(&af, &a, 4);
    uint32_t m = static_cast<uint32_t>(std::nearbyint(af * 16777216.0f));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = (((a >> 23) - 112) << 10) | ((a & 0x7fffffu) >> 13);
  uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
    ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>(((x >> 16) & 0x8000) | 0x7fc0);
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

} // namespace hpcrt

#endif // HPCRT_CORE_FLOAT16_H
