//===- NormReduceTest.cpp - softmax, norms, reductions, arg reductions -----===//

#include "RuntimeTestUtils.h"

using namespace hpcrt;
using namespace hpcrt::test;

namespace {

/// Softmax along `axis` of a row-major tensor, in double.
std::vector<double> softmaxRef(const Val &x, int axis, bool log) {
  int64_t outer = 1, inner = 1, n = x.shape[axis];
  for (int d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  std::vector<double> r(x.v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double mx = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; ++j)
        mx = std::max(mx, x.v[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j)
        s += std::exp(x.v[(o * n + j) * inner + i] - mx);
      for (int64_t j = 0; j < n; ++j) {
        double v = x.v[(o * n + j) * inner + i] - mx;
        r[(o * n + j) * inner + i] = log ? v - std::log(s) : std::exp(v) / s;
      }
    }
  return r;
}

} // namespace

TEST(Softmax, EveryAxisAndNegativeAxis) {
  Val x = randomVal(HPCRT_F32, {2, 3, 4}, 41);
  for (double &v : x.v)
    v *= 20; // large logits: needs the max subtraction
  for (int axis = 0; axis < 3; ++axis) {
    expectNear(run1({hpcrt_softmax, {x}, {{HPCRT_F32, {2, 3, 4}}}, {axis}}), softmaxRef(x, axis, false));
    expectNear(run1({hpcrt_log_softmax, {x}, {{HPCRT_F32, {2, 3, 4}}}, {axis}}), softmaxRef(x, axis, true),
               1e-5, 1e-5);
  }
  expectNear(run1({hpcrt_softmax, {x}, {{HPCRT_F32, {2, 3, 4}}}, {-1}}), softmaxRef(x, 2, false));
  Val big = f32({3}, {1000, 1000, -INFINITY});
  expectNear(run1({hpcrt_softmax, {big}, {{HPCRT_F32, {3}}}, {0}}), {0.5, 0.5, 0});
}

TEST(LayerNorm, TrailingAxesWithBroadcastScale) {
  Val x = randomVal(HPCRT_F32, {2, 3, 4}, 42);
  Val scale = randomVal(HPCRT_F32, {4}, 43), bias = randomVal(HPCRT_F32, {3, 1}, 44);
  std::vector<double> want(x.v.size());
  for (int o = 0; o < 2; ++o) { // axis = 1: statistics over 12 elements
    double mean = 0, var = 0;
    for (int j = 0; j < 12; ++j)
      mean += x.v[o * 12 + j] / 12;
    for (int j = 0; j < 12; ++j)
      var += (x.v[o * 12 + j] - mean) * (x.v[o * 12 + j] - mean) / 12;
    for (int j = 0; j < 12; ++j)
      want[o * 12 + j] = (x.v[o * 12 + j] - mean) / std::sqrt(var + 1e-5) * scale.v[j % 4] + bias.v[j / 4];
  }
  // iattrs: axis; fattrs: epsilon.
  expectNear(run1({hpcrt_layer_norm, {x, scale, bias}, {{HPCRT_F32, {2, 3, 4}}}, {1}, {1e-5}}), want, 1e-4,
             1e-5);
  // Without bias, last axis (-1).
  std::vector<double> want2(x.v.size());
  for (int o = 0; o < 6; ++o) {
    double mean = 0, var = 0;
    for (int j = 0; j < 4; ++j)
      mean += x.v[o * 4 + j] / 4;
    for (int j = 0; j < 4; ++j)
      var += (x.v[o * 4 + j] - mean) * (x.v[o * 4 + j] - mean) / 4;
    for (int j = 0; j < 4; ++j)
      want2[o * 4 + j] = (x.v[o * 4 + j] - mean) / std::sqrt(var + 1e-3) * scale.v[j];
  }
  expectNear(run1({hpcrt_layer_norm, {x, scale, std::nullopt}, {{HPCRT_F32, {2, 3, 4}}}, {-1}, {1e-3}}),
             want2, 1e-4, 1e-5);
}

TEST(RMSNorm, LastAxis) {
  Val x = randomVal(HPCRT_F32, {3, 5}, 45), scale = randomVal(HPCRT_F32, {5}, 46);
  std::vector<double> want;
  for (int o = 0; o < 3; ++o) {
    double ms = 0;
    for (int j = 0; j < 5; ++j)
      ms += x.v[o * 5 + j] * x.v[o * 5 + j] / 5;
    for (int j = 0; j < 5; ++j)
      want.push_back(x.v[o * 5 + j] / std::sqrt(ms + 1e-6) * scale.v[j]);
  }
  expectNear(run1({hpcrt_rms_norm, {x, scale}, {{HPCRT_F32, {3, 5}}}, {-1}, {1e-6}}), want, 1e-4, 1e-5);
}

TEST(BatchNorm, PerChannel) {
  Val x = randomVal(HPCRT_F32, {2, 3, 2, 2}, 47);
  Val s = f32({3}, {1, 2, 3}), b = f32({3}, {0, 1, -1}), m = f32({3}, {0.1, -0.2, 0.3}),
      v = f32({3}, {1, 0.5, 2});
  std::vector<double> want;
  for (int i = 0; i < 24; ++i) {
    int c = (i / 4) % 3;
    want.push_back((x.v[i] - m.v[c]) / std::sqrt(v.v[c] + 1e-5) * s.v[c] + b.v[c]);
  }
  expectNear(run1({hpcrt_batch_norm, {x, s, b, m, v}, {{HPCRT_F32, {2, 3, 2, 2}}}, {}, {1e-5}}), want,
             1e-5, 1e-5);
}

TEST(Reduce, AxesAndKeepdims) {
  Val x = randomVal(HPCRT_F32, {2, 3, 4}, 48);
  std::vector<double> sum(3, 0), mx(3, -INFINITY), mn(3, INFINITY);
  for (int i = 0; i < 24; ++i) {
    int c = (i / 4) % 3;
    sum[c] += x.v[i];
    mx[c] = std::max(mx[c], x.v[i]);
    mn[c] = std::min(mn[c], x.v[i]);
  }
  // iattrs: axes (count, values), keepdims.
  expectNear(run1({hpcrt_reduce_sum, {x}, {{HPCRT_F32, {1, 3, 1}}}, {2, 0, 2, 1}}), sum);
  expectNear(run1({hpcrt_reduce_sum, {x}, {{HPCRT_F32, {3}}}, {2, 0, 2, 0}}), sum);
  std::vector<double> mean = sum;
  for (double &m : mean)
    m /= 8;
  expectNear(run1({hpcrt_reduce_mean, {x}, {{HPCRT_F32, {3}}}, {2, 0, 2, 0}}), mean);
  expectNear(run1({hpcrt_reduce_max, {x}, {{HPCRT_F32, {1, 3, 1}}}, {2, 0, 2, 1}}), mx);
  expectNear(run1({hpcrt_reduce_min, {x}, {{HPCRT_F32, {3}}}, {2, 0, 2, 0}}), mn);
  EXPECT_EQ(run1({hpcrt_reduce_prod, {val(HPCRT_I32, {2, 2}, {2, 3, 4, 5})}, {{HPCRT_I32, {2}}}, {1, 1, 0}}),
            (std::vector<double>{6, 20}));
  auto nanMax = run1({hpcrt_reduce_max, {f32({3}, {1, NAN, 2})}, {{HPCRT_F32, {}}}, {1, 0, 0}});
  EXPECT_TRUE(std::isnan(nanMax[0]));
  EXPECT_EQ(run1({hpcrt_reduce_mean, {val(HPCRT_I64, {3}, {1, 2, 4})}, {{HPCRT_I64, {1}}}, {1, 0, 1}}),
            (std::vector<double>{2}));
}

TEST(Reduce, ManyElementsOneOutput) {
  int64_t n = 300000;
  Val x{HPCRT_F32, {n}, std::vector<double>(static_cast<size_t>(n))};
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    x.v[i] = static_cast<float>((i % 97) * 0.01 - 0.3);
    want += x.v[i];
  }
  expectNear(run1({hpcrt_reduce_sum, {x}, {{HPCRT_F32, {1}}}, {1, 0, 1}}), {want}, 1e-5, 1e-3);
}

TEST(ArgMax, SelectLastIndexAndKeepdims) {
  Val x = f32({2, 4}, {1, 5, 5, 2, 7, 0, 7, 7});
  // iattrs: axis, keepdims, select_last_index.
  EXPECT_EQ(run1({hpcrt_argmax, {x}, {{HPCRT_I64, {2}}}, {1, 0, 0}}), (std::vector<double>{1, 0}));
  EXPECT_EQ(run1({hpcrt_argmax, {x}, {{HPCRT_I64, {2, 1}}}, {-1, 1, 1}}), (std::vector<double>{2, 3}));
  EXPECT_EQ(run1({hpcrt_argmin, {x}, {{HPCRT_I64, {1, 4}}}, {0, 1, 0}}), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(run1({hpcrt_argmin, {x}, {{HPCRT_I64, {2}}}, {1, 0, 1}}), (std::vector<double>{0, 1}));
}

TEST(Reduce, ContiguousKeptDimensions) {
  // Reducing leading axes while the innermost (contiguous) one is kept.
  Val x = randomVal(HPCRT_F32, {5, 6, 40}, 49);
  std::vector<double> sum(40, 0), mx(40, -INFINITY);
  for (int i = 0; i < 5 * 6 * 40; ++i) {
    sum[i % 40] += x.v[i];
    mx[i % 40] = std::max(mx[i % 40], x.v[i]);
  }
  expectNear(run1({hpcrt_reduce_sum, {x}, {{HPCRT_F32, {1, 1, 40}}}, {2, 0, 1, 1}}), sum);
  expectNear(run1({hpcrt_reduce_max, {x}, {{HPCRT_F32, {40}}}, {2, 0, 1, 0}}), mx);
  Val m = val(HPCRT_I64, {3, 300}, {});
  std::vector<double> want(300, 0);
  for (int i = 0; i < 900; ++i) {
    m.v.push_back(i % 7 - 3);
    want[i % 300] += i % 7 - 3;
  }
  EXPECT_EQ(run1({hpcrt_reduce_sum, {m}, {{HPCRT_I64, {300}}}, {1, 0, 0}}), want);
  // Middle axis reduced, outer and inner kept.
  std::vector<double> mid(5 * 40, 0);
  for (int i = 0; i < 5 * 6 * 40; ++i)
    mid[(i / 240) * 40 + i % 40] += x.v[i] / 6;
  expectNear(run1({hpcrt_reduce_mean, {x}, {{HPCRT_F32, {5, 40}}}, {1, 1, 0}}), mid);
}
