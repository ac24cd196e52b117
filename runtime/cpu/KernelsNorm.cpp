//===- KernelsNorm.cpp - softmax, log_softmax, layer/rms/batch norm --------===//
//
// f32 layer_norm runs on oneDNN's layer normalization (made once, in the
// setup run); softmax, log_softmax, rms_norm and batch_norm keep the
// runtime's own kernels, each with the measurement that kept it
// (test/runtime/NormBench.cpp; docs/benchmarks.md, "Norms and softmax:
// oneDNN against the own kernels"). In the own kernels
// statistics accumulate in double; f16/bf16 load and store through float.
// f32 softmax and layer/rms norm over the last axis run Simd.h's row kernels
// on AVX2/AVX-512 (float lanes; the softmax exp is Cephes' expf, ~1 ulp).
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "Kernel.h"
#include "Simd.h"

#include <cstring>
#include <memory>

using namespace hpcrt;

namespace {

/// outer x n x inner around `axis`.
void splitAxis(const Tensor &t, int64_t axis, int64_t &outer, int64_t &n, int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= t.shape[d];
  n = t.shape[axis];
  for (int64_t d = axis + 1; d < t.rank(); ++d)
    inner *= t.shape[d];
}

namespace dn = ::dnnl;

/// Work per element of oneDNN's layer normalization in the units
/// onednn::threadsFor counts (flops at ~50 GFLOP/s per core, so its 5e6 is
/// ~100 us on one thread): ~0.25 ns per element on one thread here
/// (hpcrt-norm-bench).
constexpr double kLayerNormWork = 12;

template <bool Log> void softmaxKernel(OpCall &c, const char *what) {
  c.expect(1, 1);
  Tensor &x = c.in(0), &y = c.out();
  int64_t axis = normalizeAxis(c.i(), x.rank());
  checkSameDtype(x, y, what);
  checkShape(y, x.shape, "result");
  int64_t outer, n, inner;
  splitAxis(x, axis, outer, n, inner);
  // Both stay here (hpcrt-norm-bench on this AVX2 CPU, five runs: time of
  // this kernel over oneDNN 2.6's softmax_v2 on one thread). softmax:
  // 0.90-1.20x at the attention shapes ([12,128,128], [4,4,64,64],
  // [4,8,256,256]: within the bench's noise), 0.70-0.88x at [1,4,16,16]
  // (oneDNN's fixed cost per call), 0.10-0.12x over a non-last axis
  // (oneDNN's ref:any). log_softmax: 1.00-1.45x (median 1.12) only at
  // GPT-2's 50257-wide loss rows, 0.89-1.12x at gpt-6x512's [1024,1024],
  // and oneDNN's is less exact where the sum of exponentials is near 1 (its
  // vectorized log: 1.4e-6 instead of 0 for a single element, 4.8e-6 from
  // the double reference at [4,4,64,64] against 1.5e-6 here).
  dispatch<kF>(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = C_t<T>;
    const T *p = x.as<T>();
    T *q = y.as<T>();
    bool vec = std::is_same_v<T, float> && inner == 1 && simdLevel() > 0;
    // ~1 ns per element vectorized, more in the scalar loop.
    parallelFor(outer * inner, (vec ? 1.0 : 4.0) * static_cast<double>(n),
                [&](int64_t r0, int64_t r1) {
      std::vector<C> buf(static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r) {
#ifdef HPCRT_X86_SIMD
        if constexpr (std::is_same_v<T, float>) {
          if (vec) {
            const float *xr = p + r * n;
            float *yr = q + r * n;
            bool ok = simdLevel() == 2 ? avx512::softmaxRow<Log>(xr, yr, n)
                                       : avx2::softmaxRow<Log>(xr, yr, n);
            if (ok)
              continue; // else a NaN: the scalar loop below
          }
        }
#endif
        int64_t o = r / inner, i = r % inner;
        int64_t base = o * n * inner + i;
        C mx = -std::numeric_limits<C>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          buf[j] = ld(p, base + j * inner);
          mx = buf[j] > mx || std::isnan(buf[j]) ? buf[j] : mx;
        }
        if (std::isinf(mx) && mx < 0)
          mx = 0; // all -inf: exp gives 0, the result is NaN as in numpy
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          C e = std::exp(buf[j] - mx);
          sum += e;
          if (!Log)
            buf[j] = e;
        }
        if (Log) {
          C ls = static_cast<C>(std::log(sum));
          for (int64_t j = 0; j < n; ++j)
            st(q, base + j * inner, buf[j] - mx - ls);
        } else {
          C inv = static_cast<C>(1.0 / sum);
          for (int64_t j = 0; j < n; ++j)
            st(q, base + j * inner, buf[j] * inv);
        }
      }
    });
    (void)vec;
  });
}

/// A norm parameter broadcast (right-aligned) to the normalized trailing
/// shape, as a dense vector of its n elements.
template <typename C>
std::vector<C> expandParam(const Tensor *t, const std::vector<int64_t> &trailing,
                           const char *what) {
  int64_t n = numElements(trailing);
  std::vector<C> v(static_cast<size_t>(n));
  if (!t) {
    std::fill(v.begin(), v.end(), C(0));
    return v;
  }
  std::vector<int64_t> s = broadcastStrides(t->shape, trailing);
  std::vector<int64_t> ts = stridesOf(trailing);
  dispatch<kF>(t->dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *p = t->as<T>();
    if (t->numel == n) { // the full trailing shape (leading 1s at most)
      for (int64_t i = 0; i < n; ++i)
        v[i] = static_cast<C>(ld(p, i));
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < trailing.size(); ++d)
        off += ((i / ts[d]) % trailing[d]) * s[d];
      v[i] = static_cast<C>(ld(p, off));
    }
  });
  return v;
}

/// Below this many elements the own row kernel is faster than the oneDNN
/// call, whose fixed cost is ~1.3 us ([16,64]: 1.4 us own, 2.4-2.6 us
/// through the primitive; [256,64]: 18-27 against 10-15, hpcrt-norm-bench).
constexpr int64_t kLayerNormOnednnMin = 2048;

/// layer_norm on oneDNN's layer normalization (f32, plain): x viewed as
/// [outer, n] rows, the scale (and the bias) n dense elements each. False:
/// the own kernel runs (another dtype, a broadcast parameter, a small x,
/// primitives disabled).
bool layerNormOnednn(OpCall &c, const Tensor &x, const Tensor &scale, const Tensor *bias,
                     Tensor &y, int64_t outer, int64_t n, double eps) {
  if (!onednn::primitivesEnabled() || x.dtype != HPCRT_F32 || x.numel < kLayerNormOnednnMin ||
      outer == 0 || n == 0 || scale.numel != n || (bias && bias->numel != n))
    return false;
  uint64_t epsBits;
  std::memcpy(&epsBits, &eps, sizeof eps);
  onednn::Key key("layer_norm");
  key << x << n << static_cast<int64_t>(epsBits) << (bias ? "bias" : "");
  onednn::Primitive &p =
      onednn::primitiveFor(c, key, kLayerNormWork * static_cast<double>(x.numel), [&] {
        auto flags = dn::normalization_flags::use_scale;
        if (bias)
          flags |= dn::normalization_flags::use_shift;
        dn::layer_normalization_forward::desc desc(dn::prop_kind::forward_inference,
                                                   onednn::plain({outer, n}, onednn::dt::f32),
                                                   static_cast<float>(eps), flags);
        dn::layer_normalization_forward::primitive_desc pd(desc, onednn::baseAttr(),
                                                           onednn::engine(),
                                                           /*allow_empty=*/true);
        if (!pd)
          return onednn::Made{};
        onednn::Made m{pd, dn::layer_normalization_forward(pd), {}};
        dn::memory::desc vec = onednn::plain({n}, onednn::dt::f32);
        m.args = {{DNNL_ARG_SRC, pd.src_desc()}, {DNNL_ARG_DST, pd.dst_desc()},
                  {DNNL_ARG_SCALE, vec}};
        if (bias)
          m.args.push_back({DNNL_ARG_SHIFT, vec});
        return m;
      });
  if (!p.available)
    return false;
  if (c.setup)
    return true;
  if (bias)
    p.execute(c.ctx, {{DNNL_ARG_SRC, x.data},
                      {DNNL_ARG_DST, y.data},
                      {DNNL_ARG_SCALE, scale.data},
                      {DNNL_ARG_SHIFT, bias->data}});
  else
    p.execute(c.ctx,
              {{DNNL_ARG_SRC, x.data}, {DNNL_ARG_DST, y.data}, {DNNL_ARG_SCALE, scale.data}});
  return true;
}

/// The mean and the biased variance of a row of n elements, in double (two
/// passes); not `centered` (RMS): mean 0 and the mean square.
template <typename T> void rowMoments(const T *row, int64_t n, bool centered, double &mean,
                                      double &var) {
  mean = 0;
  if (centered) {
    for (int64_t j = 0; j < n; ++j)
      mean += static_cast<double>(ld(row, j));
    mean /= static_cast<double>(n);
  }
  var = 0;
  for (int64_t j = 0; j < n; ++j) {
    double d = static_cast<double>(ld(row, j)) - mean;
    var += d * d;
  }
  var /= static_cast<double>(n);
}

/// layer_norm_grad's state: oneDNN's layer normalization backward needs the
/// forward's mean and variance, which the inference forward did not keep, so
/// a forward_training primitive recomputes them (writing its xhat into dx,
/// which the backward then overwrites) into a buffer held for the run. The
/// backward is prop_kind::backward (oneDNN 2.6 has no backward_data with a
/// scale), so it also writes a scale gradient, into the same buffer and
/// unused: the autodiff sums the parameter gradients itself, as sums over
/// rows that the partitioner may split.
struct LayerNormGradState : KernelState {
  std::string key;
  std::unique_ptr<onednn::Primitive> statistics, backward;
  Buffer held; ///< [outer] means, [outer] variances, [n] scale gradient
};

/// layer_norm_grad on oneDNN (f32, plain, scale dense over the n normalized
/// elements). False: the own loop runs.
bool layerNormGradOnednn(OpCall &c, const Tensor &x, const Tensor &scale, const Tensor &dy,
                         Tensor &dx, int64_t outer, int64_t n, double eps) {
  if (!onednn::primitivesEnabled() || x.dtype != HPCRT_F32 || x.numel < kLayerNormOnednnMin ||
      outer == 0 || n == 0 || scale.numel != n)
    return false;
  uint64_t epsBits;
  std::memcpy(&epsBits, &eps, sizeof eps);
  onednn::Key key("layer_norm_grad");
  key << x << n << static_cast<int64_t>(epsBits);
  auto *state = dynamic_cast<LayerNormGradState *>(c.ctx.kernelState(c.op));
  if (!state || state->key != key.str()) {
    auto fresh = std::make_unique<LayerNormGradState>();
    fresh->key = key;
    dn::memory::desc data = onednn::plain({outer, n}, onednn::dt::f32),
                     stat = onednn::plain({outer}, onednn::dt::f32),
                     vec = onednn::plain({n}, onednn::dt::f32);
    float e = static_cast<float>(eps);
    double work = kLayerNormWork * static_cast<double>(x.numel);
    auto forward = [&](dn::normalization_flags flags) {
      return dn::layer_normalization_forward::primitive_desc(
          dn::layer_normalization_forward::desc(dn::prop_kind::forward_training, data, e, flags),
          onednn::baseAttr(), onednn::engine(), /*allow_empty=*/true);
    };
    fresh->statistics = onednn::makePrimitive(c.ctx, key, work, [&] {
      auto pd = forward(dn::normalization_flags::none);
      if (!pd)
        return onednn::Made{};
      onednn::Made m{pd, dn::layer_normalization_forward(pd), {}};
      m.args = {{DNNL_ARG_SRC, data}, {DNNL_ARG_DST, data}, {DNNL_ARG_MEAN, stat},
                {DNNL_ARG_VARIANCE, stat}};
      return m;
    });
    fresh->backward = onednn::makePrimitive(c.ctx, key, 2 * work, [&] {
      auto hint = forward(dn::normalization_flags::use_scale);
      if (!hint)
        return onednn::Made{};
      dn::layer_normalization_backward::primitive_desc pd(
          dn::layer_normalization_backward::desc(dn::prop_kind::backward, data, data, stat,
                                                 e, dn::normalization_flags::use_scale),
          onednn::baseAttr(), onednn::engine(), hint, /*allow_empty=*/true);
      if (!pd)
        return onednn::Made{};
      onednn::Made m{pd, dn::layer_normalization_backward(pd), {}};
      m.args = {{DNNL_ARG_SRC, data},      {DNNL_ARG_MEAN, stat},  {DNNL_ARG_VARIANCE, stat},
                {DNNL_ARG_DIFF_DST, data}, {DNNL_ARG_SCALE, vec}, {DNNL_ARG_DIFF_SRC, data},
                {DNNL_ARG_DIFF_SCALE, vec}};
      return m;
    });
    if (fresh->statistics->available && fresh->backward->available) {
      fresh->held = Buffer(static_cast<size_t>(2 * outer + n) * sizeof(float));
      fresh->heldBytes = fresh->held.size();
    }
    state = fresh.get();
    c.ctx.setKernelState(c.op, std::move(fresh));
  }
  if (!state->statistics->available || !state->backward->available)
    return false;
  if (c.setup)
    return true;
  float *mean = static_cast<float *>(state->held.data()), *variance = mean + outer,
        *scaleGrad = variance + outer;
  state->statistics->execute(c.ctx, {{DNNL_ARG_SRC, x.data},
                                     {DNNL_ARG_DST, dx.data},
                                     {DNNL_ARG_MEAN, mean},
                                     {DNNL_ARG_VARIANCE, variance}});
  state->backward->execute(c.ctx, {{DNNL_ARG_SRC, x.data},
                                   {DNNL_ARG_MEAN, mean},
                                   {DNNL_ARG_VARIANCE, variance},
                                   {DNNL_ARG_DIFF_DST, dy.data},
                                   {DNNL_ARG_SCALE, scale.data},
                                   {DNNL_ARG_DIFF_SRC, dx.data},
                                   {DNNL_ARG_DIFF_SCALE, scaleGrad}});
  return true;
}

template <bool RMS> void normKernel(OpCall &c, const char *what, bool hasBias) {
  c.expect(1, hasBias ? 3 : 2);
  Tensor &x = c.in(0), &scale = c.in(1), &y = c.out();
  Tensor *bias = hasBias ? c.opt(2) : nullptr;
  int64_t axis = normalizeAxis(c.i(), x.rank());
  double eps = c.f();
  checkSameDtype(x, y, what);
  checkSameDtype(x, scale, what);
  if (bias)
    checkSameDtype(x, *bias, what);
  checkShape(y, x.shape, "result");
  std::vector<int64_t> trailing(x.shape.begin() + axis, x.shape.end());
  int64_t n = numElements(trailing), outer = numElements(x.shape) / std::max<int64_t>(n, 1);
  if (n == 0)
    return;
  // layer_norm: oneDNN's is 2.0-3.2x faster than the own row kernel at the
  // models' shapes on one thread ([128,768] 22-29 against 62-75 us,
  // hpcrt-norm-bench).
  // rms_norm stays here: oneDNN 2.6 has no RMS normalization (no flag that
  // skips the mean; dnnl_rms_norm came with 3.x).
  if (!RMS && layerNormOnednn(c, x, scale, bias, y, outer, n, eps))
    return;
  if (c.setup)
    return;
  dispatch<kF>(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = C_t<T>;
    std::vector<C> g = expandParam<C>(&scale, trailing, what);
    std::vector<C> b = expandParam<C>(bias, trailing, what);
    const T *p = x.as<T>();
    T *q = y.as<T>();
#ifdef HPCRT_X86_SIMD
    if constexpr (std::is_same_v<T, float>) {
      if (simdLevel() > 0) {
        const float *gp = g.data(), *bp = RMS || !bias ? nullptr : b.data();
        float e = static_cast<float>(eps);
        parallelFor(outer, 0.5 * static_cast<double>(n), [&](int64_t o0, int64_t o1) {
          for (int64_t o = o0; o < o1; ++o) {
            if (simdLevel() == 2)
              avx512::normRow<RMS>(p + o * n, q + o * n, n, gp, bp, e);
            else
              avx2::normRow<RMS>(p + o * n, q + o * n, n, gp, bp, e);
          }
        });
        return;
      }
    }
#endif
    parallelFor(outer, 3.0 * static_cast<double>(n), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const int64_t base = o * n;
      double mean, var;
      rowMoments(p + base, n, /*centered=*/!RMS, mean, var);
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < n; ++j) {
        double v = (static_cast<double>(ld(p, base + j)) - mean) * inv;
        st(q, base + j, static_cast<C>(v) * g[j] + (RMS ? C(0) : b[j]));
      }
    }
    });
  });
}

} // namespace

// layer_norm_grad: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
// g = dy * scale, per row of the n normalized elements. f32 on oneDNN's
// layer normalization backward; f64, f16, bf16 and small rows here.
HPCRT_STATEFUL_KERNEL(layer_norm_grad) {
  const char *what = "layer_norm_grad";
  c.expect(1, 3);
  Tensor &x = c.in(0), &scale = c.in(1), &dy = c.in(2), &dx = c.out();
  int64_t axis = normalizeAxis(c.i(), x.rank());
  double eps = c.f();
  checkSameDtype(x, scale, what);
  checkSameDtype(x, dy, what);
  checkSameDtype(x, dx, what);
  checkShape(dy, x.shape, "grad_output");
  checkShape(dx, x.shape, "result");
  std::vector<int64_t> trailing(x.shape.begin() + axis, x.shape.end());
  checkShape(scale, trailing, "scale");
  int64_t n = numElements(trailing), outer = numElements(x.shape) / std::max<int64_t>(n, 1);
  if (n == 0)
    return;
  if (layerNormGradOnednn(c, x, scale, dy, dx, outer, n, eps) || c.setup)
    return;
  dispatch<kF>(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.as<T>(), *pg = scale.as<T>(), *pdy = dy.as<T>();
    T *pdx = dx.as<T>();
    parallelFor(outer, 6.0 * static_cast<double>(n), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const int64_t base = o * n;
        double mean, var;
        rowMoments(px + base, n, /*centered=*/true, mean, var);
        double rstd = 1.0 / std::sqrt(var + eps);
        double m1 = 0, m2 = 0;
        for (int64_t j = 0; j < n; ++j) {
          double g = static_cast<double>(ld(pdy, base + j)) * static_cast<double>(ld(pg, j));
          m1 += g;
          m2 += g * (static_cast<double>(ld(px, base + j)) - mean) * rstd;
        }
        m1 /= static_cast<double>(n);
        m2 /= static_cast<double>(n);
        for (int64_t j = 0; j < n; ++j) {
          double g = static_cast<double>(ld(pdy, base + j)) * static_cast<double>(ld(pg, j));
          double xhat = (static_cast<double>(ld(px, base + j)) - mean) * rstd;
          st(pdx, base + j, rstd * (g - m1 - xhat * m2));
        }
      }
    });
  });
}

HPCRT_KERNEL(softmax) { softmaxKernel<false>(c, "softmax"); }
HPCRT_KERNEL(log_softmax) { softmaxKernel<true>(c, "log_softmax"); }
HPCRT_STATEFUL_KERNEL(layer_norm) { normKernel<false>(c, "layer_norm", true); }
HPCRT_KERNEL(rms_norm) { normKernel<true>(c, "rms_norm", false); }

// Inference batch norm stays here: oneDNN 2.6's batch normalization over a
// plain NCHW tensor (ncsp_bnorm, what it picks for the plain layout) takes
// 3-12x the time of this loop at ResNet-18's shapes ([1,64,56,56]
// 281-461 against 27-42 us on one thread, hpcrt-norm-bench).
HPCRT_KERNEL(batch_norm) {
  c.expect(1, 5);
  double eps = c.f();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "batch_norm");
  checkShape(y, x.shape, "result");
  if (x.rank() < 2)
    fail("batch_norm: input needs rank >= 2");
  int64_t N = x.shape[0], C = x.shape[1], inner = x.numel / std::max<int64_t>(N * C, 1);
  for (int k = 1; k < 5; ++k)
    if (c.in(k).numel != C)
      fail("batch_norm: operand " + std::to_string(k) + " has shape " +
           shapeString(c.in(k).shape) + ", expected " + std::to_string(C) + " elements");
  dispatch<kF>(x.dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<double> mul(static_cast<size_t>(C)), add(static_cast<size_t>(C)),
        mean(static_cast<size_t>(C));
    auto param = [&](int k, int64_t ch) -> double {
      const Tensor &t = c.in(k);
      double v = 0;
      dispatch<kF>(t.dtype, "batch_norm", [&](auto ptag) {
        using P = typename decltype(ptag)::type;
        v = static_cast<double>(ld(t.as<P>(), ch));
      });
      return v;
    };
    for (int64_t ch = 0; ch < C; ++ch) {
      double s = param(1, ch), b = param(2, ch), m = param(3, ch), v = param(4, ch);
      mul[ch] = s / std::sqrt(v + eps);
      add[ch] = b;
      mean[ch] = m;
    }
    const T *p = x.as<T>();
    T *q = y.as<T>();
    parallelFor(N * C, static_cast<double>(inner), [&](int64_t nc0, int64_t nc1) {
      for (int64_t nc = nc0; nc < nc1; ++nc) {
        int64_t ch = nc % C;
        using Cc = C_t<T>;
        Cc a = static_cast<Cc>(mul[ch]), b = static_cast<Cc>(add[ch]),
           m = static_cast<Cc>(mean[ch]);
        for (int64_t i = 0; i < inner; ++i)
          st(q, nc * inner + i, (ld(p, nc * inner + i) - m) * a + b);
      }
    });
  });
}
