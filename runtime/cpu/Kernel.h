//===- Kernel.h - what every CPU kernel translation unit shares -*- C++ -*-===//
//
// The kernel entry macro (decodes ids and attributes, catches errors, keeps
// the trace and the high-water mark), element types (f16/bf16 stored as bits,
// computed in float; bool stored as a byte), the dtype dispatcher, the
// strided/broadcast walker that the elementwise and data-movement kernels
// share, and the GEMM, convolution and pooling-window helpers that the
// forward kernels share with the training kernels.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CPU_KERNEL_H
#define HPCRT_CPU_KERNEL_H

#include "../core/Float16.h"
#include "../core/KernelCall.h"
#include "Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
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
inline bool isFloatDtype(int dtype) {
  return dtype == HPCRT_F32 || dtype == HPCRT_F64 || dtype == HPCRT_F16 || dtype == HPCRT_BF16;
}
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

/// Defines the CPU backend's kernel of op `Id` (OpId::Id, Ops.def): the
/// body `impl(OpCall &c)` and the table entry hpcrt_cpu_<Id> that
/// CpuBackend.cpp lists. `stateful`: see KernelEntry::stateful.
#define HPCRT_KERNEL_ENTRY(Id, impl, stateful)                                 \
  static void impl(::hpcrt::OpCall &);                                         \
  extern const ::hpcrt::KernelEntry hpcrt_cpu_##Id;                            \
  const ::hpcrt::KernelEntry hpcrt_cpu_##Id{impl, stateful};                   \
  static void impl(::hpcrt::OpCall &c)

#define HPCRT_KERNEL(name) HPCRT_KERNEL_ENTRY(name, name##_kernel, false)
/// A kernel whose op name is a C++ keyword (and, or, xor, not): Ops.def's
/// id is the name with a trailing underscore.
#define HPCRT_KERNEL_AS(Id, impl) HPCRT_KERNEL_ENTRY(Id, impl, false)
/// A kernel that keeps a state between calls (KernelEntry::stateful).
#define HPCRT_STATEFUL_KERNEL(name) HPCRT_KERNEL_ENTRY(name, name##_kernel, true)
/// A dist op's kernel (Ops.def's HPCRT_DIST_OP: it communicates).
#define HPCRT_DIST_KERNEL(name) HPCRT_KERNEL(name)

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

int64_t normalizeAxis(int64_t axis, int64_t rank, const char *what = "axis");
void checkDtype(const Tensor &t, int dtype, const char *what);
void checkSameDtype(const Tensor &a, const Tensor &b, const char *what);
/// A product's result dtype against its operand's: the same, or f32 for
/// bf16/f16 operands (the f32 sum written unrounded; hpc-fuse-epilogues).
void checkProductDtype(const Tensor &operand, const Tensor &result, const char *what);
/// Whether a product of `operand`s writes f32 for 16-bit float operands.
inline bool widensResult(const Tensor &operand, const Tensor &result) {
  return result.dtype == HPCRT_F32 &&
         (operand.dtype == HPCRT_BF16 || operand.dtype == HPCRT_F16);
}
void checkShape(const Tensor &t, const std::vector<int64_t> &shape, const char *what);
/// n elements f32 -> bf16 (round to nearest even) and bf16 -> f32, on the
/// vector rows where the CPU has them (hpc.cast's kernel; conv's widened
/// bf16 path).
void bf16FromF32(const float *x, bf16 *y, int64_t n);
void f32FromBf16(const bf16 *x, float *y, int64_t n);
/// Fails unless all are blocked or all plain (elementwise kernels).
void checkSameLayout(std::initializer_list<const Tensor *> ts, const char *what);
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

/// Applies a fused epilogue `activation` ("none", "relu", "gelu",
/// "gelu_tanh", "sigmoid", "tanh", "silu") to y in place, with the
/// activation's own kernel (the own-code paths of gemm and conv; oneDNN
/// paths fuse it as a post-op).
void applyActivation(OpCall &producer, Tensor &y, const std::string &activation);

/// y += residual in place, with the add kernel (the own-code path of a conv
/// with a fused residual; oneDNN adds it as a binary post-op).
void addResidual(OpCall &producer, Tensor &y, Tensor &residual);

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

//===----------------------------------------------------------------------===//
// Products and convolution geometry (defined in KernelsLinalg.cpp; the conv
// kernels and the training kernels share them)
//===----------------------------------------------------------------------===//

/// Batched row-major f32 GEMM: C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]
/// (the SIMD micro-kernels, or OpenBLAS for large products), spread over the
/// pool.
void sgemmBatch(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float *const *A, int64_t lda, const float *const *B, int64_t ldb,
                float beta, float *const *C, int64_t ldc);
/// The f64 form of sgemmBatch (OpenBLAS).
void dgemmBatch(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                const double *const *A, int64_t lda, const double *const *B, int64_t ldb,
                double beta, double *const *C, int64_t ldc);

/// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, batched over pointer
/// lists.
template <typename T>
void gemmBatch(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha,
               const T *const *A, int64_t lda, const T *const *B, int64_t ldb, T beta,
               T *const *C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    sgemmBatch(batch, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    dgemmBatch(batch, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C.
template <typename T>
void gemmRM(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A,
            int64_t lda, const T *B, int64_t ldb, T beta, T *C, int64_t ldc) {
  gemmBatch<T>(1, ta, tb, M, N, K, alpha, &A, lda, &B, ldb, beta, &C, ldc);
}

/// A tensor's data as T: the tensor itself for T's dtype, else a widened copy.
struct FloatView {
  std::vector<float> copy;
  const void *ptr;
  FloatView(const Tensor &t) {
    if (t.dtype == HPCRT_F32 || t.dtype == HPCRT_F64) {
      ptr = t.data;
    } else {
      copy = toFloats(t);
      ptr = copy.data();
    }
  }
};

/// Runs `body(T)` in the blas type of `dtype` (f16/bf16: widened to f32);
/// `body` receives input pointers and an output pointer of that type. An f32
/// `out` of 16-bit operands (widensResult) is written directly.
template <typename F>
void inFloatType(const char *what, std::initializer_list<Tensor *> ins, Tensor &out,
                 F &&body) {
  int dt = out.dtype;
  if (dt != HPCRT_F32 && dt != HPCRT_F64 && dt != HPCRT_F16 && dt != HPCRT_BF16)
    unsupportedDtype(what, dt);
  // A product of 16-bit operands with an f32 result computes on them widened.
  for (Tensor *t : ins)
    if (t && widensResult(*t, out)) {
      dt = t->dtype;
      break;
    }
  std::vector<FloatView> views;
  std::vector<const void *> ptrs;
  views.reserve(ins.size());
  for (Tensor *t : ins) {
    if (!t) {
      ptrs.push_back(nullptr);
      continue;
    }
    if (t->dtype != dt)
      fail(std::string(what) + ": operand dtype " + dtypeName(t->dtype) +
           " differs from the result's " + dtypeName(dt));
    views.emplace_back(*t);
    ptrs.push_back(views.back().ptr);
  }
  if (dt == HPCRT_F64) {
    body(Tag<double>{}, ptrs, out.data);
  } else if (out.dtype == HPCRT_F32) {
    body(Tag<float>{}, ptrs, out.data);
  } else {
    std::vector<float> y(static_cast<size_t>(out.numel));
    body(Tag<float>{}, ptrs, static_cast<void *>(y.data()));
    fromFloats(y.data(), out);
  }
}

/// A convolution's spatial geometry.
struct ConvGeom {
  int r = 0;                              // spatial rank
  std::vector<int64_t> in, k, out;        // spatial sizes
  std::vector<int64_t> stride, dil, padB; // per spatial dim
  int64_t inSize = 1, kSize = 1, outSize = 1;
};

/// The geometry of a convolution of x [N, C, D...] with the filter w
/// [M, C/group, K...] into y [N, M, O...] (checks ranks and attribute
/// lengths; the sizes are the caller's to check).
ConvGeom convGeom(const Tensor &x, const Tensor &w, const Tensor &y,
                  const std::vector<int64_t> &strides, const std::vector<int64_t> &pads,
                  const std::vector<int64_t> &dilations);

/// col[(c, k...), o...] = x[c, o*stride - pad + k*dil] (0 outside), for
/// `channels` planes of g.inSize elements; col has channels * g.kSize rows
/// of g.outSize. Instantiated for float and double.
template <typename T>
void im2col(const T *x, int64_t channels, const ConvGeom &g, T *col);

//===----------------------------------------------------------------------===//
// Pooling windows (defined in KernelsPool.cpp; the pooling kernels and their
// gradients share them)
//===----------------------------------------------------------------------===//

/// A pooling's spatial geometry (at most 8 spatial dimensions).
struct PoolGeom {
  int r = 0;
  std::vector<int64_t> in, out, k, stride, dil, padB, padE;
  int64_t inSize = 1, outSize = 1, kSize = 1, planes = 1;
};

/// Checks x [N, C, D...] and the pooled y [N, C, O...] against the window
/// attributes (O as ONNX computes it, ceil_mode included) and returns the
/// geometry.
PoolGeom poolGeom(const Tensor &x, const Tensor &y, bool ceilMode,
                  const std::vector<int64_t> &dilations, const std::vector<int64_t> &kernel,
                  const std::vector<int64_t> &pads, const std::vector<int64_t> &strides);

/// Per spatial dimension and output coordinate: the first input index
/// inside the input, how many window taps fall inside it, and how many
/// inside the padded extent (avg_pool's count_include_pad).
struct WindowTable {
  std::vector<int64_t> first[8], count[8], padded[8];

  explicit WindowTable(const PoolGeom &g);
};

/// Calls f(plane, outIndex, valid, padded, window) for every output element,
/// where valid and padded are the window's tap counts inside the input and
/// inside the padded extent, and window(visit) calls visit(inputOffset) for
/// each tap inside the input, in scan order (row-major over the window).
/// Planes are spread over the pool; one plane's outputs run in order on one
/// thread.
template <typename F> void forEachWindow(const PoolGeom &g, F &&f) {
  WindowTable w(g);
  parallelFor(g.planes, static_cast<double>(g.outSize) * g.kSize, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      if (g.r == 2) {
        // The common case without divisions per element.
        int64_t W = g.in[1], dh = g.dil[0] * W, dw = g.dil[1];
        int64_t o = 0;
        for (int64_t oh = 0; oh < g.out[0]; ++oh) {
          int64_t h0 = w.first[0][oh], hc = w.count[0][oh], hp = w.padded[0][oh];
          for (int64_t ow = 0; ow < g.out[1]; ++ow, ++o) {
            int64_t w0 = w.first[1][ow], wc = w.count[1][ow];
            int64_t base = h0 * W + w0;
            f(plane, o, hc * wc, hp * w.padded[1][ow], [&](auto &&visit) {
              for (int64_t a = 0; a < hc; ++a)
                for (int64_t b = 0; b < wc; ++b)
                  visit(base + a * dh + b * dw);
            });
          }
        }
        continue;
      }
      for (int64_t o = 0; o < g.outSize; ++o) {
        int64_t first[8], cnt[8], istr[8];
        int64_t padded = 1, valid = 1, rem = o, mult = 1;
        for (int d = g.r - 1; d >= 0; --d) {
          int64_t oc = rem % g.out[d];
          rem /= g.out[d];
          first[d] = w.first[d][oc];
          cnt[d] = w.count[d][oc];
          padded *= w.padded[d][oc];
          valid *= cnt[d];
          istr[d] = mult;
          mult *= g.in[d];
        }
        f(plane, o, valid, padded, [&](auto &&visit) {
          int64_t j[8] = {};
          for (int64_t n = 0; n < valid; ++n) {
            int64_t off = 0;
            for (int d = 0; d < g.r; ++d)
              off += (first[d] + j[d] * g.dil[d]) * istr[d];
            visit(off);
            for (int d = g.r - 1; d >= 0; --d) {
              if (++j[d] < cnt[d])
                break;
              j[d] = 0;
            }
          }
        });
      }
    }
  });
}

} // namespace hpcrt

#endif // HPCRT_CPU_KERNEL_H
