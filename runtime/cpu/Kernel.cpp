//===- Kernel.cpp - kernel dispatch and shared kernel helpers --------------===//
//
// runKernel decodes the ABI's id list, runs one kernel body, turns any error
// into the context's first error (so the compiled code, which has no unwind
// tables, never sees an exception), and keeps the trace and high-water mark.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"

#include <new>

namespace hpcrt {

void unsupportedDtype(const char *what, int dtype) {
  fail(std::string(what) + ": dtype " + dtypeName(dtype) + " is not supported");
}

Tensor &OpCall::in(size_t k) const {
  Tensor *t = operands.at(k);
  if (!t)
    fail("operand " + std::to_string(k) + " is absent (-1) but required");
  return *t;
}

void OpCall::expect(size_t nResults, size_t nOperands) const {
  if (results.size() != nResults || operands.size() != nOperands)
    fail("expected " + std::to_string(nResults) + " result(s) and " +
         std::to_string(nOperands) + " operand(s), got " +
         std::to_string(results.size()) + " and " + std::to_string(operands.size()));
}

bool readsBlocked(const char *mnemonic) {
  for (const char *k : {"conv", "relu", "add", "max_pool", "global_avg_pool"})
    if (strcmp(mnemonic, k) == 0)
      return true;
  return false;
}

void runKernel(hpcrt_ctx *ctx, int32_t op, const int32_t *ids, const int64_t *ia,
               const double *fa, const char *const *sa, const char *mnemonic,
               KernelFn fn, KernelKind kind) {
  if (!ctx || (ctx->failed() && kind != KernelKind::Communicating))
    return;
  bool setup = ctx->settingUp();
  if (setup && kind != KernelKind::Stateful)
    return;
  bool tracing = ctx->tracing();
  double t0 = tracing ? ctx->nowUs() : 0.0;
  const auto &ops = ctx->ops();
  bool known = op >= 0 && static_cast<size_t>(op) < ops.size();
  std::string name = strchr(mnemonic, '.') ? std::string(mnemonic)
                                           : std::string("hpc.") + mnemonic;
  try {
    if (!ctx->prepared())
      fail("kernel called before the context was prepared");
    if (!ops.empty() && !known)
      fail("op index " + std::to_string(op) + " is not in the manifest's " +
           std::to_string(ops.size()) + " ops");
    if (known && ops[op].name != name)
      fail("the manifest lists op " + std::to_string(op) + " as " + ops[op].name);
    if (!ids)
      fail("no tensor ids");
    OpCall c{*ctx, op, mnemonic, {}, {}, ia, fa, sa};
    c.setup = setup;
    int32_t nres = ids[0];
    if (nres < 0 || nres > 65536)
      fail("bad result count " + std::to_string(nres));
    c.results.reserve(static_cast<size_t>(nres));
    for (int32_t k = 0; k < nres; ++k)
      c.results.push_back(&ctx->tensor(ids[1 + k]));
    int32_t nops = ids[1 + nres];
    if (nops < 0 || nops > 65536)
      fail("bad operand count " + std::to_string(nops));
    c.operands.reserve(static_cast<size_t>(nops));
    for (int32_t k = 0; k < nops; ++k) {
      int32_t id = ids[2 + nres + k];
      c.operands.push_back(id < 0 ? nullptr : &ctx->tensor(id));
    }
    for (Tensor *r : c.results)
      if (r->region != Region::Arena)
        fail("result tensor is not in the arena");
    if (!readsBlocked(mnemonic))
      for (const std::vector<Tensor *> *list : {&c.results, &c.operands})
        for (Tensor *t : *list)
          if (t && t->blocked)
            fail("this kernel does not read or write the blocked layout (a tensor " +
                 shapeString(t->shape) + " is blocked)");
    fn(c);
    if (!setup)
      for (Tensor *r : c.results)
        ctx->noteWrite(*r);
  } catch (const Error &e) {
    ctx->setError("op " + std::to_string(op) + " (" + name +
                  (known && !ops[op].loc.empty() ? " at '" + ops[op].loc + "'" : "") +
                  "): " + e.what());
  } catch (const std::bad_alloc &) {
    ctx->setError("op " + std::to_string(op) + " (" + name + "): out of memory");
  } catch (const std::exception &e) {
    ctx->setError("op " + std::to_string(op) + " (" + name + "): " + e.what());
  }
  if (tracing && !setup)
    ctx->addTrace(op, t0, ctx->nowUs() - t0);
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
