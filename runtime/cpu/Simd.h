//===- Simd.h - vectorized f32 row kernels for AVX-512 and AVX2 -*- C++ -*-===//
//
// The library is built for the baseline x86-64, so the hot f32 loops (exp,
// softmax, layer norm, gelu, the GEMM micro-kernels) are compiled a second
// and third time for AVX2+FMA and AVX-512 and picked at run time
// (simdLevel()). SimdImpl.inc holds the kernels once; it is included below
// into `avx512` and `avx2`, each under `#pragma GCC target`, after that
// namespace's handful of primitives. Other architectures get level 0 and the
// kernels' scalar loops.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CPU_SIMD_H
#define HPCRT_CPU_SIMD_H

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#define HPCRT_X86_SIMD 1
// GCC 12's AVX-512 headers trip -Wuninitialized on their own `__Y = __Y`
// placeholders once inlined; the pragmas hold for the headers' lines.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace hpcrt {

/// 2: AVX-512 (F, VL, BW, DQ), 1: AVX2 + FMA, 0: neither (scalar loops).
inline int simdLevel() {
#ifdef HPCRT_X86_SIMD
  static const int level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
      return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return 1;
    return 0;
  }();
  return level;
#else
  return 0;
#endif
}

#ifdef HPCRT_X86_SIMD

#define HPCRT_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi2"
#define HPCRT_AVX2_TARGET "avx2,fma,bmi2"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace avx512 {
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi2")
using V = __m512;
constexpr int64_t kW = 16;
inline __mmask16 maskN(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1);
}
inline V load(const float *p) { return _mm512_loadu_ps(p); }
/// The first n lanes from p, `fill` in the others (p[n..] is not read).
inline V loadN(const float *p, int64_t n, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), maskN(n), p);
}
inline void store(float *p, V v) { _mm512_storeu_ps(p, v); }
inline void storeN(float *p, V v, int64_t n) { _mm512_mask_storeu_ps(p, maskN(n), v); }
inline V set1(float x) { return _mm512_set1_ps(x); }
inline V zero() { return _mm512_setzero_ps(); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V div_(V a, V b) { return _mm512_div_ps(a, b); }
inline V sqrt_(V a) { return _mm512_sqrt_ps(a); }
inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V max_(V a, V b) { return _mm512_max_ps(a, b); }
inline V min_(V a, V b) { return _mm512_min_ps(a, b); }
inline float hsum(V v) { return _mm512_reduce_add_ps(v); }
inline float hmax(V v) { return _mm512_reduce_max_ps(v); }
inline bool anyNaN(V v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0; }
using Mask = __mmask16;
inline Mask isNaN(V v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q); }
inline Mask lessThan(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
inline Mask greaterThan(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
inline V select(Mask m, V a, V b) { return _mm512_mask_blend_ps(m, b, a); }
inline V roundNearest(V v) {
  return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/// 2^n for integral n in [-126, 127].
inline V pow2i(V n) {
  __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
/// Doubles: the low and high halves of a float vector, and back.
using VD = __m512d;
inline VD zeroD() { return _mm512_setzero_pd(); }
inline VD set1D(double x) { return _mm512_set1_pd(x); }
inline VD addD(VD a, VD b) { return _mm512_add_pd(a, b); }
inline VD subD(VD a, VD b) { return _mm512_sub_pd(a, b); }
inline VD mulD(VD a, VD b) { return _mm512_mul_pd(a, b); }
inline VD fmaddD(VD a, VD b, VD c) { return _mm512_fmadd_pd(a, b, c); }
inline double hsumD(VD v) { return _mm512_reduce_add_pd(v); }
inline VD lowD(V v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
inline VD highD(V v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }
inline V fromD(VD lo, VD hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}
#include "SimdImpl.inc"
#pragma GCC pop_options
} // namespace avx512

namespace avx2 {
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi2")
using V = __m256;
constexpr int64_t kW = 8;
inline __m256i maskN(int64_t n) {
  int k = static_cast<int>(n >= 8 ? 8 : n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline V load(const float *p) { return _mm256_loadu_ps(p); }
inline V loadN(const float *p, int64_t n, float fill) {
  __m256i m = maskN(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m),
                          _mm256_castsi256_ps(m));
}
inline void store(float *p, V v) { _mm256_storeu_ps(p, v); }
inline void storeN(float *p, V v, int64_t n) { _mm256_maskstore_ps(p, maskN(n), v); }
inline V set1(float x) { return _mm256_set1_ps(x); }
inline V zero() { return _mm256_setzero_ps(); }
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V div_(V a, V b) { return _mm256_div_ps(a, b); }
inline V sqrt_(V a) { return _mm256_sqrt_ps(a); }
inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V max_(V a, V b) { return _mm256_max_ps(a, b); }
inline V min_(V a, V b) { return _mm256_min_ps(a, b); }
inline float hsum(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hmax(V v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
using Mask = __m256;
inline Mask isNaN(V v) { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }
inline bool anyNaN(V v) { return _mm256_movemask_ps(isNaN(v)) != 0; }
inline Mask lessThan(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
inline Mask greaterThan(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
inline V select(Mask m, V a, V b) { return _mm256_blendv_ps(b, a, m); }
inline V roundNearest(V v) {
  return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline V pow2i(V n) {
  __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
using VD = __m256d;
inline VD zeroD() { return _mm256_setzero_pd(); }
inline VD set1D(double x) { return _mm256_set1_pd(x); }
inline VD addD(VD a, VD b) { return _mm256_add_pd(a, b); }
inline VD subD(VD a, VD b) { return _mm256_sub_pd(a, b); }
inline VD mulD(VD a, VD b) { return _mm256_mul_pd(a, b); }
inline VD fmaddD(VD a, VD b, VD c) { return _mm256_fmadd_pd(a, b, c); }
inline double hsumD(VD v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
inline VD lowD(V v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
inline VD highD(V v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
inline V fromD(VD lo, VD hi) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
}
#include "SimdImpl.inc"
#pragma GCC pop_options
} // namespace avx2

#pragma GCC diagnostic pop

#endif // HPCRT_X86_SIMD

} // namespace hpcrt

#endif // HPCRT_CPU_SIMD_H
