//===- LinalgTest.cpp - matmul, gemm, conv, conv_transpose vs naive loops --===//

#include "RuntimeTestUtils.h"

using namespace hpcrt;
using namespace hpcrt::test;

namespace {

/// numpy.matmul on doubles, for a-shape [..., m, k] and b-shape [..., k, n]
/// after 1-D promotion (done by the caller).
std::vector<double> matmulRef(const Val &a, const std::vector<int64_t> &as, const Val &b,
                              const std::vector<int64_t> &bs, std::vector<int64_t> &batchOut) {
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  batchOut = broadcastShape(ab, bb);
  std::vector<int64_t> sa = broadcastStrides(ab, batchOut), sb = broadcastStrides(bb, batchOut);
  int64_t nb = numElements(batchOut);
  std::vector<double> out;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t oa = 0, ob = 0, rem = i;
    for (size_t d = batchOut.size(); d-- > 0;) {
      int64_t c = rem % batchOut[d];
      rem /= batchOut[d];
      oa += c * sa[d];
      ob += c * sb[d];
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += a.v[oa * M * K + m * K + k] * b.v[ob * K * N + k * N + n];
        out.push_back(acc);
      }
  }
  return out;
}

struct ConvCase {
  std::vector<int64_t> x, w, strides, pads, dilations;
  int64_t group;
  bool bias;
};

/// Output spatial sizes of a convolution.
std::vector<int64_t> convOut(const ConvCase &c) {
  std::vector<int64_t> out = {c.x[0], c.w[0]};
  size_t r = c.x.size() - 2;
  for (size_t d = 0; d < r; ++d)
    out.push_back((c.x[2 + d] + c.pads[d] + c.pads[d + r] - c.dilations[d] * (c.w[2 + d] - 1) - 1) /
                      c.strides[d] + 1);
  return out;
}

/// Direct N-d convolution.
std::vector<double> convRef(const ConvCase &c, const Val &x, const Val &w, const Val *b) {
  std::vector<int64_t> os = convOut(c);
  size_t r = c.x.size() - 2;
  int64_t C = c.x[1], M = c.w[0], Cg = C / c.group, Mg = M / c.group;
  std::vector<int64_t> xs = stridesOf(c.x), ws = stridesOf(c.w), ost = stridesOf(os);
  std::vector<double> out(static_cast<size_t>(numElements(os)));
  std::vector<int64_t> kshape(c.w.begin() + 2, c.w.end());
  int64_t kn = numElements(kshape);
  for (int64_t i = 0; i < numElements(os); ++i) {
    std::vector<int64_t> co(os.size());
    for (size_t d = 0; d < os.size(); ++d)
      co[d] = (i / ost[d]) % os[d];
    int64_t n = co[0], m = co[1], g = m / Mg;
    double acc = b ? b->v[m] : 0;
    for (int64_t cc = 0; cc < Cg; ++cc)
      for (int64_t kk = 0; kk < kn; ++kk) {
        int64_t rem = kk, xoff = n * xs[0] + (g * Cg + cc) * xs[1], woff = m * ws[0] + cc * ws[1];
        bool ok = true;
        for (size_t d = r; d-- > 0;) {
          int64_t k = rem % kshape[d];
          rem /= kshape[d];
          int64_t pos = co[2 + d] * c.strides[d] - c.pads[d] + k * c.dilations[d];
          if (pos < 0 || pos >= c.x[2 + d])
            ok = false;
          xoff += pos * xs[2 + d];
          woff += k * ws[2 + d];
        }
        if (ok)
          acc += x.v[xoff] * w.v[woff];
      }
    out[i] = acc;
  }
  return out;
}

std::vector<int64_t> cat(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> r;
  for (const auto &p : parts)
    r.insert(r.end(), p.begin(), p.end());
  return r;
}

} // namespace

TEST(MatMul, BatchBroadcast) {
  Val a = randomVal(HPCRT_F32, {2, 1, 3, 4}, 11), b = randomVal(HPCRT_F32, {5, 4, 2}, 12);
  std::vector<int64_t> batch;
  auto want = matmulRef(a, a.shape, b, b.shape, batch);
  EXPECT_EQ(batch, (std::vector<int64_t>{2, 5}));
  expectNear(run1({hpcrt_matmul, {a, b}, {{HPCRT_F32, {2, 5, 3, 2}}}}), want);
  // Shared right operand folds the batch into M.
  Val c = randomVal(HPCRT_F32, {3, 7, 4}, 13), d = randomVal(HPCRT_F32, {4, 6}, 14);
  expectNear(run1({hpcrt_matmul, {c, d}, {{HPCRT_F32, {3, 7, 6}}}}),
             matmulRef(c, c.shape, d, d.shape, batch));
  // Left operand broadcast over the right's batch.
  expectNear(run1({hpcrt_matmul, {d, randomVal(HPCRT_F32, {2, 6, 3}, 15)}, {{HPCRT_F32, {2, 4, 3}}}}),
             matmulRef(d, d.shape, randomVal(HPCRT_F32, {2, 6, 3}, 15), {2, 6, 3}, batch));
}

TEST(MatMul, OneDimensionalPromotion) {
  Val v = randomVal(HPCRT_F32, {4}, 21), m = randomVal(HPCRT_F32, {2, 4, 3}, 22);
  std::vector<int64_t> batch;
  expectNear(run1({hpcrt_matmul, {v, m}, {{HPCRT_F32, {2, 3}}}}),
             matmulRef(v, {1, 4}, m, m.shape, batch));
  Val m2 = randomVal(HPCRT_F32, {2, 3, 4}, 23);
  expectNear(run1({hpcrt_matmul, {m2, v}, {{HPCRT_F32, {2, 3}}}}),
             matmulRef(m2, m2.shape, v, {4, 1}, batch));
  expectNear(run1({hpcrt_matmul, {v, v}, {{HPCRT_F32, {}}}}), matmulRef(v, {1, 4}, v, {4, 1}, batch));
}

TEST(MatMul, OtherDtypes) {
  Val a = val(HPCRT_I32, {2, 2}, {1, 2, 3, 4}), b = val(HPCRT_I32, {2, 2}, {5, 6, 7, 8});
  EXPECT_EQ(run1({hpcrt_matmul, {a, b}, {{HPCRT_I32, {2, 2}}}}), (std::vector<double>{19, 22, 43, 50}));
  Val h = val(HPCRT_F16, {2, 2}, {1, 2, 3, 4}), g = val(HPCRT_F16, {2, 2}, {0.5, 1, 1.5, 2});
  EXPECT_EQ(run1({hpcrt_matmul, {h, g}, {{HPCRT_F16, {2, 2}}}}), (std::vector<double>{3.5, 5, 7.5, 11}));
  Val x = randomVal(HPCRT_F64, {3, 5}, 24), y = randomVal(HPCRT_F64, {5, 2}, 25);
  std::vector<int64_t> batch;
  expectNear(run1({hpcrt_matmul, {x, y}, {{HPCRT_F64, {3, 2}}}}),
             matmulRef(x, x.shape, y, y.shape, batch), 1e-12, 1e-12);
}

TEST(Gemm, TransposesAlphaBetaAndBroadcastC) {
  Val a = randomVal(HPCRT_F32, {4, 3}, 31), b = randomVal(HPCRT_F32, {5, 4}, 32);
  for (auto cshape : {std::vector<int64_t>{5}, std::vector<int64_t>{3, 1}, std::vector<int64_t>{},
                      std::vector<int64_t>{3, 5}}) {
    Val c = randomVal(HPCRT_F32, cshape, 33);
    // y = 0.5 * A^T B^T + 2 * C : A^T is [3,4], B^T is [4,5].
    std::vector<double> want;
    std::vector<int64_t> cs = broadcastStrides(cshape, {3, 5});
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < 4; ++k)
          acc += a.v[k * 3 + i] * b.v[j * 4 + k];
        want.push_back(0.5 * acc + 2 * c.v[i * cs[0] + j * cs[1]]);
      }
    // fattrs: alpha, beta; iattrs: trans_a, trans_b.
    expectNear(run1({hpcrt_gemm, {a, b, c}, {{HPCRT_F32, {3, 5}}}, {1, 1}, {0.5, 2.0}, {"none"}}), want);
  }
  // Without C.
  Val p = f32({2, 2}, {1, 2, 3, 4}), q = f32({2, 2}, {1, 0, 0, 1});
  EXPECT_EQ(run1({hpcrt_gemm, {p, q, std::nullopt}, {{HPCRT_F32, {2, 2}}}, {0, 0}, {1, 1}, {"none"}}),
            (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(run1({hpcrt_gemm, {val(HPCRT_I64, {2, 2}, {1, 2, 3, 4}), val(HPCRT_I64, {2, 2}, {1, 1, 1, 1}),
                               val(HPCRT_I64, {1}, {10})},
                  {{HPCRT_I64, {2, 2}}}, {0, 0}, {1, 1}, {"none"}}),
            (std::vector<double>{13, 13, 17, 17}));
}

// bf16/f16 operands with an f32 result (hpc-fuse-epilogues' widened
// products): the f32 sum, not rounded to the operands' type. 1 + 2^-8 is
// the sum here; bf16 would round it to 1 and f16 keeps it.
TEST(MatMul, SixteenBitOperandsWriteTheF32Sum) {
  for (int dtype : {HPCRT_BF16, HPCRT_F16}) {
    Val a = val(dtype, {2, 2}, {1, 0.00390625, 2, 0.5}), b = val(dtype, {2, 2}, {1, 0, 1, 3});
    EXPECT_EQ(run1({hpcrt_matmul, {a, b}, {{HPCRT_F32, {2, 2}}}}),
              (std::vector<double>{1.00390625, 0.01171875, 2.5, 1.5}))
        << dtypeName(dtype);
    // gemm with a bias of the operands' type, trans_b and an activation.
    Val bias = val(dtype, {2}, {0.00390625, -4});
    EXPECT_EQ(run1({hpcrt_gemm, {a, b, bias}, {{HPCRT_F32, {2, 2}}}, {0, 1}, {1, 1}, {"relu"}}),
              (std::vector<double>{1.00390625, 0, 2.00390625, 0}))
        << dtypeName(dtype);
  }
  // Another result dtype is refused in one line.
  Val a = val(HPCRT_BF16, {2, 2}, {1, 2, 3, 4});
  Result r = run({hpcrt_matmul, {a, a}, {{HPCRT_F64, {2, 2}}}});
  EXPECT_NE(r.error.find("result dtype f64 is neither the operands' bf16 nor f32"),
            std::string::npos)
      << r.error;
}

TEST(Conv, MatchesDirectConvolution) {
  std::vector<ConvCase> cases = {
      {{1, 1, 5, 5}, {1, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false},
      {{2, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}, 2, true},   // groups, asym pads
      {{1, 3, 9, 9}, {4, 3, 3, 3}, {2, 3}, {0, 1, 1, 0}, {2, 1}, 1, true},   // stride + dilation
      {{1, 4, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4, true},   // depthwise
      {{2, 8, 5, 5}, {3, 8, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},   // pointwise
      {{1, 2, 11}, {3, 2, 4}, {3}, {2, 1}, {2}, 1, true},                    // 1-D
      {{1, 2, 4, 5, 3}, {2, 1, 2, 3, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 0}, {1, 1, 2}, 2, true}, // 3-D
  };
  unsigned seed = 100;
  for (const ConvCase &c : cases) {
    Val x = randomVal(HPCRT_F32, c.x, seed++), w = randomVal(HPCRT_F32, c.w, seed++);
    Val b = randomVal(HPCRT_F32, {c.w[0]}, seed++);
    std::optional<Val> bias;
    if (c.bias)
      bias = b;
    // iattrs: dilations, group, pads, strides.
    std::vector<int64_t> ia = cat({{static_cast<int64_t>(c.dilations.size())}, c.dilations, {c.group},
                                   {static_cast<int64_t>(c.pads.size())}, c.pads,
                                   {static_cast<int64_t>(c.strides.size())}, c.strides});
    auto got = run1({hpcrt_conv, {x, w, bias, std::nullopt}, {{HPCRT_F32, convOut(c)}}, ia, {}, {"none"}});
    expectNear(got, convRef(c, x, w, c.bias ? &b : nullptr), 1e-4, 1e-5);
  }
}

TEST(Conv, DoubleAndHalf) {
  ConvCase c{{1, 2, 5, 5}, {2, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false};
  std::vector<int64_t> ia = {2, 1, 1, 1, 4, 1, 1, 1, 1, 2, 1, 1};
  Val x = randomVal(HPCRT_F64, c.x, 7), w = randomVal(HPCRT_F64, c.w, 8);
  expectNear(run1({hpcrt_conv, {x, w, std::nullopt, std::nullopt}, {{HPCRT_F64, convOut(c)}}, ia, {}, {"none"}}),
             convRef(c, x, w, nullptr), 1e-12, 1e-12);
  Val xh = val(HPCRT_F16, c.x, std::vector<double>(50, 0.5)), wh = val(HPCRT_F16, c.w, std::vector<double>(36, 0.25));
  auto got = run1({hpcrt_conv, {xh, wh, std::nullopt, std::nullopt}, {{HPCRT_F16, convOut(c)}}, ia, {}, {"none"}});
  expectNear(got, convRef(c, xh, wh, nullptr), 1e-3, 1e-3);
}

TEST(ConvTranspose, MatchesScatterReference) {
  struct Case {
    std::vector<int64_t> x, w, strides, pads, dilations, outPad;
    int64_t group;
  };
  std::vector<Case> cases = {
      {{1, 1, 3, 3}, {1, 2, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1},
      {{2, 4, 3, 4}, {4, 3, 3, 2}, {2, 3}, {1, 0, 0, 1}, {1, 2}, {1, 0}, 2},
      {{1, 2, 5}, {2, 1, 3}, {2}, {1, 1}, {2}, {1}, 1},
  };
  unsigned seed = 200;
  for (const Case &c : cases) {
    size_t r = c.x.size() - 2;
    int64_t C = c.x[1], Mg = c.w[1], M = Mg * c.group, Cg = C / c.group;
    std::vector<int64_t> os = {c.x[0], M};
    for (size_t d = 0; d < r; ++d)
      os.push_back(c.strides[d] * (c.x[2 + d] - 1) + c.outPad[d] + (c.w[2 + d] - 1) * c.dilations[d] + 1 -
                   c.pads[d] - c.pads[d + r]);
    Val x = randomVal(HPCRT_F32, c.x, seed++), w = randomVal(HPCRT_F32, c.w, seed++);
    Val b = randomVal(HPCRT_F32, {M}, seed++);
    std::vector<double> want(static_cast<size_t>(numElements(os)));
    std::vector<int64_t> xs = stridesOf(c.x), ws = stridesOf(c.w), ost = stridesOf(os);
    for (int64_t i = 0; i < numElements(os); ++i)
      want[i] = b.v[(i / ost[1]) % M];
    std::vector<int64_t> kshape(c.w.begin() + 2, c.w.end());
    for (int64_t xi = 0; xi < static_cast<int64_t>(x.v.size()); ++xi) {
      std::vector<int64_t> co(c.x.size());
      for (size_t d = 0; d < c.x.size(); ++d)
        co[d] = (xi / xs[d]) % c.x[d];
      int64_t g = co[1] / Cg;
      for (int64_t m = 0; m < Mg; ++m)
        for (int64_t kk = 0; kk < numElements(kshape); ++kk) {
          int64_t rem = kk, ooff = co[0] * ost[0] + (g * Mg + m) * ost[1], woff = co[1] * ws[0] + m * ws[1];
          bool ok = true;
          for (size_t d = r; d-- > 0;) {
            int64_t k = rem % kshape[d];
            rem /= kshape[d];
            int64_t o = co[2 + d] * c.strides[d] - c.pads[d] + k * c.dilations[d];
            if (o < 0 || o >= os[2 + d])
              ok = false;
            ooff += o * ost[2 + d];
            woff += k * ws[2 + d];
          }
          if (ok)
            want[ooff] += x.v[xi] * w.v[woff];
        }
    }
    // iattrs: dilations, group, output_padding, pads, strides.
    std::vector<int64_t> ia = cat({{static_cast<int64_t>(r)}, c.dilations, {c.group}, {static_cast<int64_t>(r)},
                                   c.outPad, {static_cast<int64_t>(2 * r)}, c.pads,
                                   {static_cast<int64_t>(r)}, c.strides});
    expectNear(run1({hpcrt_conv_transpose, {x, w, b}, {{HPCRT_F32, os}}, ia}), want, 1e-4, 1e-5);
  }
}

TEST(Conv, WrongResultShapeIsAnError) {
  Result r = run({hpcrt_conv, {randomVal(HPCRT_F32, {1, 1, 4, 4}, 1), randomVal(HPCRT_F32, {1, 1, 3, 3}, 2),
                               std::nullopt, std::nullopt},
                  {{HPCRT_F32, {1, 1, 4, 4}}},
                  {2, 1, 1, 1, 4, 0, 0, 0, 0, 2, 1, 1}, {}, {"none"}});
  EXPECT_NE(r.error.find("should be 2"), std::string::npos) << r.error;
}

/// act(v) as the unfused ops compute it.
double activationRef(const std::string &act, double v) {
  if (act == "relu")
    return v < 0 ? 0 : v;
  if (act == "gelu")
    return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  if (act == "gelu_tanh")
    return 0.5 * v * (1 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
  if (act == "sigmoid")
    return 1 / (1 + std::exp(-v));
  if (act == "tanh")
    return std::tanh(v);
  if (act == "silu")
    return v / (1 + std::exp(-v));
  return v;
}

// Fused epilogues: oneDNN's post-ops (f32, with the bias C) and the own
// path's in-place activation kernels (f64) both give act(A B + C).
TEST(Gemm, FusedActivations) {
  Val a = randomVal(HPCRT_F32, {6, 9}, 41), b = randomVal(HPCRT_F32, {9, 7}, 42);
  Val c = randomVal(HPCRT_F32, {7}, 43);
  Val a64 = a, b64 = b, c64 = c;
  a64.dtype = b64.dtype = c64.dtype = HPCRT_F64;
  auto plainY = run1({hpcrt_gemm, {a64, b64, c64}, {{HPCRT_F64, {6, 7}}}, {0, 0}, {1, 1},
                      {"none"}});
  for (std::string act : {"relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu"}) {
    std::vector<double> want;
    for (double v : plainY)
      want.push_back(activationRef(act, v));
    expectNear(run1({hpcrt_gemm, {a, b, c}, {{HPCRT_F32, {6, 7}}}, {0, 0}, {1, 1}, {act}}), want,
               1e-4, 1e-5);
    expectNear(run1({hpcrt_gemm, {a64, b64, c64}, {{HPCRT_F64, {6, 7}}}, {0, 0}, {1, 1}, {act}}),
               want, 1e-12, 1e-12);
  }
  Result r = run({hpcrt_gemm, {a, b, c}, {{HPCRT_F32, {6, 7}}}, {0, 0}, {1, 1}, {"swish"}});
  EXPECT_NE(r.error.find("unknown activation 'swish'"), std::string::npos) << r.error;
}

// A C of the result's shape (hpc-fuse-epilogues' accumulation: a
// micro-batch's weight gradient plus the sum so far) is added by oneDNN's
// binary post-op, before the activation: act(op(A) op(B) + C), with A
// transposed as a weight gradient's is.
TEST(Gemm, WholeCAddedBeforeTheActivation) {
  Val a = randomVal(HPCRT_F32, {9, 6}, 71), b = randomVal(HPCRT_F32, {9, 7}, 72);
  Val c = randomVal(HPCRT_F32, {6, 7}, 73);
  for (std::string act : {"none", "relu"}) {
    std::vector<double> want;
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 7; ++j) {
        double acc = c.v[i * 7 + j];
        for (int64_t k = 0; k < 9; ++k)
          acc += a.v[k * 6 + i] * b.v[k * 7 + j];
        want.push_back(activationRef(act, acc));
      }
    expectNear(run1({hpcrt_gemm, {a, b, c}, {{HPCRT_F32, {6, 7}}}, {1, 0}, {1, 1}, {act}}), want,
               1e-5, 1e-6);
  }
}

TEST(Conv, FusedResidualAndRelu) {
  // relu(conv + bias + r) in one call equals the conv, then the add, then
  // the relu: a small conv (the own kernels, below 5 MFLOP) and one above
  // (oneDNN's binary post-op), with and without a bias.
  struct Case {
    std::vector<int64_t> x, w;
    bool bias;
  };
  for (const Case &k : {Case{{1, 4, 5, 5}, {6, 4, 3, 3}, true},
                        Case{{1, 16, 24, 24}, {16, 16, 3, 3}, true},
                        Case{{2, 16, 24, 24}, {16, 16, 3, 3}, false}}) {
    std::vector<int64_t> ys = {k.x[0], k.w[0], k.x[2], k.x[3]};
    Val x = randomVal(HPCRT_F32, k.x, 50), w = randomVal(HPCRT_F32, k.w, 51);
    Val r = randomVal(HPCRT_F32, ys, 52);
    std::optional<Val> b;
    if (k.bias)
      b = randomVal(HPCRT_F32, {k.w[0]}, 53);
    std::vector<int64_t> ia = {2, 1, 1, 1, 4, 1, 1, 1, 1, 2, 1, 1};
    auto conv = run1({hpcrt_conv, {x, w, b, std::nullopt}, {{HPCRT_F32, ys}}, ia, {}, {"none"}});
    std::vector<double> sum, want;
    for (size_t i = 0; i < conv.size(); ++i) {
      sum.push_back(conv[i] + r.v[i]);
      want.push_back(std::max(0.0, sum.back()));
    }
    expectNear(run1({hpcrt_conv, {x, w, b, r}, {{HPCRT_F32, ys}}, ia, {}, {"none"}}), sum,
               1e-5, 1e-5);
    expectNear(run1({hpcrt_conv, {x, w, b, r}, {{HPCRT_F32, ys}}, ia, {}, {"relu"}}), want,
               1e-5, 1e-5);
  }
}

TEST(Conv, ResidualOfAnotherShapeIsAnError) {
  Result res = run({hpcrt_conv,
                    {randomVal(HPCRT_F32, {1, 1, 4, 4}, 1), randomVal(HPCRT_F32, {1, 1, 3, 3}, 2),
                     std::nullopt, randomVal(HPCRT_F32, {1, 1, 4, 4}, 3)},
                    {{HPCRT_F32, {1, 1, 2, 2}}},
                    {2, 1, 1, 1, 4, 0, 0, 0, 0, 2, 1, 1}, {}, {"none"}});
  EXPECT_NE(res.error.find("conv: residual has shape [1, 1, 4, 4], expected [1, 1, 2, 2]"),
            std::string::npos)
      << res.error;
}

TEST(Conv, FusedRelu) {
  // x [1, 4, 5, 5], w [6, 2, 3, 3] (2 groups), pads 1, stride 1: y [1, 6, 5, 5].
  Val x = randomVal(HPCRT_F32, {1, 4, 5, 5}, 44), w = randomVal(HPCRT_F32, {6, 2, 3, 3}, 45);
  Val b = randomVal(HPCRT_F32, {6}, 46);
  // iattrs: dilations [1, 1], group, pads [1, 1, 1, 1], strides [1, 1].
  std::vector<int64_t> ia = {2, 1, 1, 2, 4, 1, 1, 1, 1, 2, 1, 1};
  auto plainY = run1({hpcrt_conv, {x, w, b, std::nullopt}, {{HPCRT_F32, {1, 6, 5, 5}}}, ia, {}, {"none"}});
  std::vector<double> want;
  for (double v : plainY)
    want.push_back(v < 0 ? 0 : v);
  expectNear(run1({hpcrt_conv, {x, w, b, std::nullopt}, {{HPCRT_F32, {1, 6, 5, 5}}}, ia, {}, {"relu"}}), want,
             1e-6, 1e-6);
}

// A product's second call on the same tensors skips its checks and key
// (onednn::verifiedPrimitive): a change of attributes, of tensors under the
// same op number, or of the operands' data must still be seen.
TEST(Gemm, RepeatedCallsOnOneOpNumber) {
  nlohmann::json tensors = nlohmann::json::array();
  int64_t off = 0;
  for (auto shape : {std::vector<int64_t>{4, 3}, {3, 5}, {4, 5}, {2, 3}, {2, 5}}) {
    tensors.push_back(
        {{"dtype", HPCRT_F32}, {"shape", shape}, {"region", "arena"}, {"offset", off}});
    off += 64 * 4;
  }
  nlohmann::json m = {{"version", 1},   {"model", "test"},  {"arena_bytes", off},
                      {"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()},
                      {"tensors", tensors}};
  Context ctx(m.dump());
  ctx.prepare();
  Val a = randomVal(HPCRT_F32, {4, 3}, 61), b = randomVal(HPCRT_F32, {3, 5}, 62);
  Val a2 = randomVal(HPCRT_F32, {2, 3}, 63);
  auto load = [&](int id, const Val &v) {
    for (size_t i = 0; i < v.v.size(); ++i)
      writeElem(ctx.tensor(id), static_cast<int64_t>(i), v.v[i]);
  };
  auto read = [&](int id) {
    std::vector<double> v;
    for (int64_t i = 0; i < ctx.tensor(id).numel; ++i)
      v.push_back(readElem(ctx.tensor(id), i));
    return v;
  };
  auto scaled = [](std::vector<double> v, double s) {
    for (double &x : v)
      x *= s;
    return v;
  };
  load(0, a), load(1, b), load(3, a2);
  std::vector<int64_t> batch;
  std::vector<double> ab = matmulRef(a, {4, 3}, b, {3, 5}, batch);
  const int32_t gemmIds[] = {1, 2, 3, 0, 1, -1}, matmulIds[] = {1, 4, 2, 3, 1};
  const int64_t noTrans[] = {0, 0};
  const double alpha1[] = {1.0, 0.0}, alpha2[] = {2.0, 0.0};
  const char *none[] = {"none"}, *relu[] = {"relu"};
  hpcrt_gemm(&ctx, 0, gemmIds, noTrans, alpha1, none);
  expectNear(read(2), ab);
  hpcrt_gemm(&ctx, 0, gemmIds, noTrans, alpha2, none); // alpha
  expectNear(read(2), scaled(ab, 2));
  hpcrt_gemm(&ctx, 0, gemmIds, noTrans, alpha2, relu); // activation
  std::vector<double> want = scaled(ab, 2);
  for (double &x : want)
    x = std::max(x, 0.0);
  expectNear(read(2), want);
  Val a3 = randomVal(HPCRT_F32, {4, 3}, 64);
  load(0, a3); // new data, same tensors
  hpcrt_gemm(&ctx, 0, gemmIds, noTrans, alpha1, none);
  expectNear(read(2), matmulRef(a3, {4, 3}, b, {3, 5}, batch));
  hpcrt_matmul(&ctx, 0, matmulIds, nullptr, nullptr, nullptr); // other tensors, same op
  expectNear(read(4), matmulRef(a2, {2, 3}, b, {3, 5}, batch));
  hpcrt_gemm(&ctx, 0, gemmIds, noTrans, alpha2, none);
  expectNear(read(2), scaled(matmulRef(a3, {4, 3}, b, {3, 5}, batch), 2));
  EXPECT_EQ(ctx.error(), "");
}
