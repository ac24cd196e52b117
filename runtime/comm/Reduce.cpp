//===- Reduce.cpp - elementwise reductions of the collectives --------------===//
//
// One combine loop per (dtype, kind), written so the compiler vectorizes the
// common f32/f64 sums. max and min propagate NaN, as hpc.max/hpc.min do.
// bool: sum and max are "or", prod and min are "and".
//
//===----------------------------------------------------------------------===//

#include "Reduce.h"

#include "../cpu/Kernel.h"

namespace hpcrt {
namespace comm {

std::string reductionName(int64_t kind) {
  switch (kind) {
  case 0: return "sum";
  case 1: return "max";
  case 2: return "min";
  case 3: return "prod";
  case 4: return "avg";
  default: return "reduction(" + std::to_string(kind) + ")";
  }
}

namespace {

template <typename C> inline C opMax(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b))
      return std::isnan(a) ? a : b;
  }
  return a < b ? b : a;
}
template <typename C> inline C opMin(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b))
      return std::isnan(a) ? a : b;
  }
  return b < a ? b : a;
}

/// Integer arithmetic wraps (computed in uint64_t, no signed overflow).
template <typename C> inline C add(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}
template <typename C> inline C mul(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

template <typename T> Reducer makeTyped(int64_t kind) {
  using C = C_t<T>;
  Reducer r;
  r.elementSize = sizeof(T);
  auto loop = [](auto op) {
    return [op](void *acc, const void *in, size_t n) {
      T *a = static_cast<T *>(acc);
      const T *b = static_cast<const T *>(in);
      const int64_t m = static_cast<int64_t>(n);
      for (int64_t i = 0; i < m; ++i)
        st(a, i, op(ld(a, i), ld(b, i)));
    };
  };
  switch (static_cast<ReductionKind>(kind)) {
  case ReductionKind::Sum:
  case ReductionKind::Avg:
    if constexpr (isBoolT<T>)
      r.combine = loop([](C x, C y) -> C { return (x || y) ? 1 : 0; });
    else
      r.combine = loop([](C x, C y) -> C { return add<C>(x, y); });
    break;
  case ReductionKind::Prod:
    if constexpr (isBoolT<T>)
      r.combine = loop([](C x, C y) -> C { return (x && y) ? 1 : 0; });
    else
      r.combine = loop([](C x, C y) -> C { return mul<C>(x, y); });
    break;
  case ReductionKind::Max:
    r.combine = loop([](C x, C y) -> C { return opMax<C>(x, y); });
    break;
  case ReductionKind::Min:
    r.combine = loop([](C x, C y) -> C { return opMin<C>(x, y); });
    break;
  default:
    fail("unknown reduction kind " + std::to_string(kind) +
         " (sum=0, max=1, min=2, prod=3, avg=4)");
  }
  if (static_cast<ReductionKind>(kind) == ReductionKind::Avg) {
    if constexpr (isBoolT<T>) {
      fail("reduction avg is not defined for bool");
    } else {
      r.finish = [](void *acc, size_t n, int g) {
        T *a = static_cast<T *>(acc);
        const int64_t m = static_cast<int64_t>(n);
        for (int64_t i = 0; i < m; ++i) {
          if constexpr (std::is_signed_v<C> && std::is_integral_v<C>)
            st(a, i, static_cast<C>(static_cast<int64_t>(ld(a, i)) / g));
          else if constexpr (std::is_integral_v<C>)
            st(a, i, static_cast<C>(static_cast<uint64_t>(ld(a, i)) / static_cast<uint64_t>(g)));
          else
            st(a, i, ld(a, i) / static_cast<C>(g));
        }
      };
    }
  }
  return r;
}

} // namespace

Reducer makeReducer(int dtype, int64_t kind) {
  Reducer r;
  dispatch<kAll>(dtype, "reduction", [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = makeTyped<T>(kind);
  });
  return r;
}

} // namespace comm
} // namespace hpcrt
