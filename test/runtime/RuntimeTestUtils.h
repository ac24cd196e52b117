//===- RuntimeTestUtils.h - calling libhpcrt kernels from tests -*- C++ -*-===//
//
// The kernels' entry points are declared by core/KernelCall.h (Ops.def).
// run(Call) builds a manifest with one arena tensor per operand and result,
// a Context from it, writes the operands (given as doubles, converted to the
// dtype as hpc.cast would), calls the kernel through its C entry point with
// the ABI's id and attribute arrays, and reads the results back as doubles.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_TEST_RUNTIMETESTUTILS_H
#define HPCRT_TEST_RUNTIMETESTUTILS_H

#include "hpcrt.h"
#include "cpu/Kernel.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace hpcrt::test {

/// The message of the exception `f` throws ("" when it throws none).
inline std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

using KFn = void (*)(hpcrt_ctx *, int32_t, const int32_t *, const int64_t *, const double *,
                     const char *const *);

/// A tensor given as doubles (converted to/from `dtype` at the boundary).
struct Val {
  int dtype = HPCRT_F32;
  std::vector<int64_t> shape;
  std::vector<double> v;
};

inline Val val(int dtype, std::vector<int64_t> shape, std::vector<double> v) {
  return Val{dtype, std::move(shape), std::move(v)};
}
inline Val f32(std::vector<int64_t> shape, std::vector<double> v) {
  return val(HPCRT_F32, std::move(shape), std::move(v));
}

/// Values 0..n-1 scaled: a deterministic pseudo-random tensor in [-1, 1).
inline Val randomVal(int dtype, std::vector<int64_t> shape, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  Val x{dtype, shape, {}};
  x.v.resize(static_cast<size_t>(numElements(shape)));
  for (double &e : x.v)
    e = d(gen);
  if (dtype == HPCRT_F32)
    for (double &e : x.v)
      e = static_cast<float>(e);
  return x;
}

struct Call {
  KFn fn;
  std::vector<std::optional<Val>> ins;
  std::vector<std::pair<int, std::vector<int64_t>>> outs; ///< dtype, shape
  std::vector<int64_t> ia;
  std::vector<double> fa;
  std::vector<std::string> sa;
};

struct Result {
  std::vector<Val> outs;
  /// The operands after the call (in-place kernels such as the optimizer
  /// updates write them); empty Vals for absent operands.
  std::vector<Val> ins;
  std::string error; ///< the context's error, empty on success
};

inline double readElem(const Tensor &t, int64_t i) {
  double r = 0;
  dispatch<kAll>(t.dtype, "test", [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = static_cast<double>(ld(t.as<T>(), i));
  });
  return r;
}

inline void writeElem(Tensor &t, int64_t i, double v) {
  encodeScalar(v, t.dtype, static_cast<uint8_t *>(t.data) + i * dtypeSize(t.dtype));
}

inline Result run(const Call &c) {
  nlohmann::json tensors = nlohmann::json::array();
  int64_t off = 0;
  auto add = [&](int dtype, const std::vector<int64_t> &shape) {
    int64_t bytes = numElements(shape) * static_cast<int64_t>(dtypeSize(dtype));
    tensors.push_back({{"dtype", dtype}, {"shape", shape}, {"region", "arena"}, {"offset", off}});
    off += (bytes + 63) / 64 * 64;
    return static_cast<int32_t>(tensors.size() - 1);
  };
  std::vector<int32_t> ids{static_cast<int32_t>(c.outs.size())};
  for (const auto &o : c.outs)
    ids.push_back(add(o.first, o.second));
  ids.push_back(static_cast<int32_t>(c.ins.size()));
  for (const auto &in : c.ins)
    ids.push_back(in ? add(in->dtype, in->shape) : -1);
  nlohmann::json m = {{"version", 1},   {"model", "test"},  {"arena_bytes", off},
                      {"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()},
                      {"tensors", tensors}};
  Context ctx(m.dump());
  ctx.prepare();
  size_t k = 1 + c.outs.size() + 1;
  for (const auto &in : c.ins) {
    if (in) {
      Tensor &t = ctx.tensor(ids[k]);
      EXPECT_EQ(static_cast<int64_t>(in->v.size()), t.numel) << "operand value count";
      for (int64_t i = 0; i < t.numel && i < static_cast<int64_t>(in->v.size()); ++i)
        writeElem(t, i, in->v[i]);
    }
    ++k;
  }
  std::vector<const char *> sp;
  for (const std::string &s : c.sa)
    sp.push_back(s.c_str());
  c.fn(&ctx, 0, ids.data(), c.ia.data(), c.fa.data(), sp.data());
  Result r;
  r.error = ctx.error();
  auto read = [&](int32_t id) {
    const Tensor &t = ctx.tensor(id);
    Val v{t.dtype, t.shape, {}};
    for (int64_t i = 0; i < t.numel; ++i)
      v.v.push_back(readElem(t, i));
    return v;
  };
  for (size_t j = 0; j < c.outs.size(); ++j)
    r.outs.push_back(read(ids[1 + j]));
  for (size_t j = 0; j < c.ins.size(); ++j)
    r.ins.push_back(c.ins[j] ? read(ids[2 + c.outs.size() + j]) : Val{});
  return r;
}

/// Runs a call that must succeed and has one result.
inline std::vector<double> run1(const Call &c) {
  Result r = run(c);
  EXPECT_EQ(r.error, "");
  return r.outs.empty() ? std::vector<double>{} : r.outs[0].v;
}

inline void expectNear(const std::vector<double> &got, const std::vector<double> &want,
                       double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << "at " << i;
  }
}

} // namespace hpcrt::test

#endif // HPCRT_TEST_RUNTIMETESTUTILS_H
