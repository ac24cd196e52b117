//===- CodecBench.cpp - the compressed reductions' codecs, per value -------===//
//
// Nanoseconds per value of each codec's arithmetic (runtime/comm/Codec.h),
// one thread, on a gradient-sized buffer: int8 blocks (encode with its
// residual, decode-add), top-k (encode with its residual, at two ratios),
// and PowerSGD's products (P = M Q, orthonormalization, Q = M^T P, the
// result P Q^T with the residual) for matrices of the shapes GPT layers
// have, beside oneDNN's f32 matmul of the same two products (M Q and
// M^T P, plain layouts, one thread), which the codec does not call (it
// runs on the communication thread; see Codec.cpp). The numbers feed
// dist-compress's cost model (docs/cost-model.md) and docs/benchmarks.md.
//
// usage: hpcrt-codec-bench [VALUES [RANK]]   (default 4194304 values, rank 4)
//
//===----------------------------------------------------------------------===//

#include "comm/Codec.h"
#include "common/Codecs.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace hpcrt::comm;

namespace {

/// Seconds per call of f: the best of 5 timed calls after one warm-up.
template <typename F> double best(F &&f) {
  f();
  double least = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    least = std::min(least, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return least;
}

/// oneDNN's f32 matmul (m x k) * (k x n), created once, timed per call.
double dnnlMatmul(dnnl::engine &eng, dnnl::stream &s, int64_t m, int64_t k, int64_t n,
                  bool transA) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a({m, k}, dt::f32, transA ? tag::ba : tag::ab);
  dnnl::memory::desc b({k, n}, dt::f32, tag::ab), c({m, n}, dt::f32, tag::ab);
  dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), eng));
  dnnl::memory A(a, eng), B(b, eng), C(c, eng);
  float *pa = static_cast<float *>(A.get_data_handle());
  for (int64_t i = 0; i < m * k; ++i)
    pa[i] = std::sin(0.01f * float(i));
  return best([&] {
    mm.execute(s, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
    s.wait();
  });
}

} // namespace

int main(int argc, char **argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t(1) << 22);
  const int64_t R = argc > 2 ? std::strtoll(argv[2], nullptr, 10) : 4;
  std::vector<float> v(n), error(n), acc(n, 0.0f);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(std::sin(0.37 * double(i)) * double(1 + i % 7));
  std::vector<char> bytes(static_cast<size_t>(hpc::codecs::int8BlockBytes(int64_t(n), 256)) + n);
  auto per = [&](double seconds) { return seconds / double(n) * 1e9; };

  printf("codec, one thread, %zu values: ns per value\n", n);
  printf("int8 blocks of 256: encode %.2f, decode-add %.2f\n",
         per(best([&] { int8BlockEncode(v.data(), n, 256, bytes.data(), error.data()); })),
         per(best([&] { int8BlockDecodeAdd(bytes.data(), n, 256, acc.data()); })));
  for (double ratio : {0.01, 0.1}) {
    size_t k = static_cast<size_t>(hpc::codecs::topkCount(int64_t(n), ratio));
    std::vector<char> pairs(8 * k);
    printf("top-k ratio %g: encode %.2f, decode-add %.2f\n", ratio,
           per(best([&] { topkEncode(v.data(), n, k, pairs.data(), error.data()); })),
           per(best([&] { topkDecodeAdd(pairs.data(), k, n, acc.data()); })));
  }

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  printf("PowerSGD rank %lld (per matrix value; oneDNN's matmul of the same products beside):\n",
         static_cast<long long>(R));
  const int64_t shapes[][2] = {{256, 768}, {256, 1024}, {1024, 256}, {768, 768}, {2048, 256}};
  for (const auto &shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1], values = rows * cols;
    std::vector<float> M(v.begin(), v.begin() + values), E(values), Q(cols * R), P(rows * R);
    powerSgdStartQ(Q.data(), Q.size(), 1);
    auto each = [&](double seconds) { return seconds / double(values) * 1e9; };
    double project = best([&] { powerSgdProject(M.data(), rows, cols, Q.data(), R, P.data()); });
    double orth = best([&] { orthonormalize(P.data(), R, rows); });
    double back = best([&] { powerSgdBack(M.data(), rows, cols, P.data(), R, Q.data()); });
    std::vector<float> out(M);
    double expand = best([&] {
      powerSgdExpand(P.data(), Q.data(), rows, cols, R, out.data(), E.data(), 0.5f);
    });
    double dnnlProject = dnnlMatmul(eng, s, rows, cols, R, false);
    double dnnlBack = dnnlMatmul(eng, s, cols, rows, R, true);
    printf("  %lldx%lld: M Q %.2f (oneDNN %.2f), orth %.3f, M^T P %.2f (oneDNN %.2f), "
           "P Q^T + residual %.2f; all %.2f\n",
           static_cast<long long>(rows), static_cast<long long>(cols), each(project),
           each(dnnlProject), each(orth), each(back), each(dnnlBack), each(expand),
           each(project + orth + back + expand));
  }
  return 0;
}
