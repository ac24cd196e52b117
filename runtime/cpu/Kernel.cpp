//===- Kernel.cpp - helpers the CPU kernels share ---------------------------===//
//
// Axis, dtype, shape and layout checks, index reading, broadcasting and the
// scalar and float conversions that many kernels use.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"

#include <new>

namespace hpcrt {

void unsupportedDtype(const char *what, int dtype) {
  fail(std::string(what) + ": dtype " + dtypeName(dtype) + " is not supported");
}

int64_t normalizeAxis(int64_t axis, int64_t rank, const char *what) {
  if (axis < -rank || axis >= rank)
    fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
         std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void checkDtype(const Tensor &t, int dtype, const char *what) {
  if (t.dtype != dtype)
    fail(std::string(what) + " has dtype " + dtypeName(t.dtype) + ", expected " +
         dtypeName(dtype));
}

void checkSameDtype(const Tensor &a, const Tensor &b, const char *what) {
  if (a.dtype != b.dtype)
    fail(std::string(what) + ": dtypes " + dtypeName(a.dtype) + " and " +
         dtypeName(b.dtype) + " differ");
}

void checkProductDtype(const Tensor &operand, const Tensor &result, const char *what) {
  if (operand.dtype != result.dtype && !widensResult(operand, result))
    fail(std::string(what) + ": result dtype " + dtypeName(result.dtype) +
         " is neither the operands' " + dtypeName(operand.dtype) + " nor f32 for 16-bit ones");
}

void checkShape(const Tensor &t, const std::vector<int64_t> &shape, const char *what) {
  if (t.shape != shape)
    fail(std::string(what) + " has shape " + shapeString(t.shape) + ", expected " +
         shapeString(shape));
}

void checkSameLayout(std::initializer_list<const Tensor *> ts, const char *what) {
  bool first = (*ts.begin())->blocked;
  for (const Tensor *t : ts)
    if (t->blocked != first)
      fail(std::string(what) + ": operands and result mix the plain and blocked layouts");
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

std::vector<int64_t> readIndices(const Tensor &t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel));
  dispatch<kNum>(t.dtype, "indices", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *p = t.as<T>();
    for (int64_t i = 0; i < t.numel; ++i) {
      if constexpr (isFloatT<T>) {
        double x = static_cast<double>(ld(p, i));
        v[i] = std::isfinite(x) && std::fabs(x) < 9.2e18 ? static_cast<int64_t>(x)
                                                          : std::numeric_limits<int64_t>::min();
      } else if constexpr (std::is_same_v<T, uint64_t>) {
        v[i] = p[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                   ? std::numeric_limits<int64_t>::max()
                   : static_cast<int64_t>(p[i]);
      } else {
        v[i] = static_cast<int64_t>(p[i]);
      }
    }
  });
  return v;
}

std::vector<int64_t> broadcastShape(const std::vector<int64_t> &a,
                                    const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("shapes " + shapeString(a) + " and " + shapeString(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out) {
  if (in.size() > out.size())
    fail("shape " + shapeString(in) + " does not broadcast to " + shapeString(out));
  std::vector<int64_t> s(out.size(), 0);
  std::vector<int64_t> is = stridesOf(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == out[lead + i])
      s[lead + i] = in[i] == 1 ? 0 : is[i];
    else if (in[i] == 1)
      s[lead + i] = 0;
    else
      fail("shape " + shapeString(in) + " does not broadcast to " + shapeString(out));
  }
  return s;
}

void stridedCopy(size_t esize, void *dst, const void *src, const Walk<1> &walk) {
  dispatchSize(esize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    U *o = static_cast<U *>(dst);
    const U *in = static_cast<const U *>(src);
    walk.run([&](int64_t oi, const int64_t *off, const int64_t *st, int64_t n) {
      const U *p = in + off[0];
      U *q = o + oi;
      if (st[0] == 1)
        memcpy(q, p, static_cast<size_t>(n) * sizeof(U));
      else if (st[0] == 0)
        std::fill(q, q + n, *p);
      else
        for (int64_t j = 0; j < n; ++j)
          q[j] = p[j * st[0]];
    });
  });
}

// Casting one value as hpc.cast does (used for pad values and the like).
void encodeScalar(double v, int dtype, void *out) {
  dispatch<kAll>(dtype, "scalar", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = static_cast<T *>(out);
    if constexpr (isFloatT<T> || isBoolT<T>) {
      st(p, 0, v);
    } else if constexpr (std::is_signed_v<T>) {
      double t = std::trunc(v);
      if (!(t >= -9.2e18 && t <= 9.2e18))
        *p = static_cast<T>(std::numeric_limits<int64_t>::min());
      else
        *p = static_cast<T>(static_cast<int64_t>(t));
    } else {
      double t = std::trunc(v);
      if (t >= 0 && t < 1.8e19)
        *p = static_cast<T>(static_cast<uint64_t>(t));
      else if (t < 0 && t > -9.2e18)
        *p = static_cast<T>(static_cast<int64_t>(t));
      else
        *p = 0;
    }
  });
}

std::vector<float> toFloats(const Tensor &t) {
  std::vector<float> v(static_cast<size_t>(t.numel));
  dispatch<kF>(t.dtype, "float conversion", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *p = t.as<T>();
    parallelFor(t.numel, 1.0, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        v[i] = static_cast<float>(ld(p, i));
    });
  });
  return v;
}

void fromFloats(const float *src, Tensor &t) {
  dispatch<kF>(t.dtype, "float conversion", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *p = t.as<T>();
    parallelFor(t.numel, 1.0, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        st(p, i, src[i]);
    });
  });
}

} // namespace hpcrt
