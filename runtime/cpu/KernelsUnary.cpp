//===- KernelsUnary.cpp - unary elementwise kernels, clip and cast ---------===//
//
// One loop per op over the flat elements (unary ops never broadcast). f16 and
// bf16 compute in float, integers wrap instead of overflowing. f32 exp,
// sigmoid, silu, tanh and tanh-gelu use Simd.h's vectorized exp on AVX2/AVX-512.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "Kernel.h"
#include "Simd.h"

using namespace hpcrt;

namespace {

template <unsigned Set, typename F> void unary(OpCall &c, const char *what, F op) {
  c.expect(1, 1);
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, what);
  checkShape(y, x.shape, "result");
  checkSameLayout({&x, &y}, what);
  int64_t n = x.numel;
  dispatch<Set>(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *p = x.as<T>();
    T *q = y.as<T>();
    parallelFor(n, 1.0, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        st(q, i, op(ld(p, i)));
    });
  });
}

/// A vectorized f32 row function of Simd.h for both instruction sets.
using RowFn = void (*)(const float *, float *, int64_t);

/// Runs `row512`/`row256` over an f32 tensor when this CPU has them; false
/// (nothing done) otherwise, and for other dtypes.
bool vectorUnary(OpCall &c, const char *what, RowFn row512, RowFn row256) {
  c.expect(1, 1);
  Tensor &x = c.in(0), &y = c.out();
  if (x.dtype != HPCRT_F32 || simdLevel() == 0 || !row512)
    return false;
  checkSameDtype(x, y, what);
  checkShape(y, x.shape, "result");
  checkSameLayout({&x, &y}, what);
  RowFn row = simdLevel() == 2 ? row512 : row256;
  const float *p = x.as<float>();
  float *q = y.as<float>();
  parallelFor(x.numel, 1.0, [&](int64_t i0, int64_t i1) { row(p + i0, q + i0, i1 - i0); });
  return true;
}

#ifdef HPCRT_X86_SIMD
#define HPCRT_ROWS(name) avx512::name, avx2::name
#else
#define HPCRT_ROWS(name) nullptr, nullptr
#endif

template <typename C> inline C sigmoidOf(C v) {
  if (v >= 0)
    return C(1) / (C(1) + std::exp(-v));
  C e = std::exp(v);
  return e / (C(1) + e);
}

} // namespace

HPCRT_KERNEL(neg) {
  unary<kNum>(c, "neg", [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(0 - static_cast<uint64_t>(v));
    else
      return -v;
  });
}

HPCRT_KERNEL(abs) {
  unary<kNum>(c, "abs", [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>)
      return v < 0 ? static_cast<C>(0 - static_cast<uint64_t>(v)) : v;
    else if constexpr (std::is_integral_v<C>)
      return v;
    else
      return std::fabs(v);
  });
}

HPCRT_KERNEL(sign) {
  unary<kNum>(c, "sign", [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(v))
        return v;
    }
    if constexpr (std::is_unsigned_v<C>)
      return v > C(0) ? C(1) : C(0);
    else
      return v > C(0) ? C(1) : (v < C(0) ? static_cast<C>(-1) : C(0));
  });
}

HPCRT_KERNEL_AS(not_, not_kernel) {
  unary<kB>(c, "not", [](auto v) { return static_cast<uint8_t>(!v); });
}

#define FLOAT_UNARY(name, expr)                                                \
  HPCRT_KERNEL(name) {                                                         \
    unary<kF>(c, #name, [](auto v) {                                           \
      using C = decltype(v);                                                   \
      (void)sizeof(C);                                                         \
      return static_cast<C>(expr);                                             \
    });                                                                        \
  }

HPCRT_KERNEL(exp) {
  if (vectorUnary(c, "exp", HPCRT_ROWS(expRow)))
    return;
  unary<kF>(c, "exp", [](auto v) { return std::exp(v); });
}
FLOAT_UNARY(log, std::log(v))
FLOAT_UNARY(sqrt, std::sqrt(v))
FLOAT_UNARY(reciprocal, C(1) / v)
FLOAT_UNARY(relu, v < C(0) ? C(0) : v)
HPCRT_KERNEL(sigmoid) {
  if (vectorUnary(c, "sigmoid", HPCRT_ROWS(sigmoidRow)))
    return;
  unary<kF>(c, "sigmoid", [](auto v) { return sigmoidOf(v); });
}
HPCRT_KERNEL(tanh) {
  if (vectorUnary(c, "tanh", HPCRT_ROWS(tanhRow)))
    return;
  unary<kF>(c, "tanh", [](auto v) { return std::tanh(v); });
}
FLOAT_UNARY(erf, std::erf(v))
FLOAT_UNARY(sin, std::sin(v))
FLOAT_UNARY(cos, std::cos(v))
FLOAT_UNARY(floor, std::floor(v))
FLOAT_UNARY(ceil, std::ceil(v))
FLOAT_UNARY(round, std::nearbyint(v))
HPCRT_KERNEL(silu) {
  if (vectorUnary(c, "silu", HPCRT_ROWS(siluRow)))
    return;
  unary<kF>(c, "silu", [](auto v) { return v * sigmoidOf(v); });
}
FLOAT_UNARY(softplus, v > C(0) ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)))
FLOAT_UNARY(hard_swish, v * std::max(C(0), std::min(C(1), v / C(6) + C(0.5))))

HPCRT_KERNEL(gelu) {
  std::string approximate = c.s();
  if (approximate == "none") {
    unary<kF>(c, "gelu", [](auto v) {
      using C = decltype(v);
      return static_cast<C>(C(0.5) * v * (C(1) + std::erf(v * C(0.70710678118654752440))));
    });
  } else if (approximate == "tanh") {
    if (vectorUnary(c, "gelu", HPCRT_ROWS(geluTanhRow)))
      return;
    unary<kF>(c, "gelu", [](auto v) {
      using C = decltype(v);
      C inner = C(0.79788456080286535588) * (v + C(0.044715) * v * v * v);
      return static_cast<C>(C(0.5) * v * (C(1) + std::tanh(inner)));
    });
  } else {
    fail("gelu: approximate '" + approximate + "' is not 'none' or 'tanh'");
  }
}

namespace {

/// gelu'(x): Phi(x) + x phi(x), or the derivative of the tanh form, each
/// in the order of PyTorch's CPU kernel (ATen's cpu/Activation.cpp), so a float
/// train step rounds as PyTorch's does.
template <typename C> C geluDerivative(C x, bool tanhForm) {
  if (tanhForm) {
    const C beta = C(0.79788456080286535588), kappa = C(0.044715);
    C x2 = x * x, x3 = x2 * x;
    C t = std::tanh(beta * (x + kappa * x3));
    C left = C(0.5) * x, right = C(1) + t;
    C leftDerivative = C(0.5) * right;
    C rightDerivative = left * (C(1) - t * t) * (beta * (C(1) + C(3) * kappa * x2));
    return leftDerivative + rightDerivative;
  }
  C cdf = C(0.5) * (C(1) + std::erf(x * C(0.70710678118654752440)));
  C pdf = std::exp(C(-0.5) * x * x) * C(0.39894228040143267794);
  return cdf + x * pdf;
}

/// Work per element of oneDNN's GELU backward in onednn::threadsFor's units
/// (flops at ~50 GFLOP/s per core): ~1 ns per element on one thread, memory
/// bound (2.15 ms for gpt-6x512's 1024x2048, train --trace).
constexpr double kGeluGradWork = 50;
/// Below this a oneDNN call's fixed cost (~1.3 us measured for layer_norm,
/// docs/benchmarks.md) is a large part of the work; the loop runs instead.
constexpr int64_t kGeluGradOnednnMin = 4096;

/// gelu_grad (f32) on oneDNN's eltwise backward (gelu_tanh / gelu_erf from
/// the source, a JIT kernel per ISA). False: the scalar loop runs (another
/// dtype, a small tensor, primitives disabled).
bool geluGradOnednn(OpCall &c, const Tensor &x, const Tensor &dy, Tensor &dx, bool tanhForm) {
  if (!onednn::primitivesEnabled() || x.dtype != HPCRT_F32 || x.numel < kGeluGradOnednnMin)
    return false;
  namespace dn = ::dnnl;
  onednn::Key key("gelu_grad");
  key << (tanhForm ? "tanh" : "erf") << x;
  onednn::Primitive &p =
      onednn::primitiveFor(c, key, kGeluGradWork * static_cast<double>(x.numel), [&] {
        auto alg = tanhForm ? dn::algorithm::eltwise_gelu_tanh : dn::algorithm::eltwise_gelu_erf;
        dn::memory::desc md = onednn::plain({x.numel}, onednn::dt::f32);
        dn::eltwise_forward::primitive_desc hint(
            dn::eltwise_forward::desc(dn::prop_kind::forward_training, alg, md, 0.f, 0.f),
            onednn::baseAttr(), onednn::engine(), /*allow_empty=*/true);
        if (!hint)
          return onednn::Made{};
        dn::eltwise_backward::primitive_desc pd(dn::eltwise_backward::desc(alg, md, md, 0.f, 0.f),
                                                onednn::baseAttr(), onednn::engine(), hint,
                                                /*allow_empty=*/true);
        if (!pd)
          return onednn::Made{};
        onednn::Made m{pd, dn::eltwise_backward(pd), {}};
        m.args = {{DNNL_ARG_SRC, md}, {DNNL_ARG_DIFF_DST, md}, {DNNL_ARG_DIFF_SRC, md}};
        return m;
      });
  if (!p.available)
    return false;
  if (c.setup)
    return true;
  p.execute(c.ctx, {{DNNL_ARG_SRC, x.data}, {DNNL_ARG_DIFF_DST, dy.data}, {DNNL_ARG_DIFF_SRC, dx.data}});
  return true;
}

} // namespace

// hpc.gelu_grad: dx = dy * gelu'(x). f32 runs on oneDNN's GELU backward;
// f64, f16 and bf16 (and small tensors) on the loop below.
HPCRT_STATEFUL_KERNEL(gelu_grad) {
  c.expect(1, 2);
  std::string approximate = c.s();
  if (approximate != "none" && approximate != "tanh")
    fail("gelu_grad: approximate '" + approximate + "' is not 'none' or 'tanh'");
  bool tanhForm = approximate == "tanh";
  Tensor &x = c.in(0), &dy = c.in(1), &dx = c.out();
  checkSameDtype(x, dy, "gelu_grad");
  checkSameDtype(x, dx, "gelu_grad");
  checkShape(dy, x.shape, "grad_output");
  checkShape(dx, x.shape, "result");
  checkSameLayout({&x, &dy, &dx}, "gelu_grad");
  if (geluGradOnednn(c, x, dy, dx, tanhForm) || c.setup)
    return;
  dispatch<kF>(x.dtype, "gelu_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.as<T>(), *pdy = dy.as<T>();
    T *pdx = dx.as<T>();
    parallelFor(x.numel, 20.0, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        st(pdx, i, ld(pdy, i) * geluDerivative(ld(px, i), tanhForm));
    });
  });
}

HPCRT_KERNEL(leaky_relu) {
  double alpha = c.f();
  unary<kF>(c, "leaky_relu", [alpha](auto v) {
    using C = decltype(v);
    return v < C(0) ? static_cast<C>(alpha) * v : v;
  });
}

HPCRT_KERNEL(elu) {
  double alpha = c.f();
  unary<kF>(c, "elu", [alpha](auto v) {
    using C = decltype(v);
    return v < C(0) ? static_cast<C>(alpha) * std::expm1(v) : v;
  });
}

HPCRT_KERNEL(hard_sigmoid) {
  double alpha = c.f(), beta = c.f();
  unary<kF>(c, "hard_sigmoid", [alpha, beta](auto v) {
    using C = decltype(v);
    return std::max(C(0), std::min(C(1), static_cast<C>(alpha) * v + static_cast<C>(beta)));
  });
}

namespace {
/// A clip bound in the element type, saturated to its range.
template <typename C> C boundOf(double b) {
  if constexpr (std::is_integral_v<C>) {
    if (std::isnan(b))
      return C(0);
    if (b <= static_cast<double>(std::numeric_limits<C>::lowest()))
      return std::numeric_limits<C>::lowest();
    if (b >= static_cast<double>(std::numeric_limits<C>::max()))
      return std::numeric_limits<C>::max();
    return static_cast<C>(b);
  } else {
    return static_cast<C>(b);
  }
}
} // namespace

HPCRT_KERNEL(clip) {
  // Attributes: max, min (alphabetical), each a presence flag + value.
  double maxV = 0, minV = 0;
  bool hasMax = c.optF(maxV);
  bool hasMin = c.optF(minV);
  unary<kNum>(c, "clip", [=](auto v) {
    using C = decltype(v);
    if (hasMin) {
      C lo = boundOf<C>(minV);
      v = v < lo ? lo : v;
    }
    if (hasMax) {
      C hi = boundOf<C>(maxV);
      v = v > hi ? hi : v;
    }
    return v;
  });
}

//===----------------------------------------------------------------------===//
// cast
//===----------------------------------------------------------------------===//

namespace {
/// cvttsd2si with a 32-bit destination: INT32_MIN for NaN and out of range.
inline int32_t cvtt32(double x) {
  if (!(x > -2147483649.0 && x < 2147483648.0))
    return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(x);
}
/// cvttsd2si with a 64-bit destination: INT64_MIN for NaN and out of range.
inline int64_t cvtt64(double x) {
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0))
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

/// Float to integer as C (and numpy) compile on x86-64: narrow types go
/// through a 32-bit conversion and keep its low bits, u32 through a 64-bit
/// one, u64 through the compiler's two-range sequence.
template <typename D> D floatToInt(double x) {
  if constexpr (std::is_same_v<D, int64_t>) {
    return cvtt64(x);
  } else if constexpr (std::is_same_v<D, uint64_t>) {
    if (x >= 9223372036854775808.0)
      return static_cast<uint64_t>(cvtt64(x - 9223372036854775808.0)) ^ (1ULL << 63);
    return static_cast<uint64_t>(cvtt64(x));
  } else if constexpr (std::is_same_v<D, uint32_t>) {
    return static_cast<uint32_t>(static_cast<uint64_t>(cvtt64(x)));
  } else {
    return static_cast<D>(static_cast<uint32_t>(cvtt32(x)));
  }
}

template <typename S, typename D> void castLoop(const S *p, D *q, int64_t n) {
  parallelFor(n, 1.0, [&](int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    auto v = ld(p, i);
    using CS = decltype(v);
    if constexpr (isBoolT<D>) {
      st(q, i, v != CS(0));
    } else if constexpr (isFloatT<D>) {
      st(q, i, static_cast<C_t<D>>(v));
    } else if constexpr (std::is_floating_point_v<CS>) {
      q[i] = floatToInt<D>(static_cast<double>(v));
    } else {
      q[i] = static_cast<D>(v); // integer/bool to integer: modular
    }
  }
  });
}
} // namespace

HPCRT_KERNEL(cast) {
  c.expect(1, 1);
  int64_t to = c.i();
  Tensor &x = c.in(0), &y = c.out();
  if (y.dtype != to)
    fail("cast: result dtype " + dtypeName(y.dtype) + " is not 'to' (" +
         dtypeName(static_cast<int>(to)) + ")");
  checkShape(y, x.shape, "result");
  // Elementwise: a blocked tensor (a bf16 conv chain's) casts in its layout.
  if (x.blocked || y.blocked)
    checkSameLayout({&x, &y}, "cast");
  // The casts around bf16 products (autocast).
  if (x.dtype == HPCRT_F32 && y.dtype == HPCRT_BF16) {
    bf16FromF32(x.as<float>(), y.as<bf16>(), x.numel);
    return;
  }
  if (x.dtype == HPCRT_BF16 && y.dtype == HPCRT_F32) {
    f32FromBf16(x.as<bf16>(), y.as<float>(), x.numel);
    return;
  }
  dispatch<kAll>(x.dtype, "cast input", [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch<kAll>(y.dtype, "cast result", [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      castLoop(x.as<S>(), y.as<D>(), x.numel);
    });
  });
}

namespace hpcrt {

void bf16FromF32(const float *x, bf16 *y, int64_t n) {
#ifdef HPCRT_X86_SIMD
  // The vector rows (round to nearest even, as castLoop).
  if (simdLevel() > 0) {
    parallelFor(n, 1.0, [&](int64_t i0, int64_t i1) {
      auto *q = reinterpret_cast<uint16_t *>(y) + i0;
      simdLevel() == 2 ? avx512::toBf16Row(x + i0, q, i1 - i0)
                       : avx2::toBf16Row(x + i0, q, i1 - i0);
    });
    return;
  }
#endif
  castLoop(x, y, n);
}

void f32FromBf16(const bf16 *x, float *y, int64_t n) {
#ifdef HPCRT_X86_SIMD
  if (simdLevel() > 0) {
    parallelFor(n, 1.0, [&](int64_t i0, int64_t i1) {
      const auto *p = reinterpret_cast<const uint16_t *>(x) + i0;
      simdLevel() == 2 ? avx512::fromBf16Row(p, y + i0, i1 - i0)
                       : avx2::fromBf16Row(p, y + i0, i1 - i0);
    });
    return;
  }
#endif
  castLoop(x, y, n);
}

void applyActivation(OpCall &producer, Tensor &y, const std::string &activation) {
  if (activation == "none")
    return;
  // The activation's own kernel, in place (elementwise: y[i] from y[i]).
  OpCall c{producer.ctx, producer.op, producer.mnemonic, {&y}, {&y}, nullptr, nullptr, nullptr};
  const char *approximate[1] = {activation == "gelu_tanh" ? "tanh" : "none"};
  if (activation == "relu")
    relu_kernel(c);
  else if (activation == "gelu" || activation == "gelu_tanh") {
    c.sa = approximate;
    gelu_kernel(c);
  } else if (activation == "sigmoid")
    sigmoid_kernel(c);
  else if (activation == "tanh")
    tanh_kernel(c);
  else if (activation == "silu")
    silu_kernel(c);
  else
    fail("unknown activation '" + activation + "'");
}

} // namespace hpcrt
