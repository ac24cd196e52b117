//===- KernelsLinalg.cpp - matmul, gemm, conv, conv_transpose --------------===//
//
// f32/f64 go through OpenBLAS (conv as im2col + gemm, conv_transpose as gemm
// + col2im); f16/bf16 are widened to f32 and narrowed back; integer matmul
// and gemm are plain loops that wrap.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"

#include <cblas.h>
#include <climits>

using namespace hpcrt;

namespace {

blasint blasDim(int64_t v) {
  if (v < 0 || v > INT_MAX)
    fail("dimension " + std::to_string(v) + " is too large for BLAS");
  return static_cast<blasint>(v);
}

/// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C.
template <typename T>
void gemmRM(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A,
            int64_t lda, const T *B, int64_t ldb, T beta, T *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    return;
  }
  auto tA = ta ? CblasTrans : CblasNoTrans, tB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, tA, tB, blasDim(M), blasDim(N), blasDim(K), alpha, A,
                blasDim(lda), B, blasDim(ldb), beta, C, blasDim(ldc));
  else
    cblas_dgemm(CblasRowMajor, tA, tB, blasDim(M), blasDim(N), blasDim(K), alpha, A,
                blasDim(lda), B, blasDim(ldb), beta, C, blasDim(ldc));
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
/// `body` receives input pointers and an output pointer of that type.
template <typename F>
void inFloatType(const char *what, std::initializer_list<Tensor *> ins, Tensor &out,
                 F &&body) {
  int dt = out.dtype;
  if (dt != HPCRT_F32 && dt != HPCRT_F64 && dt != HPCRT_F16 && dt != HPCRT_BF16)
    unsupportedDtype(what, dt);
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
  } else if (dt == HPCRT_F32) {
    body(Tag<float>{}, ptrs, out.data);
  } else {
    std::vector<float> y(static_cast<size_t>(out.numel));
    body(Tag<float>{}, ptrs, static_cast<void *>(y.data()));
    fromFloats(y.data(), out);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

HPCRT_KERNEL(matmul) {
  c.expect(1, 2);
  Tensor &a = c.in(0), &b = c.in(1), &y = c.out();
  checkSameDtype(a, b, "matmul");
  checkSameDtype(a, y, "matmul");
  if (a.rank() < 1 || b.rank() < 1)
    fail("matmul operands must have rank >= 1");
  std::vector<int64_t> as = a.shape, bs = b.shape;
  bool dropM = as.size() == 1, dropN = bs.size() == 1;
  if (dropM)
    as.insert(as.begin(), 1);
  if (dropN)
    bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    fail("matmul: inner dimensions " + std::to_string(K) + " and " +
         std::to_string(bs[bs.size() - 2]) + " differ");
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  std::vector<int64_t> batch = broadcastShape(ab, bb);
  std::vector<int64_t> expect = batch;
  if (!dropM)
    expect.push_back(M);
  if (!dropN)
    expect.push_back(N);
  checkShape(y, expect, "result");
  std::vector<int64_t> sa = broadcastStrides(ab, batch), sb = broadcastStrides(bb, batch);
  int64_t nb = numElements(batch);
  std::vector<int64_t> bstr = stridesOf(batch);
  auto batchOffsets = [&](int64_t i, int64_t &oa, int64_t &ob) {
    oa = ob = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      int64_t cd = (i / bstr[d]) % batch[d];
      oa += cd * sa[d];
      ob += cd * sb[d];
    }
    oa *= M * K;
    ob *= K * N;
  };
  bool bShared = std::all_of(sb.begin(), sb.end(), [](int64_t s) { return s == 0; });
  bool aFull = ab == batch;

  if (y.dtype == HPCRT_F32 || y.dtype == HPCRT_F64 || y.dtype == HPCRT_F16 ||
      y.dtype == HPCRT_BF16) {
    inFloatType("matmul", {&a, &b}, y, [&](auto tag, auto &ptrs, void *out) {
      using T = typename decltype(tag)::type;
      const T *A = static_cast<const T *>(ptrs[0]);
      const T *B = static_cast<const T *>(ptrs[1]);
      T *Y = static_cast<T *>(out);
      if (bShared && aFull) {
        gemmRM<T>(false, false, nb * M, N, K, T(1), A, K, B, N, T(0), Y, N);
        return;
      }
      for (int64_t i = 0; i < nb; ++i) {
        int64_t oa, ob;
        batchOffsets(i, oa, ob);
        gemmRM<T>(false, false, M, N, K, T(1), A + oa, K, B + ob, N, T(0), Y + i * M * N, N);
      }
    });
    return;
  }
  dispatch<kI>(y.dtype, "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *A = a.as<T>();
    const T *B = b.as<T>();
    T *Y = y.as<T>();
#pragma omp parallel for if (parallelWorth(nb * M * N * K))
    for (int64_t r = 0; r < nb * M; ++r) {
      int64_t i = r / M, m = r % M, oa, ob;
      batchOffsets(i, oa, ob);
      for (int64_t n = 0; n < N; ++n) {
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<uint64_t>(A[oa + m * K + k]) * static_cast<uint64_t>(B[ob + k * N + n]);
        Y[r * N + n] = static_cast<T>(acc);
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// gemm
//===----------------------------------------------------------------------===//

HPCRT_KERNEL(gemm) {
  c.expect(1, 3);
  double alpha = c.f(), beta = c.f();
  bool ta = c.b(), tb = c.b();
  Tensor &a = c.in(0), &b = c.in(1), &y = c.out();
  Tensor *cc = c.opt(2);
  if (a.rank() != 2 || b.rank() != 2)
    fail("gemm operands must be 2-D");
  int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1];
  int64_t K2 = tb ? b.shape[1] : b.shape[0], N = tb ? b.shape[0] : b.shape[1];
  if (K != K2)
    fail("gemm: inner dimensions " + std::to_string(K) + " and " + std::to_string(K2) +
         " differ");
  checkShape(y, {M, N}, "result");
  checkSameDtype(a, y, "gemm");
  checkSameDtype(b, y, "gemm");
  std::vector<int64_t> cs;
  if (cc) {
    checkSameDtype(*cc, y, "gemm");
    cs = broadcastStrides(cc->shape, {M, N});
  }
  bool useC = cc && beta != 0.0;

  if (y.dtype == HPCRT_F32 || y.dtype == HPCRT_F64 || y.dtype == HPCRT_F16 ||
      y.dtype == HPCRT_BF16) {
    inFloatType("gemm", {&a, &b, cc}, y, [&](auto tag, auto &ptrs, void *out) {
      using T = typename decltype(tag)::type;
      T *Y = static_cast<T *>(out);
      if (useC) {
        const T *C = static_cast<const T *>(ptrs[2]);
        T bt = static_cast<T>(beta);
#pragma omp parallel for if (parallelWorth(M * N))
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j)
            Y[i * N + j] = bt * C[i * cs[0] + j * cs[1]];
      }
      gemmRM<T>(ta, tb, M, N, K, static_cast<T>(alpha), static_cast<const T *>(ptrs[0]),
                a.shape[1], static_cast<const T *>(ptrs[1]), b.shape[1],
                useC ? T(1) : T(0), Y, N);
    });
    return;
  }
  dispatch<kI>(y.dtype, "gemm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *A = a.as<T>();
    const T *B = b.as<T>();
    const T *C = useC ? cc->as<T>() : nullptr;
    T *Y = y.as<T>();
    bool exact = alpha == 1.0 && (beta == 1.0 || !useC);
#pragma omp parallel for if (parallelWorth(M * N * K))
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          T av = ta ? A[k * M + i] : A[i * K + k];
          T bv = tb ? B[j * K + k] : B[k * N + j];
          acc += static_cast<uint64_t>(av) * static_cast<uint64_t>(bv);
        }
        T cv = C ? C[i * cs[0] + j * cs[1]] : T(0);
        if (exact)
          Y[i * N + j] = static_cast<T>(acc + static_cast<uint64_t>(cv));
        else
          Y[i * N + j] = static_cast<T>(static_cast<int64_t>(
              alpha * static_cast<double>(static_cast<T>(acc)) +
              (useC ? beta * static_cast<double>(cv) : 0.0)));
      }
  });
}

//===----------------------------------------------------------------------===//
// conv and conv_transpose
//===----------------------------------------------------------------------===//

namespace {

struct ConvGeom {
  int r = 0;                              // spatial rank
  std::vector<int64_t> in, k, out;        // spatial sizes
  std::vector<int64_t> stride, dil, padB; // per spatial dim
  int64_t inSize = 1, kSize = 1, outSize = 1;
};

ConvGeom convGeom(const Tensor &x, const Tensor &w, const Tensor &y,
                  const std::vector<int64_t> &strides, const std::vector<int64_t> &pads,
                  const std::vector<int64_t> &dilations) {
  ConvGeom g;
  g.r = x.rank() - 2;
  if (g.r < 1 || w.rank() != x.rank() || y.rank() != x.rank())
    fail("conv: input, weight and result need the same rank >= 3");
  if (static_cast<int>(strides.size()) != g.r || static_cast<int>(dilations.size()) != g.r ||
      static_cast<int>(pads.size()) != 2 * g.r)
    fail("conv: strides/dilations need " + std::to_string(g.r) + " entries and pads " +
         std::to_string(2 * g.r));
  for (int d = 0; d < g.r; ++d) {
    g.in.push_back(x.shape[2 + d]);
    g.k.push_back(w.shape[2 + d]);
    g.out.push_back(y.shape[2 + d]);
    g.stride.push_back(strides[d]);
    g.dil.push_back(dilations[d]);
    g.padB.push_back(pads[d]);
    if (strides[d] < 1 || dilations[d] < 1)
      fail("conv: strides and dilations must be positive");
    g.inSize *= g.in[d];
    g.kSize *= g.k[d];
    g.outSize *= g.out[d];
  }
  return g;
}

/// col[(c, k...), o...] = x[c, o*stride - pad + k*dil] (0 outside).
template <typename T>
void im2col(const T *x, int64_t channels, const ConvGeom &g, T *col) {
  int64_t rows = channels * g.kSize;
  int r = g.r;
  int64_t outLast = g.out[r - 1];
  int64_t outer = g.outSize / outLast;
#pragma omp parallel for if (parallelWorth(rows * g.outSize))
  for (int64_t row = 0; row < rows; ++row) {
    int64_t ch = row / g.kSize, kr = row % g.kSize;
    int64_t kk[8];
    for (int d = r - 1; d >= 0; --d) {
      kk[d] = kr % g.k[d];
      kr /= g.k[d];
    }
    const T *xc = x + ch * g.inSize;
    T *dst = col + row * g.outSize;
    for (int64_t ou = 0; ou < outer; ++ou) {
      // Coordinates of the outer output dims, and the input offset they give.
      int64_t rem = ou, off = 0, mult = g.in[r - 1];
      bool valid = true;
      for (int d = r - 2; d >= 0; --d) {
        int64_t o = rem % g.out[d];
        rem /= g.out[d];
        int64_t i = o * g.stride[d] - g.padB[d] + kk[d] * g.dil[d];
        if (i < 0 || i >= g.in[d])
          valid = false;
        off += i * mult;
        mult *= g.in[d];
      }
      T *q = dst + ou * outLast;
      if (!valid) {
        std::fill(q, q + outLast, T(0));
        continue;
      }
      int64_t s = g.stride[r - 1], base = kk[r - 1] * g.dil[r - 1] - g.padB[r - 1];
      int64_t n = g.in[r - 1];
      for (int64_t o = 0; o < outLast; ++o) {
        int64_t i = o * s + base;
        q[o] = (i >= 0 && i < n) ? xc[off + i] : T(0);
      }
    }
  }
}

} // namespace

HPCRT_KERNEL(conv) {
  c.expect(1, 3);
  std::vector<int64_t> dilations = c.ivec();
  int64_t group = c.i();
  std::vector<int64_t> pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &w = c.in(1), &y = c.out();
  Tensor *bias = c.opt(2);
  ConvGeom g = convGeom(x, w, y, strides, pads, dilations);
  if (g.r > 8)
    fail("conv: more than 8 spatial dimensions");
  int64_t N = x.shape[0], C = x.shape[1], M = w.shape[0];
  if (group < 1 || C % group || M % group || w.shape[1] != C / group)
    fail("conv: " + std::to_string(C) + " input channels, weight " + shapeString(w.shape) +
         " and group " + std::to_string(group) + " do not fit");
  if (y.shape[0] != N || y.shape[1] != M)
    fail("conv: result shape " + shapeString(y.shape) + " does not fit");
  for (int d = 0; d < g.r; ++d) {
    int64_t span = g.dil[d] * (g.k[d] - 1) + 1;
    int64_t o = (g.in[d] + pads[d] + pads[d + g.r] - span) / g.stride[d] + 1;
    if (o != g.out[d])
      fail("conv: result spatial size " + std::to_string(g.out[d]) + " in dim " +
           std::to_string(d) + " should be " + std::to_string(o));
  }
  if (bias && (bias->numel != M))
    fail("conv: bias has " + std::to_string(bias->numel) + " elements, expected " +
         std::to_string(M));
  int64_t Cg = C / group, Mg = M / group;
  bool pointwise = g.kSize == 1;
  for (int d = 0; d < g.r; ++d)
    pointwise = pointwise && g.stride[d] == 1 && pads[d] == 0 && pads[d + g.r] == 0 &&
                g.in[d] == g.out[d];
  inFloatType("conv", {&x, &w, bias}, y, [&](auto tag, auto &ptrs, void *out) {
    using T = typename decltype(tag)::type;
    const T *X = static_cast<const T *>(ptrs[0]);
    const T *W = static_cast<const T *>(ptrs[1]);
    const T *B = static_cast<const T *>(ptrs[2]);
    T *Y = static_cast<T *>(out);
    std::vector<T> col(pointwise ? 0 : static_cast<size_t>(Cg * g.kSize * g.outSize));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t gi = 0; gi < group; ++gi) {
        const T *xg = X + (n * C + gi * Cg) * g.inSize;
        const T *cm = xg;
        if (!pointwise) {
          im2col(xg, Cg, g, col.data());
          cm = col.data();
        }
        T *yg = Y + (n * M + gi * Mg) * g.outSize;
        gemmRM<T>(false, false, Mg, g.outSize, Cg * g.kSize, T(1), W + gi * Mg * Cg * g.kSize,
                  Cg * g.kSize, cm, g.outSize, T(0), yg, g.outSize);
      }
    if (B) {
#pragma omp parallel for if (parallelWorth(N * M * g.outSize))
      for (int64_t nm = 0; nm < N * M; ++nm) {
        T bv = B[nm % M];
        T *q = Y + nm * g.outSize;
        for (int64_t i = 0; i < g.outSize; ++i)
          q[i] += bv;
      }
    }
  });
}

HPCRT_KERNEL(conv_transpose) {
  c.expect(1, 3);
  std::vector<int64_t> dilations = c.ivec();
  int64_t group = c.i();
  std::vector<int64_t> outputPadding = c.ivec(), pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &w = c.in(1), &y = c.out();
  Tensor *bias = c.opt(2);
  ConvGeom g = convGeom(x, w, y, strides, pads, dilations);
  int64_t N = x.shape[0], C = x.shape[1];
  if (group < 1 || C % group || w.shape[0] != C)
    fail("conv_transpose: " + std::to_string(C) + " input channels, weight " +
         shapeString(w.shape) + " and group " + std::to_string(group) + " do not fit");
  int64_t Cg = C / group, Mg = w.shape[1], M = Mg * group;
  if (y.shape[0] != N || y.shape[1] != M)
    fail("conv_transpose: result shape " + shapeString(y.shape) + " does not fit");
  if (static_cast<int>(outputPadding.size()) != g.r)
    fail("conv_transpose: output_padding needs " + std::to_string(g.r) + " entries");
  for (int d = 0; d < g.r; ++d) {
    int64_t o = g.stride[d] * (g.in[d] - 1) + outputPadding[d] + (g.k[d] - 1) * g.dil[d] + 1 -
                pads[d] - pads[d + g.r];
    if (o != g.out[d])
      fail("conv_transpose: result spatial size " + std::to_string(g.out[d]) + " in dim " +
           std::to_string(d) + " should be " + std::to_string(o));
  }
  if (bias && bias->numel != M)
    fail("conv_transpose: bias has " + std::to_string(bias->numel) + " elements, expected " +
         std::to_string(M));
  if (g.r > 8)
    fail("conv_transpose: more than 8 spatial dimensions");
  inFloatType("conv_transpose", {&x, &w, bias}, y, [&](auto tag, auto &ptrs, void *out) {
    using T = typename decltype(tag)::type;
    const T *X = static_cast<const T *>(ptrs[0]);
    const T *W = static_cast<const T *>(ptrs[1]);
    const T *B = static_cast<const T *>(ptrs[2]);
    T *Y = static_cast<T *>(out);
    int64_t rows = Mg * g.kSize;
    std::vector<T> col(static_cast<size_t>(rows * g.inSize));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t gi = 0; gi < group; ++gi) {
        // col[(m, k...), i...] = sum_c W[c, m, k...] * X[c, i...]
        gemmRM<T>(true, false, rows, g.inSize, Cg, T(1), W + gi * Cg * rows, rows,
                  X + (n * C + gi * Cg) * g.inSize, g.inSize, T(0), col.data(), g.inSize);
        T *yg = Y + (n * M + gi * Mg) * g.outSize;
#pragma omp parallel for if (parallelWorth(rows * g.inSize))
        for (int64_t m = 0; m < Mg; ++m) {
          T *ym = yg + m * g.outSize;
          T bv = B ? B[gi * Mg + m] : T(0);
          std::fill(ym, ym + g.outSize, bv);
          for (int64_t kr = 0; kr < g.kSize; ++kr) {
            int64_t kk[8], rem = kr;
            for (int d = g.r - 1; d >= 0; --d) {
              kk[d] = rem % g.k[d];
              rem /= g.k[d];
            }
            const T *src = col.data() + (m * g.kSize + kr) * g.inSize;
            for (int64_t i = 0; i < g.inSize; ++i) {
              int64_t irem = i, off = 0, mult = 1;
              bool valid = true;
              for (int d = g.r - 1; d >= 0; --d) {
                int64_t id = irem % g.in[d];
                irem /= g.in[d];
                int64_t o = id * g.stride[d] - g.padB[d] + kk[d] * g.dil[d];
                if (o < 0 || o >= g.out[d]) {
                  valid = false;
                  break;
                }
                off += o * mult;
                mult *= g.out[d];
              }
              if (valid)
                ym[off] += src[i];
            }
          }
        }
      }
  });
}
