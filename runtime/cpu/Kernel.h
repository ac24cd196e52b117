//===- Kernel.h - what every CPU kernel translation unit shares -*- C++ -*-===//
//
// The kernel entry macro (decodes ids and attributes, catches errors, keeps
// the trace and the high-water mark), element types (f16/bf16 stored as bits,
// computed in float; bool stored as a byte), the dtype dispatcher, and the
// strided/broadcast walker that the elementwise and data-movement kernels
// share.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CPU_KERNEL_H
#define HPCRT_CPU_KERNEL_H

#include "Context.h"
#include "Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace hpcrt {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};
/// HPCRT_BOOL storage: one byte, any non-zero byte reads as true.
struct boolean {
  uint8_t v;
};

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

/// The type arithmetic happens in: float for f16/bf16, a byte for bool.
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<f16> { using type = float; };
template <> struct ComputeOf<bf16> { using type = float; };
template <> struct ComputeOf<boolean> { using type = uint8_t; };
template <typename T> using C_t = typename ComputeOf<T>::type;

template <typename T> inline C_t<T> ld(const T *p, int64_t i) { return p[i]; }
template <> inline float ld<f16>(const f16 *p, int64_t i) { return halfToFloat(p[i].bits); }
template <> inline float ld<bf16>(const bf16 *p, int64_t i) { return bf16ToFloat(p[i].bits); }
template <> inline uint8_t ld<boolean>(const boolean *p, int64_t i) { return p[i].v != 0; }

template <typename T> struct Storer {
  template <typename C> static void put(T *p, int64_t i, C v) { p[i] = static_cast<T>(v); }
};
template <> struct Storer<f16> {
  template <typename C> static void put(f16 *p, int64_t i, C v) {
    p[i].bits = floatToHalf(static_cast<float>(v));
  }
};
template <> struct Storer<bf16> {
  template <typename C> static void put(bf16 *p, int64_t i, C v) {
    p[i].bits = floatToBf16(static_cast<float>(v));
  }
};
template <> struct Storer<boolean> {
  template <typename C> static void put(boolean *p, int64_t i, C v) { p[i].v = v ? 1 : 0; }
};
template <typename T, typename C> inline void st(T *p, int64_t i, C v) { Storer<T>::put(p, i, v); }

template <typename T> constexpr bool isFloatT =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, f16> ||
    std::is_same_v<T, bf16>;
template <typename T> constexpr bool isIntT = std::is_integral_v<T>;
template <typename T> constexpr bool isBoolT = std::is_same_v<T, boolean>;

//===----------------------------------------------------------------------===//
// Dtype dispatch
//===----------------------------------------------------------------------===//

template <typename T> struct Tag { using type = T; };

enum : unsigned { kF = 1, kI = 2, kB = 4, kNum = kF | kI, kAll = kF | kI | kB };

[[noreturn]] void unsupportedDtype(const char *what, int dtype);

/// Calls f(Tag<T>{}) for the storage type T of `dtype` if it is in `Set`.
template <unsigned Set, typename F> void dispatch(int dtype, const char *what, F &&f) {
  switch (dtype) {
  case HPCRT_F32: if constexpr (Set & kF) { f(Tag<float>{}); return; } break;
  case HPCRT_F64: if constexpr (Set & kF) { f(Tag<double>{}); return; } break;
  case HPCRT_F16: if constexpr (Set & kF) { f(Tag<f16>{}); return; } break;
  case HPCRT_BF16: if constexpr (Set & kF) { f(Tag<bf16>{}); return; } break;
  case HPCRT_I8: if constexpr (Set & kI) { f(Tag<int8_t>{}); return; } break;
  case HPCRT_I16: if constexpr (Set & kI) { f(Tag<int16_t>{}); return; } break;
  case HPCRT_I32: if constexpr (Set & kI) { f(Tag<int32_t>{}); return; } break;
  case HPCRT_I64: if constexpr (Set & kI) { f(Tag<int64_t>{}); return; } break;
  case HPCRT_U8: if constexpr (Set & kI) { f(Tag<uint8_t>{}); return; } break;
  case HPCRT_U16: if constexpr (Set & kI) { f(Tag<uint16_t>{}); return; } break;
  case HPCRT_U32: if constexpr (Set & kI) { f(Tag<uint32_t>{}); return; } break;
  case HPCRT_U64: if constexpr (Set & kI) { f(Tag<uint64_t>{}); return; } break;
  case HPCRT_BOOL: if constexpr (Set & kB) { f(Tag<boolean>{}); return; } break;
  default: break;
  }
  unsupportedDtype(what, dtype);
}

/// Calls f(Tag<U>{}) with an unsigned integer type of the element size.
template <typename F> void dispatchSize(size_t size, F &&f) {
  switch (size) {
  case 1: f(Tag<uint8_t>{}); return;
  case 2: f(Tag<uint16_t>{}); return;
  case 4: f(Tag<uint32_t>{}); return;
  case 8: f(Tag<uint64_t>{}); return;
  default: fail("element size " + std::to_string(size) + " is not supported");
  }
}

//===----------------------------------------------------------------------===//
// Kernel calls
//===----------------------------------------------------------------------===//

/// One kernel invocation: its tensors and an attribute reader that follows
/// the ABI's alphabetical order.
struct OpCall {
  Context &ctx;
  int op;
  const char *mnemonic;
  std::vector<Tensor *> results, operands;
  const int64_t *ia;
  const double *fa;
  const char *const *sa;
  size_t ii = 0, fi = 0, si = 0;

  Tensor &out(size_t k = 0) const { return *results.at(k); }
  Tensor &in(size_t k) const;
  Tensor *opt(size_t k) const { return operands.at(k); }
  /// Fails unless there are exactly these many results and operands.
  void expect(size_t nResults, size_t nOperands) const;

  int64_t i() { return ia[ii++]; }
  bool b() { return ia[ii++] != 0; }
  std::vector<int64_t> ivec() {
    int64_t n = i();
    if (n < 0 || n > (1 << 20))
      fail("bad attribute array length " + std::to_string(n));
    std::vector<int64_t> v(ia + ii, ia + ii + n);
    ii += static_cast<size_t>(n);
    return v;
  }
  double f() { return fa[fi++]; }
  std::vector<double> fvec() {
    int64_t n = i();
    if (n < 0 || n > (1 << 20))
      fail("bad attribute array length " + std::to_string(n));
    std::vector<double> v(fa + fi, fa + fi + n);
    fi += static_cast<size_t>(n);
    return v;
  }
  std::string s() {
    const char *p = sa[si++];
    return p ? p : "";
  }
  /// An optional F64Attr: presence flag in iattrs, value in fattrs.
  bool optF(double &v) {
    if (!b())
      return false;
    v = f();
    return true;
  }
};

using KernelFn = void (*)(OpCall &);

/// Runs one kernel call. `mnemonic` is the op name without "hpc." ("matmul")
/// or a full op name ("dist.all_reduce"). A `communicating` kernel (the
/// dist collectives, send, recv) runs even after an earlier kernel failed,
/// so that the other ranks are not left waiting for this one; the first
/// error stays the one reported.
void runKernel(hpcrt_ctx *ctx, int32_t op, const int32_t *ids, const int64_t *ia,
               const double *fa, const char *const *sa, const char *mnemonic,
               KernelFn fn, bool communicating = false);

#define HPCRT_KERNEL_AS(cname, mnemonic, impl)                                 \
  static void impl(::hpcrt::OpCall &);                                         \
  extern "C" void cname(hpcrt_ctx *ctx, int32_t op, const int32_t *ids,        \
                        const int64_t *ia, const double *fa,                   \
                        const char *const *sa) {                               \
    ::hpcrt::runKernel(ctx, op, ids, ia, fa, sa, mnemonic, impl);              \
  }                                                                            \
  static void impl(::hpcrt::OpCall &c)

#define HPCRT_KERNEL(name) HPCRT_KERNEL_AS(hpcrt_##name, #name, name##_kernel)

/// A dist op's kernel: hpcrt_<mnemonic>, listed as "dist.<mnemonic>".
#define HPCRT_DIST_KERNEL(name)                                                \
  static void name##_kernel(::hpcrt::OpCall &);                                \
  extern "C" void hpcrt_##name(hpcrt_ctx *ctx, int32_t op, const int32_t *ids, \
                               const int64_t *ia, const double *fa,            \
                               const char *const *sa) {                        \
    ::hpcrt::runKernel(ctx, op, ids, ia, fa, sa, "dist." #name, name##_kernel, \
                       true);                                                  \
  }                                                                            \
  static void name##_kernel(::hpcrt::OpCall &c)

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

int64_t normalizeAxis(int64_t axis, int64_t rank, const char *what = "axis");
void checkDtype(const Tensor &t, int dtype, const char *what);
void checkSameDtype(const Tensor &a, const Tensor &b, const char *what);
void checkShape(const Tensor &t, const std::vector<int64_t> &shape, const char *what);
/// Row-major element strides of a shape.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);
/// Reads an integer (or float, truncated) tensor as int64 values.
std::vector<int64_t> readIndices(const Tensor &t);
/// Numpy broadcast of two shapes (fails if they do not broadcast).
std::vector<int64_t> broadcastShape(const std::vector<int64_t> &a,
                                    const std::vector<int64_t> &b);
/// Converts a double to the bytes of one element of `dtype` (as cast does).
void encodeScalar(double v, int dtype, void *out);
/// f16/bf16/f32 data as floats (copies only when needed).
std::vector<float> toFloats(const Tensor &t);
void fromFloats(const float *src, Tensor &t);

/// Number of threads worth using for `work` elementary operations.
inline bool parallelWorth(int64_t work) { return work >= 32768; }

/// A walk over a contiguous output of `shape` with N inputs read at
/// `base[k] + sum(coord[d] * strides[k][d])` (strides may be 0 or negative).
/// Dimensions are coalesced where every input allows it.
template <int N> struct Walk {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides[N];
  int64_t base[N] = {};
  int64_t total = 1;

  Walk(const std::vector<int64_t> &outShape,
       const std::vector<int64_t> (&inStrides)[N]) {
    for (int64_t d : outShape)
      total *= d;
    for (size_t d = 0; d < outShape.size(); ++d) {
      if (outShape[d] == 1)
        continue;
      bool merge = !shape.empty();
      for (int k = 0; k < N && merge; ++k)
        merge = strides[k].back() == inStrides[k][d] * outShape[d];
      if (merge) {
        shape.back() *= outShape[d];
        for (int k = 0; k < N; ++k)
          strides[k].back() = inStrides[k][d];
      } else {
        shape.push_back(outShape[d]);
        for (int k = 0; k < N; ++k)
          strides[k].push_back(inStrides[k][d]);
      }
    }
    if (shape.empty()) {
      shape.push_back(1);
      for (int k = 0; k < N; ++k)
        strides[k].push_back(0);
    }
  }

  /// Calls f(outIndex, offsets[N], innerStrides[N], count) over runs of the
  /// innermost dimension, in parallel chunks.
  template <typename F> void run(F &&f) const {
    if (total == 0)
      return;
    const int64_t chunk = 16384;
    int64_t nchunks = (total + chunk - 1) / chunk;
    int rank = static_cast<int>(shape.size());
    int64_t inner = shape.back();
    int64_t innerStride[N];
    for (int k = 0; k < N; ++k)
      innerStride[k] = strides[k].back();
    // Chunks of 16K elements, costed at ~1 ns each (parallelFor decides).
    parallelFor(nchunks, 16384.0, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c)
        runChunk(c * chunk, std::min(total, (c + 1) * chunk), rank, inner, innerStride, f);
    });
  }

  template <typename F>
  void runChunk(int64_t s, int64_t e, int rank, int64_t inner, const int64_t *innerStride,
                F &f) const {
    {
      int64_t coord[16];
      std::vector<int64_t> coordBig;
      int64_t *co = coord;
      if (rank > 16) {
        coordBig.resize(rank);
        co = coordBig.data();
      }
      int64_t rem = s;
      for (int d = rank - 1; d >= 0; --d) {
        co[d] = rem % shape[d];
        rem /= shape[d];
      }
      int64_t off[N];
      for (int k = 0; k < N; ++k) {
        off[k] = base[k];
        for (int d = 0; d < rank; ++d)
          off[k] += co[d] * strides[k][d];
      }
      while (s < e) {
        int64_t n = std::min(e - s, inner - co[rank - 1]);
        f(s, off, innerStride, n);
        s += n;
        co[rank - 1] += n;
        for (int k = 0; k < N; ++k)
          off[k] += n * innerStride[k];
        for (int d = rank - 1; d > 0 && co[d] == shape[d]; --d) {
          co[d] = 0;
          ++co[d - 1];
          for (int k = 0; k < N; ++k)
            off[k] += strides[k][d - 1] - shape[d] * strides[k][d];
        }
      }
    }
  }
};

/// Strides that read `in` (right-aligned) broadcast to `out`.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out);

/// Copies elements of size `esize` from `src` (read through `walk`) into the
/// contiguous `dst`.
void stridedCopy(size_t esize, void *dst, const void *src, const Walk<1> &walk);

} // namespace hpcrt

#endif // HPCRT_CPU_KERNEL_H
