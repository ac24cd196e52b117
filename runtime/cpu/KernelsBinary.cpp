//===- KernelsBinary.cpp - broadcasting binary kernels and where -----------===//
//
// Arithmetic, comparisons and logic with numpy broadcasting, through the
// shared Walk (coalesced dimensions, a stride of 0 on broadcast dimensions).
// Integer arithmetic wraps; integer division or remainder by zero gives 0.
// f32 add/sub/mul/div runs of stride 0 or 1 use Simd.h's binaryRow.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"
#include "Simd.h"

using namespace hpcrt;

namespace {

/// f32 arithmetic that Simd.h's binaryRow vectorizes (0: none).
enum VecOp { kNoVec = 0, kVecAdd = 1, kVecSub = 2, kVecMul = 3, kVecDiv = 4 };

template <unsigned Set, bool BoolResult, typename F, int Vec = kNoVec>
void binary(OpCall &c, const char *what, F op) {
  c.expect(1, 2);
  Tensor &a = c.in(0), &b = c.in(1), &y = c.out();
  checkSameDtype(a, b, what);
  if (a.blocked || b.blocked || y.blocked) {
    // Elementwise over the same layout: the flat walk below (no broadcast).
    checkSameLayout({&a, &b, &y}, what);
    checkShape(b, a.shape, "second operand");
    checkShape(y, a.shape, "result");
  }
  if (BoolResult)
    checkDtype(y, HPCRT_BOOL, "result");
  else
    checkSameDtype(a, y, what);
  checkShape(y, broadcastShape(a.shape, b.shape), "result");
  std::vector<int64_t> strides[2] = {broadcastStrides(a.shape, y.shape),
                                     broadcastStrides(b.shape, y.shape)};
  Walk<2> walk(y.shape, strides);
  dispatch<Set>(a.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using R = std::conditional_t<BoolResult, boolean, T>;
    const T *A = a.as<T>();
    const T *B = b.as<T>();
    R *Y = y.as<R>();
    [[maybe_unused]] int level = simdLevel();
    walk.run([&](int64_t o, const int64_t *off, const int64_t *sd, int64_t n) {
      const T *pa = A + off[0];
      const T *pb = B + off[1];
      R *q = Y + o;
#ifdef HPCRT_X86_SIMD
      if constexpr (Vec != kNoVec && std::is_same_v<T, float> && std::is_same_v<R, float>) {
        if (level > 0 && sd[0] >= 0 && sd[0] <= 1 && sd[1] >= 0 && sd[1] <= 1) {
          if (level == 2)
            avx512::binaryRow<Vec>(pa, sd[0], pb, sd[1], q, n);
          else
            avx2::binaryRow<Vec>(pa, sd[0], pb, sd[1], q, n);
          return;
        }
      }
#endif
      if (sd[0] == 1 && sd[1] == 1) {
        for (int64_t j = 0; j < n; ++j)
          st(q, j, op(ld(pa, j), ld(pb, j)));
      } else if (sd[0] == 1 && sd[1] == 0) {
        auto bv = ld(pb, 0);
        for (int64_t j = 0; j < n; ++j)
          st(q, j, op(ld(pa, j), bv));
      } else if (sd[0] == 0 && sd[1] == 1) {
        auto av = ld(pa, 0);
        for (int64_t j = 0; j < n; ++j)
          st(q, j, op(av, ld(pb, j)));
      } else {
        for (int64_t j = 0; j < n; ++j)
          st(q, j, op(ld(pa, j * sd[0]), ld(pb, j * sd[1])));
      }
    });
  });
}

template <typename C> constexpr bool isInt = std::is_integral_v<C>;

template <typename C> C wrap(uint64_t v) { return static_cast<C>(v); }

/// Integer power by squaring, wrapping; negative exponents as integer
/// arithmetic gives them (0 unless the base is 1 or -1).
template <typename C> C ipow(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) {
      if (base == 1)
        return 1;
      if (base == -1)
        return (exp % 2) ? C(-1) : C(1);
      return 0;
    }
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  uint64_t e = static_cast<uint64_t>(exp);
  while (e) {
    if (e & 1)
      result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<C>(result);
}

} // namespace

HPCRT_KERNEL(add) {
  auto op = [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>)
      return wrap<C>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
    else
      return x + y;
  };
  binary<kNum, false, decltype(op), kVecAdd>(c, "add", op);
}

namespace hpcrt {
void addResidual(OpCall &producer, Tensor &y, Tensor &residual) {
  // Elementwise over one shape and layout: y[i] + r[i] may land in y[i].
  OpCall c{producer.ctx, producer.op, producer.mnemonic, {&y}, {&y, &residual},
           nullptr, nullptr, nullptr};
  add_kernel(c);
}
} // namespace hpcrt

HPCRT_KERNEL(sub) {
  auto op = [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>)
      return wrap<C>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
    else
      return x - y;
  };
  binary<kNum, false, decltype(op), kVecSub>(c, "sub", op);
}

HPCRT_KERNEL(mul) {
  auto op = [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>)
      return wrap<C>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
    else
      return x * y;
  };
  binary<kNum, false, decltype(op), kVecMul>(c, "mul", op);
}

HPCRT_KERNEL(div) {
  auto op = [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>) {
      if (y == 0)
        return C(0);
      if constexpr (std::is_signed_v<C>)
        if (y == C(-1))
          return wrap<C>(0 - static_cast<uint64_t>(x));
      return static_cast<C>(x / y);
    } else {
      return x / y;
    }
  };
  binary<kNum, false, decltype(op), kVecDiv>(c, "div", op);
}

HPCRT_KERNEL(pow) {
  binary<kNum, false>(c, "pow", [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>)
      return ipow<C>(x, y);
    else
      return static_cast<C>(std::pow(x, y));
  });
}

HPCRT_KERNEL(max) {
  binary<kAll, false>(c, "max", [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>)
      return x > y ? x : y;
    else
      return (x != x || x > y) ? x : y; // NaN propagates
  });
}

HPCRT_KERNEL(min) {
  binary<kAll, false>(c, "min", [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>)
      return x < y ? x : y;
    else
      return (x != x || x < y) ? x : y;
  });
}

HPCRT_KERNEL(mod) {
  binary<kNum, false>(c, "mod", [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>) {
      if (y == 0)
        return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (y == C(-1))
          return C(0);
        C r = static_cast<C>(x % y);
        if (r != 0 && ((r < 0) != (y < 0)))
          r = static_cast<C>(r + y);
        return r;
      } else {
        return static_cast<C>(x % y);
      }
    } else {
      C r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0)))
        r += y;
      return r;
    }
  });
}

HPCRT_KERNEL(fmod) {
  binary<kNum, false>(c, "fmod", [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (isInt<C>) {
      if (y == 0)
        return C(0);
      if constexpr (std::is_signed_v<C>)
        if (y == C(-1))
          return C(0);
      return static_cast<C>(x % y);
    } else {
      return static_cast<C>(std::fmod(x, y));
    }
  });
}

HPCRT_KERNEL_AS(and_, and_kernel) {
  binary<kB, false>(c, "and", [](auto x, auto y) { return static_cast<uint8_t>(x && y); });
}
HPCRT_KERNEL_AS(or_, or_kernel) {
  binary<kB, false>(c, "or", [](auto x, auto y) { return static_cast<uint8_t>(x || y); });
}
HPCRT_KERNEL_AS(xor_, xor_kernel) {
  binary<kB, false>(c, "xor", [](auto x, auto y) { return static_cast<uint8_t>(!x != !y); });
}

HPCRT_KERNEL(equal) {
  binary<kAll, true>(c, "equal", [](auto x, auto y) { return x == y; });
}
HPCRT_KERNEL(less) {
  binary<kAll, true>(c, "less", [](auto x, auto y) { return x < y; });
}
HPCRT_KERNEL(less_equal) {
  binary<kAll, true>(c, "less_equal", [](auto x, auto y) { return x <= y; });
}
HPCRT_KERNEL(greater) {
  binary<kAll, true>(c, "greater", [](auto x, auto y) { return x > y; });
}
HPCRT_KERNEL(greater_equal) {
  binary<kAll, true>(c, "greater_equal", [](auto x, auto y) { return x >= y; });
}

HPCRT_KERNEL(where) {
  c.expect(1, 3);
  Tensor &cond = c.in(0), &a = c.in(1), &b = c.in(2), &y = c.out();
  checkDtype(cond, HPCRT_BOOL, "condition");
  checkSameDtype(a, b, "where");
  checkSameDtype(a, y, "where");
  checkShape(y, broadcastShape(cond.shape, broadcastShape(a.shape, b.shape)), "result");
  std::vector<int64_t> strides[3] = {broadcastStrides(cond.shape, y.shape),
                                     broadcastStrides(a.shape, y.shape),
                                     broadcastStrides(b.shape, y.shape)};
  Walk<3> walk(y.shape, strides);
  dispatchSize(dtypeSize(y.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const uint8_t *C = cond.as<uint8_t>();
    const U *A = a.as<U>();
    const U *B = b.as<U>();
    U *Y = y.as<U>();
    walk.run([&](int64_t o, const int64_t *off, const int64_t *sd, int64_t n) {
      const uint8_t *cp = C + off[0];
      const U *ap = A + off[1], *bp = B + off[2];
      U *yp = Y + o;
      // Contiguous runs with a scalar or contiguous branch: loops that
      // vectorize (a causal mask's where).
      // Branch-free bit selects (a mask's pattern mispredicts).
      auto sel = [](uint8_t c, U a, U b) {
        U m = static_cast<U>(0) - static_cast<U>(c != 0);
        return static_cast<U>((a & m) | (b & ~m));
      };
      if (sd[0] == 1 && sd[1] == 1 && sd[2] == 0) {
        U bv = *bp;
        for (int64_t j = 0; j < n; ++j)
          yp[j] = sel(cp[j], ap[j], bv);
      } else if (sd[0] == 1 && sd[1] == 0 && sd[2] == 1) {
        U av = *ap;
        for (int64_t j = 0; j < n; ++j)
          yp[j] = sel(cp[j], av, bp[j]);
      } else if (sd[0] == 1 && sd[1] == 1 && sd[2] == 1) {
        for (int64_t j = 0; j < n; ++j)
          yp[j] = sel(cp[j], ap[j], bp[j]);
      } else {
        for (int64_t j = 0; j < n; ++j)
          yp[j] = cp[j * sd[0]] ? ap[j * sd[1]] : bp[j * sd[2]];
      }
    });
  });
}
