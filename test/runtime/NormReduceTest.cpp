//===- NormReduceTest.cpp - softmax, norms, reductions, arg reductions -----===//

#include "RuntimeTestUtils.h"
#include "cpu/Dnnl.h"

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

namespace {

/// Makes layer_norm run its own f32 kernel for a scope (no oneDNN
/// primitive).
struct OwnKernelsOnly {
  OwnKernelsOnly() { onednn::setPrimitivesEnabled(false); }
  ~OwnKernelsOnly() { onednn::setPrimitivesEnabled(true); }
  OwnKernelsOnly(const OwnKernelsOnly &) = delete;
  OwnKernelsOnly &operator=(const OwnKernelsOnly &) = delete;
};

struct StatefulRun {
  std::vector<double> y;
  size_t states = 0; ///< kernel states the context holds after the calls
  uint64_t heldBytes = 0; ///< what those states hold (KernelState::heldBytes)
};

/// One call of `fn` (one result of x's shape and dtype) on a context of its
/// own. `setup`: a setup run first (Context::beginSetup), which must make
/// the kernel's state and leave the result as it was.
StatefulRun runStateful(KFn fn, const std::vector<std::optional<Val>> &ins,
                        std::vector<int64_t> ia, std::vector<double> fa, bool setup = false) {
  nlohmann::json tensors = nlohmann::json::array();
  int64_t off = 0;
  auto add = [&](const Val &v) {
    tensors.push_back({{"dtype", v.dtype}, {"shape", v.shape}, {"region", "arena"},
                       {"offset", off}});
    off += (numElements(v.shape) * static_cast<int64_t>(dtypeSize(v.dtype)) + 63) / 64 * 64;
    return static_cast<int32_t>(tensors.size() - 1);
  };
  std::vector<int32_t> ids{1, add(Val{ins[0]->dtype, ins[0]->shape, {}}),
                           static_cast<int32_t>(ins.size())};
  for (const auto &in : ins)
    ids.push_back(in ? add(*in) : -1);
  nlohmann::json m = {{"version", 1},   {"model", "test"},  {"arena_bytes", off},
                      {"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()},
                      {"tensors", tensors}};
  Context ctx(m.dump());
  ctx.prepare();
  for (size_t k = 0; k < ins.size(); ++k)
    if (ins[k])
      for (size_t i = 0; i < ins[k]->v.size(); ++i)
        writeElem(ctx.tensor(ids[3 + k]), static_cast<int64_t>(i), ins[k]->v[i]);
  Tensor &y = ctx.tensor(ids[1]);
  for (int64_t i = 0; i < y.numel; ++i)
    writeElem(y, i, 12345.0);
  if (setup) {
    ctx.beginSetup();
    fn(&ctx, 0, ids.data(), ia.data(), fa.data(), nullptr);
    ctx.endSetup();
    EXPECT_EQ(ctx.error(), "");
    EXPECT_EQ(ctx.kernelStateCount(), 1u) << "the setup run makes the primitive";
    for (int64_t i = 0; i < y.numel; ++i)
      if (readElem(y, i) != 12345.0) {
        ADD_FAILURE() << "the setup run wrote the result at " << i;
        break;
      }
  }
  fn(&ctx, 0, ids.data(), ia.data(), fa.data(), nullptr);
  EXPECT_EQ(ctx.error(), "");
  StatefulRun r;
  r.states = ctx.kernelStateCount();
  r.heldBytes = ctx.kernelStateBytes();
  for (int64_t i = 0; i < y.numel; ++i)
    r.y.push_back(readElem(y, i));
  return r;
}

/// layer_norm in double over the trailing n elements of each row.
std::vector<double> layerNormRef(const Val &x, int64_t n, const Val &scale,
                                 const std::optional<Val> &bias, double eps) {
  std::vector<double> r(x.v.size());
  for (size_t o = 0; o < x.v.size() / n; ++o) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j)
      mean += x.v[o * n + j] / n;
    for (int64_t j = 0; j < n; ++j)
      var += (x.v[o * n + j] - mean) * (x.v[o * n + j] - mean) / n;
    for (int64_t j = 0; j < n; ++j)
      r[o * n + j] = (x.v[o * n + j] - mean) / std::sqrt(var + eps) * scale.v[j] +
                     (bias ? bias->v[j] : 0.0);
  }
  return r;
}

} // namespace

// f32 layer_norm runs on oneDNN's layer normalization; the own kernel (f64,
// f16, bf16, broadcast parameters) must give the same results on the same
// data: ~1e-6 relative, both within 1e-5 of the double reference.
TEST(LayerNorm, OnednnAndOwnKernelAgree) {
  struct Shape {
    std::vector<int64_t> x;
    int64_t axis;
  };
  unsigned seed = 100;
  for (const Shape &sh : {Shape{{128, 768}, -1}, Shape{{4, 64, 64}, -1}, Shape{{6, 40, 35}, 1},
                          Shape{{2048, 1}, -1}, Shape{{1, 3000}, 1}}) {
    int64_t axis = sh.axis < 0 ? static_cast<int64_t>(sh.x.size()) + sh.axis : sh.axis;
    std::vector<int64_t> trailing(sh.x.begin() + axis, sh.x.end());
    int64_t n = numElements(trailing);
    Val x = randomVal(HPCRT_F32, sh.x, seed++);
    for (double &v : x.v)
      v = static_cast<float>(3 * v + 0.5);
    Val scale = randomVal(HPCRT_F32, trailing, seed++), bias = randomVal(HPCRT_F32, trailing, seed++);
    for (bool withBias : {true, false}) {
      SCOPED_TRACE(shapeString(sh.x) + (withBias ? " with bias" : " without bias"));
      std::optional<Val> b = withBias ? std::optional<Val>(bias) : std::nullopt;
      StatefulRun dnnl = runStateful(hpcrt_layer_norm, {x, scale, b}, {sh.axis}, {1e-5});
      EXPECT_EQ(dnnl.states, 1u) << "the f32 layer_norm runs on a oneDNN primitive";
      StatefulRun own;
      {
        OwnKernelsOnly scope;
        own = runStateful(hpcrt_layer_norm, {x, scale, b}, {sh.axis}, {1e-5});
      }
      EXPECT_EQ(own.states, 0u);
      expectNear(dnnl.y, own.y, 2e-6, 2e-6);
      std::vector<double> want = layerNormRef(x, n, scale, b, 1e-5);
      expectNear(dnnl.y, want, 1e-5, 1e-5);
      expectNear(own.y, want, 1e-5, 1e-5);
    }
  }
}

TEST(LayerNorm, SetupRunMakesThePrimitive) {
  Val x = randomVal(HPCRT_F32, {64, 64}, 120), scale = randomVal(HPCRT_F32, {64}, 121),
      bias = randomVal(HPCRT_F32, {64}, 122);
  StatefulRun r = runStateful(hpcrt_layer_norm, {x, scale, bias}, {-1}, {1e-3}, /*setup=*/true);
  EXPECT_EQ(r.states, 1u);
  expectNear(r.y, layerNormRef(x, 64, scale, bias, 1e-3), 1e-5, 1e-5);
}

TEST(LayerNorm, OwnKernelForOtherDtypesSmallShapesAndBroadcastParameters) {
  // Below 2048 elements: the own row kernel (cheaper than a oneDNN call).
  Val xs = randomVal(HPCRT_F32, {16, 64}, 128), ss = randomVal(HPCRT_F32, {64}, 129);
  StatefulRun rs = runStateful(hpcrt_layer_norm, {xs, ss, ss}, {-1}, {1e-5});
  EXPECT_EQ(rs.states, 0u);
  expectNear(rs.y, layerNormRef(xs, 64, ss, ss, 1e-5), 1e-5, 1e-5);
  Val x = randomVal(HPCRT_F64, {64, 64}, 123), scale = randomVal(HPCRT_F64, {64}, 124),
      bias = randomVal(HPCRT_F64, {64}, 125);
  StatefulRun r = runStateful(hpcrt_layer_norm, {x, scale, bias}, {-1}, {1e-5});
  EXPECT_EQ(r.states, 0u) << "oneDNN has no f64";
  expectNear(r.y, layerNormRef(x, 64, scale, bias, 1e-5), 1e-12, 1e-12);
  // A scale broadcast over the trailing [3, 4]: the own kernel.
  Val xf = randomVal(HPCRT_F32, {256, 3, 4}, 126), s4 = randomVal(HPCRT_F32, {4}, 127);
  StatefulRun rb = runStateful(hpcrt_layer_norm, {xf, s4, std::nullopt}, {1}, {1e-5});
  EXPECT_EQ(rb.states, 0u);
  Val s12{HPCRT_F32, {12}, {}};
  for (int j = 0; j < 12; ++j)
    s12.v.push_back(s4.v[j % 4]);
  expectNear(rb.y, layerNormRef(xf, 12, s12, std::nullopt, 1e-5), 1e-5, 1e-5);
}

/// d<layer_norm(x), dy>/dx by central differences of layerNormRef (double).
std::vector<double> layerNormGradRef(const Val &x, int64_t n, const Val &scale, const Val &dy,
                                     double eps) {
  std::vector<double> r(x.v.size());
  const double h = 1e-6;
  auto loss = [&](const Val &at) {
    std::vector<double> y = layerNormRef(at, n, scale, std::nullopt, eps);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i)
      l += y[i] * dy.v[i];
    return l;
  };
  for (size_t i = 0; i < x.v.size(); ++i) {
    Val up = x, down = x;
    up.v[i] += h;
    down.v[i] -= h;
    r[i] = (loss(up) - loss(down)) / (2 * h);
  }
  return r;
}

// layer_norm_grad: the own loop (f64) against central differences of the
// forward; the f32 oneDNN path (forward_training for the statistics, then
// backward_data) against the own loop; bf16 within its rounding.
TEST(LayerNormGrad, MatchesFiniteDifferencesAndOnednnAgrees) {
  Val x = randomVal(HPCRT_F64, {3, 2, 5}, 140), scale = randomVal(HPCRT_F64, {2, 5}, 141),
      dy = randomVal(HPCRT_F64, {3, 2, 5}, 142);
  StatefulRun r = runStateful(hpcrt_layer_norm_grad, {x, scale, dy}, {1}, {1e-3});
  EXPECT_EQ(r.states, 0u) << "oneDNN has no f64";
  expectNear(r.y, layerNormGradRef(x, 10, scale, dy, 1e-3), 1e-7, 1e-8);

  unsigned seed = 143;
  for (std::vector<int64_t> shape : {std::vector<int64_t>{64, 512}, {4, 32, 96}}) {
    SCOPED_TRACE(shapeString(shape));
    int64_t n = shape.back();
    Val x32 = randomVal(HPCRT_F32, shape, seed++), s32 = randomVal(HPCRT_F32, {n}, seed++),
        dy32 = randomVal(HPCRT_F32, shape, seed++);
    for (double &v : x32.v)
      v = static_cast<float>(3 * v + 0.5);
    StatefulRun dnnl = runStateful(hpcrt_layer_norm_grad, {x32, s32, dy32}, {-1}, {1e-5});
    EXPECT_EQ(dnnl.states, 1u) << "the f32 layer_norm_grad runs on oneDNN";
    // Held only once both primitives exist: means, variances, scale gradient.
    EXPECT_EQ(dnnl.heldBytes, (2 * numElements(shape) / n + n) * sizeof(float));
    StatefulRun setup =
        runStateful(hpcrt_layer_norm_grad, {x32, s32, dy32}, {-1}, {1e-5}, /*setup=*/true);
    Val x64 = x32, s64 = s32, dy64 = dy32;
    x64.dtype = s64.dtype = dy64.dtype = HPCRT_F64;
    StatefulRun want = runStateful(hpcrt_layer_norm_grad, {x64, s64, dy64}, {-1}, {1e-5});
    expectNear(dnnl.y, want.y, 1e-4, 1e-5);
    expectNear(setup.y, want.y, 1e-4, 1e-5);
    StatefulRun own;
    {
      OwnKernelsOnly scope;
      own = runStateful(hpcrt_layer_norm_grad, {x32, s32, dy32}, {-1}, {1e-5});
    }
    EXPECT_EQ(own.states, 0u);
    expectNear(own.y, want.y, 1e-5, 1e-6);
  }
  Val xb = randomVal(HPCRT_F64, {4, 16}, 150), sb = randomVal(HPCRT_F64, {16}, 151),
      dyb = randomVal(HPCRT_F64, {4, 16}, 152);
  for (Val *v : {&xb, &sb, &dyb})
    for (double &e : v->v)
      e = bf16ToFloat(floatToBf16(static_cast<float>(e)));
  StatefulRun want = runStateful(hpcrt_layer_norm_grad, {xb, sb, dyb}, {-1}, {1e-5});
  xb.dtype = sb.dtype = dyb.dtype = HPCRT_BF16;
  StatefulRun rb = runStateful(hpcrt_layer_norm_grad, {xb, sb, dyb}, {-1}, {1e-5});
  expectNear(rb.y, want.y, 1e-2, 1e-2);
}

TEST(LayerNormGrad, BadShapesAreErrors) {
  Val x = randomVal(HPCRT_F32, {2, 3}, 160), s2 = randomVal(HPCRT_F32, {2}, 161),
      dy = randomVal(HPCRT_F32, {2, 3}, 162);
  Result r = run({hpcrt_layer_norm_grad, {x, s2, dy}, {{HPCRT_F32, {2, 3}}}, {-1}, {1e-5}});
  EXPECT_NE(r.error.find("scale"), std::string::npos) << r.error;
  Val s3 = randomVal(HPCRT_F32, {3}, 163), dy6 = randomVal(HPCRT_F32, {6}, 164);
  EXPECT_NE(run({hpcrt_layer_norm_grad, {x, s3, dy6}, {{HPCRT_F32, {2, 3}}}, {-1}, {1e-5}}).error,
            "");
}

// log_softmax keeps its own row kernel (KernelsNorm.cpp says why): wide
// rows (the vectorized body and its tail), masked logits, another axis.
TEST(LogSoftmax, WideRowsMasksAndAxes) {
  unsigned seed = 130;
  for (const std::vector<int64_t> &shape :
       {std::vector<int64_t>{128, 1000}, {4, 4, 64, 64}, {3, 50257}, {5, 7}, {1}}) {
    SCOPED_TRACE(shapeString(shape));
    Val x = randomVal(HPCRT_F32, shape, seed++);
    for (double &v : x.v)
      v = static_cast<float>(8 * v);
    StatefulRun r = runStateful(hpcrt_log_softmax, {x}, {-1}, {});
    expectNear(r.y, softmaxRef(x, static_cast<int>(shape.size()) - 1, true), 1e-6, 2e-6);
  }
  Val masked = f32({2, 3}, {0, -INFINITY, 1, -INFINITY, 2, -INFINITY});
  StatefulRun rm = runStateful(hpcrt_log_softmax, {masked}, {1}, {});
  std::vector<double> wm = softmaxRef(masked, 1, true);
  for (size_t i = 0; i < wm.size(); ++i) {
    if (std::isinf(wm[i]))
      EXPECT_EQ(rm.y[i], -INFINITY) << "at " << i;
    else
      EXPECT_NEAR(rm.y[i], wm[i], 1e-6) << "at " << i;
  }
  Val x3 = randomVal(HPCRT_F32, {3, 5, 4}, 140);
  expectNear(runStateful(hpcrt_log_softmax, {x3}, {1}, {}).y, softmaxRef(x3, 1, true), 1e-5,
             1e-5);
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

// reduce_sum_square: f32 over contiguous runs of every length (Simd.h's
// sumSqRowD), strided reductions, one output of many elements (the split
// path), f64 and i32, against sums of squares in double.
TEST(Reduce, SumSquare) {
  for (int64_t n : {1, 7, 8, 9, 17, 129}) {
    SCOPED_TRACE("n " + std::to_string(n));
    Val x = randomVal(HPCRT_F32, {3, 4, n}, 70 + static_cast<unsigned>(n));
    std::vector<double> inner(3, 0), outer(4 * n, 0);
    for (int64_t i = 0; i < 3 * 4 * n; ++i) {
      inner[i / (4 * n)] += x.v[i] * x.v[i];
      outer[i % (4 * n)] += x.v[i] * x.v[i];
    }
    expectNear(run1({hpcrt_reduce_sum_square, {x}, {{HPCRT_F32, {3}}}, {2, 1, 2, 0}}), inner,
               1e-6, 1e-7);
    expectNear(run1({hpcrt_reduce_sum_square, {x}, {{HPCRT_F32, {1, 4, n}}}, {1, 0, 1}}), outer,
               1e-6, 1e-7);
  }
  int64_t n = 300000;
  Val big{HPCRT_F32, {n}, std::vector<double>(static_cast<size_t>(n))};
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    big.v[i] = static_cast<float>((i % 97) * 0.01 - 0.3);
    want += big.v[i] * big.v[i];
  }
  expectNear(run1({hpcrt_reduce_sum_square, {big}, {{HPCRT_F32, {}}}, {1, 0, 0}}), {want}, 1e-9,
             0);
  Val d = randomVal(HPCRT_F64, {2, 5}, 80);
  std::vector<double> rows(2, 0);
  for (int i = 0; i < 10; ++i)
    rows[i / 5] += d.v[i] * d.v[i];
  expectNear(run1({hpcrt_reduce_sum_square, {d}, {{HPCRT_F64, {2}}}, {1, 1, 0}}), rows, 1e-15,
             1e-15);
  EXPECT_EQ(run1({hpcrt_reduce_sum_square, {val(HPCRT_I32, {2, 2}, {2, -3, 4, 5})},
                  {{HPCRT_I32, {2}}}, {1, 0, 0}}),
            (std::vector<double>{20, 34}));
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

TEST(Reduce, ContiguousReducedRunsOfEveryLength) {
  // f32 sums over contiguous innermost runs go through the vector double
  // lanes (Simd.h's sumRowD); lengths around the vector width, reduced
  // axes inside and outside, means too, against sums in double.
  for (int64_t n : {1, 7, 8, 9, 15, 17, 37, 64, 129}) {
    Val x = randomVal(HPCRT_F32, {3, 4, n}, 61 + static_cast<unsigned>(n));
    std::vector<double> inner(3, 0), outer(4 * n, 0);
    for (int64_t i = 0; i < 3 * 4 * n; ++i) {
      inner[i / (4 * n)] += x.v[i];
      outer[i % (4 * n)] += x.v[i];
    }
    SCOPED_TRACE("n " + std::to_string(n));
    // iattrs: axes (count, values), keepdims.
    expectNear(run1({hpcrt_reduce_sum, {x}, {{HPCRT_F32, {3}}}, {2, 1, 2, 0}}), inner, 1e-6, 1e-6);
    std::vector<double> mean = inner;
    for (double &m : mean)
      m /= static_cast<double>(4 * n);
    expectNear(run1({hpcrt_reduce_mean, {x}, {{HPCRT_F32, {3, 1, 1}}}, {2, 1, 2, 1}}), mean, 1e-6,
               1e-7);
    expectNear(run1({hpcrt_reduce_sum, {x}, {{HPCRT_F32, {4, n}}}, {1, 0, 0}}), outer, 1e-6, 1e-6);
  }
}
