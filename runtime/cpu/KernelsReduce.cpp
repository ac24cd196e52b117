//===- KernelsReduce.cpp - reductions, argmax, argmin ----------------------===//
//
// Reductions walk the kept dimensions outside and the reduced ones inside
// (both coalesced); when there are few outputs the reduced range is split
// across threads instead. Float sums and products accumulate in double
// (f32 sums over a contiguous innermost run in Simd.h's double lanes),
// integer ones wrap; max and min propagate NaN.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"
#include "Simd.h"

using namespace hpcrt;

namespace {

enum class Red { Sum, Mean, Max, Min, Prod, SumSquare };

/// Dimensions (sizes and input strides) with adjacent contiguous ones merged.
struct Dims {
  std::vector<int64_t> size, stride;
  int64_t count = 1;
  void add(int64_t n, int64_t s) {
    count *= n;
    if (n == 1)
      return;
    if (!size.empty() && stride.back() == s * n) {
      size.back() *= n;
      stride.back() = s;
      return;
    }
    size.push_back(n);
    stride.push_back(s);
  }
  int64_t offsetOf(int64_t linear) const {
    int64_t off = 0;
    for (size_t d = size.size(); d-- > 0;) {
      off += (linear % size[d]) * stride[d];
      linear /= size[d];
    }
    return off;
  }
};

/// Calls f(offset, n, stride) for the runs along the innermost reduced
/// dimension that cover the reduced linear indices [s, e) relative to base.
template <typename F> void walkRuns(const Dims &r, int64_t base, int64_t s, int64_t e, F &&f) {
  if (s >= e)
    return;
  if (r.size.empty()) {
    f(base, int64_t(1), int64_t(1));
    return;
  }
  int rank = static_cast<int>(r.size.size());
  std::vector<int64_t> co(rank);
  int64_t rem = s;
  for (int d = rank - 1; d >= 0; --d) {
    co[d] = rem % r.size[d];
    rem /= r.size[d];
  }
  int64_t off = base + r.offsetOf(s);
  int64_t inner = r.size.back(), is = r.stride.back();
  while (s < e) {
    int64_t n = std::min(e - s, inner - co[rank - 1]);
    f(off, n, is);
    s += n;
    off += n * is;
    co[rank - 1] += n;
    for (int d = rank - 1; d > 0 && co[d] == r.size[d]; --d) {
      co[d] = 0;
      ++co[d - 1];
      off += r.stride[d - 1] - r.size[d] * r.stride[d];
    }
  }
}

/// Calls f(offset) for the reduced linear indices [s, e) relative to base.
template <typename F> void walkRange(const Dims &r, int64_t base, int64_t s, int64_t e, F &&f) {
  walkRuns(r, base, s, e, [&](int64_t off, int64_t n, int64_t is) {
    for (int64_t j = 0; j < n; ++j)
      f(off + j * is);
  });
}

/// Sums of f32 (or, with Square, of their squares) over [s, e) of the
/// reduced space (double accumulation): contiguous runs through Simd.h's
/// sumRowD / sumSqRowD where this CPU has them.
template <bool Square>
double sumF32(const float *p, const Dims &r, int64_t base, int64_t s, int64_t e) {
  double a = 0;
#ifdef HPCRT_X86_SIMD
  if (simdLevel() > 0 && !r.size.empty() && r.stride.back() == 1) {
    auto row = Square ? (simdLevel() == 2 ? avx512::sumSqRowD : avx2::sumSqRowD)
                      : (simdLevel() == 2 ? avx512::sumRowD : avx2::sumRowD);
    walkRuns(r, base, s, e, [&](int64_t off, int64_t n, int64_t) { a += row(p + off, n); });
    return a;
  }
#endif
  walkRange(r, base, s, e, [&](int64_t off) {
    double v = p[off];
    a += Square ? v * v : v;
  });
  return a;
}

template <typename T, Red K> struct Acc {
  using C = C_t<T>;
  static constexpr bool fl = std::is_floating_point_v<C>;
  using A = std::conditional_t<(K == Red::Max || K == Red::Min), C,
                               std::conditional_t<fl, double, uint64_t>>;
  static A init() {
    if constexpr (K == Red::Sum || K == Red::Mean || K == Red::SumSquare)
      return A(0);
    else if constexpr (K == Red::Prod)
      return A(1);
    else if constexpr (K == Red::Max)
      return fl ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
    else
      return fl ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max();
  }
  static A combine(A a, A b) {
    if constexpr (K == Red::Sum || K == Red::Mean || K == Red::SumSquare)
      return a + b;
    else if constexpr (K == Red::Prod)
      return a * b;
    else if constexpr (K == Red::Max)
      return (a != a || a > b) ? a : b;
    else
      return (a != a || a < b) ? a : b;
  }
  static A fromValue(C v) {
    if constexpr (K == Red::Max || K == Red::Min)
      return v;
    else if constexpr (K == Red::SumSquare)
      return static_cast<A>(v) * static_cast<A>(v);
    else
      return static_cast<A>(v);
  }
  static void store(T *q, int64_t i, A a, int64_t count) {
    if constexpr (K == Red::Mean) {
      if constexpr (fl)
        st(q, i, a / static_cast<double>(count));
      else if constexpr (std::is_signed_v<C>)
        st(q, i, count ? static_cast<int64_t>(a) / count : 0);
      else
        st(q, i, count ? a / static_cast<uint64_t>(count) : 0);
    } else {
      st(q, i, a);
    }
  }
};

/// f32 sums, means and sums of squares, which sumF32 computes.
template <typename T, Red K>
constexpr bool kF32Sum =
    std::is_same_v<T, float> && (K == Red::Sum || K == Red::Mean || K == Red::SumSquare);

template <Red K, unsigned Set> void reduceKernel(OpCall &c, const char *what) {
  c.expect(1, 1);
  std::vector<int64_t> axes = c.ivec();
  bool keepdims = c.b();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, what);
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t a : axes)
    reduced[normalizeAxis(a, x.rank(), "reduction axis")] = true;
  std::vector<int64_t> expect, xs = stridesOf(x.shape);
  Dims kept, red;
  for (int d = 0; d < x.rank(); ++d) {
    if (reduced[d]) {
      red.add(x.shape[d], xs[d]);
      if (keepdims)
        expect.push_back(1);
    } else {
      kept.add(x.shape[d], xs[d]);
      expect.push_back(x.shape[d]);
    }
  }
  checkShape(y, expect, "result");
  int64_t nOut = kept.count, nRed = red.count;
  dispatch<Set>(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Ac = Acc<T, K>;
    using A = typename Ac::A;
    const T *p = x.as<T>();
    T *q = y.as<T>();
    if (!kept.size.empty() && kept.stride.back() == 1 && kept.size.back() >= 16 &&
        !red.size.empty()) {
      // The innermost kept dimension is contiguous: walk the reduced space
      // outside and accumulate a run of contiguous outputs inside.
      const int64_t run = 256;
      int64_t k1 = kept.size.back(), nk = nOut / k1, chunks = (k1 + run - 1) / run;
      parallelFor(nk * chunks, static_cast<double>(nRed) * std::min(k1, run),
                  [&](int64_t w0, int64_t w1) {
        for (int64_t w = w0; w < w1; ++w) {
          int64_t ko = w / chunks, j0 = (w % chunks) * run, j1 = std::min(k1, j0 + run);
          A acc[run];
          for (int64_t j = 0; j < j1 - j0; ++j)
            acc[j] = Ac::init();
          walkRange(red, kept.offsetOf(ko * k1) + j0, 0, nRed, [&](int64_t off) {
            for (int64_t j = 0; j < j1 - j0; ++j)
              acc[j] = Ac::combine(acc[j], Ac::fromValue(ld(p, off + j)));
          });
          for (int64_t j = 0; j < j1 - j0; ++j)
            Ac::store(q, ko * k1 + j0 + j, acc[j], nRed);
        }
      });
      return;
    }
    if (nOut >= 64 || nRed < 65536) {
      parallelFor(nOut, static_cast<double>(nRed), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          A a = Ac::init();
          if constexpr (kF32Sum<T, K>)
            a = sumF32<K == Red::SumSquare>(p, red, kept.offsetOf(o), 0, nRed);
          else
            walkRange(red, kept.offsetOf(o), 0, nRed,
                      [&](int64_t off) { a = Ac::combine(a, Ac::fromValue(ld(p, off))); });
          Ac::store(q, o, a, nRed);
        }
      });
      return;
    }
    for (int64_t o = 0; o < nOut; ++o) {
      int64_t base = kept.offsetOf(o);
      // A fixed split (not the thread count) keeps the result the same
      // for every --threads.
      const int64_t parts = 64;
      std::vector<A> part(static_cast<size_t>(parts), Ac::init());
      parallelFor(parts, static_cast<double>(nRed) / parts, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          int64_t s = nRed * t / parts, e = nRed * (t + 1) / parts;
          A a = Ac::init();
          if constexpr (kF32Sum<T, K>)
            a = sumF32<K == Red::SumSquare>(p, red, base, s, e);
          else
            walkRange(red, base, s, e,
                      [&](int64_t off) { a = Ac::combine(a, Ac::fromValue(ld(p, off))); });
          part[t] = a;
        }
      });
      A a = Ac::init();
      for (A v : part)
        a = Ac::combine(a, v);
      Ac::store(q, o, a, nRed);
    }
  });
}

template <bool Max> void argKernel(OpCall &c, const char *what) {
  c.expect(1, 1);
  Tensor &x = c.in(0), &y = c.out();
  int64_t axis = normalizeAxis(c.i(), x.rank());
  bool keepdims = c.b(), last = c.b();
  checkDtype(y, HPCRT_I64, "result");
  std::vector<int64_t> expect = x.shape;
  if (keepdims)
    expect[axis] = 1;
  else
    expect.erase(expect.begin() + axis);
  checkShape(y, expect, "result");
  int64_t outer = 1, inner = 1, n = x.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.shape[d];
  if (n == 0 && outer * inner > 0)
    fail(std::string(what) + ": the reduced axis is empty");
  dispatch<kAll>(x.dtype, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = C_t<T>;
    const T *p = x.as<T>();
    int64_t *q = y.as<int64_t>();
    parallelFor(outer * inner, static_cast<double>(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t o = r / inner, i = r % inner, base = o * n * inner + i;
      C best = ld(p, base);
      int64_t idx = 0;
      for (int64_t j = 1; j < n; ++j) {
        C v = ld(p, base + j * inner);
        if constexpr (std::is_floating_point_v<C>) {
          if (best != best) { // the first NaN wins (the last with select_last_index)
            if (last && v != v)
              idx = j;
            continue;
          }
          if (v != v) {
            best = v;
            idx = j;
            continue;
          }
        }
        bool better = Max ? (v > best) : (v < best);
        if (better || (last && v == best)) {
          best = v;
          idx = j;
        }
      }
      q[r] = idx;
    }
    });
  });
}

} // namespace

HPCRT_KERNEL(reduce_sum) { reduceKernel<Red::Sum, kNum>(c, "reduce_sum"); }
HPCRT_KERNEL(reduce_mean) { reduceKernel<Red::Mean, kNum>(c, "reduce_mean"); }
HPCRT_KERNEL(reduce_max) { reduceKernel<Red::Max, kAll>(c, "reduce_max"); }
HPCRT_KERNEL(reduce_min) { reduceKernel<Red::Min, kAll>(c, "reduce_min"); }
HPCRT_KERNEL(reduce_prod) { reduceKernel<Red::Prod, kNum>(c, "reduce_prod"); }
HPCRT_KERNEL(reduce_sum_square) { reduceKernel<Red::SumSquare, kNum>(c, "reduce_sum_square"); }
HPCRT_KERNEL(argmax) { argKernel<true>(c, "argmax"); }
HPCRT_KERNEL(argmin) { argKernel<false>(c, "argmin"); }
