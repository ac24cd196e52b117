//===- KernelsPool.cpp - pooling and resize --------------------------------===//
//
// N-d max/avg pooling (pads, dilations, ceil_mode, count_include_pad), the
// global pools, and Resize (nearest and multilinear) with the coordinate
// transforms of the ONNX reference implementation. 2-D max/avg pooling
// runs as two separable 1-D passes (H, then W) that vectorize; avg sums in
// the compute type (float for f32/f16/bf16), max falls back to the
// per-window loop for planes holding a NaN. The window geometry (poolGeom,
// WindowTable, forEachWindow in Kernel.h) is shared with the pooling
// gradients of KernelsTrain.cpp.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "Kernel.h"
#include "Simd.h"

#include <atomic>

using namespace hpcrt;

namespace hpcrt {

PoolGeom poolGeom(const Tensor &x, const Tensor &y, bool ceilMode,
                  const std::vector<int64_t> &dilations, const std::vector<int64_t> &kernel,
                  const std::vector<int64_t> &pads, const std::vector<int64_t> &strides) {
  PoolGeom g;
  g.r = x.rank() - 2;
  if (g.r < 1 || y.rank() != x.rank())
    fail("pooling needs an [N, C, D1...] input and a result of the same rank");
  size_t r = static_cast<size_t>(g.r);
  if (kernel.size() != r || strides.size() != r || dilations.size() != r || pads.size() != 2 * r)
    fail("pooling: kernel_shape/strides/dilations need " + std::to_string(r) +
         " entries and pads " + std::to_string(2 * r));
  if (y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1])
    fail("pooling: result shape " + shapeString(y.shape) + " does not fit the input " +
         shapeString(x.shape));
  g.planes = x.shape[0] * x.shape[1];
  for (size_t d = 0; d < r; ++d) {
    if (kernel[d] < 1 || strides[d] < 1 || dilations[d] < 1)
      fail("pooling: kernel_shape, strides and dilations must be positive");
    g.in.push_back(x.shape[2 + d]);
    g.out.push_back(y.shape[2 + d]);
    g.k.push_back(kernel[d]);
    g.stride.push_back(strides[d]);
    g.dil.push_back(dilations[d]);
    g.padB.push_back(pads[d]);
    g.padE.push_back(pads[d + r]);
    int64_t span = (kernel[d] - 1) * dilations[d] + 1;
    int64_t numer = g.in[d] + pads[d] + pads[d + r] - span;
    int64_t o = numer < 0 ? 0
                          : (ceilMode ? (numer + strides[d] - 1) / strides[d]
                                      : numer / strides[d]) + 1;
    if (ceilMode && o > 0 && (o - 1) * strides[d] >= g.in[d] + pads[d])
      --o;
    if (o != g.out[d])
      fail("pooling: result size " + std::to_string(g.out[d]) + " in spatial dim " +
           std::to_string(d) + " should be " + std::to_string(o));
    g.inSize *= g.in[d];
    g.outSize *= g.out[d];
    g.kSize *= g.k[d];
  }
  if (g.r > 8)
    fail("pooling: more than 8 spatial dimensions");
  return g;
}

WindowTable::WindowTable(const PoolGeom &g) {
  for (int d = 0; d < g.r; ++d) {
    int64_t n = g.out[d];
    first[d].resize(n);
    count[d].resize(n);
    padded[d].resize(n);
    for (int64_t oc = 0; oc < n; ++oc) {
      int64_t start = oc * g.stride[d] - g.padB[d], dil = g.dil[d];
      int64_t k0 = start < 0 ? (-start + dil - 1) / dil : 0;
      int64_t lim = g.in[d] - start; // positions start + k*dil < in
      int64_t k1 = lim <= 0 ? 0 : std::min(g.k[d], (lim + dil - 1) / dil);
      int64_t limPad = g.in[d] + g.padE[d] - start;
      padded[d][oc] = limPad <= 0 ? 0 : std::min(g.k[d], (limPad + dil - 1) / dil);
      count[d][oc] = std::max<int64_t>(0, k1 - k0);
      first[d][oc] = start + k0 * dil;
    }
  }
}

} // namespace hpcrt

namespace {

/// 2-D pooling as two 1-D passes (the windows are rectangles): along H
/// into `rows` (one row of the input width per output row; contiguous, so
/// the loops vectorize), then along W. `combine` is max or +, in the
/// accumulator type A; out[0] x out[1] results are left in `out`.
template <typename A, typename T, typename F>
void separablePool2d(const PoolGeom &g, const WindowTable &w, const T *xp, A init, F combine,
                     A *rows, A *out) {
  int64_t W = g.in[1], OH = g.out[0], OW = g.out[1];
  int64_t sw = g.stride[1], dw = g.dil[1], kw = g.k[1], dh = g.dil[0];
  for (int64_t oh = 0; oh < OH; ++oh) {
    A *t = rows + oh * W;
    int64_t hc = w.count[0][oh], f = w.first[0][oh];
    if (hc == 0) {
      std::fill(t, t + W, init);
      continue;
    }
    const T *x0 = xp + f * W;
    for (int64_t i = 0; i < W; ++i)
      t[i] = static_cast<A>(ld(x0, i));
    for (int64_t a = 1; a < hc; ++a) {
      const T *xa = xp + (f + a * dh) * W;
      for (int64_t i = 0; i < W; ++i)
        t[i] = combine(t[i], static_cast<A>(ld(xa, i)));
    }
  }
  // Output columns whose window lies fully inside the input: a contiguous
  // range [lo, hi), where the taps are a fixed pattern.
  int64_t lo = 0, hi = 0;
  for (int64_t ow = 0; ow < OW; ++ow)
    if (w.count[1][ow] == kw && w.first[1][ow] == ow * sw - g.padB[1]) {
      if (hi == lo)
        lo = ow;
      hi = ow + 1;
    }
  for (int64_t oh = 0; oh < OH; ++oh) {
    const A *t = rows + oh * W;
    A *o = out + oh * OW;
    for (int64_t ow = 0; ow < OW; ++ow) {
      if (ow == lo && hi > lo) {
        const A *base = t + (lo * sw - g.padB[1]); // column lo's first tap
        A *q = o + lo;
        int64_t n = hi - lo;
        if (sw == 2 && kw == 2 && dw == 1) { // constant strides vectorize
          for (int64_t j = 0; j < n; ++j)
            q[j] = combine(base[2 * j], base[2 * j + 1]);
        } else if (sw == 1) {
          for (int64_t j = 0; j < n; ++j)
            q[j] = base[j];
          for (int64_t b = 1; b < kw; ++b)
            for (int64_t j = 0; j < n; ++j)
              q[j] = combine(q[j], base[j + b * dw]);
        } else {
          for (int64_t j = 0; j < n; ++j) {
            A a = base[j * sw];
            for (int64_t b = 1; b < kw; ++b)
              a = combine(a, base[j * sw + b * dw]);
            q[j] = a;
          }
        }
        ow = hi - 1;
        continue;
      }
      A a = init;
      for (int64_t b = 0, f = w.first[1][ow]; b < w.count[1][ow]; ++b)
        a = combine(a, t[f + b * dw]);
      o[ow] = a;
    }
  }
}

/// Whether any of n elements is a NaN (branch-free, vectorizes for f32).
template <typename T> bool anyNaN(const T *p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
#ifdef HPCRT_X86_SIMD
    if (simdLevel() == 2)
      return avx512::anyNaNRow(p, n);
    if (simdLevel() == 1)
      return avx2::anyNaNRow(p, n);
#endif
    uint32_t acc = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u;
      memcpy(&u, p + i, 4);
      acc |= static_cast<int32_t>(u & 0x7fffffffu) > 0x7f800000;
    }
    return acc != 0;
  } else {
    bool nan = false;
    for (int64_t i = 0; i < n; ++i)
      nan |= ld(p, i) != ld(p, i);
    return nan;
  }
}

} // namespace

namespace {

namespace dn = ::dnnl;

/// Work per window tap of oneDNN's pooling in onednn::threadsFor's units
/// (flops at ~50 GFLOP/s per core): ResNet-18's 3x3 max_pool of 64x112x112
/// (1.8M taps) takes 0.37 ms on one core of the AMX Xeon, ~10 units a tap.
/// Counted per input element it stayed on one thread, and took 0.33 ms
/// with two cores available.
constexpr double kPoolWorkPerTap = 10;

/// Pooling over a blocked-layout x [N, C, H, W] on oneDNN (the own kernels
/// read plain tensors): max over the windows, or the average over the whole
/// plane into a [N, C, 1, 1] result (whose bytes are the same in both
/// layouts, C being a multiple of the block). The right paddings come from
/// the output size, so ceil_mode fits; max pooling never reads them.
void poolBlocked(OpCall &c, const Tensor &x, Tensor &y, bool isMax, const PoolGeom &g) {
  using onednn::dims;
  if (!x.blocked || (isMax && !y.blocked) || g.r != 2)
    fail("pooling: a blocked input needs a 2-D pooling with a blocked result");
  dims src = {x.shape[0], x.shape[1], g.in[0], g.in[1]};
  dims dst = {y.shape[0], y.shape[1], g.out[0], g.out[1]};
  dims kernel = {g.k[0], g.k[1]}, strides = {g.stride[0], g.stride[1]};
  dims padL = {g.padB[0], g.padB[1]}, padR(2);
  for (int d = 0; d < 2; ++d) {
    if (g.dil[d] != 1)
      fail("pooling: a blocked input needs dilations of 1");
    padR[d] = std::max<int64_t>(0, (g.out[d] - 1) * g.stride[d] + g.k[d] - g.in[d] - g.padB[d]);
  }
  onednn::Key key(isMax ? "max_pool" : "avg_pool");
  key << x << y << kernel << strides << padL << padR;
  double work = kPoolWorkPerTap * static_cast<double>(y.numel) * static_cast<double>(g.kSize);
  onednn::Primitive &p = onednn::primitiveFor(c, key, work, [&] {
    auto alg = isMax ? dn::algorithm::pooling_max : dn::algorithm::pooling_avg_exclude_padding;
    dn::pooling_forward::desc d(dn::prop_kind::forward_inference, alg,
                                onednn::activationDesc(c.ctx, true, src, onednn::dt::f32),
                                onednn::activationDesc(c.ctx, true, dst, onednn::dt::f32), strides,
                                kernel, padL, padR);
    dn::pooling_forward::primitive_desc pd(d, onednn::baseAttr(), onednn::engine(), true);
    if (!pd)
      return onednn::Made{};
    onednn::Made m{pd, dn::pooling_forward(pd), {}};
    m.args = {{DNNL_ARG_SRC, pd.src_desc()}, {DNNL_ARG_DST, pd.dst_desc()}};
    return m;
  });
  if (!p.available)
    fail("pooling: oneDNN has no pooling for this blocked-layout case");
  if (!c.setup)
    p.execute(c.ctx, {{DNNL_ARG_SRC, x.data}, {DNNL_ARG_DST, y.data}});
}

} // namespace

HPCRT_STATEFUL_KERNEL(max_pool) {
  c.expect(1, 1);
  bool ceilMode = c.b();
  std::vector<int64_t> dil = c.ivec(), kernel = c.ivec(), pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "max_pool");
  PoolGeom g = poolGeom(x, y, ceilMode, dil, kernel, pads, strides);
  if (x.blocked || y.blocked) {
    poolBlocked(c, x, y, true, g);
    return;
  }
  if (c.setup)
    return;
  dispatch<kNum>(x.dtype, "max_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = C_t<T>;
    const T *p = x.as<T>();
    T *q = y.as<T>();
    if constexpr (std::is_floating_point_v<C>) {
      if (g.r == 2) {
        WindowTable w(g);
        C lowest = -std::numeric_limits<C>::infinity();
        std::atomic<bool> done{true};
        parallelFor(g.planes, 0.5 * static_cast<double>(g.inSize), [&](int64_t p0, int64_t p1) {
          std::vector<C> rows(static_cast<size_t>(g.out[0] * g.in[1])),
              out(static_cast<size_t>(g.outSize));
          for (int64_t plane = p0; plane < p1; ++plane) {
            const T *xp = p + plane * g.inSize;
            if (anyNaN(xp, g.inSize)) { // NaN propagates: the per-window loop below
              done.store(false, std::memory_order_relaxed);
              continue;
            }
            separablePool2d<C>(g, w, xp, lowest, [](C a, C b) { return b > a ? b : a; },
                               rows.data(), out.data());
            for (int64_t i = 0; i < g.outSize; ++i)
              st(q, plane * g.outSize + i, out[i]);
          }
        });
        if (done.load())
          return;
      }
    }
    forEachWindow(g, [&](int64_t plane, int64_t o, int64_t, int64_t, auto &&window) {
      const T *xp = p + plane * g.inSize;
      C lowest = std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                             : std::numeric_limits<C>::lowest();
      C best = lowest;
      bool nan = false;
      // Branch-free (a data-dependent branch mispredicts half the time).
      auto isNaN = [](C v) {
        if constexpr (std::is_floating_point_v<C>)
          return v != v;
        else
          return false;
      };
      window([&](int64_t off) {
        C v = ld(xp, off);
        best = v > best ? v : best;
        nan |= isNaN(v);
      });
      if (nan) { // the window's first NaN
        best = lowest;
        window([&](int64_t off) {
          C v = ld(xp, off);
          if (v > best || isNaN(v))
            best = isNaN(best) ? best : v;
        });
      }
      st(q, plane * g.outSize + o, best);
    });
  });
}

HPCRT_KERNEL(avg_pool) {
  c.expect(1, 1);
  bool ceilMode = c.b(), includePad = c.b();
  std::vector<int64_t> dil = c.ivec(), kernel = c.ivec(), pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "avg_pool");
  PoolGeom g = poolGeom(x, y, ceilMode, dil, kernel, pads, strides);
  dispatch<kF>(x.dtype, "avg_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *p = x.as<T>();
    T *q = y.as<T>();
    if (g.r == 2) {
      // Sums in the compute type (float for f32/f16/bf16: a window has few
      // taps), except f64.
      using A = C_t<T>;
      WindowTable w(g);
      // Each output's divisor (0 gives 0 / 0 = NaN, an empty window).
      std::vector<A> count(static_cast<size_t>(g.outSize));
      for (int64_t oh = 0, o = 0; oh < g.out[0]; ++oh)
        for (int64_t ow = 0; ow < g.out[1]; ++ow, ++o)
          count[o] = static_cast<A>(includePad ? w.padded[0][oh] * w.padded[1][ow]
                                               : w.count[0][oh] * w.count[1][ow]);
      parallelFor(g.planes, 0.5 * static_cast<double>(g.inSize), [&](int64_t p0, int64_t p1) {
        std::vector<A> rows(static_cast<size_t>(g.out[0] * g.in[1])),
            out(static_cast<size_t>(g.outSize));
        for (int64_t plane = p0; plane < p1; ++plane) {
          separablePool2d<A>(g, w, p + plane * g.inSize, A(0), [](A a, A b) { return a + b; },
                             rows.data(), out.data());
          T *qp = q + plane * g.outSize;
          for (int64_t o = 0; o < g.outSize; ++o)
            st(qp, o, out[o] / count[o]);
        }
      });
      return;
    }
    forEachWindow(g, [&](int64_t plane, int64_t o, int64_t valid, int64_t padded,
                         auto &&window) {
      const T *xp = p + plane * g.inSize;
      double sum = 0;
      window([&](int64_t off) { sum += ld(xp, off); });
      int64_t count = includePad ? padded : valid;
      st(q, plane * g.outSize + o, count ? sum / static_cast<double>(count) : std::nan(""));
    });
  });
}

namespace {
template <bool Max> void globalPool(OpCall &c, const char *what) {
  c.expect(1, 1);
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, what);
  if (x.rank() < 3)
    fail(std::string(what) + " needs an [N, C, D1...] input");
  std::vector<int64_t> expect = {x.shape[0], x.shape[1]};
  expect.resize(x.shape.size(), 1);
  checkShape(y, expect, "result");
  int64_t planes = x.shape[0] * x.shape[1], inner = x.numel / std::max<int64_t>(planes, 1);
  dispatch<kF>(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *p = x.as<T>();
    T *q = y.as<T>();
    parallelFor(planes, static_cast<double>(inner), [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        double acc = Max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t i = 0; i < inner; ++i) {
          double v = ld(p, pl * inner + i);
          if (Max)
            acc = (acc != acc || acc > v) ? acc : v;
          else
            acc += v;
        }
        st(q, pl, Max ? acc : acc / static_cast<double>(inner));
      }
    });
  });
}
} // namespace

HPCRT_STATEFUL_KERNEL(global_avg_pool) {
  Tensor &x = c.in(0);
  if (x.blocked) {
    c.expect(1, 1);
    Tensor &y = c.out();
    checkSameDtype(x, y, "global_avg_pool");
    checkShape(y, {x.shape[0], x.shape[1], 1, 1}, "result");
    if (y.blocked)
      fail("global_avg_pool: the [N, C, 1, 1] result is plain");
    PoolGeom g;
    g.r = 2;
    g.in = {x.shape[2], x.shape[3]};
    g.out = {1, 1};
    g.k = g.in;
    g.stride = {1, 1};
    g.dil = {1, 1};
    g.padB = {0, 0};
    poolBlocked(c, x, y, false, g);
    return;
  }
  if (c.setup)
    return;
  globalPool<false>(c, "global_avg_pool");
}
HPCRT_KERNEL(global_max_pool) { globalPool<true>(c, "global_max_pool"); }

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

namespace {

/// x_original for output coordinate `o` (ONNX reference _interpolate_1d_with_x).
double originalCoord(const std::string &mode, double o, double scale, int64_t inLen,
                     int64_t outLen) {
  double outWidth = scale * static_cast<double>(inLen);
  if (mode == "align_corners")
    return outWidth == 1.0 ? 0.0 : o * static_cast<double>(inLen - 1) / (outWidth - 1.0);
  if (mode == "asymmetric")
    return o / scale;
  if (mode == "pytorch_half_pixel")
    return outWidth == 1.0 ? -0.5 : (o + 0.5) / scale - 0.5;
  if (mode == "half_pixel")
    return (o + 0.5) / scale - 0.5;
  if (mode == "tf_half_pixel_for_nn")
    return (o + 0.5) / scale;
  if (mode == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(outLen) / outWidth;
    double center = static_cast<double>(inLen) / 2.0;
    double offset = center * (1.0 - adjustment);
    return offset + (o + 0.5) / scale - 0.5;
  }
  fail("resize: unsupported coordinate_transformation_mode '" + mode + "'");
}

int64_t clampIndex(int64_t i, int64_t n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

} // namespace

HPCRT_KERNEL(resize) {
  c.expect(1, 1);
  // Attributes: coordinate_transformation_mode, mode, nearest_mode, scales, sizes.
  std::string ctm = c.s(), mode = c.s(), nearestMode = c.s();
  std::vector<double> scales = c.fvec();
  std::vector<int64_t> sizes = c.ivec();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "resize");
  int r = x.rank();
  if (static_cast<int>(scales.size()) != r || static_cast<int>(sizes.size()) != r)
    fail("resize: scales and sizes need one entry per dimension");
  checkShape(y, sizes, "result");
  bool linear = mode == "linear";
  if (!linear && mode != "nearest")
    fail("resize: unsupported mode '" + mode + "'");
  int nm = nearestMode == "round_prefer_floor" ? 0
           : nearestMode == "round_prefer_ceil" ? 1
           : nearestMode == "floor"             ? 2
           : nearestMode == "ceil"              ? 3
                                                : -1;
  if (nm < 0)
    fail("resize: unsupported nearest_mode '" + nearestMode + "'");
  if (y.numel == 0)
    return;
  if (x.numel == 0)
    fail("resize: empty input");
  // Per dimension and output coordinate: the two source indices and the
  // weight of the second.
  std::vector<std::vector<int64_t>> i0(r), i1(r);
  std::vector<std::vector<double>> w1(r);
  std::vector<int> linDims;
  for (int d = 0; d < r; ++d) {
    int64_t n = x.shape[d];
    if (!(scales[d] > 0))
      fail("resize: scales must be positive");
    bool any = false;
    for (int64_t o = 0; o < y.shape[d]; ++o) {
      double xo = originalCoord(ctm, static_cast<double>(o), scales[d], n, y.shape[d]);
      double fl = std::floor(xo);
      int64_t xi = static_cast<int64_t>(fl);
      double ratio = xo - fl;
      if (linear) {
        i0[d].push_back(clampIndex(xi, n));
        i1[d].push_back(clampIndex(xi + 1, n));
        w1[d].push_back(ratio);
        any = any || (ratio != 0 && i0[d].back() != i1[d].back());
      } else {
        int64_t pick = xi;
        if (ratio != 0) {
          bool up = nm == 0 ? ratio > 0.5 : nm == 1 ? ratio >= 0.5 : nm == 3;
          pick = up ? xi + 1 : xi;
        }
        i0[d].push_back(clampIndex(pick, n));
        i1[d].push_back(i0[d].back());
        w1[d].push_back(0.0);
      }
    }
    if (any)
      linDims.push_back(d);
  }
  std::vector<int64_t> xs = stridesOf(x.shape);
  // Rows of the innermost output dimension: the outer dims give a set of
  // (offset, weight) corners, the innermost one its two taps per element.
  int last = r - 1;
  bool lastLinear = !linDims.empty() && linDims.back() == last;
  std::vector<int> outerLin(linDims.begin(), linDims.end() - (lastLinear ? 1 : 0));
  int L = static_cast<int>(outerLin.size());
  if (L > 16)
    fail("resize: too many interpolated dimensions");
  int64_t W = y.shape[last], rows = y.numel / W;
  std::vector<int64_t> off0(W), off1(W);
  for (int64_t j = 0; j < W; ++j) {
    off0[j] = i0[last][j] * xs[last];
    off1[j] = i1[last][j] * xs[last];
  }
  const std::vector<double> &wl = w1[last];
  dispatch<kAll>(x.dtype, "resize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *p = x.as<T>();
    T *q = y.as<T>();
    double rowCost = static_cast<double>(W << (L + lastLinear));
    parallelFor(rows, rowCost, [&](int64_t row0, int64_t row1) {
    std::vector<int64_t> co(static_cast<size_t>(r));
    for (int64_t row = row0; row < row1; ++row) {
      int64_t rem = row, base = 0;
      for (int d = last - 1; d >= 0; --d) {
        co[d] = rem % y.shape[d];
        rem /= y.shape[d];
        base += i0[d][co[d]] * xs[d];
      }
      int64_t cOff[1 << 4];
      double cW[1 << 4];
      std::vector<int64_t> bigOff;
      std::vector<double> bigW;
      int64_t *co_ = cOff;
      double *cw_ = cW;
      if (L > 4) {
        bigOff.resize(size_t(1) << L);
        bigW.resize(size_t(1) << L);
        co_ = bigOff.data();
        cw_ = bigW.data();
      }
      int nc = 0;
      for (int corner = 0; corner < (1 << L); ++corner) {
        double w = 1;
        int64_t off = base;
        for (int l = 0; l < L; ++l) {
          int d = outerLin[l];
          double wd = w1[d][co[d]];
          if (corner & (1 << l)) {
            w *= wd;
            off += (i1[d][co[d]] - i0[d][co[d]]) * xs[d];
          } else {
            w *= 1.0 - wd;
          }
        }
        if (w != 0) {
          co_[nc] = off;
          cw_[nc++] = w;
        }
      }
      T *out = q + row * W;
      for (int64_t j = 0; j < W; ++j) {
        if (!lastLinear && nc == 1 && cw_[0] == 1.0) {
          out[j] = p[co_[0] + off0[j]];
          continue;
        }
        double acc = 0;
        for (int c = 0; c < nc; ++c) {
          double v = static_cast<double>(ld(p, co_[c] + off0[j]));
          if (lastLinear && wl[j] != 0)
            v += wl[j] * (static_cast<double>(ld(p, co_[c] + off1[j])) - v);
          acc += cw_[c] * v;
        }
        st(out, j, acc);
      }
    }
    });
  });
}
