//===- ElementwiseTest.cpp - unary, binary, where, clip, cast kernels ------===//

#include "RuntimeTestUtils.h"

#include <climits>

using namespace hpcrt;
using namespace hpcrt::test;

namespace {

/// Naive numpy broadcasting reference for a binary op.
template <typename F>
std::vector<double> broadcastRef(const Val &a, const Val &b, const std::vector<int64_t> &out,
                                 F op) {
  std::vector<double> r;
  int64_t n = numElements(out);
  size_t R = out.size();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> co(R);
    int64_t rem = i;
    for (size_t d = R; d-- > 0;) {
      co[d] = rem % out[d];
      rem /= out[d];
    }
    auto at = [&](const Val &x) {
      int64_t off = 0;
      size_t lead = R - x.shape.size();
      for (size_t d = 0; d < x.shape.size(); ++d)
        off = off * x.shape[d] + (x.shape[d] == 1 ? 0 : co[lead + d]);
      return x.v[off];
    };
    r.push_back(op(at(a), at(b)));
  }
  return r;
}

} // namespace

TEST(Binary, BroadcastAddAllRanks) {
  Val a = randomVal(HPCRT_F32, {2, 3, 1}, 1), b = randomVal(HPCRT_F32, {1, 4}, 2);
  auto got = run1({hpcrt_add, {a, b}, {{HPCRT_F32, {2, 3, 4}}}});
  expectNear(got, broadcastRef(a, b, {2, 3, 4}, [](double x, double y) { return x + y; }));
  // Scalar operand, and a middle-dimension broadcast.
  Val s = f32({}, {0.5}), c = randomVal(HPCRT_F32, {3, 1, 5}, 3), d = randomVal(HPCRT_F32, {3, 2, 5}, 4);
  expectNear(run1({hpcrt_mul, {c, s}, {{HPCRT_F32, {3, 1, 5}}}}),
             broadcastRef(c, s, {3, 1, 5}, [](double x, double y) { return x * y; }));
  expectNear(run1({hpcrt_sub, {c, d}, {{HPCRT_F32, {3, 2, 5}}}}),
             broadcastRef(c, d, {3, 2, 5}, [](double x, double y) { return x - y; }));
}

TEST(Binary, LargeBroadcastIsParallelAndCorrect) {
  Val a = randomVal(HPCRT_F32, {64, 1, 300}, 5), b = randomVal(HPCRT_F32, {7, 300}, 6);
  expectNear(run1({hpcrt_div, {a, b}, {{HPCRT_F32, {64, 7, 300}}}}),
             broadcastRef(a, b, {64, 7, 300}, [](double x, double y) { return x / y; }), 1e-5,
             1e-4);
}

TEST(Binary, IntegerSemantics) {
  Val a = val(HPCRT_I32, {6}, {7, -7, 7, -7, INT_MIN, 5});
  Val b = val(HPCRT_I32, {6}, {2, 2, -2, -2, -1, 0});
  EXPECT_EQ(run1({hpcrt_div, {a, b}, {{HPCRT_I32, {6}}}}),
            (std::vector<double>{3, -3, -3, 3, INT_MIN, 0}));
  EXPECT_EQ(run1({hpcrt_mod, {a, b}, {{HPCRT_I32, {6}}}}),
            (std::vector<double>{1, 1, -1, -1, 0, 0}));
  EXPECT_EQ(run1({hpcrt_fmod, {a, b}, {{HPCRT_I32, {6}}}}),
            (std::vector<double>{1, -1, 1, -1, 0, 0}));
  // Wrapping add/mul.
  Val big = val(HPCRT_I32, {2}, {INT_MAX, 65536});
  EXPECT_EQ(run1({hpcrt_add, {big, val(HPCRT_I32, {2}, {1, 0})}, {{HPCRT_I32, {2}}}}),
            (std::vector<double>{INT_MIN, 65536}));
  EXPECT_EQ(run1({hpcrt_mul, {big, val(HPCRT_I32, {2}, {1, 65536})}, {{HPCRT_I32, {2}}}}),
            (std::vector<double>{INT_MAX, 0}));
  EXPECT_EQ(run1({hpcrt_pow, {val(HPCRT_I64, {3}, {3, 2, -2}), val(HPCRT_I64, {3}, {4, 10, 3})},
                  {{HPCRT_I64, {3}}}}),
            (std::vector<double>{81, 1024, -8}));
  EXPECT_EQ(run1({hpcrt_div, {val(HPCRT_U8, {2}, {200, 7}), val(HPCRT_U8, {2}, {3, 0})},
                  {{HPCRT_U8, {2}}}}),
            (std::vector<double>{66, 0}));
}

TEST(Binary, FloatModAndMinMaxNaN) {
  Val a = f32({4}, {5.5, -5.5, 5.5, -5.5}), b = f32({4}, {2, 2, -2, -2});
  EXPECT_EQ(run1({hpcrt_mod, {a, b}, {{HPCRT_F32, {4}}}}), (std::vector<double>{1.5, 0.5, -0.5, -1.5}));
  EXPECT_EQ(run1({hpcrt_fmod, {a, b}, {{HPCRT_F32, {4}}}}), (std::vector<double>{1.5, -1.5, 1.5, -1.5}));
  Val n = f32({3}, {NAN, 1, 2}), m = f32({3}, {0, NAN, 3});
  auto mx = run1({hpcrt_max, {n, m}, {{HPCRT_F32, {3}}}});
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 3);
  auto mn = run1({hpcrt_min, {n, m}, {{HPCRT_F32, {3}}}});
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_EQ(mn[2], 2);
  expectNear(run1({hpcrt_pow, {f32({3}, {2, 4, -2}), f32({1}, {0.5})}, {{HPCRT_F32, {3}}}}),
             {std::sqrt(2.0), 2, NAN});
}

TEST(Binary, ComparisonsAndLogic) {
  Val a = val(HPCRT_I64, {2, 2}, {1, 2, 3, 4}), b = val(HPCRT_I64, {2}, {2, 2});
  EXPECT_EQ(run1({hpcrt_equal, {a, b}, {{HPCRT_BOOL, {2, 2}}}}), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(run1({hpcrt_less, {a, b}, {{HPCRT_BOOL, {2, 2}}}}), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(run1({hpcrt_less_equal, {a, b}, {{HPCRT_BOOL, {2, 2}}}}), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(run1({hpcrt_greater, {a, b}, {{HPCRT_BOOL, {2, 2}}}}), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(run1({hpcrt_greater_equal, {a, b}, {{HPCRT_BOOL, {2, 2}}}}), (std::vector<double>{0, 1, 1, 1}));
  Val nan = f32({2}, {NAN, 1});
  EXPECT_EQ(run1({hpcrt_equal, {nan, nan}, {{HPCRT_BOOL, {2}}}}), (std::vector<double>{0, 1}));
  Val p = val(HPCRT_BOOL, {4}, {0, 0, 1, 1}), q = val(HPCRT_BOOL, {4}, {0, 1, 0, 1});
  EXPECT_EQ(run1({hpcrt_and, {p, q}, {{HPCRT_BOOL, {4}}}}), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(run1({hpcrt_or, {p, q}, {{HPCRT_BOOL, {4}}}}), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(run1({hpcrt_xor, {p, q}, {{HPCRT_BOOL, {4}}}}), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(run1({hpcrt_not, {p}, {{HPCRT_BOOL, {4}}}}), (std::vector<double>{1, 1, 0, 0}));
}

TEST(Binary, MismatchedShapesAreAnError) {
  Result r = run({hpcrt_add, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2}, {1, 2})},
                  {{HPCRT_F32, {2, 3}}}});
  EXPECT_NE(r.error.find("do not broadcast"), std::string::npos) << r.error;
}

TEST(Where, ThreeWayBroadcast) {
  Val c = val(HPCRT_BOOL, {2, 1}, {1, 0});
  Val a = f32({3}, {1, 2, 3}), b = f32({2, 3}, {10, 20, 30, 40, 50, 60});
  EXPECT_EQ(run1({hpcrt_where, {c, a, b}, {{HPCRT_F32, {2, 3}}}}),
            (std::vector<double>{1, 2, 3, 40, 50, 60}));
}

TEST(Unary, FloatFunctions) {
  std::vector<double> xs = {-3, -0.5, 0, 0.25, 2.5};
  Val x = f32({5}, xs);
  auto each = [&](double (*f)(double)) {
    std::vector<double> r;
    for (double v : xs)
      r.push_back(f(static_cast<float>(v)));
    return r;
  };
  expectNear(run1({hpcrt_exp, {x}, {{HPCRT_F32, {5}}}}), each([](double v) { return std::exp(v); }));
  expectNear(run1({hpcrt_sigmoid, {x}, {{HPCRT_F32, {5}}}}),
             each([](double v) { return 1 / (1 + std::exp(-v)); }));
  expectNear(run1({hpcrt_tanh, {x}, {{HPCRT_F32, {5}}}}), each([](double v) { return std::tanh(v); }));
  expectNear(run1({hpcrt_erf, {x}, {{HPCRT_F32, {5}}}}), each([](double v) { return std::erf(v); }));
  expectNear(run1({hpcrt_relu, {x}, {{HPCRT_F32, {5}}}}), {0, 0, 0, 0.25, 2.5});
  expectNear(run1({hpcrt_silu, {x}, {{HPCRT_F32, {5}}}}),
             each([](double v) { return v / (1 + std::exp(-v)); }));
  expectNear(run1({hpcrt_softplus, {x}, {{HPCRT_F32, {5}}}}),
             each([](double v) { return std::log(1 + std::exp(v)); }));
  expectNear(run1({hpcrt_hard_swish, {x}, {{HPCRT_F32, {5}}}}),
             each([](double v) { return v * std::max(0.0, std::min(1.0, v / 6 + 0.5)); }));
  expectNear(run1({hpcrt_gelu, {x}, {{HPCRT_F32, {5}}}, {}, {}, {"none"}}),
             each([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }));
  expectNear(run1({hpcrt_gelu, {x}, {{HPCRT_F32, {5}}}, {}, {}, {"tanh"}}), each([](double v) {
               return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
             }));
  expectNear(run1({hpcrt_leaky_relu, {x}, {{HPCRT_F32, {5}}}, {}, {0.1}}), {-0.3, -0.05, 0, 0.25, 2.5});
  expectNear(run1({hpcrt_elu, {x}, {{HPCRT_F32, {5}}}, {}, {2.0}}),
             each([](double v) { return v < 0 ? 2 * (std::exp(v) - 1) : v; }));
  expectNear(run1({hpcrt_hard_sigmoid, {x}, {{HPCRT_F32, {5}}}, {}, {0.2, 0.5}}),
             each([](double v) { return std::max(0.0, std::min(1.0, 0.2 * v + 0.5)); }));
  expectNear(run1({hpcrt_round, {f32({6}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4})}, {{HPCRT_F32, {6}}}}),
             {0, 2, 2, -0, -2, 2});
  expectNear(run1({hpcrt_sign, {f32({3}, {-2, 0, 3})}, {{HPCRT_F32, {3}}}}), {-1, 0, 1});
  EXPECT_EQ(run1({hpcrt_abs, {val(HPCRT_I8, {3}, {-128, -5, 5})}, {{HPCRT_I8, {3}}}}),
            (std::vector<double>{-128, 5, 5}));
  EXPECT_EQ(run1({hpcrt_neg, {val(HPCRT_I64, {2}, {5, -7})}, {{HPCRT_I64, {2}}}}),
            (std::vector<double>{-5, 7}));
}

TEST(Unary, VectorTanhWithinFourUlpEverywhere) {
  // Dense over the range where tanh is not +-1 in float, and the switch of
  // the vector code at |x| = 0.25, tiny values, infinities, NaN and -0.
  std::vector<double> xs;
  for (int i = -20000; i <= 20000; ++i)
    xs.push_back(i * 5e-4);
  for (double v : {1e-30, 1e-12, 1e-6, 0.2499999, 0.25, 0.2500001, 9.0, 44.0, 100.0})
    for (double s : {1.0, -1.0})
      xs.push_back(s * v);
  xs.push_back(INFINITY);
  xs.push_back(-INFINITY);
  xs.push_back(NAN);
  xs.push_back(-0.0);
  int64_t n = static_cast<int64_t>(xs.size());
  std::vector<double> got = run1({hpcrt_tanh, {f32({n}, xs)}, {{HPCRT_F32, {n}}}});
  double worst = 0;
  for (int64_t i = 0; i + 2 < n; ++i) {
    double want = std::tanh(static_cast<double>(static_cast<float>(xs[i])));
    worst = std::max(worst, std::abs(got[i] - want) / std::max(std::abs(want), 1e-38));
  }
  EXPECT_LT(worst, 4 * 5.96e-8) << "worst relative error " << worst;
  EXPECT_TRUE(std::isnan(got[n - 2]));
  EXPECT_EQ(got[n - 1], 0.0);
  EXPECT_TRUE(std::signbit(got[n - 1]));
}

TEST(Unary, HalfAndBfloat16ComputeInFloat) {
  Val h = val(HPCRT_F16, {3}, {0.5, 1, -2});
  expectNear(run1({hpcrt_exp, {h}, {{HPCRT_F16, {3}}}}), {std::exp(0.5), std::exp(1.0), std::exp(-2.0)},
             1e-3, 1e-4);
  Val b = val(HPCRT_BF16, {3}, {0.5, 1, -2});
  expectNear(run1({hpcrt_sqrt, {b}, {{HPCRT_BF16, {3}}}}), {std::sqrt(0.5), 1, NAN}, 1e-2, 1e-3);
}

TEST(Clip, OptionalBounds) {
  Val x = f32({5}, {-3, -1, 0, 1, 3});
  // iattrs: has max, has min; fattrs: max, min (alphabetical).
  EXPECT_EQ(run1({hpcrt_clip, {x}, {{HPCRT_F32, {5}}}, {1, 1}, {2, -1}}),
            (std::vector<double>{-1, -1, 0, 1, 2}));
  EXPECT_EQ(run1({hpcrt_clip, {x}, {{HPCRT_F32, {5}}}, {0, 1}, {0}}),
            (std::vector<double>{0, 0, 0, 1, 3}));
  EXPECT_EQ(run1({hpcrt_clip, {x}, {{HPCRT_F32, {5}}}, {1, 0}, {0.5}}),
            (std::vector<double>{-3, -1, 0, 0.5, 0.5}));
  EXPECT_EQ(run1({hpcrt_clip, {val(HPCRT_I8, {3}, {-100, 0, 100})}, {{HPCRT_I8, {3}}}, {1, 1}, {1000, -5}}),
            (std::vector<double>{-5, 0, 100}));
}

TEST(Cast, FloatToIntEdgeCases) {
  Val x = f32({7}, {2.9, -2.9, NAN, 3e9, -3e9, 300, -1});
  EXPECT_EQ(run1({hpcrt_cast, {x}, {{HPCRT_I32, {7}}}, {HPCRT_I32}}),
            (std::vector<double>{2, -2, INT_MIN, INT_MIN, INT_MIN, 300, -1}));
  // Narrow types keep the low bits of the 32-bit conversion (as x86 code does).
  EXPECT_EQ(run1({hpcrt_cast, {x}, {{HPCRT_I8, {7}}}, {HPCRT_I8}}),
            (std::vector<double>{2, -2, 0, 0, 0, 44, -1}));
  EXPECT_EQ(run1({hpcrt_cast, {x}, {{HPCRT_U8, {7}}}, {HPCRT_U8}}),
            (std::vector<double>{2, 254, 0, 0, 0, 44, 255}));
  auto i64 = run1({hpcrt_cast, {f32({3}, {1e20, NAN, -7.5})}, {{HPCRT_I64, {3}}}, {HPCRT_I64}});
  EXPECT_EQ(i64, (std::vector<double>{-9223372036854775808.0, -9223372036854775808.0, -7}));
  EXPECT_EQ(run1({hpcrt_cast, {f32({4}, {0, -0.0, 0.1, NAN})}, {{HPCRT_BOOL, {4}}}, {HPCRT_BOOL}}),
            (std::vector<double>{0, 0, 1, 1}));
}

TEST(Cast, BetweenFloatAndIntTypes) {
  EXPECT_EQ(run1({hpcrt_cast, {val(HPCRT_I64, {3}, {-1, 0, 300})}, {{HPCRT_U8, {3}}}, {HPCRT_U8}}),
            (std::vector<double>{255, 0, 44}));
  EXPECT_EQ(run1({hpcrt_cast, {val(HPCRT_BOOL, {2}, {1, 0})}, {{HPCRT_F32, {2}}}, {HPCRT_F32}}),
            (std::vector<double>{1, 0}));
  // f32 -> f16 rounds to nearest even; overflow gives inf.
  auto h = run1({hpcrt_cast, {f32({4}, {1.0 / 3, 65504, 65520, 1e-8})}, {{HPCRT_F16, {4}}}, {HPCRT_F16}});
  EXPECT_EQ(h[0], 0.333251953125);
  EXPECT_EQ(h[1], 65504);
  EXPECT_TRUE(std::isinf(h[2]));
  EXPECT_EQ(h[3], 0); // below half the smallest subnormal
  auto b = run1({hpcrt_cast, {f32({2}, {1.0 / 3, 3.0e38})}, {{HPCRT_BF16, {2}}}, {HPCRT_BF16}});
  EXPECT_EQ(b[0], 0.333984375);
  EXPECT_NEAR(b[1], 3.0e38, 3e36);
  Result bad = run({hpcrt_cast, {f32({1}, {1})}, {{HPCRT_F32, {1}}}, {HPCRT_I32}});
  EXPECT_NE(bad.error.find("'to'"), std::string::npos) << bad.error;
}
