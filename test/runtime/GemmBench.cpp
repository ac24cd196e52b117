//===- GemmBench.cpp - the runtime's matmul/gemm against oneDNN's matmul ---===//
//
// GFLOP/s of f32 (or, with --dtype bf16, bf16: bf16 operands and result,
// f32 accumulation) products of the shapes the bundled models and GPT-2 small
// (128 tokens) run, computed (a) by libhpcrt's kernels through their C entry
// points (hpcrt_matmul; hpcrt_gemm with trans_b for the tied LM head
// A x W^T) on a real context whose arena holds the operands, and (b) by a
// oneDNN matmul primitive created directly (same dtype, plain row-major layouts;
// W^T is W [N,K] row-major, i.e. tag "ba" of the [K,N] operand) on the same
// operand buffers, created once and executed repeatedly. One row per
// product: M K N (and the batch), both GFLOP/s, runtime/oneDNN; then the
// minimum and the geometric mean of the ratio. Each side: one warm-up call,
// then 3 rounds of enough calls for ~--time seconds (default 0.3); the best
// round counts. A row whose two results differ by more than 1e-3 relative
// (to the largest |value|; 1e-2 in bf16, whose results round to 8 bits
// after sums in different orders) is flagged.
//
// usage: hpcrt-gemm-bench [--threads T] [--time S] [--dtype f32|bf16]
//
// --threads sets omp_set_num_threads (the runtime's pool and oneDNN, built
// with OpenMP, both read omp_get_max_threads()); default: OMP_NUM_THREADS or
// all cores. scripts/bench_gemm.sh runs it for T=1 and T=2.
//
//===----------------------------------------------------------------------===//

#include "core/Float16.h"
#include "core/KernelCall.h"

#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>


namespace {

struct Case {
  const char *what;
  int64_t batch, M, K, N;
  bool transB; ///< B stored [N,K]: hpcrt_gemm trans_b=1 (2-D only)
};

const Case kCases[] = {
    {"gpt2s attn/proj", 1, 128, 768, 768, false},
    {"gpt2s qkv", 1, 128, 768, 2304, false},
    {"gpt2s mlp fc", 1, 128, 768, 3072, false},
    {"gpt2s mlp proj", 1, 128, 3072, 768, false},
    {"gpt2s lm head A*W^T", 1, 128, 768, 50257, true},
    {"gpt2 (bundled) mlp fc", 1, 4 * 64, 64, 256, false},
    {"gpt2 (bundled) mlp proj", 1, 4 * 64, 256, 64, false},
    {"gpt2s attn q*k^T", 12, 128, 64, 128, false},
    {"gpt2s attn p*v", 12, 128, 128, 64, false},
    {"", 1, 256, 512, 2048, false},
    {"", 1, 1024, 512, 512, false},
    {"", 1, 64, 64, 64, false},
    {"resnet18 fc A*W^T", 1, 1, 512, 1000, true},
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Seconds per call: a warm-up call, then `rounds` rounds of n calls, n chosen
/// from the warm-up so a round takes about `target` seconds; the best round.
template <typename F> double timeIt(F &&f, double target, int rounds = 3) {
  double t0 = now();
  f();
  double once = now() - t0;
  // The warm-up includes first-touch costs: time one more call to size n.
  t0 = now();
  f();
  once = std::min(once, now() - t0);
  int64_t n = std::max<int64_t>(1, static_cast<int64_t>(target / std::max(once, 1e-9)));
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    t0 = now();
    for (int64_t i = 0; i < n; ++i)
      f();
    best = std::min(best, (now() - t0) / static_cast<double>(n));
  }
  return best;
}

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      size_t p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "?";
}

const char *isaName(dnnl::cpu_isa isa) {
  switch (isa) {
  case dnnl::cpu_isa::sse41: return "sse41";
  case dnnl::cpu_isa::avx: return "avx";
  case dnnl::cpu_isa::avx2: return "avx2";
  case dnnl::cpu_isa::avx512_core: return "avx512_core";
  case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
  case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
  case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
  default: return "other";
  }
}

/// A context with the arena tensors of `shapes` (ids 0, 1, ...) in `dtype`
/// (HPCRT_F32 or HPCRT_BF16), prepared.
struct Arena {
  std::unique_ptr<hpcrt_ctx> ctx;
  int dtype;
  Arena(const std::vector<std::vector<int64_t>> &shapes, int dtype) : dtype(dtype) {
    const int64_t esize = dtype == HPCRT_BF16 ? 2 : 4;
    nlohmann::json tensors = nlohmann::json::array();
    int64_t off = 0;
    for (const auto &s : shapes) {
      int64_t n = 1;
      for (int64_t d : s)
        n *= d;
      tensors.push_back({{"dtype", dtype}, {"shape", s}, {"region", "arena"},
                         {"offset", off}});
      off += (n * esize + 63) / 64 * 64;
    }
    nlohmann::json m = {{"version", 1},
                        {"model", "gemm-bench"},
                        {"arena_bytes", off},
                        {"inputs", nlohmann::json::array()},
                        {"outputs", nlohmann::json::array()},
                        {"tensors", tensors}};
    ctx = std::make_unique<hpcrt_ctx>(m.dump());
    ctx->prepare();
  }
  void *data(int id) { return hpcrt_tensor_data(ctx.get(), id); }
  float get(int id, int64_t i) {
    if (dtype == HPCRT_BF16)
      return hpcrt::bf16ToFloat(static_cast<const uint16_t *>(data(id))[i]);
    return static_cast<const float *>(data(id))[i];
  }
  void set(int id, int64_t i, float v) {
    if (dtype == HPCRT_BF16)
      static_cast<uint16_t *>(data(id))[i] = hpcrt::floatToBf16(v);
    else
      static_cast<float *>(data(id))[i] = v;
  }
};

} // namespace

namespace {
int benchMain(int argc, char **argv) {
  double target = 0.3;
  bool bf16 = false;
  std::string only; // "MxKxN": just that product (profiling one row)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      int t = atoi(argv[++i]);
      if (t < 1) {
        fprintf(stderr, "hpcrt-gemm-bench: --threads must be >= 1\n");
        return 1;
      }
      omp_set_num_threads(t);
    } else if (a == "--time" && i + 1 < argc) {
      target = atof(argv[++i]);
    } else if (a == "--dtype" && i + 1 < argc) {
      std::string d = argv[++i];
      if (d != "f32" && d != "bf16") {
        fprintf(stderr, "hpcrt-gemm-bench: --dtype: '%s' is not f32 or bf16\n", d.c_str());
        return 1;
      }
      bf16 = d == "bf16";
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      fprintf(stderr,
              "usage: hpcrt-gemm-bench [--threads T] [--time SECONDS] [--dtype f32|bf16] "
              "[--only MxKxN]\n");
      return a == "-h" || a == "--help" ? 0 : 1;
    }
  }
  const dnnl_version_t *v = dnnl_version();
  printf("cpu: %s; threads %d; oneDNN %d.%d.%d (%s)\n", cpuModel().c_str(),
         omp_get_max_threads(), v->major, v->minor, v->patch,
         isaName(dnnl::get_effective_cpu_isa()));
  printf("%s, best of 3 rounds of ~%.2f s each after a warm-up call\n\n", bf16 ? "bf16" : "f32", target);
  printf("| product | batch | M | K | N | runtime GFLOP/s | oneDNN GFLOP/s | runtime/oneDNN "
         "| oneDNN impl |\n");
  printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
  fflush(stdout);

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  std::vector<double> ratios;
  int bad = 0;
  for (const Case &c : kCases) {
    if (!only.empty() && only != std::to_string(c.M) + "x" + std::to_string(c.K) + "x" +
                                     std::to_string(c.N))
      continue;
    bool batched = c.batch > 1;
    std::vector<int64_t> as, bs, ys;
    if (batched) {
      as = {c.batch, c.M, c.K};
      bs = {c.batch, c.K, c.N};
      ys = {c.batch, c.M, c.N};
    } else {
      as = {c.M, c.K};
      bs = c.transB ? std::vector<int64_t>{c.N, c.K} : std::vector<int64_t>{c.K, c.N};
      ys = {c.M, c.N};
    }
    Arena ar({as, bs, ys, ys}, bf16 ? HPCRT_BF16 : HPCRT_F32); // A, B, Y (runtime), Y (oneDNN)
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (int id = 0; id < 2; ++id) {
      int64_t n = 1;
      for (int64_t e : (id == 0 ? as : bs))
        n *= e;
      for (int64_t i = 0; i < n; ++i)
        ar.set(id, i, d(gen));
    }

    // (a) the runtime's kernel through its C entry point.
    const int32_t ids[] = {1, 2, 2, 0, 1};          // 1 result (2), 2 operands (0, 1)
    const int32_t gemmIds[] = {1, 2, 3, 0, 1, -1};  // gemm: c absent
    const int64_t gemmI[] = {0, c.transB ? 1 : 0}; // trans_a, trans_b
    const double gemmF[] = {1.0, 0.0};              // alpha, beta
    const char *gemmS[] = {"none"};                 // activation
    hpcrt_ctx *ctx = ar.ctx.get();
    auto runtimeCall = [&] {
      if (c.transB)
        hpcrt_gemm(ctx, 0, gemmIds, gemmI, gemmF, gemmS);
      else
        hpcrt_matmul(ctx, 0, ids, nullptr, nullptr, nullptr);
    };

    // (b) oneDNN's matmul on the same operands.
    dnnl::memory::dims ad(as.begin(), as.end()), yd(ys.begin(), ys.end());
    dnnl::memory::dims bd = batched ? dnnl::memory::dims{c.batch, c.K, c.N}
                                    : dnnl::memory::dims{c.K, c.N};
    tag t = batched ? tag::abc : tag::ab;
    dt type = bf16 ? dt::bf16 : dt::f32;
    dnnl::memory::desc amd(ad, type, t), ymd(yd, type, t);
    dnnl::memory::desc bmd(bd, type, c.transB ? tag::ba : t);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(amd, bmd, ymd), eng,
                                    /*allow_empty=*/true);
    if (!pd) {
      fprintf(stderr, "hpcrt-gemm-bench: error: oneDNN has no %s matmul on this CPU (%s)\n",
              bf16 ? "bf16" : "f32", isaName(dnnl::get_effective_cpu_isa()));
      return 1;
    }
    dnnl::matmul prim(pd);
    dnnl::memory am(amd, eng, ar.data(0)), bm(bmd, eng, ar.data(1)), ym(ymd, eng, ar.data(3));
    std::unordered_map<int, dnnl::memory> margs = {
        {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, ym}};
    auto onednnCall = [&] {
      prim.execute(strm, margs);
      strm.wait();
    };

    double tr = timeIt(runtimeCall, target);
    if (!ctx->error().empty()) {
      fprintf(stderr, "hpcrt-gemm-bench: runtime kernel failed: %s\n", ctx->error().c_str());
      return 1;
    }
    double to = timeIt(onednnCall, target);

    int64_t ny = 1;
    for (int64_t e : ys)
      ny *= e;
    double diff = 0, mag = 0;
    for (int64_t i = 0; i < ny; ++i) {
      float y0 = ar.get(2, i), y1 = ar.get(3, i);
      diff = std::max(diff, static_cast<double>(std::fabs(y0 - y1)));
      mag = std::max(mag, static_cast<double>(std::fabs(y1)));
    }
    double flop = 2.0 * c.batch * c.M * c.K * c.N;
    double gr = flop / tr * 1e-9, go = flop / to * 1e-9, ratio = gr / go;
    ratios.push_back(ratio);
    std::string impl = pd.impl_info_str();
    printf("| %s%s | %lld | %lld | %lld | %lld | %.1f | %.1f | %.2f | %s |\n",
           c.what[0] ? c.what : "-",
           c.transB ? " (gemm trans_b)" : "", static_cast<long long>(c.batch),
           static_cast<long long>(c.M), static_cast<long long>(c.K),
           static_cast<long long>(c.N), gr, go, ratio, impl.c_str());
    if (diff > (bf16 ? 1e-2 : 1e-3) * std::max(mag, 1.0)) {
      printf("MISMATCH above: max |runtime - oneDNN| %.3g (max |y| %.3g)\n", diff, mag);
      ++bad;
    }
    fflush(stdout);
  }
  if (ratios.empty()) {
    fprintf(stderr, "hpcrt-gemm-bench: --only %s matches no product of the sweep\n",
            only.c_str());
    return 1;
  }
  double lg = 0;
  for (double r : ratios)
    lg += std::log(r);
  printf("\nruntime/oneDNN: min %.2f, geometric mean %.2f (%zu products, %d threads)\n",
         *std::min_element(ratios.begin(), ratios.end()), std::exp(lg / ratios.size()),
         ratios.size(), omp_get_max_threads());
  return bad ? 2 : 0;
}
} // namespace

int main(int argc, char **argv) {
  try {
    return benchMain(argc, argv);
  } catch (const std::exception &e) {
    fprintf(stderr, "hpcrt-gemm-bench: error: %s\n", e.what());
    return 1;
  }
}
