//===- KernelsPool.cpp - pooling and resize --------------------------------===//
//
// N-d max/avg pooling (pads, dilations, ceil_mode, count_include_pad), the
// global pools, and Resize (nearest and multilinear) with the coordinate
// transforms of the ONNX reference implementation.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"

using namespace hpcrt;

namespace {

struct PoolGeom {
  int r = 0;
  std::vector<int64_t> in, out, k, stride, dil, padB, padE;
  int64_t inSize = 1, outSize = 1, kSize = 1, planes = 1;
};

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

/// Calls f(inputOffset) for each window position inside the input, and
/// returns the number of positions inside the padded extent.
template <typename F> int64_t forWindow(const PoolGeom &g, int64_t o, int64_t &valid, F &&f) {
  int64_t first[8], cnt[8], istr[8];
  int64_t padded = 1, rem = o, mult = 1;
  valid = 1;
  for (int d = g.r - 1; d >= 0; --d) {
    int64_t oc = rem % g.out[d];
    rem /= g.out[d];
    int64_t start = oc * g.stride[d] - g.padB[d], dil = g.dil[d];
    int64_t k0 = start < 0 ? (-start + dil - 1) / dil : 0;
    int64_t lim = g.in[d] - start; // positions start + k*dil < in
    int64_t k1 = lim <= 0 ? 0 : std::min(g.k[d], (lim + dil - 1) / dil);
    int64_t limPad = g.in[d] + g.padE[d] - start;
    padded *= limPad <= 0 ? 0 : std::min(g.k[d], (limPad + dil - 1) / dil);
    cnt[d] = std::max<int64_t>(0, k1 - k0);
    first[d] = start + k0 * dil;
    istr[d] = mult;
    mult *= g.in[d];
    valid *= cnt[d];
  }
  if (valid == 0)
    return padded;
  if (g.r == 2) {
    int64_t s0 = g.dil[0] * istr[0], s1 = g.dil[1];
    int64_t base = first[0] * istr[0] + first[1];
    for (int64_t a = 0; a < cnt[0]; ++a)
      for (int64_t b = 0; b < cnt[1]; ++b)
        f(base + a * s0 + b * s1);
    return padded;
  }
  int64_t j[8] = {};
  for (int64_t n = 0; n < valid; ++n) {
    int64_t off = 0;
    for (int d = 0; d < g.r; ++d)
      off += (first[d] + j[d] * g.dil[d]) * istr[d];
    f(off);
    for (int d = g.r - 1; d >= 0; --d) {
      if (++j[d] < cnt[d])
        break;
      j[d] = 0;
    }
  }
  return padded;
}

} // namespace

HPCRT_KERNEL(max_pool) {
  c.expect(1, 1);
  bool ceilMode = c.b();
  std::vector<int64_t> dil = c.ivec(), kernel = c.ivec(), pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "max_pool");
  PoolGeom g = poolGeom(x, y, ceilMode, dil, kernel, pads, strides);
  dispatch<kNum>(x.dtype, "max_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = C_t<T>;
    const T *p = x.as<T>();
    T *q = y.as<T>();
#pragma omp parallel for if (parallelWorth(g.planes * g.outSize * g.kSize))
    for (int64_t r = 0; r < g.planes * g.outSize; ++r) {
      int64_t plane = r / g.outSize, o = r % g.outSize, valid;
      const T *xp = p + plane * g.inSize;
      C best = std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                           : std::numeric_limits<C>::lowest();
      forWindow(g, o, valid, [&](int64_t off) {
        C v = ld(xp, off);
        if (v > best || v != v)
          best = best != best ? best : v;
      });
      st(q, r, best);
    }
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
#pragma omp parallel for if (parallelWorth(g.planes * g.outSize * g.kSize))
    for (int64_t r = 0; r < g.planes * g.outSize; ++r) {
      int64_t plane = r / g.outSize, o = r % g.outSize, valid;
      const T *xp = p + plane * g.inSize;
      double sum = 0;
      int64_t padded = forWindow(g, o, valid, [&](int64_t off) { sum += ld(xp, off); });
      int64_t count = includePad ? padded : valid;
      st(q, r, count ? sum / static_cast<double>(count) : std::nan(""));
    }
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
#pragma omp parallel for if (parallelWorth(x.numel))
    for (int64_t pl = 0; pl < planes; ++pl) {
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
}
} // namespace

HPCRT_KERNEL(global_avg_pool) { globalPool<false>(c, "global_avg_pool"); }
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
#pragma omp parallel for if (parallelWorth(y.numel << (L + lastLinear)))
    for (int64_t row = 0; row < rows; ++row) {
      std::vector<int64_t> co(static_cast<size_t>(r));
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
}
