//===- KernelsTrain.cpp - optimizer updates and backward kernels -----------===//
//
// The kernels of the training ops (dialects/HPC/HPCTrainOps.td). sgd_update
// and adamw_update write their state operands (param, moments) in place and
// follow PyTorch's torch.optim.SGD and torch.optim.AdamW (single-tensor
// implementation) operation by operation: the scalars are computed in double
// as Python computes them and then used in the tensor's type, and every
// tensor operation is rounded on its own (no fused multiply-add).
// conv_weight_grad is the filter gradient of hpc.conv: oneDNN's
// backward-weights convolution, or (dtypes oneDNN lacks) im2col + GEMM per
// image, accumulated over the batch; max_pool_grad and avg_pool_grad are the
// input gradients of the pooling kernels, over the very windows of the
// forward kernels (Kernel.h's poolGeom / forEachWindow).
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "Kernel.h"
#include "Simd.h"

#include <memory>

using namespace hpcrt;

namespace {

/// Calls f(Tag<T>{}) for the f32 and f64 state tensors of the optimizers.
template <typename F> void dispatchState(int dtype, const char *what, F &&f) {
  if (dtype == HPCRT_F32)
    f(Tag<float>{});
  else if (dtype == HPCRT_F64)
    f(Tag<double>{});
  else
    fail(std::string(what) + ": dtype " + dtypeName(dtype) + " is not supported (f32 or f64)");
}

/// Checks a tensor the update reads or writes along with `param`.
void checkLikeParam(const Tensor &t, const Tensor &param, const char *what,
                    const char *name) {
  if (t.dtype != param.dtype)
    fail(std::string(what) + ": " + name + " has dtype " + dtypeName(t.dtype) +
         ", param has " + dtypeName(param.dtype));
  if (t.shape != param.shape)
    fail(std::string(what) + ": " + name + " has shape " + shapeString(t.shape) +
         ", param has " + shapeString(param.shape));
}

/// The value of a 0-d step input (lr: f32, step: i64).
double scalarOf(const Tensor &t, int dtype, const char *what, const char *name) {
  if (t.dtype != dtype || t.rank() != 0)
    fail(std::string(what) + ": " + name + " must be a 0-d " + dtypeName(dtype) +
         " tensor, got " + dtypeName(t.dtype) + " " + shapeString(t.shape));
  if (dtype == HPCRT_F32)
    return static_cast<double>(*t.as<float>());
  return static_cast<double>(*t.as<int64_t>());
}

/// Elementwise loops cost a few nanoseconds per element.
constexpr double kUpdateCost = 4.0;

} // namespace

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// The counter-based generator of hpc.dropout_mask: splitmix64 of the
/// element's global index mixed with seed, step and stream (a hash, so any
/// element can be drawn alone and every rank draws the same mask).
static inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

HPCRT_KERNEL(dropout_mask) {
  c.expect(1, 2);
  double ratio = c.f();
  int64_t stream = c.i();
  Tensor &mask = c.out();
  // Checked as 0-d i64, then read exactly (not through a double).
  scalarOf(c.in(0), HPCRT_I64, "dropout_mask", "seed");
  scalarOf(c.in(1), HPCRT_I64, "dropout_mask", "step");
  uint64_t seed = static_cast<uint64_t>(*c.in(0).as<int64_t>());
  uint64_t step = static_cast<uint64_t>(*c.in(1).as<int64_t>());
  uint64_t key = mix64(mix64(mix64(seed) ^ step) ^ static_cast<uint64_t>(stream));
  const double keep = 1.0 / (1.0 - ratio);
  dispatchState(mask.dtype, "dropout_mask", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *m = mask.as<T>();
    parallelFor(mask.numel, kUpdateCost, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        // 24 random bits: u in [0, 1), kept when u >= ratio.
        double u = static_cast<double>(mix64(key ^ static_cast<uint64_t>(i)) >> 40) * 0x1p-24;
        m[i] = u >= ratio ? static_cast<T>(keep) : T(0);
      }
    });
  });
}

/// hpc.assign: the target (a state tensor) takes the value's bytes; a copy
/// the runtime has no better library call for than memcpy.
HPCRT_KERNEL(assign) {
  c.expect(0, 2);
  Tensor &target = c.in(0), &value = c.in(1);
  if (target.dtype != value.dtype || target.shape != value.shape)
    fail("assign: the value is " + dtypeName(value.dtype) + " " + shapeString(value.shape) +
         ", the target " + dtypeName(target.dtype) + " " + shapeString(target.shape));
  if (target.bytes)
    memcpy(target.data, value.data, target.bytes);
}

/// An update's `unless_nonfinite` operand (the step's global gradient
/// norm): a non-finite one skips the update (GradScaler's skipped step).
static bool skipped(Tensor *guard, const char *op) {
  return guard && !std::isfinite(scalarOf(*guard, HPCRT_F32, op, "unless_nonfinite"));
}

/// An update's `clip` operands (the global norm and the max norm): the
/// factor its gradient is read with, min(1, max_norm / (norm + 1e-6)) in
/// f32 as clip_grad_norm_ computes it; 1 without them.
static float clipFactor(Tensor *norm, Tensor *maxNorm, const char *op) {
  if (!norm || !maxNorm)
    return 1.0f;
  float n = static_cast<float>(scalarOf(*norm, HPCRT_F32, op, "clip norm"));
  float max = static_cast<float>(scalarOf(*maxNorm, HPCRT_F32, op, "clip max_norm"));
  float coef = max / (n + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

HPCRT_KERNEL(sgd_update) {
  c.expect(0, 7);
  double momentum = c.f(), weightDecay = c.f();
  bool nesterov = c.b();
  Tensor &param = c.in(0), &grad = c.in(1);
  Tensor *buffer = c.opt(3);
  if (skipped(c.opt(4), "sgd_update"))
    return;
  checkLikeParam(grad, param, "sgd_update", "grad");
  double lr = scalarOf(c.in(2), HPCRT_F32, "sgd_update", "lr");
  const float clip = clipFactor(c.opt(5), c.opt(6), "sgd_update");
  if (momentum != 0.0) {
    if (!buffer)
      fail("sgd_update: momentum " + std::to_string(momentum) + " needs a momentum_buffer");
    checkLikeParam(*buffer, param, "sgd_update", "momentum_buffer");
  }
  dispatchState(param.dtype, "sgd_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = param.as<T>();
    const T *gr = grad.as<T>();
    T *buf = momentum != 0.0 ? buffer->as<T>() : nullptr;
    // torch.optim.SGD (dampening 0): grad.add(param, alpha=wd);
    // buf.mul_(momentum).add_(grad); grad.add(buf, alpha=momentum) or buf;
    // param.add_(grad, alpha=-lr).
    const T wd = static_cast<T>(weightDecay), mom = static_cast<T>(momentum),
            negLr = static_cast<T>(-lr);
    const bool decay = weightDecay != 0.0, clipped = c.opt(5) != nullptr;
    const T gscale = static_cast<T>(clip);
    parallelFor(param.numel, kUpdateCost, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T g = gr[i];
        if (clipped)
          g = g * gscale;
        if (decay)
          g = g + wd * p[i];
        if (buf) {
          T b = buf[i] * mom;
          b = b + g;
          buf[i] = b;
          g = nesterov ? g + mom * b : b;
        }
        p[i] = p[i] + negLr * g;
      }
    });
  });
}

HPCRT_KERNEL(adamw_update) {
  c.expect(0, 9);
  double beta1 = c.f(), beta2 = c.f(), eps = c.f(), weightDecay = c.f();
  Tensor &param = c.in(0), &grad = c.in(1), &expAvg = c.in(2), &expAvgSq = c.in(3);
  if (skipped(c.opt(6), "adamw_update"))
    return;
  checkLikeParam(grad, param, "adamw_update", "grad");
  checkLikeParam(expAvg, param, "adamw_update", "exp_avg");
  checkLikeParam(expAvgSq, param, "adamw_update", "exp_avg_sq");
  double lr = scalarOf(c.in(4), HPCRT_F32, "adamw_update", "lr");
  double stepValue = scalarOf(c.in(5), HPCRT_I64, "adamw_update", "step");
  const float clip = clipFactor(c.opt(7), c.opt(8), "adamw_update");
  const bool clipped = c.opt(7) != nullptr;
  if (stepValue < 1)
    fail("adamw_update: step " + std::to_string(static_cast<int64_t>(stepValue)) +
         " is not positive (steps count from 1)");
  // The Python scalars of _single_tensor_adam (decoupled weight decay).
  double biasCorrection1 = 1.0 - std::pow(beta1, stepValue);
  double biasCorrection2 = 1.0 - std::pow(beta2, stepValue);
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
  dispatchState(param.dtype, "adamw_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = param.as<T>(), *m = expAvg.as<T>(), *v = expAvgSq.as<T>();
    const T *gr = grad.as<T>();
    const bool decay = weightDecay != 0.0;
    const T keep = static_cast<T>(1.0 - lr * weightDecay);
    // exp_avg.lerp_(grad, 1 - beta1), in lerp's two forms.
    const T w = static_cast<T>(1.0 - beta1);
    const bool smallWeight = std::fabs(w) < T(0.5);
    const T b2 = static_cast<T>(beta2), c2 = static_cast<T>(1.0 - beta2);
    const T bc2 = static_cast<T>(biasCorrection2Sqrt), e = static_cast<T>(eps);
    const T negStep = static_cast<T>(-stepSize);
    const T gscale = static_cast<T>(clip);
#ifdef HPCRT_X86_SIMD
    // f32 on AVX2/AVX-512: the same operations in vectors (Simd.h).
    if constexpr (std::is_same_v<T, float>) {
      if (simdLevel() > 0) {
        auto row = simdLevel() == 2 ? avx512::adamwRow : avx2::adamwRow;
        parallelFor(param.numel, kUpdateCost, [&](int64_t i0, int64_t i1) {
          row(p + i0, gr + i0, m + i0, v + i0, i1 - i0, decay, keep, smallWeight, w, b2, c2,
              bc2, e, negStep, clipped, clip);
        });
        return;
      }
    }
#endif
    parallelFor(param.numel, 3 * kUpdateCost, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        T pv = p[i];
        if (decay)
          pv = pv * keep; // param.mul_(1 - lr * weight_decay)
        const T g = clipped ? gr[i] * gscale : gr[i];
        T a = m[i];
        T diff = g - a;
        a = smallWeight ? a + w * diff : g - diff * (T(1) - w);
        m[i] = a;
        // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        T s = v[i] * b2;
        T gg = c2 * g;
        gg = gg * g;
        s = s + gg;
        v[i] = s;
        // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps);
        // param.addcdiv_(exp_avg, denom, value=-step_size)
        T denom = std::sqrt(s) / bc2;
        denom = denom + e;
        T upd = negStep * a;
        upd = upd / denom;
        p[i] = pv + upd;
      }
    });
  });
}

//===----------------------------------------------------------------------===//
// conv_weight_grad
//===----------------------------------------------------------------------===//

HPCRT_STATEFUL_KERNEL(conv_weight_grad) {
  c.expect(1, 2);
  std::vector<int64_t> dilations = c.ivec();
  int64_t group = c.i();
  std::vector<int64_t> kernel = c.ivec(), pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &dy = c.in(1), &dw = c.out();
  // The forward conv's geometry: x * dw -> dy.
  ConvGeom g = convGeom(x, dw, dy, strides, pads, dilations);
  if (g.r > 8)
    fail("conv_weight_grad: more than 8 spatial dimensions");
  if (static_cast<int>(kernel.size()) != g.r)
    fail("conv_weight_grad: kernel_shape needs " + std::to_string(g.r) + " entries");
  int64_t N = x.shape[0], C = x.shape[1], M = dw.shape[0];
  if (group < 1 || C % group || M % group)
    fail("conv_weight_grad: " + std::to_string(C) + " input channels and " +
         std::to_string(M) + " filters do not split into " + std::to_string(group) +
         " groups");
  std::vector<int64_t> wantDw = {M, C / group};
  wantDw.insert(wantDw.end(), kernel.begin(), kernel.end());
  checkShape(dw, wantDw, "conv_weight_grad result");
  if (dy.shape[0] != N || dy.shape[1] != M)
    fail("conv_weight_grad: grad_output shape " + shapeString(dy.shape) + " does not fit " +
         std::to_string(N) + " images and " + std::to_string(M) + " filters");
  for (int d = 0; d < g.r; ++d) {
    if (kernel[d] < 1)
      fail("conv_weight_grad: kernel_shape must be positive");
    int64_t span = g.dil[d] * (kernel[d] - 1) + 1;
    int64_t numer = g.in[d] + pads[d] + pads[d + g.r] - span;
    if (numer < 0)
      fail("conv_weight_grad: the kernel (" + std::to_string(span) +
           " positions) is larger than the padded input in spatial dim " + std::to_string(d));
    int64_t o = numer / g.stride[d] + 1;
    if (o != g.out[d])
      fail("conv_weight_grad: grad_output spatial size " + std::to_string(g.out[d]) +
           " in dim " + std::to_string(d) + " should be " + std::to_string(o));
  }
  if (onednn::convWeightGrad(c, x, dy, dw, g, group) || c.setup)
    return;
  int64_t Cg = C / group, Mg = M / group, rows = Cg * g.kSize;
  bool pointwise = g.kSize == 1;
  for (int d = 0; d < g.r; ++d)
    pointwise = pointwise && g.stride[d] == 1 && pads[d] == 0 && pads[d + g.r] == 0 &&
                g.in[d] == g.out[d];
  inFloatType("conv_weight_grad", {&x, &dy}, dw, [&](auto tag, auto &ptrs, void *out) {
    using T = typename decltype(tag)::type;
    const T *X = static_cast<const T *>(ptrs[0]);
    const T *DY = static_cast<const T *>(ptrs[1]);
    T *DW = static_cast<T *>(out);
    if (N == 0) {
      std::fill(DW, DW + dw.numel, T(0));
      return;
    }
    // Per image and group: dw_g += dy_g [Mg, O] * col_g^T [O, Cg*K].
    std::unique_ptr<T[]> col(
        pointwise ? nullptr : new T[static_cast<size_t>(C * g.kSize * g.outSize)]);
    std::vector<const T *> pa(static_cast<size_t>(group)), pb(static_cast<size_t>(group));
    std::vector<T *> pc(static_cast<size_t>(group));
    for (int64_t gi = 0; gi < group; ++gi)
      pc[gi] = DW + gi * Mg * rows;
    for (int64_t n = 0; n < N; ++n) {
      const T *xn = X + n * C * g.inSize;
      const T *cm = xn;
      if (!pointwise) {
        im2col(xn, C, g, col.get());
        cm = col.get();
      }
      for (int64_t gi = 0; gi < group; ++gi) {
        pa[gi] = DY + (n * M + gi * Mg) * g.outSize;
        pb[gi] = cm + gi * rows * g.outSize;
      }
      gemmBatch<T>(group, false, true, Mg, rows, g.outSize, T(1), pa.data(), g.outSize,
                   pb.data(), g.outSize, n == 0 ? T(0) : T(1), pc.data(), rows);
    }
  });
}

//===----------------------------------------------------------------------===//
// Pooling gradients
//===----------------------------------------------------------------------===//

namespace {

/// Shared checks of max_pool_grad / avg_pool_grad: dx is x's type, dy the
/// pooled shape of x under the window attributes.
PoolGeom poolGradGeom(const char *what, const Tensor &x, const Tensor &dy, const Tensor &dx,
                      bool ceilMode, const std::vector<int64_t> &dil,
                      const std::vector<int64_t> &kernel, const std::vector<int64_t> &pads,
                      const std::vector<int64_t> &strides) {
  checkSameDtype(x, dy, what);
  checkSameDtype(x, dx, what);
  checkShape(dx, x.shape, "result");
  return poolGeom(x, dy, ceilMode, dil, kernel, pads, strides);
}

/// Runs body(T, acc, X, DY) with acc a zeroed accumulator of dx in the
/// compute type (dx itself for f32/f64, a float copy for f16/bf16 that is
/// stored afterwards).
template <typename F> void withGradAccumulator(const char *what, Tensor &x, Tensor &dy,
                                               Tensor &dx, F &&body) {
  dispatch<kF>(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = C_t<T>;
    std::vector<A> copy;
    A *acc;
    if constexpr (std::is_same_v<T, A>) {
      acc = dx.as<A>();
    } else {
      copy.resize(static_cast<size_t>(dx.numel));
      acc = copy.data();
    }
    std::fill(acc, acc + dx.numel, A(0));
    body(tag, acc, static_cast<const T *>(x.data), static_cast<const T *>(dy.data));
    if constexpr (!std::is_same_v<T, A>) {
      T *q = dx.as<T>();
      for (int64_t i = 0; i < dx.numel; ++i)
        st(q, i, copy[i]);
    }
  });
}

} // namespace

HPCRT_KERNEL(max_pool_grad) {
  c.expect(1, 2);
  bool ceilMode = c.b();
  std::vector<int64_t> dil = c.ivec(), kernel = c.ivec(), pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &dy = c.in(1), &dx = c.out();
  PoolGeom g = poolGradGeom("max_pool_grad", x, dy, dx, ceilMode, dil, kernel, pads, strides);
  withGradAccumulator("max_pool_grad", x, dy, dx, [&](auto tag, auto *acc, auto *X, auto *DY) {
    using T = typename decltype(tag)::type;
    using A = C_t<T>;
    // Each window's gradient goes to its first maximum in scan order (its
    // first NaN when it holds one, the element max_pool returns); planes
    // run on one thread each, so the overlapping windows accumulate safely.
    forEachWindow(g, [&](int64_t plane, int64_t o, int64_t, int64_t, auto &&window) {
      const T *xp = X + plane * g.inSize;
      A best = 0;
      int64_t arg = -1;
      bool nan = false;
      window([&](int64_t off) {
        A v = ld(xp, off);
        if (nan)
          return;
        if (v != v) {
          nan = true;
          arg = off;
        } else if (arg < 0 || v > best) {
          best = v;
          arg = off;
        }
      });
      if (arg >= 0)
        acc[plane * g.inSize + arg] += static_cast<A>(ld(DY, plane * g.outSize + o));
    });
  });
}

HPCRT_KERNEL(avg_pool_grad) {
  c.expect(1, 2);
  bool ceilMode = c.b(), includePad = c.b();
  std::vector<int64_t> dil = c.ivec(), kernel = c.ivec(), pads = c.ivec(), strides = c.ivec();
  Tensor &x = c.in(0), &dy = c.in(1), &dx = c.out();
  PoolGeom g = poolGradGeom("avg_pool_grad", x, dy, dx, ceilMode, dil, kernel, pads, strides);
  withGradAccumulator("avg_pool_grad", x, dy, dx, [&](auto tag, auto *acc, auto *, auto *DY) {
    using T = typename decltype(tag)::type;
    using A = C_t<T>;
    // avg_pool's divisor: the taps inside the input, or inside the padded
    // extent with count_include_pad (a ceil_mode window past the end
    // padding counts only up to it). A window without taps adds nothing.
    forEachWindow(g, [&](int64_t plane, int64_t o, int64_t valid, int64_t padded,
                         auto &&window) {
      int64_t count = includePad ? padded : valid;
      if (valid == 0 || count == 0)
        return;
      A share = static_cast<A>(ld(DY, plane * g.outSize + o)) / static_cast<A>(count);
      A *ap = acc + plane * g.inSize;
      window([&](int64_t off) { ap[off] += share; });
    });
  });
}
