//===- TrainKernelsTest.cpp - training kernels and float64 forward kernels -===//
//
// The kernels of the training ops against references computed here in
// double: sgd_update / adamw_update against a plain re-implementation of
// PyTorch's formulas over three steps; conv_weight_grad against a direct
// loop and against central differences of the forward conv kernel (f64);
// max_pool_grad against central differences of max_pool and avg_pool_grad
// through the adjoint identity <avg_pool(v), dy> = <avg_pool_grad(x, dy), v>;
// gelu_grad against central differences of GELU in double, its f32 oneDNN
// path against its own loop. Then the float64 forms of the forward kernels that the float64 gradient
// checks of training programs run, against double references.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"
#include "cpu/Dnnl.h"

#include <algorithm>
#include <numeric>


using namespace hpcrt;
using namespace hpcrt::test;

namespace {

std::vector<int64_t> cat(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> out;
  for (const auto &p : parts)
    out.insert(out.end(), p.begin(), p.end());
  return out;
}

/// An attribute array as the ABI encodes it: count, then values.
std::vector<int64_t> arr(const std::vector<int64_t> &v) {
  return cat({{static_cast<int64_t>(v.size())}, v});
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  EXPECT_EQ(a.size(), b.size());
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// |got - want| <= rtol * max(|want|, floor) element by element, where the
/// floor (a tenth of the largest |want|) keeps elements near zero from
/// asking for more than the tensor's precision.
void expectRel(const std::vector<double> &got, const std::vector<double> &want, double rtol,
               const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want)
    scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rtol * std::max(std::fabs(want[i]), 0.1 * scale))
        << what << " at " << i;
}

/// A call's operands and results after it ran (the optimizer updates write
/// their operands in place).
struct After {
  std::vector<Val> operands, results;
  std::string error;
};

/// The updates' operand places: sgd_update 7 (param, grad, lr, buffer,
/// guard, clip norm, clip max norm), adamw_update 9; the tests below leave
/// out the trailing clip places they do not use.
Call withClipPlaces(Call c) {
  size_t places = c.fn == hpcrt_sgd_update ? 7 : c.fn == hpcrt_adamw_update ? 9 : 0;
  while (c.ins.size() < places)
    c.ins.push_back(std::nullopt);
  return c;
}

/// RuntimeTestUtils' run(), with the operands read back after the call.
After runInPlace(const Call &c) {
  Result r = run(withClipPlaces(c));
  return After{r.ins, r.outs, r.error};
}

/// Distinct values (a shuffled grid in [-1, 1) with spacing 2 / n): no two
/// elements of a pooling window are within a finite-difference step.
Val distinctVal(int dtype, std::vector<int64_t> shape, unsigned seed) {
  Val x{dtype, std::move(shape), {}};
  int64_t n = numElements(x.shape);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 gen(seed);
  std::shuffle(perm.begin(), perm.end(), gen);
  for (int64_t p : perm)
    x.v.push_back(static_cast<float>(-1.0 + 2.0 * static_cast<double>(p) / static_cast<double>(n)));
  return x;
}

//===----------------------------------------------------------------------===//
// sgd_update
//===----------------------------------------------------------------------===//

struct SgdConfig {
  double momentum, weightDecay;
  bool nesterov;
};

/// torch.optim.SGD (dampening 0) in double, one step.
void sgdRef(const SgdConfig &cfg, double lr, std::vector<double> &p, const std::vector<double> &g,
            std::vector<double> &buf) {
  for (size_t i = 0; i < p.size(); ++i) {
    double d = g[i] + (cfg.weightDecay != 0 ? cfg.weightDecay * p[i] : 0.0);
    if (cfg.momentum != 0) {
      buf[i] = cfg.momentum * buf[i] + d;
      d = cfg.nesterov ? d + cfg.momentum * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
}

void checkSgd(int dtype, const SgdConfig &cfg, double rtol) {
  std::vector<int64_t> shape = {3, 7};
  Val param = randomVal(dtype, shape, 1);
  Val buf{dtype, shape, std::vector<double>(21, 0.0)};
  std::vector<double> refP = param.v, refBuf = buf.v;
  const double lrs[3] = {0.5, 0.25, 0.125 + 1.0 / 1024};
  for (int step = 0; step < 3; ++step) {
    Val grad = randomVal(dtype, shape, 10 + step);
    std::optional<Val> bufOpt;
    if (cfg.momentum != 0)
      bufOpt = buf;
    Call call{hpcrt_sgd_update,
              {param, grad, f32({}, {lrs[step]}), bufOpt, std::nullopt},
              {},
              {cfg.nesterov ? 1 : 0},
              {cfg.momentum, cfg.weightDecay}};
    After r = runInPlace(call);
    ASSERT_EQ(r.error, "");
    sgdRef(cfg, lrs[step], refP, grad.v, refBuf);
    param.v = r.operands[0].v;
    expectRel(param.v, refP, rtol, "param");
    if (cfg.momentum != 0) {
      buf.v = r.operands[3].v;
      expectRel(buf.v, refBuf, rtol, "momentum_buffer");
    }
    EXPECT_EQ(r.operands[1].v, grad.v) << "grad is read only";
  }
}

TEST(TrainSgd, MatchesPyTorchFormulasOverThreeSteps) {
  const SgdConfig configs[] = {
      {0.0, 0.0, false}, {0.0, 0.05, false}, {0.9, 0.0, false}, {0.9, 0.01, false},
      {0.8, 0.1, true}};
  for (const SgdConfig &cfg : configs) {
    SCOPED_TRACE("momentum " + std::to_string(cfg.momentum) + " weight_decay " +
                 std::to_string(cfg.weightDecay) + " nesterov " + std::to_string(cfg.nesterov));
    checkSgd(HPCRT_F32, cfg, 1e-6);
    checkSgd(HPCRT_F64, cfg, 1e-13);
  }
}

TEST(TrainSgd, FirstMomentumStepIsTheGradient) {
  // buf starts at zero: the first step's buffer is g (PyTorch clones it).
  Val p = f32({3}, {1, 2, 3}), g = f32({3}, {0.5, -0.25, 2}), buf = f32({3}, {0, 0, 0});
  After r = runInPlace({hpcrt_sgd_update, {p, g, f32({}, {0.5}), buf, std::nullopt}, {}, {0}, {0.9, 0.0}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.operands[3].v, g.v);
  EXPECT_EQ(r.operands[0].v, (std::vector<double>{0.75, 2.125, 2}));
}

TEST(TrainUpdates, ANonFiniteNormSkipsTheUpdate) {
  // unless_nonfinite (the step's gradient norm): NaN or infinity leaves the
  // parameter and the optimizer state bitwise as they were (GradScaler's
  // skipped step); a finite one is the plain update.
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  Val p = f32({3}, {1, 2, 3}), g = f32({3}, {nan, -0.25, 2}), buf = f32({3}, {0.5, 0.5, 0.5});
  for (double norm : {nan, inf, -inf}) {
    After r = runInPlace({hpcrt_sgd_update, {p, g, f32({}, {0.5}), buf, f32({}, {norm})}, {}, {0},
                          {0.9, 0.01}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.operands[0].v, p.v);
    EXPECT_EQ(r.operands[3].v, buf.v);
    Val m = f32({3}, {0.125, 0.25, -0.5}), v = f32({3}, {0.0625, 0.25, 1.5});
    r = runInPlace({hpcrt_adamw_update,
                    {p, g, m, v, f32({}, {0.5}), val(HPCRT_I64, {}, {3}), f32({}, {norm})},
                    {}, {}, {0.9, 0.999, 1e-8, 0.01}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.operands[0].v, p.v);
    EXPECT_EQ(r.operands[2].v, m.v);
    EXPECT_EQ(r.operands[3].v, v.v);
  }
  Val finite = f32({3}, {0.5, -0.25, 2});
  After guarded = runInPlace(
      {hpcrt_sgd_update, {p, finite, f32({}, {0.5}), buf, f32({}, {2.1})}, {}, {0}, {0.9, 0.0}});
  After plain = runInPlace(
      {hpcrt_sgd_update, {p, finite, f32({}, {0.5}), buf, std::nullopt}, {}, {0}, {0.9, 0.0}});
  ASSERT_EQ(guarded.error, "");
  EXPECT_EQ(guarded.operands[0].v, plain.operands[0].v);
  EXPECT_NE(guarded.operands[0].v, p.v);
}

TEST(TrainUpdates, ClipScalesTheGradientAsItIsRead) {
  // clip(norm, max_norm): the update of g * min(1, max_norm / (norm + 1e-6))
  // (f32, clip_grad_norm_'s factor) equals the plain update of that scaled
  // gradient, bit for bit; a max norm above the norm (or infinite) leaves
  // the gradient as it is.
  Val p = f32({3}, {1, 2, 3}), g = f32({3}, {0.5, -0.25, 2}), buf = f32({3}, {0.5, 0.5, 0.5});
  Val m = f32({3}, {0.125, 0.25, -0.5}), v = f32({3}, {0.0625, 0.25, 1.5});
  const float norm = 4.0f, maxNorm = 1.0f, coef = maxNorm / (norm + 1e-6f);
  Val scaled = g;
  for (double &x : scaled.v)
    x = static_cast<double>(static_cast<float>(x) * coef);
  Val lr = f32({}, {0.5}), step = val(HPCRT_I64, {}, {3});
  for (double limit : {double(maxNorm), 8.0, std::numeric_limits<double>::infinity()}) {
    const Val &want = limit == maxNorm ? scaled : g;
    After clipped = runInPlace({hpcrt_sgd_update,
                                {p, g, lr, buf, std::nullopt, f32({}, {norm}), f32({}, {limit})},
                                {}, {0}, {0.9, 0.01}});
    After plain = runInPlace({hpcrt_sgd_update, {p, want, lr, buf}, {}, {0}, {0.9, 0.01}});
    ASSERT_EQ(clipped.error, "");
    EXPECT_EQ(clipped.operands[0].v, plain.operands[0].v) << limit;
    EXPECT_EQ(clipped.operands[3].v, plain.operands[3].v) << limit;
    clipped = runInPlace({hpcrt_adamw_update,
                          {p, g, m, v, lr, step, std::nullopt, f32({}, {norm}), f32({}, {limit})},
                          {}, {}, {0.9, 0.999, 1e-8, 0.01}});
    plain = runInPlace({hpcrt_adamw_update, {p, want, m, v, lr, step}, {}, {}, {0.9, 0.999, 1e-8, 0.01}});
    ASSERT_EQ(clipped.error, "");
    EXPECT_EQ(clipped.operands[0].v, plain.operands[0].v) << limit;
    EXPECT_EQ(clipped.operands[2].v, plain.operands[2].v) << limit;
    EXPECT_EQ(clipped.operands[3].v, plain.operands[3].v) << limit;
  }
}

TEST(TrainSgd, BadOperandsAreErrors) {
  Val p = f32({4}, {1, 2, 3, 4}), g = f32({4}, {1, 1, 1, 1});
  auto err = [&](const Call &c) { return runInPlace(c).error; };
  EXPECT_NE(err({hpcrt_sgd_update, {p, f32({3}, {1, 1, 1}), f32({}, {0.1}), std::nullopt, std::nullopt}, {}, {0},
                 {0.0, 0.0}})
                .find("grad has shape [3]"),
            std::string::npos);
  EXPECT_NE(err({hpcrt_sgd_update, {p, g, f32({}, {0.1}), std::nullopt, std::nullopt}, {}, {0}, {0.9, 0.0}})
                .find("needs a momentum_buffer"),
            std::string::npos);
  EXPECT_NE(err({hpcrt_sgd_update, {p, g, val(HPCRT_F64, {}, {0.1}), std::nullopt, std::nullopt}, {}, {0},
                 {0.0, 0.0}})
                .find("lr must be a 0-d f32 tensor"),
            std::string::npos);
  EXPECT_NE(err({hpcrt_sgd_update, {p, val(HPCRT_F64, {4}, {1, 1, 1, 1}), f32({}, {0.1}),
                                    std::nullopt, std::nullopt},
                 {}, {0}, {0.0, 0.0}})
                .find("grad has dtype f64"),
            std::string::npos);
  Val h = val(HPCRT_F16, {4}, {1, 2, 3, 4});
  EXPECT_NE(err({hpcrt_sgd_update, {h, h, f32({}, {0.1}), std::nullopt, std::nullopt}, {}, {0}, {0.0, 0.0}})
                .find("is not supported"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// adamw_update
//===----------------------------------------------------------------------===//

struct AdamConfig {
  double beta1, beta2, eps, weightDecay;
};

/// torch.optim.AdamW (amsgrad and maximize off) in double, one step.
void adamwRef(const AdamConfig &cfg, double lr, int64_t step, std::vector<double> &p,
              const std::vector<double> &g, std::vector<double> &m, std::vector<double> &v) {
  double bc1 = 1 - std::pow(cfg.beta1, static_cast<double>(step));
  double bc2 = 1 - std::pow(cfg.beta2, static_cast<double>(step));
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1 - lr * cfg.weightDecay;
    m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g[i];
    v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g[i] * g[i];
    double denom = std::sqrt(v[i]) / std::sqrt(bc2) + cfg.eps;
    p[i] -= lr / bc1 * m[i] / denom;
  }
}

void checkAdamw(int dtype, const AdamConfig &cfg, int64_t firstStep, double rtol) {
  std::vector<int64_t> shape = {5, 4};
  Val param = randomVal(dtype, shape, 2);
  Val m{dtype, shape, std::vector<double>(20, 0.0)}, v = m;
  std::vector<double> refP = param.v, refM = m.v, refV = v.v;
  const double lrs[3] = {1.0 / 64, 1.0 / 128, 1.0 / 256};
  for (int k = 0; k < 3; ++k) {
    int64_t step = firstStep + k;
    Val grad = randomVal(dtype, shape, 20 + k);
    Call call{hpcrt_adamw_update,
              {param, grad, m, v, f32({}, {lrs[k]}), val(HPCRT_I64, {}, {static_cast<double>(step)}),
               std::nullopt},
              {},
              {},
              {cfg.beta1, cfg.beta2, cfg.eps, cfg.weightDecay}};
    After r = runInPlace(call);
    ASSERT_EQ(r.error, "");
    adamwRef(cfg, lrs[k], step, refP, grad.v, refM, refV);
    param.v = r.operands[0].v;
    m.v = r.operands[2].v;
    v.v = r.operands[3].v;
    expectRel(param.v, refP, rtol, "param");
    expectRel(m.v, refM, rtol, "exp_avg");
    expectRel(v.v, refV, rtol, "exp_avg_sq");
  }
}

TEST(TrainAdamW, MatchesPyTorchFormulasOverThreeSteps) {
  const AdamConfig configs[] = {
      {0.9, 0.999, 1e-8, 0.01},  // PyTorch's defaults
      {0.9, 0.95, 1e-6, 0.0},    // no weight decay
      {0.3, 0.9, 1e-3, 0.1},     // 1 - beta1 >= 0.5: lerp's other form
  };
  for (const AdamConfig &cfg : configs) {
    SCOPED_TRACE("beta1 " + std::to_string(cfg.beta1) + " beta2 " + std::to_string(cfg.beta2));
    checkAdamw(HPCRT_F32, cfg, 1, 1e-6);
    checkAdamw(HPCRT_F64, cfg, 1, 1e-12);
    checkAdamw(HPCRT_F64, cfg, 41, 1e-12); // bias corrections of later steps
  }
}

TEST(TrainAdamW, FirstStepMovesEachParamByLr) {
  // Step 1 without weight decay: m / sqrt(v) after bias correction is
  // sign(g), so every param moves by lr (up to eps).
  Val p = val(HPCRT_F64, {3}, {1, 2, 3}), g = val(HPCRT_F64, {3}, {0.5, -4, 1e-3});
  Val z = val(HPCRT_F64, {3}, {0, 0, 0});
  After r = runInPlace({hpcrt_adamw_update, {p, g, z, z, f32({}, {0.125}), val(HPCRT_I64, {}, {1}), std::nullopt},
                        {}, {}, {0.9, 0.999, 1e-12, 0.0}});
  ASSERT_EQ(r.error, "");
  expectNear(r.operands[0].v, {0.875, 2.125, 2.875}, 1e-9, 1e-9);
}

TEST(TrainAdamW, BadOperandsAreErrors) {
  Val p = f32({2}, {1, 2}), g = f32({2}, {1, 1}), z = f32({2}, {0, 0});
  auto err = [&](const Val &m, const Val &lr, const Val &step) {
    return runInPlace({hpcrt_adamw_update, {p, g, m, z, lr, step, std::nullopt}, {}, {}, {0.9, 0.999, 1e-8, 0.01}})
        .error;
  };
  Val lr = f32({}, {0.1}), one = val(HPCRT_I64, {}, {1});
  EXPECT_NE(err(z, lr, val(HPCRT_I64, {}, {0})).find("step 0 is not positive"), std::string::npos);
  EXPECT_NE(err(z, lr, val(HPCRT_I32, {}, {1})).find("step must be a 0-d i64 tensor"),
            std::string::npos);
  EXPECT_NE(err(z, f32({1}, {0.1}), one).find("lr must be a 0-d f32 tensor"), std::string::npos);
  EXPECT_NE(err(f32({1, 2}, {0, 0}), lr, one).find("exp_avg has shape [1, 2]"), std::string::npos);
  EXPECT_EQ(err(z, lr, one), "");
}

//===----------------------------------------------------------------------===//
// conv_weight_grad
//===----------------------------------------------------------------------===//

struct ConvWCase {
  std::vector<int64_t> x;      ///< [N, C, D...]
  int64_t M;                   ///< filters
  std::vector<int64_t> k, strides, pads, dilations;
  int64_t group;
};

std::vector<int64_t> convOutShape(const ConvWCase &c) {
  std::vector<int64_t> out = {c.x[0], c.M};
  size_t r = c.k.size();
  for (size_t d = 0; d < r; ++d)
    out.push_back((c.x[2 + d] + c.pads[d] + c.pads[d + r] - c.dilations[d] * (c.k[d] - 1) - 1) /
                      c.strides[d] + 1);
  return out;
}

std::vector<int64_t> filterShape(const ConvWCase &c) {
  return cat({{c.M, c.x[1] / c.group}, c.k});
}

/// dw[m, c, k...] = sum over images n and outputs o of
/// dy[n, m, o] * x[n, group(m) * Cg + c, o * stride - pad + k * dilation].
std::vector<double> convWeightGradRef(const ConvWCase &c, const Val &x, const Val &dy) {
  std::vector<int64_t> ws = filterShape(c), ys = convOutShape(c);
  size_t r = c.k.size();
  int64_t N = c.x[0], C = c.x[1], Cg = C / c.group, Mg = c.M / c.group;
  int64_t kSize = numElements(c.k);
  std::vector<int64_t> oshape(ys.begin() + 2, ys.end()), xsp(c.x.begin() + 2, c.x.end());
  int64_t oSize = numElements(oshape), inSize = numElements(xsp);
  std::vector<double> dw(static_cast<size_t>(numElements(ws)), 0.0);
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t ci = 0; ci < Cg; ++ci)
      for (int64_t kk = 0; kk < kSize; ++kk)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t o = 0; o < oSize; ++o) {
            int64_t krem = kk, orem = o, off = 0, mult = 1;
            bool inside = true;
            for (size_t d = r; d-- > 0;) {
              int64_t kd = krem % c.k[d], od = orem % oshape[d];
              krem /= c.k[d];
              orem /= oshape[d];
              int64_t i = od * c.strides[d] - c.pads[d] + kd * c.dilations[d];
              inside = inside && i >= 0 && i < xsp[d];
              off += i * mult;
              mult *= xsp[d];
            }
            if (!inside)
              continue;
            int64_t chan = (m / Mg) * Cg + ci;
            dw[(m * Cg + ci) * kSize + kk] +=
                dy.v[(n * c.M + m) * oSize + o] * x.v[(n * C + chan) * inSize + off];
          }
  return dw;
}

std::vector<int64_t> convWeightGradAttrs(const ConvWCase &c) {
  // dilations, group, kernel_shape, pads, strides
  return cat({arr(c.dilations), {c.group}, arr(c.k), arr(c.pads), arr(c.strides)});
}

std::vector<int64_t> convAttrs(const ConvWCase &c) {
  // dilations, group, pads, strides
  return cat({arr(c.dilations), {c.group}, arr(c.pads), arr(c.strides)});
}

const std::vector<ConvWCase> &convCases() {
  static const std::vector<ConvWCase> cases = {
      {{2, 3, 11}, 4, {3}, {2}, {1, 2}, {1}, 1},                            // 1-D
      {{2, 4, 7, 6}, 6, {3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 2}, 2},           // groups, dilation
      {{1, 2, 5, 4, 4}, 3, {2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {2, 1, 1}, 1}, // 3-D
      {{3, 5, 4, 4}, 2, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},           // pointwise
      {{2, 3, 6, 6}, 3, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 3},           // depthwise
      {{1, 2, 9, 8}, 2, {2, 2}, {3, 3}, {0, 0, 1, 0}, {1, 1}, 1},           // strides > kernel
  };
  return cases;
}

TEST(TrainConvWeightGrad, MatchesDirectLoops) {
  unsigned seed = 300;
  for (const ConvWCase &c : convCases()) {
    for (int dtype : {HPCRT_F32, HPCRT_F64}) {
      Val x = randomVal(dtype, c.x, seed++), dy = randomVal(dtype, convOutShape(c), seed++);
      auto got = run1({hpcrt_conv_weight_grad, {x, dy}, {{dtype, filterShape(c)}},
                       convWeightGradAttrs(c)});
      expectRel(got, convWeightGradRef(c, x, dy), dtype == HPCRT_F64 ? 1e-12 : 1e-5,
                "conv_weight_grad");
    }
  }
}

TEST(TrainConvWeightGrad, LargeProductsOnBlas) {
  // 64 x 576 x 1024 per image: OpenBLAS's path for f32 as well.
  ConvWCase c{{2, 64, 32, 32}, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  for (int dtype : {HPCRT_F32, HPCRT_F64}) {
    Val x = randomVal(dtype, c.x, 41), dy = randomVal(dtype, convOutShape(c), 42);
    auto got = run1({hpcrt_conv_weight_grad, {x, dy}, {{dtype, filterShape(c)}},
                     convWeightGradAttrs(c)});
    expectRel(got, convWeightGradRef(c, x, dy), dtype == HPCRT_F64 ? 1e-12 : 1e-4,
              "conv_weight_grad");
  }
}

TEST(TrainConvWeightGrad, MatchesFiniteDifferencesOfConv) {
  // L(w) = <conv(x, w), dy>; dL/dw = conv_weight_grad(x, dy). Central
  // differences of the forward conv kernel, in float64.
  unsigned seed = 400;
  const double e = 1e-4;
  for (const ConvWCase &c : convCases()) {
    Val x = randomVal(HPCRT_F64, c.x, seed++), dy = randomVal(HPCRT_F64, convOutShape(c), seed++);
    Val w = randomVal(HPCRT_F64, filterShape(c), seed++);
    auto loss = [&](const Val &wv) {
      auto y = run1({hpcrt_conv, {x, wv, std::nullopt, std::nullopt}, {{HPCRT_F64, convOutShape(c)}},
                     convAttrs(c), {}, {"none"}});
      return dot(y, dy.v);
    };
    std::vector<double> fd(w.v.size());
    for (size_t j = 0; j < w.v.size(); ++j) {
      Val plus = w, minus = w;
      plus.v[j] += e;
      minus.v[j] -= e;
      fd[j] = (loss(plus) - loss(minus)) / (2 * e);
    }
    auto got = run1({hpcrt_conv_weight_grad, {x, dy}, {{HPCRT_F64, filterShape(c)}},
                     convWeightGradAttrs(c)});
    expectRel(got, fd, 1e-6, "conv_weight_grad vs finite differences");
  }
}

TEST(TrainConvWeightGrad, HalfPrecisionWidens) {
  ConvWCase c = convCases()[1];
  Val x = randomVal(HPCRT_F64, c.x, 5), dy = randomVal(HPCRT_F64, convOutShape(c), 6);
  Val xh = x, dyh = dy;
  xh.dtype = dyh.dtype = HPCRT_F16;
  for (double &v : xh.v)
    v = halfToFloat(floatToHalf(static_cast<float>(v)));
  for (double &v : dyh.v)
    v = halfToFloat(floatToHalf(static_cast<float>(v)));
  auto got = run1({hpcrt_conv_weight_grad, {xh, dyh}, {{HPCRT_F16, filterShape(c)}},
                   convWeightGradAttrs(c)});
  expectRel(got, convWeightGradRef(c, xh, dyh), 2e-3, "f16 conv_weight_grad");
}

TEST(TrainConvWeightGrad, BadShapesAreErrors) {
  ConvWCase c = convCases()[1];
  Val x = randomVal(HPCRT_F32, c.x, 1), dy = randomVal(HPCRT_F32, convOutShape(c), 2);
  auto error = [&](const Val &xv, const Val &dyv, std::vector<int64_t> dw, std::vector<int64_t> ia) {
    return run({hpcrt_conv_weight_grad, {xv, dyv}, {{HPCRT_F32, dw}}, ia}).error;
  };
  std::vector<int64_t> ia = convWeightGradAttrs(c);
  EXPECT_EQ(error(x, dy, filterShape(c), ia), "");
  EXPECT_NE(error(x, dy, {6, 4, 3, 2}, ia).find("result has shape [6, 4, 3, 2], expected [6, 2, 3, 2]"),
            std::string::npos);
  Val dyBad = randomVal(HPCRT_F32, {2, 6, 4, 5}, 3);
  EXPECT_NE(error(x, dyBad, filterShape(c), ia).find("grad_output spatial size"),
            std::string::npos);
  ConvWCase g3 = c;
  g3.group = 3;
  EXPECT_NE(error(x, dy, filterShape(c), convWeightGradAttrs(g3)).find("do not split into 3 groups"),
            std::string::npos);
  Val dy64 = randomVal(HPCRT_F64, convOutShape(c), 4);
  EXPECT_NE(error(x, dy64, filterShape(c), ia).find("operand dtype f64"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// max_pool_grad / avg_pool_grad
//===----------------------------------------------------------------------===//

struct PoolCase {
  std::vector<int64_t> x, k, strides, pads, dilations;
  bool ceil;
};

/// ONNX's pooled sizes (ceil_mode: the last window starts inside the input
/// or its begin padding).
std::vector<int64_t> poolOutShape(const PoolCase &c) {
  std::vector<int64_t> out = {c.x[0], c.x[1]};
  size_t r = c.k.size();
  for (size_t d = 0; d < r; ++d) {
    int64_t numer = c.x[2 + d] + c.pads[d] + c.pads[d + r] - ((c.k[d] - 1) * c.dilations[d] + 1);
    int64_t o = (c.ceil ? (numer + c.strides[d] - 1) / c.strides[d] : numer / c.strides[d]) + 1;
    if (c.ceil && (o - 1) * c.strides[d] >= c.x[2 + d] + c.pads[d])
      --o;
    out.push_back(o);
  }
  return out;
}

std::vector<int64_t> poolAttrs(const PoolCase &c, int includePad) {
  // ceil_mode, [count_include_pad], dilations, kernel_shape, pads, strides
  std::vector<int64_t> ia = {c.ceil ? 1 : 0};
  if (includePad >= 0)
    ia.push_back(includePad);
  return cat({ia, arr(c.dilations), arr(c.k), arr(c.pads), arr(c.strides)});
}

/// Direct pooling in double: each window's taps inside the input; max, or
/// the sum over the taps inside the input divided by their count (or by the
/// count of taps inside [-pad_begin, size + pad_end) with count_include_pad).
std::vector<double> poolRef(const PoolCase &c, const Val &x, bool isMax, bool includePad) {
  std::vector<int64_t> ys = poolOutShape(c);
  size_t r = c.k.size();
  std::vector<int64_t> xsp(c.x.begin() + 2, c.x.end()), osp(ys.begin() + 2, ys.end());
  int64_t planes = c.x[0] * c.x[1], inSize = numElements(xsp), oSize = numElements(osp);
  int64_t kSize = numElements(c.k);
  std::vector<double> y;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t o = 0; o < oSize; ++o) {
      double best = -INFINITY, sum = 0;
      int64_t valid = 0, padded = 0;
      for (int64_t kk = 0; kk < kSize; ++kk) {
        int64_t krem = kk, orem = o, off = 0, mult = 1;
        bool inside = true, inPadded = true;
        for (size_t d = r; d-- > 0;) {
          int64_t kd = krem % c.k[d], od = orem % osp[d];
          krem /= c.k[d];
          orem /= osp[d];
          int64_t i = od * c.strides[d] - c.pads[d] + kd * c.dilations[d];
          inside = inside && i >= 0 && i < xsp[d];
          inPadded = inPadded && i >= -c.pads[d] && i < xsp[d] + c.pads[d + r];
          off += i * mult;
          mult *= xsp[d];
        }
        padded += inPadded;
        if (!inside)
          continue;
        ++valid;
        double v = x.v[p * inSize + off];
        best = std::max(best, v);
        sum += v;
      }
      y.push_back(isMax ? best : sum / static_cast<double>(includePad ? padded : valid));
    }
  return y;
}

const std::vector<PoolCase> &poolCases() {
  static const std::vector<PoolCase> cases = {
      {{2, 3, 7, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},     // ceil_mode, pads
      {{1, 2, 9, 10}, {2, 2}, {3, 4}, {0, 1, 1, 0}, {1, 1}, true},    // strides > kernel
      {{1, 2, 9, 10}, {2, 3}, {3, 4}, {1, 0, 0, 1}, {1, 1}, false},   // strides > kernel
      {{1, 1, 6, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false},    // overlapping windows
      {{1, 2, 8, 7}, {2, 3}, {2, 1}, {1, 1, 0, 1}, {2, 2}, true},     // 2-D dilations
      {{2, 2, 13}, {3}, {2}, {2, 1}, {2}, false},                     // 1-D dilation
      {{2, 1, 10}, {4}, {3}, {1, 2}, {1}, true},                      // 1-D ceil_mode
      {{1, 2, 5, 6, 5}, {2, 3, 2}, {2, 1, 2}, {1, 0, 1, 0, 1, 1}, {1, 1, 1}, true}, // 3-D
      {{4, 8, 32, 32}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false}, // planes in parallel
  };
  return cases;
}

TEST(TrainPoolForward, Float64MatchesDirectPooling) {
  unsigned seed = 500;
  for (const PoolCase &c : poolCases()) {
    Val x = randomVal(HPCRT_F64, c.x, seed++);
    std::vector<int64_t> ys = poolOutShape(c);
    expectNear(run1({hpcrt_max_pool, {x}, {{HPCRT_F64, ys}}, poolAttrs(c, -1)}),
               poolRef(c, x, true, false), 1e-15, 0);
    for (int inc : {0, 1})
      expectNear(run1({hpcrt_avg_pool, {x}, {{HPCRT_F64, ys}}, poolAttrs(c, inc)}),
                 poolRef(c, x, false, inc), 1e-14, 1e-15);
  }
}

TEST(TrainMaxPoolGrad, MatchesFiniteDifferencesOfMaxPool) {
  // <max_pool(x + e v) - max_pool(x - e v), dy> / 2e = <max_pool_grad(x, dy), v>
  // in float64; x has distinct values, so no window's maximum moves.
  unsigned seed = 600;
  const double e = 1e-6;
  for (const PoolCase &c : poolCases()) {
    std::vector<int64_t> ys = poolOutShape(c);
    Val x = distinctVal(HPCRT_F64, c.x, seed++), dy = randomVal(HPCRT_F64, ys, seed++);
    Val v = randomVal(HPCRT_F64, c.x, seed++);
    Val xp = x, xm = x;
    for (size_t i = 0; i < x.v.size(); ++i) {
      xp.v[i] += e * v.v[i];
      xm.v[i] -= e * v.v[i];
    }
    auto pool = [&](const Val &in) {
      return run1({hpcrt_max_pool, {in}, {{HPCRT_F64, ys}}, poolAttrs(c, -1)});
    };
    double fd = (dot(pool(xp), dy.v) - dot(pool(xm), dy.v)) / (2 * e);
    auto dx = run1({hpcrt_max_pool_grad, {x, dy}, {{HPCRT_F64, c.x}}, poolAttrs(c, -1)});
    double adj = dot(dx, v.v);
    EXPECT_NEAR(adj, fd, 1e-6 * std::max(1.0, std::fabs(fd)));
    // The same routing in f32 (the values are f32 numbers).
    Val x32 = x, dy32 = dy;
    x32.dtype = dy32.dtype = HPCRT_F32;
    for (double &d : dy32.v)
      d = static_cast<float>(d);
    Val dyRounded = dy32;
    dyRounded.dtype = HPCRT_F64;
    auto dx32 = run1({hpcrt_max_pool_grad, {x32, dy32}, {{HPCRT_F32, c.x}}, poolAttrs(c, -1)});
    auto dx64 = run1({hpcrt_max_pool_grad, {x, dyRounded}, {{HPCRT_F64, c.x}}, poolAttrs(c, -1)});
    expectNear(dx32, dx64, 1e-6, 1e-6);
  }
}

TEST(TrainMaxPoolGrad, FirstMaximumTakesTheGradient) {
  // Ties: every window of ones sends its gradient to its first element
  // inside the input (padding never wins); windows overlap and accumulate.
  PoolCase c{{1, 1, 5}, {3}, {1}, {1, 1}, {1}, false};
  EXPECT_EQ(run1({hpcrt_max_pool_grad, {f32(c.x, {1, 1, 1, 1, 1}), f32({1, 1, 5}, {1, 10, 100, 1000, 10000})},
                  {{HPCRT_F32, c.x}}, poolAttrs(c, -1)}),
            (std::vector<double>{11, 100, 1000, 10000, 0}));
  // Negative values next to padding: the padding (never a candidate) does
  // not take the gradient away.
  PoolCase p{{1, 1, 3}, {2}, {1}, {1, 1}, {1}, false};
  EXPECT_EQ(run1({hpcrt_max_pool_grad, {f32(p.x, {-5, -3, -4}), f32({1, 1, 4}, {1, 1, 1, 1})},
                  {{HPCRT_F32, p.x}}, poolAttrs(p, -1)}),
            (std::vector<double>{1, 2, 1}));
  // A NaN is the window's maximum (max_pool returns it): its first one.
  PoolCase n{{1, 1, 4}, {4}, {1}, {0, 0}, {1}, false};
  EXPECT_EQ(run1({hpcrt_max_pool_grad, {f32(n.x, {1, NAN, 3, NAN}), f32({1, 1, 1}, {2})},
                  {{HPCRT_F32, n.x}}, poolAttrs(n, -1)}),
            (std::vector<double>{0, 2, 0, 0}));
  // 2-D, a plateau of equal values: the first in row-major window order.
  PoolCase q{{1, 1, 2, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false};
  EXPECT_EQ(run1({hpcrt_max_pool_grad, {f32(q.x, {0, 5, 7, 7, 7, 7}), f32({1, 1, 1, 2}, {1, 2})},
                  {{HPCRT_F32, q.x}}, poolAttrs(q, -1)}),
            (std::vector<double>{0, 0, 2, 1, 0, 0}));
}

TEST(TrainAvgPoolGrad, IsTheAdjointOfAvgPool) {
  // <avg_pool(v), dy> = <avg_pool_grad(x, dy), v> for every v.
  unsigned seed = 700;
  for (const PoolCase &c : poolCases())
    for (int inc : {0, 1}) {
      SCOPED_TRACE("count_include_pad " + std::to_string(inc));
      std::vector<int64_t> ys = poolOutShape(c);
      Val x = randomVal(HPCRT_F64, c.x, seed++), dy = randomVal(HPCRT_F64, ys, seed++);
      auto dx = run1({hpcrt_avg_pool_grad, {x, dy}, {{HPCRT_F64, c.x}}, poolAttrs(c, inc)});
      for (int trial = 0; trial < 3; ++trial) {
        Val v = randomVal(HPCRT_F64, c.x, seed++);
        auto pv = run1({hpcrt_avg_pool, {v}, {{HPCRT_F64, ys}}, poolAttrs(c, inc)});
        double lhs = dot(pv, dy.v), rhs = dot(dx, v.v);
        EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::fabs(lhs)));
      }
      // f32 agrees with f64.
      Val x32 = x, dy32 = dy;
      x32.dtype = dy32.dtype = HPCRT_F32;
      for (double &d : dy32.v)
        d = static_cast<float>(d);
      for (double &d : x32.v)
        d = static_cast<float>(d);
      Val xRounded = x32, dyRounded = dy32;
      xRounded.dtype = dyRounded.dtype = HPCRT_F64;
      auto dx32 = run1({hpcrt_avg_pool_grad, {x32, dy32}, {{HPCRT_F32, c.x}}, poolAttrs(c, inc)});
      auto dx64 = run1({hpcrt_avg_pool_grad, {xRounded, dyRounded}, {{HPCRT_F64, c.x}},
                        poolAttrs(c, inc)});
      expectNear(dx32, dx64, 1e-6, 1e-7);
    }
}

TEST(TrainAvgPoolGrad, SpreadsOverTheDivisor) {
  // Length 5, kernel 2, stride 2, ceil_mode: windows {0,1}, {2,3}, {4};
  // pads 0, so count_include_pad changes nothing and the last divisor is 1.
  PoolCase c{{1, 1, 5}, {2}, {2}, {0, 0}, {1}, true};
  Val x = f32(c.x, {0, 0, 0, 0, 0}), dy = f32({1, 1, 3}, {2, 4, 8});
  for (int inc : {0, 1})
    EXPECT_EQ(run1({hpcrt_avg_pool_grad, {x, dy}, {{HPCRT_F32, c.x}}, poolAttrs(c, inc)}),
              (std::vector<double>{1, 1, 2, 2, 8}));
  // Pads 1: windows {-1,0}, {1,2}, {3,4}; with count_include_pad the first
  // divides by 2.
  PoolCase p{{1, 1, 5}, {2}, {2}, {1, 1}, {1}, false};
  Val dyp = f32({1, 1, 3}, {2, 4, 8});
  EXPECT_EQ(run1({hpcrt_avg_pool_grad, {x, dyp}, {{HPCRT_F32, p.x}}, poolAttrs(p, 0)}),
            (std::vector<double>{2, 2, 2, 4, 4}));
  EXPECT_EQ(run1({hpcrt_avg_pool_grad, {x, dyp}, {{HPCRT_F32, p.x}}, poolAttrs(p, 1)}),
            (std::vector<double>{1, 2, 2, 4, 4}));
}

TEST(TrainPoolGrad, BadShapesAreErrors) {
  PoolCase c = poolCases()[0];
  std::vector<int64_t> ys = poolOutShape(c);
  Val x = randomVal(HPCRT_F32, c.x, 1), dy = randomVal(HPCRT_F32, ys, 2);
  EXPECT_EQ(run({hpcrt_max_pool_grad, {x, dy}, {{HPCRT_F32, c.x}}, poolAttrs(c, -1)}).error, "");
  EXPECT_NE(run({hpcrt_max_pool_grad, {x, dy}, {{HPCRT_F32, {2, 3, 7, 7}}}, poolAttrs(c, -1)})
                .error.find("result has shape [2, 3, 7, 7], expected [2, 3, 7, 8]"),
            std::string::npos);
  Val dyBad = randomVal(HPCRT_F32, {2, 3, 4, 4}, 3);
  EXPECT_NE(run({hpcrt_avg_pool_grad, {x, dyBad}, {{HPCRT_F32, c.x}}, poolAttrs(c, 0)})
                .error.find("pooling: result size 4 in spatial dim 1 should be 5"),
            std::string::npos);
  Val xi = val(HPCRT_I32, c.x, x.v), dyi = val(HPCRT_I32, ys, dy.v);
  EXPECT_NE(run({hpcrt_max_pool_grad, {xi, dyi}, {{HPCRT_I32, c.x}}, poolAttrs(c, -1)})
                .error.find("dtype i32 is not supported"),
            std::string::npos);
  Val dy64 = randomVal(HPCRT_F64, ys, 4);
  EXPECT_NE(run({hpcrt_avg_pool_grad, {x, dy64}, {{HPCRT_F32, c.x}}, poolAttrs(c, 1)})
                .error.find("dtypes f32 and f64 differ"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// gelu_grad
//===----------------------------------------------------------------------===//

double geluRef(double x, bool tanhForm) {
  if (tanhForm)
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

/// dy * gelu'(x) by central differences of geluRef (h = 1e-5: ~1e-10 off).
std::vector<double> geluGradRef(const Val &x, const Val &dy, bool tanhForm) {
  std::vector<double> r;
  const double h = 1e-5;
  for (size_t i = 0; i < x.v.size(); ++i)
    r.push_back(dy.v[i] * (geluRef(x.v[i] + h, tanhForm) - geluRef(x.v[i] - h, tanhForm)) /
                (2 * h));
  return r;
}

Val spread(Val v, double by) {
  for (double &e : v.v)
    e = v.dtype == HPCRT_F32 ? static_cast<float>(e * by) : e * by;
  return v;
}

TEST(TrainGeluGrad, MatchesFiniteDifferencesOfGelu) {
  for (bool tanhForm : {false, true}) {
    SCOPED_TRACE(tanhForm ? "tanh" : "erf");
    std::string approximate = tanhForm ? "tanh" : "none";
    // float64: the loop, against the differences to ~1e-9.
    Val x = spread(randomVal(HPCRT_F64, {3, 41}, 900), 6), dy = randomVal(HPCRT_F64, {3, 41}, 901);
    expectNear(run1({hpcrt_gelu_grad, {x, dy}, {{HPCRT_F64, x.shape}}, {}, {}, {approximate}}),
               geluGradRef(x, dy, tanhForm), 1e-8, 1e-9);
    // float32 above the oneDNN threshold: oneDNN's eltwise backward, and the
    // loop with primitives off, both within f32 rounding of the reference.
    Val x32 = spread(randomVal(HPCRT_F32, {16, 1000}, 902), 8),
        dy32 = randomVal(HPCRT_F32, {16, 1000}, 903);
    std::vector<double> want = geluGradRef(x32, dy32, tanhForm);
    Call call{hpcrt_gelu_grad, {x32, dy32}, {{HPCRT_F32, x32.shape}}, {}, {}, {approximate}};
    std::vector<double> dnnl = run1(call);
    onednn::setPrimitivesEnabled(false);
    std::vector<double> own = run1(call);
    onednn::setPrimitivesEnabled(true);
    expectNear(dnnl, want, 1e-5, 2e-6);
    expectNear(own, want, 1e-5, 2e-6);
    // bf16: computed in float from the rounded inputs, rounded once.
    Val xb = x, dyb = dy;
    xb.dtype = dyb.dtype = HPCRT_BF16;
    for (Val *v : {&xb, &dyb})
      for (double &e : v->v)
        e = bf16ToFloat(floatToBf16(static_cast<float>(e)));
    expectNear(run1({hpcrt_gelu_grad, {xb, dyb}, {{HPCRT_BF16, x.shape}}, {}, {}, {approximate}}),
               geluGradRef(xb, dyb, tanhForm), 8e-3, 1e-3);
  }
}

TEST(TrainGeluGrad, BadOperandsAreErrors) {
  Val x = randomVal(HPCRT_F32, {2, 3}, 910), dy = randomVal(HPCRT_F32, {2, 3}, 911);
  EXPECT_NE(run({hpcrt_gelu_grad, {x, dy}, {{HPCRT_F32, {2, 3}}}, {}, {}, {"fast"}})
                .error.find("approximate 'fast' is not 'none' or 'tanh'"),
            std::string::npos);
  Val dy6 = randomVal(HPCRT_F32, {6}, 912);
  EXPECT_NE(run({hpcrt_gelu_grad, {x, dy6}, {{HPCRT_F32, {2, 3}}}, {}, {}, {"tanh"}}).error, "");
  Val xi = val(HPCRT_I32, {2}, {1, 2});
  EXPECT_NE(run({hpcrt_gelu_grad, {xi, xi}, {{HPCRT_I32, {2}}}, {}, {}, {"tanh"}})
                .error.find("not supported"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// float64 forward kernels (the float64 gradient checks run them)
//===----------------------------------------------------------------------===//

std::vector<double> mapRef(const Val &x, double (*f)(double)) {
  std::vector<double> y;
  for (double v : x.v)
    y.push_back(f(v));
  return y;
}

TEST(TrainFloat64, UnaryKernels) {
  Val x = randomVal(HPCRT_F64, {4, 9}, 800);
  for (double &v : x.v)
    v *= 3;
  Val pos = x;
  for (double &v : pos.v)
    v = std::fabs(v) + 0.125;
  struct U {
    KFn fn;
    const Val *in;
    double (*ref)(double);
  };
  const U cases[] = {
      {hpcrt_neg, &x, [](double v) { return -v; }},
      {hpcrt_abs, &x, [](double v) { return std::fabs(v); }},
      {hpcrt_exp, &x, [](double v) { return std::exp(v); }},
      {hpcrt_log, &pos, [](double v) { return std::log(v); }},
      {hpcrt_sqrt, &pos, [](double v) { return std::sqrt(v); }},
      {hpcrt_reciprocal, &pos, [](double v) { return 1 / v; }},
      {hpcrt_relu, &x, [](double v) { return v > 0 ? v : 0.0; }},
      {hpcrt_sigmoid, &x, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {hpcrt_tanh, &x, [](double v) { return std::tanh(v); }},
      {hpcrt_erf, &x, [](double v) { return std::erf(v); }},
      {hpcrt_sin, &x, [](double v) { return std::sin(v); }},
      {hpcrt_cos, &x, [](double v) { return std::cos(v); }},
      {hpcrt_silu, &x, [](double v) { return v / (1 + std::exp(-v)); }},
      {hpcrt_softplus, &x, [](double v) { return std::log(1 + std::exp(v)); }},
      {hpcrt_hard_swish, &x, [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }},
      {hpcrt_sign, &x, [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }},
  };
  for (const U &u : cases)
    expectNear(run1({u.fn, {*u.in}, {{HPCRT_F64, u.in->shape}}}), mapRef(*u.in, u.ref), 1e-14,
               1e-15);
  auto unaryWith = [&](KFn fn, std::vector<int64_t> ia, std::vector<double> fa,
                       std::vector<std::string> sa) {
    return run1({fn, {x}, {{HPCRT_F64, x.shape}}, std::move(ia), std::move(fa), std::move(sa)});
  };
  expectNear(unaryWith(hpcrt_gelu, {}, {}, {"none"}),
             mapRef(x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }),
             1e-14, 1e-15);
  expectNear(unaryWith(hpcrt_gelu, {}, {}, {"tanh"}), mapRef(x, [](double v) {
               return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
             }),
             1e-14, 1e-15);
  expectNear(unaryWith(hpcrt_leaky_relu, {}, {0.1}, {}),
             mapRef(x, [](double v) { return v < 0 ? 0.1 * v : v; }), 1e-15, 0);
  expectNear(unaryWith(hpcrt_elu, {}, {1.5}, {}),
             mapRef(x, [](double v) { return v < 0 ? 1.5 * std::expm1(v) : v; }), 1e-14, 1e-15);
  expectNear(unaryWith(hpcrt_hard_sigmoid, {}, {0.2, 0.5}, {}),
             mapRef(x, [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }), 1e-15, 1e-16);
  // clip: iattrs {has_max, has_min}, fattrs {max, min}
  expectNear(unaryWith(hpcrt_clip, {1, 1}, {0.7, -0.3}, {}),
             mapRef(x, [](double v) { return std::clamp(v, -0.3, 0.7); }), 0, 0);
}

TEST(TrainFloat64, BinaryWhereAndCast) {
  Val a = randomVal(HPCRT_F64, {2, 3, 4}, 810), b = randomVal(HPCRT_F64, {3, 1}, 811);
  Val bp = b;
  for (double &v : bp.v)
    v = std::fabs(v) + 0.5;
  Val ap = a;
  for (double &v : ap.v)
    v = std::fabs(v) + 0.25;
  auto ref = [&](const Val &x, const Val &y, double (*f)(double, double)) {
    std::vector<double> out;
    for (int64_t i = 0; i < 24; ++i)
      out.push_back(f(x.v[i], y.v[(i / 4) % 3]));
    return out;
  };
  struct B {
    KFn fn;
    const Val *x, *y;
    double (*f)(double, double);
  };
  const B cases[] = {
      {hpcrt_add, &a, &b, [](double x, double y) { return x + y; }},
      {hpcrt_sub, &a, &b, [](double x, double y) { return x - y; }},
      {hpcrt_mul, &a, &b, [](double x, double y) { return x * y; }},
      {hpcrt_div, &a, &bp, [](double x, double y) { return x / y; }},
      {hpcrt_pow, &ap, &b, [](double x, double y) { return std::pow(x, y); }},
      {hpcrt_max, &a, &b, [](double x, double y) { return std::max(x, y); }},
      {hpcrt_min, &a, &b, [](double x, double y) { return std::min(x, y); }},
  };
  for (const B &c : cases)
    expectNear(run1({c.fn, {*c.x, *c.y}, {{HPCRT_F64, {2, 3, 4}}}}), ref(*c.x, *c.y, c.f), 1e-15,
               0);
  Val cond = val(HPCRT_BOOL, {3, 1}, {1, 0, 1});
  std::vector<double> w = run1({hpcrt_where, {cond, a, b}, {{HPCRT_F64, {2, 3, 4}}}});
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(w[i], (i / 4) % 3 == 1 ? b.v[1] : a.v[i]);
  // cast: f64 -> f32 rounds, f32 -> f64, bool -> f64, i64 -> f64 are exact.
  Val third = val(HPCRT_F64, {3}, {1.0 / 3, -2.5, 1e-40});
  EXPECT_EQ(run1({hpcrt_cast, {third}, {{HPCRT_F32, {3}}}, {HPCRT_F32}}),
            (std::vector<double>{static_cast<float>(1.0 / 3), -2.5, static_cast<float>(1e-40)}));
  Val f = f32({2}, {static_cast<float>(0.1), -3});
  EXPECT_EQ(run1({hpcrt_cast, {f}, {{HPCRT_F64, {2}}}, {HPCRT_F64}}), f.v);
  EXPECT_EQ(run1({hpcrt_cast, {val(HPCRT_BOOL, {3}, {1, 0, 1})}, {{HPCRT_F64, {3}}}, {HPCRT_F64}}),
            (std::vector<double>{1, 0, 1}));
  Val big = val(HPCRT_I64, {3}, {9007199254740991.0, -7, 0});
  EXPECT_EQ(run1({hpcrt_cast, {big}, {{HPCRT_F64, {3}}}, {HPCRT_F64}}), big.v);
}

TEST(TrainFloat64, MatmulAndGemm) {
  // Batched with broadcasting: [2, 1, 3, 4] x [3, 4, 5] -> [2, 3, 3, 5].
  Val a = randomVal(HPCRT_F64, {2, 1, 3, 4}, 820), b = randomVal(HPCRT_F64, {3, 4, 5}, 821);
  std::vector<double> want;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t m = 0; m < 3; ++m)
        for (int64_t n = 0; n < 5; ++n) {
          double s = 0;
          for (int64_t k = 0; k < 4; ++k)
            s += a.v[(i * 3 + m) * 4 + k] * b.v[(j * 4 + k) * 5 + n];
          want.push_back(s);
        }
  expectNear(run1({hpcrt_matmul, {a, b}, {{HPCRT_F64, {2, 3, 3, 5}}}}), want, 1e-14, 1e-15);
  // gemm: y = alpha * A^T B^T + beta * c, c [5] broadcast over rows.
  Val at = randomVal(HPCRT_F64, {4, 3}, 822), bt = randomVal(HPCRT_F64, {5, 4}, 823);
  Val c = randomVal(HPCRT_F64, {5}, 824);
  std::vector<double> g;
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 5; ++n) {
      double s = 0;
      for (int64_t k = 0; k < 4; ++k)
        s += at.v[k * 3 + m] * bt.v[n * 4 + k];
      g.push_back(0.7 * s + 1.3 * c.v[n]);
    }
  // fattrs {alpha, beta}, iattrs {transA, transB}
  expectNear(run1({hpcrt_gemm, {at, bt, c}, {{HPCRT_F64, {3, 5}}}, {1, 1}, {0.7, 1.3}, {"none"}}), g, 1e-14,
             1e-15);
}

TEST(TrainFloat64, ConvTransposeIsTheAdjointOfConv) {
  // conv_transpose(dy, w) is conv's input gradient:
  // <conv_transpose(dy, w), v> = <dy, conv(v, w)>, with groups, strides,
  // dilations, pads and output_padding.
  struct Case {
    std::vector<int64_t> dy, w, strides, pads, dilations, outPad;
    int64_t group;
  };
  const Case cases[] = {
      {{2, 4, 3, 4}, {4, 3, 3, 2}, {2, 3}, {1, 0, 0, 1}, {1, 2}, {1, 0}, 2},
      {{1, 2, 5}, {2, 1, 3}, {2}, {1, 1}, {2}, {1}, 1},
      {{1, 3, 2, 3, 2}, {3, 2, 2, 2, 3}, {1, 2, 2}, {0, 1, 0, 1, 0, 1}, {1, 1, 2}, {0, 1, 1}, 1},
  };
  unsigned seed = 830;
  for (const Case &c : cases) {
    size_t r = c.dy.size() - 2;
    int64_t C = c.dy[1], Mg = c.w[1], M = Mg * c.group;
    std::vector<int64_t> xs = {c.dy[0], M};
    for (size_t d = 0; d < r; ++d)
      xs.push_back(c.strides[d] * (c.dy[2 + d] - 1) + c.outPad[d] +
                   (c.w[2 + d] - 1) * c.dilations[d] + 1 - c.pads[d] - c.pads[d + r]);
    Val dy = randomVal(HPCRT_F64, c.dy, seed++), w = randomVal(HPCRT_F64, c.w, seed++);
    Val v = randomVal(HPCRT_F64, xs, seed++);
    // conv_transpose iattrs: dilations, group, output_padding, pads, strides
    auto ct = run1({hpcrt_conv_transpose, {dy, w, std::nullopt}, {{HPCRT_F64, xs}},
                    cat({arr(c.dilations), {c.group}, arr(c.outPad), arr(c.pads), arr(c.strides)})});
    // conv iattrs: dilations, group, pads, strides; w is [C, M/group, K...]
    ASSERT_EQ(C % c.group, 0);
    auto cv = run1({hpcrt_conv, {v, w, std::nullopt, std::nullopt}, {{HPCRT_F64, c.dy}},
                    cat({arr(c.dilations), {c.group}, arr(c.pads), arr(c.strides)}), {},
                    {"none"}});
    double lhs = dot(ct, v.v), rhs = dot(dy.v, cv);
    EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::fabs(lhs)));
  }
}

TEST(TrainFloat64, NormsSoftmaxAndGlobalPools) {
  Val x = randomVal(HPCRT_F64, {2, 3, 4}, 840);
  // softmax / log_softmax over axis 1.
  std::vector<double> sm(24), lsm(24);
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < 4; ++i) {
      double s = 0;
      for (int64_t j = 0; j < 3; ++j)
        s += std::exp(x.v[(o * 3 + j) * 4 + i]);
      for (int64_t j = 0; j < 3; ++j) {
        int64_t k = (o * 3 + j) * 4 + i;
        sm[k] = std::exp(x.v[k]) / s;
        lsm[k] = x.v[k] - std::log(s);
      }
    }
  expectNear(run1({hpcrt_softmax, {x}, {{HPCRT_F64, x.shape}}, {1}}), sm, 1e-14, 1e-15);
  expectNear(run1({hpcrt_log_softmax, {x}, {{HPCRT_F64, x.shape}}, {1}}), lsm, 1e-14, 1e-15);
  // layer_norm / rms_norm over the last axis (iattrs {axis}, fattrs {epsilon}).
  Val scale = randomVal(HPCRT_F64, {4}, 841), bias = randomVal(HPCRT_F64, {4}, 842);
  std::vector<double> ln(24), rms(24);
  for (int64_t row = 0; row < 6; ++row) {
    double mean = 0, var = 0, sq = 0;
    for (int64_t j = 0; j < 4; ++j)
      mean += x.v[row * 4 + j] / 4;
    for (int64_t j = 0; j < 4; ++j) {
      double d = x.v[row * 4 + j] - mean;
      var += d * d / 4;
      sq += x.v[row * 4 + j] * x.v[row * 4 + j] / 4;
    }
    for (int64_t j = 0; j < 4; ++j) {
      ln[row * 4 + j] = (x.v[row * 4 + j] - mean) / std::sqrt(var + 1e-5) * scale.v[j] + bias.v[j];
      rms[row * 4 + j] = x.v[row * 4 + j] / std::sqrt(sq + 1e-6) * scale.v[j];
    }
  }
  expectNear(run1({hpcrt_layer_norm, {x, scale, bias}, {{HPCRT_F64, x.shape}}, {-1}, {1e-5}}), ln,
             1e-13, 1e-14);
  expectNear(run1({hpcrt_rms_norm, {x, scale}, {{HPCRT_F64, x.shape}}, {-1}, {1e-6}}), rms, 1e-13,
             1e-14);
  // batch_norm (inference statistics) over channels of [2, 3, 4].
  Val s = randomVal(HPCRT_F64, {3}, 843), b = randomVal(HPCRT_F64, {3}, 844);
  Val mean = randomVal(HPCRT_F64, {3}, 845), var = randomVal(HPCRT_F64, {3}, 846);
  for (double &v : var.v)
    v = std::fabs(v) + 0.5;
  std::vector<double> bn(24);
  for (int64_t i = 0; i < 24; ++i) {
    int64_t ch = (i / 4) % 3;
    bn[i] = (x.v[i] - mean.v[ch]) / std::sqrt(var.v[ch] + 1e-5) * s.v[ch] + b.v[ch];
  }
  expectNear(run1({hpcrt_batch_norm, {x, s, b, mean, var}, {{HPCRT_F64, x.shape}}, {}, {1e-5}}), bn,
             1e-13, 1e-14);
  // global pools over [2, 3, 4] (planes of 4).
  std::vector<double> gavg, gmax;
  for (int64_t p = 0; p < 6; ++p) {
    double sum = 0, mx = -INFINITY;
    for (int64_t j = 0; j < 4; ++j) {
      sum += x.v[p * 4 + j];
      mx = std::max(mx, x.v[p * 4 + j]);
    }
    gavg.push_back(sum / 4);
    gmax.push_back(mx);
  }
  expectNear(run1({hpcrt_global_avg_pool, {x}, {{HPCRT_F64, {2, 3, 1}}}}), gavg, 1e-15, 1e-16);
  expectNear(run1({hpcrt_global_max_pool, {x}, {{HPCRT_F64, {2, 3, 1}}}}), gmax, 0, 0);
}

TEST(TrainFloat64, Reductions) {
  Val x = randomVal(HPCRT_F64, {3, 4, 5}, 850);
  // Over axes {0, 2}, keepdims: [1, 4, 1]. iattrs {axes..., keepdims}.
  std::vector<int64_t> ia = {2, 0, 2, 1};
  std::vector<double> sum(4, 0), prod(4, 1), mx(4, -INFINITY), mn(4, INFINITY);
  for (int64_t i = 0; i < 60; ++i) {
    int64_t j = (i / 5) % 4;
    sum[j] += x.v[i];
    prod[j] *= 2 * x.v[i];
    mx[j] = std::max(mx[j], x.v[i]);
    mn[j] = std::min(mn[j], x.v[i]);
  }
  std::vector<double> mean = sum;
  for (double &m : mean)
    m /= 15;
  expectNear(run1({hpcrt_reduce_sum, {x}, {{HPCRT_F64, {1, 4, 1}}}, ia}), sum, 1e-14, 1e-15);
  expectNear(run1({hpcrt_reduce_mean, {x}, {{HPCRT_F64, {1, 4, 1}}}, ia}), mean, 1e-14, 1e-15);
  expectNear(run1({hpcrt_reduce_max, {x}, {{HPCRT_F64, {1, 4, 1}}}, ia}), mx, 0, 0);
  expectNear(run1({hpcrt_reduce_min, {x}, {{HPCRT_F64, {1, 4, 1}}}, ia}), mn, 0, 0);
  Val x2 = x;
  for (double &v : x2.v)
    v *= 2;
  expectNear(run1({hpcrt_reduce_prod, {x2}, {{HPCRT_F64, {1, 4, 1}}}, ia}), prod, 1e-13, 1e-300);
}

/// Runs a data-movement call on f64 operands and on the same values as f32
/// (every value is an f32 number): the results must be identical.
void expectSameAsF32(Call call, const std::vector<size_t> &floatOperands) {
  std::vector<double> f64 = run1(call);
  for (size_t k : floatOperands)
    call.ins[k]->dtype = HPCRT_F32;
  for (auto &o : call.outs)
    o.first = HPCRT_F32;
  std::vector<double> f32v = run1(call);
  EXPECT_EQ(f64, f32v);
  EXPECT_FALSE(f64.empty());
}

TEST(TrainFloat64, IndexingAndDataMovement) {
  Val x = distinctVal(HPCRT_F64, {3, 4}, 860);
  Val idx = val(HPCRT_I64, {2, 2}, {2, 0, -1, 1});
  expectSameAsF32({hpcrt_gather, {x, idx}, {{HPCRT_F64, {3, 2, 2}}}, {1}}, {0});
  Val gi = val(HPCRT_I64, {2, 4}, {0, 2, 1, 2, 1, 0, 0, 1});
  expectSameAsF32({hpcrt_gather_elements, {x, gi}, {{HPCRT_F64, {2, 4}}}, {0}}, {0});
  Val upd = distinctVal(HPCRT_F64, {2, 4}, 861);
  Val si = val(HPCRT_I64, {2, 4}, {0, 2, 1, 2, 0, 2, 1, 2});
  Val su = val(HPCRT_I64, {2, 4}, {0, 2, 1, 2, 1, 0, 2, 0});
  expectSameAsF32({hpcrt_scatter_elements, {x, su, upd}, {{HPCRT_F64, {3, 4}}}, {0}, {}, {"none"}},
                  {0, 2});
  // scatter add accumulates duplicates (in f64).
  std::vector<double> added = x.v;
  for (int64_t i = 0; i < 8; ++i)
    added[static_cast<int64_t>(si.v[i]) * 4 + i % 4] += upd.v[i];
  expectNear(run1({hpcrt_scatter_elements, {x, si, upd}, {{HPCRT_F64, {3, 4}}}, {0}, {}, {"add"}}),
             added, 1e-15, 0);
  // slice: ends, starts, steps (negative steps reverse).
  expectSameAsF32({hpcrt_slice, {x}, {{HPCRT_F64, {2, 2}}}, {2, 0, -1, 2, 2, 3, 2, -1, -2}}, {0});
  auto sl = run1({hpcrt_slice, {x}, {{HPCRT_F64, {2, 2}}}, {2, 0, -1, 2, 2, 3, 2, -1, -2}});
  EXPECT_EQ(sl, (std::vector<double>{x.v[2 * 4 + 3], x.v[2 * 4 + 1], x.v[1 * 4 + 3], x.v[1 * 4 + 1]}));
  Val y = distinctVal(HPCRT_F64, {3, 2}, 862);
  expectSameAsF32({hpcrt_concat, {x, y}, {{HPCRT_F64, {3, 6}}}, {1}}, {0, 1});
  {
    Call split{hpcrt_split, {x}, {{HPCRT_F64, {3, 1}}, {HPCRT_F64, {3, 3}}}, {1, 2, 1, 3}};
    Result r = run(split);
    ASSERT_EQ(r.error, "");
    ASSERT_EQ(r.outs.size(), 2u);
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(r.outs[0].v[i], x.v[i * 4]);
      for (int64_t j = 0; j < 3; ++j)
        EXPECT_EQ(r.outs[1].v[i * 3 + j], x.v[i * 4 + 1 + j]);
    }
  }
  expectSameAsF32({hpcrt_transpose, {x}, {{HPCRT_F64, {4, 3}}}, {2, 1, 0}}, {0});
  // pad constant: sattrs {mode}, iattrs {pads}, fattrs {value}.
  expectSameAsF32({hpcrt_pad, {x}, {{HPCRT_F64, {4, 7}}}, {4, 1, 2, 0, 1}, {0.5}, {"constant"}}, {0});
  auto pd = run1({hpcrt_pad, {x}, {{HPCRT_F64, {4, 7}}}, {4, 1, 2, 0, 1}, {0.1}, {"constant"}});
  EXPECT_EQ(pd[0], 0.1) << "the pad value stays a double";
  expectSameAsF32({hpcrt_expand, {y}, {{HPCRT_F64, {2, 3, 2}}}, {3, 2, 3, 2}}, {0});
  expectSameAsF32({hpcrt_tile, {y}, {{HPCRT_F64, {6, 4}}}, {2, 2, 2}}, {0});
}

} // namespace
