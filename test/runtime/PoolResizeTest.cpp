//===- PoolResizeTest.cpp - pooling and resize ------------------------------===//
//
// Expected values are the ONNX backend tests' (maxpool_2d_ceil,
// averagepool_2d_ceil, resize_upsample_scales_linear[_align_corners],
// resize_downsample_scales_nearest, ..._half_pixel_symmetric) or derived by
// hand from the ONNX formulas.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

using namespace hpcrt;
using namespace hpcrt::test;

namespace {
Val sixteen() {
  Val x{HPCRT_F32, {1, 1, 4, 4}, {}};
  for (int i = 1; i <= 16; ++i)
    x.v.push_back(i);
  return x;
}

std::vector<int64_t> poolAttrs(bool ceil, std::vector<int64_t> dil, std::vector<int64_t> k,
                               std::vector<int64_t> pads, std::vector<int64_t> strides,
                               int includePad = -1) {
  std::vector<int64_t> ia = {ceil};
  if (includePad >= 0)
    ia.push_back(includePad);
  for (auto *v : {&dil, &k, &pads, &strides}) {
    ia.push_back(static_cast<int64_t>(v->size()));
    ia.insert(ia.end(), v->begin(), v->end());
  }
  return ia;
}

/// Resize attributes: sattrs (ctm, mode, nearest_mode), iattrs (#scales,
/// #sizes, sizes...), fattrs (scales...).
Call resizeCall(const Val &x, std::vector<int64_t> sizes, std::vector<double> scales,
                const std::string &mode, const std::string &ctm,
                const std::string &nearest = "round_prefer_floor") {
  std::vector<int64_t> ia = {static_cast<int64_t>(scales.size()), static_cast<int64_t>(sizes.size())};
  ia.insert(ia.end(), sizes.begin(), sizes.end());
  return Call{hpcrt_resize, {x}, {{x.dtype, sizes}}, ia, scales, {ctm, mode, nearest}};
}
} // namespace

TEST(MaxPool, CeilModeAndPads) {
  Val x = sixteen();
  EXPECT_EQ(run1({hpcrt_max_pool, {x}, {{HPCRT_F32, {1, 1, 2, 2}}},
                  poolAttrs(true, {1, 1}, {3, 3}, {0, 0, 0, 0}, {2, 2})}),
            (std::vector<double>{11, 12, 15, 16}));
  EXPECT_EQ(run1({hpcrt_max_pool, {x}, {{HPCRT_F32, {1, 1, 1, 1}}},
                  poolAttrs(false, {1, 1}, {3, 3}, {0, 0, 0, 0}, {2, 2})}),
            (std::vector<double>{11}));
  // Dilation 2, pads 1: windows {-1,1}, {1,3}.
  EXPECT_EQ(run1({hpcrt_max_pool, {x}, {{HPCRT_F32, {1, 1, 2, 2}}},
                  poolAttrs(false, {2, 2}, {2, 2}, {1, 1, 1, 1}, {2, 2})}),
            (std::vector<double>{6, 8, 14, 16}));
  EXPECT_EQ(run1({hpcrt_max_pool, {val(HPCRT_U8, {1, 1, 3}, {1, 200, 3})}, {{HPCRT_U8, {1, 1, 2}}},
                  poolAttrs(false, {1}, {2}, {0, 0}, {1})}),
            (std::vector<double>{200, 200}));
}

TEST(AvgPool, CeilModeAndCountIncludePad) {
  Val x = sixteen();
  EXPECT_EQ(run1({hpcrt_avg_pool, {x}, {{HPCRT_F32, {1, 1, 2, 2}}},
                  poolAttrs(true, {1, 1}, {3, 3}, {0, 0, 0, 0}, {2, 2}, 0)}),
            (std::vector<double>{6, 7.5, 12, 13.5}));
  Val y = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto inc = run1({hpcrt_avg_pool, {y}, {{HPCRT_F32, {1, 1, 4, 4}}},
                   poolAttrs(false, {1, 1}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1)});
  EXPECT_EQ(inc[0], 0.25);
  EXPECT_EQ(inc[5], 3);
  auto exc = run1({hpcrt_avg_pool, {y}, {{HPCRT_F32, {1, 1, 4, 4}}},
                   poolAttrs(false, {1, 1}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0)});
  EXPECT_EQ(exc[0], 1);
  EXPECT_EQ(exc[1], 1.5);
  // ceil_mode: a window running past the end padding counts only up to it.
  Val z = f32({1, 1, 5}, {1, 2, 3, 4, 5});
  EXPECT_EQ(run1({hpcrt_avg_pool, {z}, {{HPCRT_F32, {1, 1, 3}}}, poolAttrs(true, {1}, {2}, {0, 0}, {2}, 1)}),
            (std::vector<double>{1.5, 3.5, 5}));
  EXPECT_EQ(run1({hpcrt_avg_pool, {z}, {{HPCRT_F32, {1, 1, 3}}}, poolAttrs(true, {1}, {2}, {0, 1}, {2}, 1)}),
            (std::vector<double>{1.5, 3.5, 2.5}));
  EXPECT_EQ(run1({hpcrt_avg_pool, {z}, {{HPCRT_F32, {1, 1, 3}}}, poolAttrs(true, {1}, {2}, {0, 1}, {2}, 0)}),
            (std::vector<double>{1.5, 3.5, 5}));
  // The result size must be the ceil_mode rule's.
  Result r = run({hpcrt_avg_pool, {z}, {{HPCRT_F32, {1, 1, 3}}}, poolAttrs(false, {1}, {2}, {0, 0}, {2}, 0)});
  EXPECT_NE(r.error.find("should be 2"), std::string::npos) << r.error;
}

TEST(GlobalPool, MeanAndMax) {
  Val x = f32({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, 5});
  EXPECT_EQ(run1({hpcrt_global_avg_pool, {x}, {{HPCRT_F32, {1, 2, 1, 1}}}}), (std::vector<double>{2.5, -0.25}));
  EXPECT_EQ(run1({hpcrt_global_max_pool, {x}, {{HPCRT_F32, {1, 2, 1, 1}}}}), (std::vector<double>{4, 5}));
}

TEST(Resize, LinearHalfPixelAndAlignCorners) {
  Val x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  expectNear(run1(resizeCall(x, {1, 1, 4, 4}, {1, 1, 2, 2}, "linear", "half_pixel")),
             {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  expectNear(run1(resizeCall(x, {1, 1, 4, 4}, {1, 1, 2, 2}, "linear", "align_corners")),
             {1, 4.0 / 3, 5.0 / 3, 2, 5.0 / 3, 2, 7.0 / 3, 8.0 / 3, 7.0 / 3, 8.0 / 3, 3, 10.0 / 3, 3,
              10.0 / 3, 11.0 / 3, 4});
  expectNear(run1(resizeCall(x, {1, 1, 4, 5}, {1, 1, 2.3, 2.94}, "linear", "half_pixel_symmetric")),
             {1, 1.15986395, 1.5, 1.84013605, 2, 1.56521738, 1.72508133, 2.06521738, 2.40535343,
              2.56521738, 2.43478262, 2.59464657, 2.93478262, 3.27491867, 3.43478262, 3, 3.15986395,
              3.5, 3.84013605, 4});
}

TEST(Resize, NearestModes) {
  Val d = f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  expectNear(run1(resizeCall(d, {1, 1, 1, 2}, {1, 1, 0.6, 0.6}, "nearest", "half_pixel")), {1, 3});
  Val x = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  auto up = [&](const std::string &ctm, const std::string &nm) {
    return run1(resizeCall(x, {1, 1, 1, 8}, {1, 1, 1, 2}, "nearest", ctm, nm));
  };
  EXPECT_EQ(up("asymmetric", "round_prefer_ceil"), (std::vector<double>{1, 2, 2, 3, 3, 4, 4, 4}));
  EXPECT_EQ(up("asymmetric", "round_prefer_floor"), (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(up("asymmetric", "floor"), (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(up("asymmetric", "ceil"), (std::vector<double>{1, 2, 2, 3, 3, 4, 4, 4}));
  EXPECT_EQ(up("tf_half_pixel_for_nn", "round_prefer_floor"), (std::vector<double>{1, 2, 2, 3, 3, 4, 4, 4}));
  EXPECT_EQ(up("half_pixel", "round_prefer_floor"), (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4}));
  // Integer data resizes too.
  Val xi = val(HPCRT_I64, {1, 1, 1, 4}, {1, 2, 3, 4});
  EXPECT_EQ(run1(resizeCall(xi, {1, 1, 1, 8}, {1, 1, 1, 2}, "nearest", "asymmetric", "floor")),
            (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4}));
}

TEST(Resize, PytorchHalfPixelToOneElement) {
  Val x = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  expectNear(run1(resizeCall(x, {1, 1, 1, 1}, {1, 1, 1, 0.25}, "linear", "pytorch_half_pixel")), {1});
  expectNear(run1(resizeCall(x, {1, 1, 1, 1}, {1, 1, 1, 0.25}, "linear", "half_pixel")), {2.5});
}

TEST(Resize, MultilinearOverThreeDimensions) {
  Val x = randomVal(HPCRT_F32, {1, 2, 3, 4, 5}, 61);
  std::vector<int64_t> sizes = {1, 2, 5, 3, 7};
  std::vector<double> scales;
  for (int d = 0; d < 5; ++d)
    scales.push_back(static_cast<double>(sizes[d]) / x.shape[d]);
  // Reference: the product of per-dimension 2-tap weights (half_pixel).
  std::vector<int64_t> ys = stridesOf(sizes), xs = stridesOf(x.shape);
  std::vector<double> want;
  for (int64_t e = 0; e < numElements(sizes); ++e) {
    std::vector<std::vector<std::pair<int64_t, double>>> taps(5);
    for (int d = 0; d < 5; ++d) {
      int64_t o = (e / ys[d]) % sizes[d], n = x.shape[d];
      double c = (o + 0.5) / scales[d] - 0.5, f = std::floor(c);
      auto clampI = [n](int64_t i) { return std::min(std::max<int64_t>(i, 0), n - 1); };
      taps[d] = {{clampI(static_cast<int64_t>(f)), 1 - (c - f)}, {clampI(static_cast<int64_t>(f) + 1), c - f}};
    }
    double acc = 0;
    for (int m = 0; m < 32; ++m) {
      double w = 1;
      int64_t off = 0;
      for (int d = 0; d < 5; ++d) {
        auto t = taps[d][(m >> d) & 1];
        w *= t.second;
        off += t.first * xs[d];
      }
      acc += w * x.v[off];
    }
    want.push_back(acc);
  }
  expectNear(run1(resizeCall(x, sizes, scales, "linear", "half_pixel")), want, 1e-5, 1e-6);
}
