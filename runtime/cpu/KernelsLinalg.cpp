//===- KernelsLinalg.cpp - matmul, gemm, conv, conv_transpose --------------===//
//
// f32 products (and bf16 where this CPU has it) run on oneDNN primitives
// (Dnnl.h), made once per op, with gemm's and conv's bias and activation
// fused. What oneDNN lacks keeps the own paths: f64 on OpenBLAS, f16 and
// bf16 without hardware support widened to f32 and narrowed back, integer
// matmul and gemm as plain loops that wrap, and gemm's beta != 1 or alpha
// with C; there the AVX-512/AVX2 micro-kernels below (conv without im2col
// where the last stride is 1) and OpenBLAS (conv as im2col + gemm,
// conv_transpose as gemm + col2im) run the f32 products that the training
// kernels (KernelsTrain.cpp) share through Kernel.h's sgemmBatch. The batched GEMMs, the convolution geometry and im2col are declared
// in Kernel.h: the training kernels (KernelsTrain.cpp) use them as well.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "Kernel.h"
#include "Simd.h"

#include <cblas.h>
#include <climits>
#include <memory>
#include <strings.h>

using namespace hpcrt;

namespace {

blasint blasDim(int64_t v) {
  if (v < 0 || v > INT_MAX)
    fail("dimension " + std::to_string(v) + " is too large for BLAS");
  return static_cast<blasint>(v);
}

//===----------------------------------------------------------------------===//
// f32 GEMM
//
// Small and medium f32 products (all of a transformer's or a small CNN's)
// run on register-blocked AVX-512 or AVX2 micro-kernels: an MR x NR tile of
// C stays in registers while k runs, A is read in place (broadcasts), B in
// place when it is row-major (one NR-wide panel, masked at the right edge)
// and packed into panels when it is transposed. The tiles of all batch
// entries are spread over the thread pool. Larger products, f64, and CPUs
// without AVX2/FMA go to OpenBLAS, single-threaded per call (the pool splits
// the work), so that OpenBLAS's own threads never compete with the pool's.
//===----------------------------------------------------------------------===//

#define HPCRT_AVX512 __attribute__((target(HPCRT_AVX512_TARGET)))
#define HPCRT_AVX2 __attribute__((target(HPCRT_AVX2_TARGET)))

/// OpenBLAS single-threaded from here on (idempotent, cheap).
void blasSingleThreaded() {
  if (openblas_get_num_threads() != 1)
    openblas_set_num_threads(1);
}

/// Whether OpenBLAS runs AVX2-or-better kernels on this CPU (its runtime
/// detection falls back to old cores on CPUs it does not know).
bool blasHasModernCore() {
  static const bool modern = [] {
    const char *core = openblas_get_corename();
    std::string name = core ? core : "";
    for (const char *good : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
      if (strcasecmp(name.c_str(), good) == 0)
        return true;
    return false;
  }();
  return modern;
}

/// One sgemm problem, possibly batched:
///   C[b](i, j) = alpha * sum_k A[b](i, k) B[b](k, j) + beta * C[b](i, j) + bias[b][i]
/// with A(i, k) = a[b][i * ars + k * acs] and B(k, j) = b[b][boff[k] + j]: B's
/// rows through an offset table, so that a row-major matrix (boff[k] = k *
/// ldb) and a convolution's shifted input rows (no im2col) are the same
/// kernel. bias (one pointer per batch entry, or no array) is optional.
struct Sgemm {
  int64_t M, N, K;
  const float *const *a;
  int64_t ars, acs;
  const float *const *b;
  const int64_t *boff;
  float *const *c;
  int64_t ldc;
  float alpha, beta;
  const float *const *bias = nullptr;
  /// Elements from one NR-wide panel of B to the next: 0 for NR (B's
  /// columns in place), K * NR for packed panels.
  int64_t bpanel = 0;
  /// A panel is NV vectors of vcols (<= W) columns each, vector v at B row
  /// + v * bvec and C row + v * cvec; 0 means W for all three (a plain
  /// NR-column panel). A convolution puts two output rows of <= W columns
  /// into one panel this way.
  int64_t vcols = 0, bvec = 0, cvec = 0;
};

#ifdef HPCRT_X86_SIMD

template <int MR, int NV, bool Edge>
HPCRT_AVX512 void tile512(const Sgemm &g, const float *A, const float *B, float *C, int64_t cols,
                          const float *bias) {
  __m512 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v)
      acc[i][v] = _mm512_setzero_ps();
  const int64_t vc = g.vcols ? g.vcols : 16, bv = g.bvec ? g.bvec : 16, cv = g.cvec ? g.cvec : 16;
  __mmask16 mask[NV];
  for (int v = 0; v < NV; ++v) {
    int64_t n = std::min<int64_t>(vc, std::max<int64_t>(0, cols - vc * v));
    mask[v] = static_cast<__mmask16>((1u << n) - 1);
  }
  const int64_t K = g.K, ars = g.ars, acs = g.acs;
  const int64_t *boff = g.boff;
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[NV];
    const float *Bk = B + boff[k];
    for (int v = 0; v < NV; ++v)
      b[v] = Edge ? _mm512_maskz_loadu_ps(mask[v], Bk + bv * v) : _mm512_loadu_ps(Bk + bv * v);
    for (int i = 0; i < MR; ++i) {
      __m512 a = _mm512_set1_ps(A[i * ars + k * acs]);
      for (int v = 0; v < NV; ++v)
        acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
    }
  }
  __m512 alpha = _mm512_set1_ps(g.alpha), beta = _mm512_set1_ps(g.beta);
  bool useBeta = g.beta != 0.0f, scale = g.alpha != 1.0f;
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) {
      float *p = C + i * g.ldc + cv * v;
      __m512 r = scale ? _mm512_mul_ps(acc[i][v], alpha) : acc[i][v];
      if (bias)
        r = _mm512_add_ps(r, _mm512_set1_ps(bias[i]));
      if (Edge) {
        if (useBeta)
          r = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(mask[v], p), r);
        _mm512_mask_storeu_ps(p, mask[v], r);
      } else {
        if (useBeta)
          r = _mm512_fmadd_ps(beta, _mm512_loadu_ps(p), r);
        _mm512_storeu_ps(p, r);
      }
    }
}

template <int MR, int NV, bool Edge>
HPCRT_AVX2 void tile256(const Sgemm &g, const float *A, const float *B, float *C, int64_t cols,
                        const float *bias) {
  __m256 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v)
      acc[i][v] = _mm256_setzero_ps();
  const int64_t vc = g.vcols ? g.vcols : 8, bv = g.bvec ? g.bvec : 8, cv = g.cvec ? g.cvec : 8;
  __m256i mask[NV];
  for (int v = 0; v < NV; ++v) {
    int n = static_cast<int>(std::min<int64_t>(vc, std::max<int64_t>(0, cols - vc * v)));
    mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  const int64_t K = g.K, ars = g.ars, acs = g.acs;
  const int64_t *boff = g.boff;
  for (int64_t k = 0; k < K; ++k) {
    __m256 b[NV];
    const float *Bk = B + boff[k];
    for (int v = 0; v < NV; ++v)
      b[v] = Edge ? _mm256_maskload_ps(Bk + bv * v, mask[v]) : _mm256_loadu_ps(Bk + bv * v);
    for (int i = 0; i < MR; ++i) {
      __m256 a = _mm256_broadcast_ss(A + i * ars + k * acs);
      for (int v = 0; v < NV; ++v)
        acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
    }
  }
  __m256 alpha = _mm256_set1_ps(g.alpha), beta = _mm256_set1_ps(g.beta);
  bool useBeta = g.beta != 0.0f, scale = g.alpha != 1.0f;
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) {
      float *p = C + i * g.ldc + cv * v;
      __m256 r = scale ? _mm256_mul_ps(acc[i][v], alpha) : acc[i][v];
      if (bias)
        r = _mm256_add_ps(r, _mm256_set1_ps(bias[i]));
      if (Edge) {
        if (useBeta)
          r = _mm256_fmadd_ps(beta, _mm256_maskload_ps(p, mask[v]), r);
        _mm256_maskstore_ps(p, mask[v], r);
      } else {
        if (useBeta)
          r = _mm256_fmadd_ps(beta, _mm256_loadu_ps(p), r);
        _mm256_storeu_ps(p, r);
      }
    }
}

/// Tile shapes: MR rows by NV vectors of W floats.
constexpr int kMR512 = 8, kMR256 = 6;

template <int NV, bool Edge>
HPCRT_AVX512 void rows512(int rows, const Sgemm &g, const float *A, const float *B, float *C,
                          int64_t cols, const float *bias) {
  switch (rows) {
  case 8: tile512<8, NV, Edge>(g, A, B, C, cols, bias); break;
  case 7: tile512<7, NV, Edge>(g, A, B, C, cols, bias); break;
  case 6: tile512<6, NV, Edge>(g, A, B, C, cols, bias); break;
  case 5: tile512<5, NV, Edge>(g, A, B, C, cols, bias); break;
  case 4: tile512<4, NV, Edge>(g, A, B, C, cols, bias); break;
  case 3: tile512<3, NV, Edge>(g, A, B, C, cols, bias); break;
  case 2: tile512<2, NV, Edge>(g, A, B, C, cols, bias); break;
  default: tile512<1, NV, Edge>(g, A, B, C, cols, bias); break;
  }
}

template <int NV, bool Edge>
HPCRT_AVX2 void rows256(int rows, const Sgemm &g, const float *A, const float *B, float *C,
                        int64_t cols, const float *bias) {
  switch (rows) {
  case 6: tile256<6, NV, Edge>(g, A, B, C, cols, bias); break;
  case 5: tile256<5, NV, Edge>(g, A, B, C, cols, bias); break;
  case 4: tile256<4, NV, Edge>(g, A, B, C, cols, bias); break;
  case 3: tile256<3, NV, Edge>(g, A, B, C, cols, bias); break;
  case 2: tile256<2, NV, Edge>(g, A, B, C, cols, bias); break;
  default: tile256<1, NV, Edge>(g, A, B, C, cols, bias); break;
  }
}

/// Runs tiles [t0, t1) of the batch; tile t is (batch, panel, row block)
/// with the row block fastest, so that consecutive tiles share a B panel.
template <int Level, int NV>
void runTiles(const Sgemm &g, int64_t batchCount, int64_t t0, int64_t t1) {
  (void)batchCount;
  constexpr int W = Level == 2 ? 16 : 8, MR = Level == 2 ? kMR512 : kMR256, NR = W * NV;
  int64_t mt = (g.M + MR - 1) / MR, np = (g.N + NR - 1) / NR;
  for (int64_t t = t0; t < t1; ++t) {
    int64_t bi = t / (np * mt), rem = t % (np * mt), p = rem / mt, m = rem % mt;
    int rows = static_cast<int>(std::min<int64_t>(MR, g.M - m * MR));
    int64_t cols = std::min<int64_t>(NR, g.N - p * NR);
    const float *A = g.a[bi] + m * MR * g.ars;
    const float *B = g.b[bi] + p * (g.bpanel ? g.bpanel : NR);
    float *C = g.c[bi] + m * MR * g.ldc + p * NR;
    const float *bias = g.bias && g.bias[bi] ? g.bias[bi] + m * MR : nullptr;
    // Masked loads and stores for a partial panel or narrower vectors.
    bool edge = cols != NR || (g.vcols && g.vcols != W);
    if constexpr (Level == 2) {
      if (edge)
        rows512<NV, true>(rows, g, A, B, C, cols, bias);
      else
        rows512<NV, false>(rows, g, A, B, C, cols, bias);
    } else {
      if (edge)
        rows256<NV, true>(rows, g, A, B, C, cols, bias);
      else
        rows256<NV, false>(rows, g, A, B, C, cols, bias);
    }
  }
}

template <int Level, int NV> void sgemmTiles(const Sgemm &g, int64_t batchCount) {
  constexpr int W = Level == 2 ? 16 : 8, MR = Level == 2 ? kMR512 : kMR256, NR = W * NV;
  int64_t tiles = batchCount * ((g.M + MR - 1) / MR) * ((g.N + NR - 1) / NR);
  // ~32 (AVX-512) or ~16 (AVX2) multiply-adds per nanosecond and thread.
  double cost = static_cast<double>(MR) * NR * std::max<int64_t>(g.K, 1) / (Level == 2 ? 32 : 16);
  parallelFor(tiles, cost, [&](int64_t t0, int64_t t1) {
    runTiles<Level, NV>(g, batchCount, t0, t1);
  });
}

/// The panel width runSgemm uses for N columns.
int64_t panelWidth(int64_t N) {
  if (simdLevel() == 2)
    return N <= 16 ? 16 : 32;
  return N <= 8 ? 8 : 16;
}

/// Runs a prepared problem on this CPU's micro-kernels (simdLevel() > 0).
void runSgemm(const Sgemm &g, int64_t batch) {
  if (simdLevel() == 2) {
    if (g.N <= 16)
      sgemmTiles<2, 1>(g, batch);
    else
      sgemmTiles<2, 2>(g, batch);
  } else {
    if (g.N <= 8)
      sgemmTiles<1, 1>(g, batch);
    else
      sgemmTiles<1, 2>(g, batch);
  }
}

#else // no x86 SIMD: simdLevel() is 0 and these are never called

int64_t panelWidth(int64_t) { return 8; }
void runSgemm(const Sgemm &, int64_t) { fail("no SIMD GEMM on this CPU"); }

#endif // HPCRT_X86_SIMD

} // namespace

namespace hpcrt {

/// Batched row-major f32 GEMM: C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b].
void sgemmBatch(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float *const *A, int64_t lda, const float *const *B, int64_t ldb,
                float beta, float *const *C, int64_t ldc) {
  if (M == 0 || N == 0 || batch == 0)
    return;
  if (K == 0) {
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          C[bi][i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[bi][i * ldc + j];
    return;
  }
  int level = simdLevel();
  double macs = static_cast<double>(M) * N * K;
  bool own = level > 0 && (macs < 16.0 * (1 << 20) || !blasHasModernCore() ||
                           std::min({M, N, K}) < 32);
  if (!own) {
    blasSingleThreaded();
    auto tA = ta ? CblasTrans : CblasNoTrans, tB = tb ? CblasTrans : CblasNoTrans;
    // Split each product into column slabs of >= 64 columns for the pool.
    int64_t slabs = std::max<int64_t>(1, std::min<int64_t>(N / 64, 4 * maxThreads()));
    double cost = macs / static_cast<double>(slabs) / 8;
    parallelFor(batch * slabs, cost, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) {
        int64_t bi = s / slabs, sl = s % slabs;
        int64_t j0 = sl * N / slabs, j1 = (sl + 1) * N / slabs;
        const float *b = B[bi] + (tb ? j0 * ldb : j0);
        cblas_sgemm(CblasRowMajor, tA, tB, blasDim(M), blasDim(j1 - j0), blasDim(K), alpha,
                    A[bi], blasDim(lda), b, blasDim(ldb), beta, C[bi] + j0, blasDim(ldc));
      }
    });
    return;
  }
  // B is read in place (row-major) or packed into contiguous K x NR panels
  // (zero-padded): when transposed, and when many row blocks reuse a large
  // B (a panel streams from cache instead of K rows ldb apart, which alias
  // in the L1 when ldb is a power of two).
  int64_t NR = panelWidth(N), np = (N + NR - 1) / NR;
  bool pack = tb || (M >= 256 && K >= 64 && N > NR);
  std::vector<const float *> packed;
  std::unique_ptr<float[]> packBuf;
  const float *const *Bp = B;
  if (pack) {
    packBuf.reset(new float[static_cast<size_t>(batch * np * K * NR)]);
    packed.resize(static_cast<size_t>(batch));
    for (int64_t bi = 0; bi < batch; ++bi)
      packed[bi] = packBuf.get() + bi * np * K * NR;
    parallelFor(batch * np, static_cast<double>(K * NR) / 4, [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        int64_t bi = q / np, p = q % np, j0 = p * NR, nc = std::min(NR, N - j0);
        const float *src = B[bi];
        float *dst = packBuf.get() + (bi * np + p) * K * NR;
        for (int64_t k = 0; k < K; ++k, dst += NR) {
          for (int64_t j = 0; j < nc; ++j)
            dst[j] = tb ? src[(j0 + j) * ldb + k] : src[k * ldb + j0 + j];
          for (int64_t j = nc; j < NR; ++j)
            dst[j] = 0.0f;
        }
      }
    });
    Bp = packed.data();
  }
  std::vector<int64_t> boff(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k)
    boff[k] = k * (pack ? NR : ldb);
  Sgemm g{M, N, K, A, ta ? 1 : lda, ta ? lda : 1, Bp, boff.data(), C, ldc, alpha, beta};
  g.bpanel = pack ? K * NR : 0;
  runSgemm(g, batch);
}

/// f64: OpenBLAS, one call per batch entry, spread over the pool.
void dgemmBatch(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                const double *const *A, int64_t lda, const double *const *B, int64_t ldb,
                double beta, double *const *C, int64_t ldc) {
  if (M == 0 || N == 0 || batch == 0)
    return;
  if (K == 0) {
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          C[bi][i * ldc + j] = beta == 0.0 ? 0.0 : beta * C[bi][i * ldc + j];
    return;
  }
  blasSingleThreaded();
  auto tA = ta ? CblasTrans : CblasNoTrans, tB = tb ? CblasTrans : CblasNoTrans;
  double macs = static_cast<double>(M) * N * K;
  int64_t slabs = std::max<int64_t>(1, std::min<int64_t>(N / 64, 4 * maxThreads()));
  parallelFor(batch * slabs, macs / static_cast<double>(slabs) / 4, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      int64_t bi = s / slabs, sl = s % slabs;
      int64_t j0 = sl * N / slabs, j1 = (sl + 1) * N / slabs;
      const double *b = B[bi] + (tb ? j0 * ldb : j0);
      cblas_dgemm(CblasRowMajor, tA, tB, blasDim(M), blasDim(j1 - j0), blasDim(K), alpha, A[bi],
                  blasDim(lda), b, blasDim(ldb), beta, C[bi] + j0, blasDim(ldc));
    }
  });
}

} // namespace hpcrt

//===----------------------------------------------------------------------===//
// oneDNN paths of matmul and gemm
//===----------------------------------------------------------------------===//

namespace {

namespace dn = ::dnnl;
using onednn::dims;
using onednn::dt;

/// The data type a oneDNN product reads and writes for a result of `dtype`
/// (dt::undef: the own code path; f16 is widened there).
dt productType(int dtype) {
  dt type = onednn::dataType(dtype);
  return type == dt::f32 || type == dt::bf16 ? type : dt::undef;
}

/// The row pitch (elements) of a constant right operand's copy: rows whose
/// bytes are a multiple of 1 KiB are padded by 64 bytes. oneDNN's gemm
/// reads B's rows at that pitch, and pitches of 3 KiB, 8 KiB or 12 KiB put
/// a panel's rows into the same L1 sets: 128x768x3072 runs at 38 GFLOP/s
/// with B's rows 12 KiB apart and at 79 with 12 KiB + 64 (AVX2,
/// docs/benchmarks.md); with AVX-512, GPT-2 small's padded mlp products
/// (gemm:jit) run about 8% faster than unpadded ones (brg:avx512_core).
int64_t paddedPitch(int64_t elements, size_t elementBytes) {
  int64_t bytes = elements * static_cast<int64_t>(elementBytes);
  return bytes % 1024 == 0 ? elements + 64 / static_cast<int64_t>(elementBytes) : elements;
}

/// The descriptor of a 2-D right operand [K, N] stored with row pitch `ld`
/// ([N, K] rows when transposed).
dn::memory::desc rightDesc(int64_t K, int64_t N, bool tb, int64_t ld, dt type) {
  return onednn::strided({K, N}, type, tb ? dims{1, ld} : dims{ld, 1});
}

/// The data a product reads for its right operand b (K x N, transposed when
/// tb): the tensor itself, or, for a constant weight whose rows would
/// alias in the cache, its copy with padded rows made once.
const void *rightData(onednn::Primitive &p, const Tensor &b, int64_t K, int64_t N, bool tb,
                      bool padded, dt type) {
  if (!padded)
    return b.data;
  return onednn::reorderedWeights(p, DNNL_ARG_WEIGHTS,
                                  rightDesc(K, N, tb, tb ? K : N, type), b.data);
}

onednn::Made makeMatmul(const dn::memory::desc &a, const dn::memory::desc &b,
                        const dn::memory::desc *bias, const dn::memory::desc &y,
                        const dn::primitive_attr &attr,
                        const dn::memory::desc *postOpSrc = nullptr) {
  dn::matmul::desc d = bias ? dn::matmul::desc(a, b, *bias, y) : dn::matmul::desc(a, b, y);
  dn::matmul::primitive_desc pd(d, attr, onednn::engine(), /*allow_empty=*/true);
  return onednn::productMade(pd, pd ? dn::primitive(dn::matmul(pd)) : dn::primitive(),
                             bias != nullptr, postOpSrc);
}

/// matmul on oneDNN: y [batch..., M, N] = a [..., M, K] x b [..., K, N],
/// batch dimensions right-aligned (oneDNN broadcasts a batch dimension of
/// 1 as numpy does). A shared 2-D b with a full-batch a is one [batch*M, K]
/// product. False: no oneDNN implementation (the own path runs).
bool matmulOnednn(OpCall &c, const Tensor &a, const Tensor &b, Tensor &y,
                  const std::vector<int64_t> &ab, const std::vector<int64_t> &bb,
                  const std::vector<int64_t> &batch, int64_t M, int64_t K, int64_t N,
                  bool collapse) {
  dt type = productType(a.dtype), ytype = productType(y.dtype);
  size_t R = batch.size() + 2;
  if (type == dt::undef || ytype == dt::undef || R > DNNL_MAX_NDIMS || M * N * K == 0)
    return false;
  // A constant 2-D right operand whose rows alias in the cache is read
  // from a copy with padded rows.
  size_t esize = dtypeSize(b.dtype);
  bool pad = collapse && b.region == Region::Weights && paddedPitch(N, esize) != N;
  onednn::Key key("matmul");
  key << a << b << y << (pad ? "padded" : "");
  double work = onednn::productWork(2.0 * numElements(batch) * M * N * K,
                                    static_cast<double>(a.bytes + b.bytes + y.bytes));
  onednn::Primitive &p = onednn::primitiveFor(c, key, work, [&] {
    dims ad, bd, yd;
    if (collapse) {
      int64_t rows = numElements(batch) * M;
      ad = {rows, K};
      bd = {K, N};
      yd = {rows, N};
    } else {
      ad.assign(R, 1);
      bd.assign(R, 1);
      yd.assign(batch.begin(), batch.end());
      std::copy(ab.begin(), ab.end(), ad.begin() + (batch.size() - ab.size()));
      std::copy(bb.begin(), bb.end(), bd.begin() + (batch.size() - bb.size()));
      ad[R - 2] = M, ad[R - 1] = K;
      bd[R - 2] = K, bd[R - 1] = N;
      yd.push_back(M);
      yd.push_back(N);
    }
    dn::memory::desc bm = pad ? rightDesc(K, N, false, paddedPitch(N, esize), type)
                              : onednn::plain(bd, type);
    return makeMatmul(onednn::plain(ad, type), bm, nullptr, onednn::plain(yd, ytype),
                      onednn::baseAttr());
  });
  if (!p.available) {
    onednn::noteWidened(c, a.dtype);
    return false;
  }
  const void *bdata = rightData(p, b, K, N, false, pad, type);
  p.markVerified({{&a, &b, &y}}, pad ? bdata : nullptr);
  if (!c.setup)
    p.executeProduct(c.ctx, a.data, bdata, nullptr, y.data);
  return true;
}

/// Whether gemm's C has the result's shape (no broadcast): oneDNN adds it
/// as a binary post-op, not as the bias. oneDNN 2.6 runs a matmul with a
/// bias of the result's shape on its reference kernel (ref:any, 500 ms for
/// the 256x128x2048 product brg:avx512_core runs in 0.4 ms), and one with
/// the binary add on brgemm.
bool wholeC(const Tensor *cc, const Tensor &y) { return cc && cc->shape == y.shape; }

/// gemm on oneDNN: y = act(alpha * op(A) op(B) + C) with C as the
/// product's bias (broadcast over rows and/or columns) or, of the result's
/// shape (wholeC), added by a binary post-op; transposes as strides. Cases
/// oneDNN's matmul does not express (beta other than 1 with C, alpha with
/// C) take the own path.
bool gemmOnednn(OpCall &c, const onednn::CallSignature &sig, const Tensor &a, const Tensor &b,
                const Tensor *cc, Tensor &y, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                double alpha, double beta, const std::vector<int64_t> &cs, bool useC,
                const std::string &activation) {
  dt type = productType(a.dtype), ytype = productType(y.dtype);
  if (type == dt::undef || ytype == dt::undef || M * N * K == 0 ||
      (useC && (beta != 1.0 || alpha != 1.0)))
    return false;
  bool wholeSum = useC && wholeC(cc, y);
  size_t esize = dtypeSize(b.dtype);
  int64_t ldb = tb ? K : N;
  // Only a row-major B is padded: oneDNN's brgemm takes no padded rows and
  // its gemm:jit fallback, faster for row-major B, is slower for a
  // transposed one (GPT-2's LM head 128x768x50257 with [N, K] weights: 133
  // ms on gemm:jit with padded rows, 100 ms on brg:avx512_core unpadded).
  bool pad = !tb && b.region == Region::Weights && paddedPitch(ldb, esize) != ldb;
  uint64_t alphaBits;
  std::memcpy(&alphaBits, &alpha, sizeof alpha);
  onednn::Key key(pad ? "gemm padded" : "gemm");
  key << a << b;
  useC ? key << *cc : key << "-";
  key << y << activation << (ta ? "ta" : "") << (tb ? "tb" : "")
      << static_cast<int64_t>(alphaBits);
  double work = onednn::productWork(2.0 * M * N * K,
                                    static_cast<double>(a.bytes + b.bytes + y.bytes));
  onednn::Primitive &p = onednn::primitiveFor(c, key, work, [&] {
    dn::memory::desc am = onednn::strided({M, K}, type, ta ? dims{1, M} : dims{K, 1});
    dn::memory::desc bm = rightDesc(K, N, tb, pad ? paddedPitch(ldb, esize) : ldb, type);
    dn::memory::desc ym = onednn::plain({M, N}, ytype);
    dn::primitive_attr attr = onednn::baseAttr();
    if (alpha != 1.0)
      attr.set_output_scales(0, {static_cast<float>(alpha)});
    dn::post_ops ops;
    dn::memory::desc whole = onednn::plain({M, N}, type);
    if (wholeSum)
      ops.append_binary(dn::algorithm::binary_add, whole); // post-op 0, before the activation
    onednn::appendActivation(ops, activation);
    attr.set_post_ops(ops);
    if (!useC)
      return makeMatmul(am, bm, nullptr, ym, attr);
    if (wholeSum)
      return makeMatmul(am, bm, nullptr, ym, attr, &whole);
    dims biasDims = {cs[0] ? M : 1, cs[1] ? N : 1};
    dn::memory::desc cm = onednn::plain(biasDims, type);
    return makeMatmul(am, bm, &cm, ym, attr);
  });
  if (!p.available) {
    onednn::noteWidened(c, a.dtype);
    return false;
  }
  const void *bdata = rightData(p, b, K, N, tb, pad, type);
  p.markVerified(sig, pad ? bdata : nullptr);
  if (c.setup)
    return true;
  if (wholeSum)
    p.executeProduct(c.ctx, a.data, bdata, nullptr, y.data, cc->data);
  else
    p.executeProduct(c.ctx, a.data, bdata, useC ? cc->data : nullptr, y.data);
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

HPCRT_STATEFUL_KERNEL(matmul) {
  c.expect(1, 2);
  Tensor &a = c.in(0), &b = c.in(1), &y = c.out();
  if (onednn::Primitive *p = onednn::verifiedPrimitive(c, {{&a, &b, &y}})) {
    if (!c.setup)
      p->executeProduct(c.ctx, a.data, p->verifiedWeights ? p->verifiedWeights : b.data,
                        nullptr, y.data);
    return;
  }
  checkSameDtype(a, b, "matmul");
  checkProductDtype(a, y, "matmul");
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
  // b is one matrix for every batch entry of a full-batch a.
  bool bShared = std::all_of(bb.begin(), bb.end(), [](int64_t d) { return d == 1; });
  bool aFull = ab == batch;
  if (matmulOnednn(c, a, b, y, ab, bb, batch, M, K, N, bShared && aFull) || c.setup)
    return;

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
      std::vector<const T *> pa(static_cast<size_t>(nb)), pb(static_cast<size_t>(nb));
      std::vector<T *> py(static_cast<size_t>(nb));
      for (int64_t i = 0; i < nb; ++i) {
        int64_t oa, ob;
        batchOffsets(i, oa, ob);
        pa[i] = A + oa;
        pb[i] = B + ob;
        py[i] = Y + i * M * N;
      }
      gemmBatch<T>(nb, false, false, M, N, K, T(1), pa.data(), K, pb.data(), N, T(0), py.data(),
                   N);
    });
    return;
  }
  dispatch<kI>(y.dtype, "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *A = a.as<T>();
    const T *B = b.as<T>();
    T *Y = y.as<T>();
    parallelFor(nb * M, static_cast<double>(N) * K, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t i = r / M, m = r % M, oa, ob;
        batchOffsets(i, oa, ob);
        for (int64_t n = 0; n < N; ++n) {
          uint64_t acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += static_cast<uint64_t>(A[oa + m * K + k]) *
                   static_cast<uint64_t>(B[ob + k * N + n]);
          Y[r * N + n] = static_cast<T>(acc);
        }
      }
    });
  });
}

//===----------------------------------------------------------------------===//
// gemm
//===----------------------------------------------------------------------===//

HPCRT_STATEFUL_KERNEL(gemm) {
  c.expect(1, 3);
  std::string activation = c.s();
  double alpha = c.f(), beta = c.f();
  bool ta = c.b(), tb = c.b();
  if (!onednn::knownActivation(activation))
    fail("gemm: unknown activation '" + activation + "'");
  Tensor &a = c.in(0), &b = c.in(1), &y = c.out();
  Tensor *cc = c.opt(2);
  onednn::CallSignature sig{{&a, &b, &y, cc}, {}};
  sig.attrs[0] = static_cast<uint64_t>(onednn::activationIndex(activation)) << 2 |
                 (ta ? 1u : 0u) | (tb ? 2u : 0u);
  std::memcpy(&sig.attrs[1], &alpha, sizeof alpha);
  std::memcpy(&sig.attrs[2], &beta, sizeof beta);
  if (onednn::Primitive *p = onednn::verifiedPrimitive(c, sig)) {
    if (c.setup)
      return;
    const void *weights = p->verifiedWeights ? p->verifiedWeights : b.data;
    if (wholeC(cc, y) && beta != 0.0)
      p->executeProduct(c.ctx, a.data, weights, nullptr, y.data, cc->data);
    else
      p->executeProduct(c.ctx, a.data, weights, cc && beta != 0.0 ? cc->data : nullptr,
                        y.data);
    return;
  }
  if (a.rank() != 2 || b.rank() != 2)
    fail("gemm operands must be 2-D");
  int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1];
  int64_t K2 = tb ? b.shape[1] : b.shape[0], N = tb ? b.shape[0] : b.shape[1];
  if (K != K2)
    fail("gemm: inner dimensions " + std::to_string(K) + " and " + std::to_string(K2) +
         " differ");
  checkShape(y, {M, N}, "result");
  checkSameDtype(a, b, "gemm");
  checkProductDtype(a, y, "gemm");
  std::vector<int64_t> cs;
  if (cc) {
    checkSameDtype(*cc, a, "gemm");
    cs = broadcastStrides(cc->shape, {M, N});
  }
  bool useC = cc && beta != 0.0;
  if (gemmOnednn(c, sig, a, b, cc, y, ta, tb, M, N, K, alpha, beta, cs, useC, activation) ||
      c.setup)
    return;
  if (activation != "none" && !isFloatDtype(y.dtype))
    fail("gemm: activation '" + activation + "' needs a floating-point result, got " +
         dtypeName(y.dtype));

  if (y.dtype == HPCRT_F32 || y.dtype == HPCRT_F64 || y.dtype == HPCRT_F16 ||
      y.dtype == HPCRT_BF16) {
    inFloatType("gemm", {&a, &b, cc}, y, [&](auto tag, auto &ptrs, void *out) {
      using T = typename decltype(tag)::type;
      T *Y = static_cast<T *>(out);
      if (useC) {
        const T *C = static_cast<const T *>(ptrs[2]);
        T bt = static_cast<T>(beta);
        parallelFor(M, static_cast<double>(N), [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = 0; j < N; ++j)
              Y[i * N + j] = bt * C[i * cs[0] + j * cs[1]];
        });
      }
      gemmRM<T>(ta, tb, M, N, K, static_cast<T>(alpha), static_cast<const T *>(ptrs[0]),
                a.shape[1], static_cast<const T *>(ptrs[1]), b.shape[1],
                useC ? T(1) : T(0), Y, N);
    });
    applyActivation(c, y, activation);
    return;
  }
  dispatch<kI>(y.dtype, "gemm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *A = a.as<T>();
    const T *B = b.as<T>();
    const T *C = useC ? cc->as<T>() : nullptr;
    T *Y = y.as<T>();
    bool exact = alpha == 1.0 && (beta == 1.0 || !useC);
    parallelFor(M, static_cast<double>(N) * K, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
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
  });
}

//===----------------------------------------------------------------------===//
// conv and conv_transpose
//===----------------------------------------------------------------------===//

namespace hpcrt {

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
  parallelFor(rows, static_cast<double>(g.outSize), [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      int64_t ch = row / g.kSize, kr = row % g.kSize;
      int64_t kk[8], co[8] = {};
      for (int d = r - 1; d >= 0; --d) {
        kk[d] = kr % g.k[d];
        kr /= g.k[d];
      }
      const T *xc = x + ch * g.inSize;
      T *dst = col + row * g.outSize;
      // The innermost dimension (the same for every outer position): zeros
      // for o < lo, input elements base + o * s for lo <= o < hi, zeros.
      int64_t s = g.stride[r - 1], base = kk[r - 1] * g.dil[r - 1] - g.padB[r - 1];
      int64_t n = g.in[r - 1];
      int64_t lo = base >= 0 ? 0 : std::min(outLast, (-base + s - 1) / s);
      int64_t hi = n - base <= 0 ? 0 : std::min(outLast, (n - base + s - 1) / s);
      hi = std::max(hi, lo);
      for (int64_t ou = 0; ou < outer; ++ou) {
        // The outer output coordinates co[] (an odometer, no divisions) and
        // the input offset they give.
        int64_t off = 0, mult = g.in[r - 1];
        bool valid = true;
        for (int d = r - 2; d >= 0; --d) {
          int64_t i = co[d] * g.stride[d] - g.padB[d] + kk[d] * g.dil[d];
          valid = valid && i >= 0 && i < g.in[d];
          off += i * mult;
          mult *= g.in[d];
        }
        for (int d = r - 2; d >= 0; --d) {
          if (++co[d] < g.out[d])
            break;
          co[d] = 0;
        }
        T *q = dst + ou * outLast;
        if (!valid) {
          std::fill(q, q + outLast, T(0));
          continue;
        }
        const T *src = xc + off;
        for (int64_t o = 0; o < lo; ++o)
          q[o] = T(0);
        if (s == 1)
          for (int64_t o = lo; o < hi; ++o)
            q[o] = src[o + base];
        else
          for (int64_t o = lo; o < hi; ++o)
            q[o] = src[o * s + base];
        for (int64_t o = hi; o < outLast; ++o)
          q[o] = T(0);
      }
    }
  });
}

template void im2col<float>(const float *, int64_t, const ConvGeom &, float *);
template void im2col<double>(const double *, int64_t, const ConvGeom &, double *);

} // namespace hpcrt

namespace {

//===----------------------------------------------------------------------===//
// oneDNN paths of the convolutions
//===----------------------------------------------------------------------===//

/// Appends a convolution's group count, strides, dilations and paddings.
onednn::Key &geomKey(onednn::Key &key, const onednn::ConvShape &s, int64_t group) {
  return key << group << s.strides << s.dilation << s.padL << s.padR;
}

/// The filter's descriptor: the ONNX layout, or `any` (the primitive
/// picks; reordered once) for weights that never change.
dn::memory::desc filterDesc(const onednn::ConvShape &s, dt type, bool constant) {
  if (constant)
    return dn::memory::desc(s.weights, type, dn::memory::format_tag::any);
  return onednn::strided(s.weights, type, s.weightsStrides);
}

/// The filter data a primitive reads: the tensor itself, or its copy in
/// the primitive's layout (made once) when that differs.
const void *filterData(onednn::Primitive &p, const onednn::ConvShape &s, dt type,
                       const Tensor &w, bool constant) {
  dn::memory::desc mine = onednn::strided(s.weights, type, s.weightsStrides);
  if (!constant || p.args.at(DNNL_ARG_WEIGHTS).get_desc() == mine)
    return w.data;
  return onednn::reorderedWeights(p, DNNL_ARG_WEIGHTS, mine, w.data);
}

/// The f32 copies a widened bf16 convolution computes on, placed in the
/// context's scratchpad after the primitive's own part: input, filter,
/// bias, residual and result, each 64-byte aligned.
struct WidenedConv {
  size_t offset[5] = {}, total = 0;
  WidenedConv(size_t primitiveScratch, const Tensor &x, const Tensor &w, const Tensor *bias,
              const Tensor *residual, const Tensor &y) {
    auto up = [](size_t b) { return (b + 63) / 64 * 64; };
    total = up(primitiveScratch);
    const Tensor *ts[5] = {&x, &w, bias, residual, &y};
    for (int i = 0; i < 5; ++i) {
      offset[i] = total;
      total += ts[i] ? up(static_cast<size_t>(ts[i]->numel) * sizeof(float)) : 0;
    }
  }
  float *at(void *base, int i) const {
    return reinterpret_cast<float *>(static_cast<char *>(base) + offset[i]);
  }
};

/// conv (transposed: conv_transpose as oneDNN's deconvolution) with the
/// bias, the residual (a binary add post-op, read in the result's layout)
/// and the activation fused. False: the own path runs.
///
/// A bf16 convolution with a blocked tensor where oneDNN has no bf16
/// kernels runs oneDNN's f32 primitive on widened copies (the own path
/// reads plain layouts only): the numerics of the plain case's widened
/// path, bf16 operands summed in f32 and the result rounded once.
bool convOnednn(OpCall &c, const Tensor &x, const Tensor &w, const Tensor *bias,
                const Tensor *residual, Tensor &y, const ConvGeom &g, int64_t group,
                const std::string &activation, bool transposed) {
  dt type = productType(y.dtype);
  if (type == dt::undef || x.numel == 0 || y.numel == 0 || w.dtype != y.dtype ||
      (bias && bias->dtype != y.dtype))
    return false;
  onednn::ConvShape s = onednn::convShape(x, y, g, group, transposed);
  if (!s.ok)
    return false;
  bool widen = type == dt::bf16 && (x.blocked || y.blocked) && !onednn::hasAvx512Core() &&
               (!residual || residual->dtype == y.dtype);
  if (widen) {
    onednn::noteWidened(c, y.dtype);
    type = dt::f32;
  }
  // A plain source of a channels-last result (a network's first conv) is
  // reordered into the blocked layout first: oneDNN's channels-last
  // convolutions read no plain source (only its reference one would).
  bool stage = !widen && !x.blocked && y.blocked && onednn::blockedIsChannelsLast(c.ctx);
  // An f32 residual on the channels-last layout is copied into the result
  // and added by a sum post-op: oneDNN 2.6's f32 brgemm convolution takes no
  // binary post-op (with one it picks the direct kernel, 8-13% slower on
  // ResNet-18's 3x3 convolutions, one core of the AMX Xeon; the copy of a
  // block's output costs about 1% of that).
  //
  // An f32 3x3 stride-1 convolution with constant weights on nChw16c (an
  // f32 program's blocked layout with AVX-512) asks for oneDNN's Winograd
  // kernel, F(2x2, 3x3): 1.2-1.7x faster than the direct kernels on
  // ResNet-18's (T = 1 and 2), as close to a float64 reference
  // (docs/benchmarks.md). Its weights, transformed once, are 16/9 the
  // size. It takes a sum post-op but no binary one, so its residual is
  // summed too.
  bool constant = w.region == Region::Weights;
  bool winograd = !widen && !transposed && type == dt::f32 && group == 1 && constant &&
                  x.blocked && y.blocked && onednn::hasAvx512Core() &&
                  !onednn::blockedIsChannelsLast(c.ctx) && s.weights.size() == 4 &&
                  s.weights[2] == 3 && s.weights[3] == 3 && s.strides == dims{1, 1} &&
                  s.dilation == dims{0, 0};
  bool sumResidual = residual && !widen && !transposed && type == dt::f32 && y.blocked &&
                     (onednn::blockedIsChannelsLast(c.ctx) || winograd);
  onednn::Key key(transposed ? "deconv" : "conv");
  key << (widen ? "widened" : "") << (stage ? "staged" : "") << (sumResidual ? "sum" : "")
      << (winograd ? "winograd" : "") << x << w;
  bias ? key << *bias : key << "-";
  key << y << (residual ? "residual" : "") << activation;
  geomKey(key, s, group) << (constant ? "const" : "") << (x.blocked ? "xb" : "")
                         << (y.blocked ? "yb" : "");
  // Multiply-adds: every output element of a conv (every input element of
  // a deconvolution) meets C/group * K filter taps.
  double flops = 2.0 * (transposed ? x.numel * (w.numel / x.shape[1])
                                   : y.numel * (w.numel / y.shape[1]));
  onednn::Primitive &p = onednn::primitiveFor(c, key, flops, [&] {
    dn::memory::desc src = onednn::activationDesc(c.ctx, x.blocked || stage, s.src, type);
    dn::memory::desc dst = onednn::activationDesc(c.ctx, y, s.dst, type);
    dn::memory::desc wm = filterDesc(s, type, constant), bm = onednn::plain(s.bias, type);
    dn::primitive_attr attr = onednn::baseAttr();
    dn::post_ops ops;
    // The residual is post-op 0 (onednn::kPostOpSrcArg), in dst's layout,
    // or (sumResidual) the destination's contents, added by a sum post-op.
    if (sumResidual)
      ops.append_sum(1.0f);
    else if (residual)
      ops.append_binary(dn::algorithm::binary_add, dst);
    onednn::appendActivation(ops, activation);
    attr.set_post_ops(ops);
    const dn::memory::desc *src1 = residual && !sumResidual ? &dst : nullptr;
    auto fwd = dn::prop_kind::forward_inference;
    if (transposed) {
      auto alg = dn::algorithm::deconvolution_direct;
      auto d = bias ? dn::deconvolution_forward::desc(fwd, alg, src, wm, bm, dst, s.strides,
                                                      s.dilation, s.padL, s.padR)
                    : dn::deconvolution_forward::desc(fwd, alg, src, wm, dst, s.strides,
                                                      s.dilation, s.padL, s.padR);
      dn::deconvolution_forward::primitive_desc pd(d, attr, onednn::engine(), true);
      return onednn::productMade(
          pd, pd ? dn::primitive(dn::deconvolution_forward(pd)) : dn::primitive(), bias, src1);
    }
    auto make = [&](dn::algorithm alg) {
      auto d = bias ? dn::convolution_forward::desc(fwd, alg, src, wm, bm, dst, s.strides,
                                                    s.dilation, s.padL, s.padR)
                    : dn::convolution_forward::desc(fwd, alg, src, wm, dst, s.strides,
                                                    s.dilation, s.padL, s.padR);
      return dn::convolution_forward::primitive_desc(d, attr, onednn::engine(), true);
    };
    dn::convolution_forward::primitive_desc pd;
    if (winograd)
      pd = make(dn::algorithm::convolution_winograd);
    if (!pd)
      pd = make(dn::algorithm::convolution_direct);
    return onednn::productMade(
        pd, pd ? dn::primitive(dn::convolution_forward(pd)) : dn::primitive(), bias, src1);
  });
  if (!p.available) {
    onednn::noteWidened(c, y.dtype);
    return false;
  }
  if (widen) {
    WidenedConv wc(p.scratchpadBytes, x, w, bias, residual, y);
    c.ctx.requireScratchpad(wc.total);
    void *base = c.ctx.scratchpad(wc.total);
    auto widenInto = [&](const Tensor *t, int slot) {
      if (t)
        f32FromBf16(t->as<bf16>(), wc.at(base, slot), t->numel);
    };
    // The filter while the primitive reads it (a constant one is reordered
    // into its own copy once, at setup); the activations on every run.
    if (!constant || !p.weightsReady)
      widenInto(&w, 1);
    if (!c.setup) {
      widenInto(&x, 0);
      widenInto(bias, 2);
      widenInto(residual, 3);
    }
    Tensor wf = w;
    wf.dtype = HPCRT_F32;
    wf.data = wc.at(base, 1);
    const void *wdata = filterData(p, s, type, wf, constant);
    if (c.setup)
      return true;
    float *yf = wc.at(base, 4);
    p.executeProduct(c.ctx, wc.at(base, 0), wdata, bias ? wc.at(base, 2) : nullptr, yf,
                     residual ? wc.at(base, 3) : nullptr);
    bf16FromF32(yf, y.as<bf16>(), y.numel);
    return true;
  }
  const void *wdata = filterData(p, s, type, w, constant);
  const void *src = x.data;
  if (stage) {
    size_t offset = (p.scratchpadBytes + 63) / 64 * 64;
    c.ctx.requireScratchpad(offset + x.bytes);
    if (c.setup)
      return true;
    void *staged = static_cast<char *>(c.ctx.scratchpad(offset + x.bytes)) + offset;
    onednn::ThreadScope scope(p.threads);
    dn::memory from(onednn::plain(s.src, type), onednn::engine(), x.data);
    dn::memory to(onednn::activationDesc(c.ctx, true, s.src, type), onednn::engine(), staged);
    dn::reorder(from, to).execute(onednn::stream(), from, to);
    src = staged;
  }
  if (c.setup)
    return true;
  if (sumResidual) {
    if (residual->data != y.data)
      std::memcpy(y.data, residual->data, y.bytes);
    p.executeProduct(c.ctx, src, wdata, bias ? bias->data : nullptr, y.data);
    return true;
  }
  p.executeProduct(c.ctx, src, wdata, bias ? bias->data : nullptr, y.data,
                   residual ? residual->data : nullptr);
  return true;
}

} // namespace

namespace hpcrt::onednn {

bool convWeightGrad(OpCall &c, const Tensor &x, const Tensor &dy, Tensor &dw,
                    const ConvGeom &g, int64_t group) {
  dt type = productType(dw.dtype);
  if (type == dt::undef || x.numel == 0 || dy.numel == 0 || x.dtype != dw.dtype ||
      dy.dtype != dw.dtype)
    return false;
  ConvShape s = convShape(x, dy, g, group, false);
  if (!s.ok)
    return false;
  Key key("conv_weight_grad");
  geomKey(key << x << dy << dw, s, group);
  Primitive &p = primitiveFor(c, key, 2.0 * dy.numel * (dw.numel / dw.shape[0]), [&] {
    dn::memory::desc src = plain(s.src, type), ddst = plain(s.dst, type);
    dn::memory::desc dwm = strided(s.weights, type, s.weightsStrides);
    auto alg = dn::algorithm::convolution_direct;
    dn::convolution_forward::desc fd(dn::prop_kind::forward_training, alg, src, dwm, ddst,
                                     s.strides, s.dilation, s.padL, s.padR);
    dn::convolution_forward::primitive_desc hint(fd, baseAttr(), engine(), true);
    if (!hint)
      return Made{};
    dn::convolution_backward_weights::desc bd(alg, src, dwm, ddst, s.strides, s.dilation,
                                              s.padL, s.padR);
    dn::convolution_backward_weights::primitive_desc pd(bd, baseAttr(), engine(), hint, true);
    if (!pd)
      return Made{};
    Made m{pd, dn::convolution_backward_weights(pd), {}};
    m.args = {{DNNL_ARG_SRC, pd.src_desc()},
              {DNNL_ARG_DIFF_DST, pd.diff_dst_desc()},
              {DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc()}};
    return m;
  });
  if (!p.available) {
    noteWidened(c, dw.dtype);
    return false;
  }
  if (!c.setup)
    p.execute(c.ctx,
              {{DNNL_ARG_SRC, x.data}, {DNNL_ARG_DIFF_DST, dy.data}, {DNNL_ARG_DIFF_WEIGHTS, dw.data}});
  return true;
}

} // namespace hpcrt::onednn

namespace {

/// f32 convolution without im2col, for a unit stride in the last spatial
/// dimension: the input is copied once into a zero-padded buffer (unless
/// there is no padding), and each output row (all last-dimension positions
/// of one outer output position) is a GEMM whose B rows are that buffer at
/// the offsets of (channel, kernel position); the bias is added in the
/// GEMM's epilogue.
void directConv(const float *X, const float *W, const float *bias, float *Y, int64_t N,
                int64_t C, int64_t M, int64_t group, const ConvGeom &g,
                const std::vector<int64_t> &pads) {
  int r = g.r;
  int64_t Cg = C / group, Mg = M / group, K = Cg * g.kSize;
  int64_t P[8], pitch[8], plane = 1;
  bool padded = false;
  for (int d = 0; d < r; ++d) {
    P[d] = g.in[d] + pads[d] + pads[d + r];
    padded = padded || pads[d] != 0 || pads[d + r] != 0;
  }
  for (int d = r - 1; d >= 0; --d) {
    pitch[d] = plane;
    plane *= P[d];
  }
  // B row offsets of (channel, kernel position), the same for every row.
  std::vector<int64_t> boff(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    int64_t c = k / g.kSize, kr = k % g.kSize, off = c * plane;
    for (int d = r - 1; d >= 0; --d) {
      off += (kr % g.k[d]) * g.dil[d] * pitch[d];
      kr /= g.k[d];
    }
    boff[k] = off;
  }
  int64_t OW = g.out[r - 1], outer = g.outSize / OW, batch = group * outer;
  int64_t vec = simdLevel() == 2 ? 16 : 8;
  bool pair = r == 2 && outer >= 2 && 2 * OW > vec && OW <= vec;
  std::vector<const float *> pa(static_cast<size_t>(batch)), pb(static_cast<size_t>(batch)),
      pbias(static_cast<size_t>(batch));
  std::vector<float *> pc(static_cast<size_t>(batch));
  std::unique_ptr<float[]> buf(padded ? new float[static_cast<size_t>(C * plane)] : nullptr);
  for (int64_t n = 0; n < N; ++n) {
    const float *xn = X + n * C * g.inSize, *src = xn;
    if (padded) {
      // Zero borders and the input's rows (last dimension) inside them.
      int64_t inLast = g.in[r - 1], rows = g.inSize / inLast;
      float *xp = buf.get();
      parallelFor(C, static_cast<double>(plane), [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          float *dst = xp + c * plane;
          std::fill(dst, dst + plane, 0.0f);
          int64_t co[8] = {};
          for (int64_t row = 0; row < rows; ++row) {
            int64_t off = pads[r - 1];
            for (int d = 0; d < r - 1; ++d)
              off += (co[d] + pads[d]) * pitch[d];
            std::copy(xn + (c * rows + row) * inLast, xn + (c * rows + row + 1) * inLast,
                      dst + off);
            for (int d = r - 2; d >= 0; --d) {
              if (++co[d] < g.in[d])
                break;
              co[d] = 0;
            }
          }
        }
      });
      src = xp;
    }
    // Batch entries: output rows, or (pairs) two adjacent rows of a 2-D
    // output whose rows are at most one vector wide but more than half of
    // one, as the two vectors of one panel; then the rows left over.
    int64_t b = 0, rowsLeft = 0;
    auto entry = [&](int64_t gi, int64_t ou, int64_t off) {
      pa[b] = W + gi * Mg * K;
      pb[b] = src + off;
      pc[b] = Y + (n * M + gi * Mg) * g.outSize + ou * OW;
      pbias[b] = bias ? bias + gi * Mg : nullptr;
      ++b;
    };
    if (pair) {
      for (int64_t gi = 0; gi < group; ++gi)
        for (int64_t oh = 0; oh + 1 < outer; oh += 2)
          entry(gi, oh, gi * Cg * plane + oh * g.stride[0] * pitch[0]);
      int64_t pairs = b;
      if (outer % 2)
        for (int64_t gi = 0; gi < group; ++gi)
          entry(gi, outer - 1, gi * Cg * plane + (outer - 1) * g.stride[0] * pitch[0]);
      rowsLeft = b - pairs;
      Sgemm sg{Mg, 2 * OW, K, pa.data(), K, 1, pb.data(), boff.data(), pc.data(), g.outSize,
               1.0f, 0.0f, pbias.data()};
      sg.vcols = OW;
      sg.bvec = g.stride[0] * pitch[0];
      sg.cvec = OW;
      runSgemm(sg, pairs);
      if (!rowsLeft)
        continue;
    } else {
      for (int64_t gi = 0; gi < group; ++gi) {
        int64_t co[8] = {};
        for (int64_t ou = 0; ou < outer; ++ou) {
          int64_t off = gi * Cg * plane;
          for (int d = 0; d < r - 1; ++d)
            off += co[d] * g.stride[d] * pitch[d];
          for (int d = r - 2; d >= 0; --d) {
            if (++co[d] < g.out[d])
              break;
            co[d] = 0;
          }
          entry(gi, ou, off);
        }
      }
      rowsLeft = b;
    }
    size_t first = static_cast<size_t>(b - rowsLeft);
    Sgemm sg{Mg, OW, K, pa.data() + first, K, 1, pb.data() + first, boff.data(),
             pc.data() + first, g.outSize, 1.0f, 0.0f, pbias.data() + first};
    runSgemm(sg, rowsLeft);
  }
}

} // namespace

HPCRT_STATEFUL_KERNEL(conv) {
  c.expect(1, 4);
  std::string activation = c.s();
  if (!onednn::knownActivation(activation))
    fail("conv: unknown activation '" + activation + "'");
  std::vector<int64_t> dilations = c.ivec();
  int64_t group = c.i();
  std::vector<int64_t> pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &w = c.in(1), &y = c.out();
  Tensor *bias = c.opt(2), *residual = c.opt(3);
  ConvGeom g = convGeom(x, w, y, strides, pads, dilations);
  if (g.r > 8)
    fail("conv: more than 8 spatial dimensions");
  if (residual) {
    checkShape(*residual, y.shape, "conv: residual");
    checkSameDtype(*residual, y, "conv: residual");
    checkSameLayout({residual, &y}, "conv: residual and result");
    if (residual->data == y.data)
      fail("conv: the residual must not share the result's storage");
  }
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
  // Small f32 convolutions (below ~5 MFLOP, e.g. examples/cnn.onnx's three:
  // 0.10 ms per run on directConv and the micro-kernel GEMM (pointwise)
  // against 0.17 ms on oneDNN's gemm:jit convolution, AVX2,
  // docs/benchmarks.md) stay on the own kernels, whose per-call cost is
  // lower; everything else runs on oneDNN.
  bool smallDirect = !x.blocked && !y.blocked && y.dtype == HPCRT_F32 && simdLevel() > 0 &&
                     (pointwise || g.stride[g.r - 1] == 1) &&
                     2.0 * static_cast<double>(y.numel) * static_cast<double>(w.numel / M) < 5e6;
  if (!smallDirect && convOnednn(c, x, w, bias, residual, y, g, group, activation, false))
    return;
  if (x.blocked || y.blocked)
    fail("conv: oneDNN has no convolution for this blocked-layout case");
  if (c.setup)
    return;
  inFloatType("conv", {&x, &w, bias}, y, [&](auto tag, auto &ptrs, void *out) {
    using T = typename decltype(tag)::type;
    const T *X = static_cast<const T *>(ptrs[0]);
    const T *W = static_cast<const T *>(ptrs[1]);
    const T *B = static_cast<const T *>(ptrs[2]);
    T *Y = static_cast<T *>(out);
    if constexpr (std::is_same_v<T, float>) {
      if (simdLevel() > 0 && !pointwise && g.stride[g.r - 1] == 1) {
        directConv(X, W, B, Y, N, C, M, group, g, pads);
        return;
      }
    }
    // Per image: im2col of all channels (the groups' column matrices one
    // after another), then one batched product over the groups.
    std::unique_ptr<T[]> col(pointwise ? nullptr : new T[static_cast<size_t>(C * g.kSize * g.outSize)]);
    std::vector<const T *> pw(static_cast<size_t>(group)), pc(static_cast<size_t>(group));
    std::vector<T *> py(static_cast<size_t>(group));
    for (int64_t n = 0; n < N; ++n) {
      const T *xn = X + n * C * g.inSize;
      const T *cm = xn;
      if (!pointwise) {
        im2col(xn, C, g, col.get());
        cm = col.get();
      }
      for (int64_t gi = 0; gi < group; ++gi) {
        pw[gi] = W + gi * Mg * Cg * g.kSize;
        pc[gi] = cm + gi * Cg * g.kSize * g.outSize;
        py[gi] = Y + (n * M + gi * Mg) * g.outSize;
      }
      gemmBatch<T>(group, false, false, Mg, g.outSize, Cg * g.kSize, T(1), pw.data(),
                   Cg * g.kSize, pc.data(), g.outSize, T(0), py.data(), g.outSize);
    }
    if (B) {
      parallelFor(N * M, static_cast<double>(g.outSize), [&](int64_t nm0, int64_t nm1) {
        for (int64_t nm = nm0; nm < nm1; ++nm) {
          T bv = B[nm % M];
          T *q = Y + nm * g.outSize;
          for (int64_t i = 0; i < g.outSize; ++i)
            q[i] += bv;
        }
      });
    }
  });
  if (residual)
    addResidual(c, y, *residual);
  applyActivation(c, y, activation);
}

HPCRT_STATEFUL_KERNEL(conv_transpose) {
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
  if (convOnednn(c, x, w, bias, nullptr, y, g, group, "none", true) || c.setup)
    return;
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
        parallelFor(Mg, static_cast<double>(g.kSize) * g.inSize, [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
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
        });
      }
  });
}
