//===- KernelBench.cpp - libhpcrt's kernels, timed ------------------------===//
//
// The kernel half of hpc-calibrate: what one device of this machine computes
// per second, measured through the same C entry points a compiled program
// calls (hpcrt_matmul, hpcrt_conv, hpcrt_add; as test/runtime/GemmBench.cpp
// does) on a real context whose arena holds the operands. GEMMs of square
// and transformer-like shapes in f32 and bf16, ResNet-like convolutions,
// large elementwise adds (bytes read and written / time = the memory
// bandwidth kernels achieve) and a tiny add (the fixed cost of one kernel
// call). Each case: a warm-up call (it also makes the kernel's oneDNN
// primitive), a second call to size the rounds, then rounds of n calls of
// about a target time each; the best round counts. Timed by the context's
// clock (hpcrt_ctx::nowUs).
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "core/Float16.h"
#include "core/KernelCall.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <random>

using namespace hpc;
using namespace hpc::calibrate;
using cost::DType;

namespace {

/// One arena tensor of a bench context.
struct TensorDesc {
  int dtype; ///< hpcrt_dtype
  std::vector<int64_t> shape;
};

int64_t elements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A prepared context whose arena holds `tensors` (ids 0, 1, ...), filled
/// with small pseudo-random values (fixed seed). Throws hpcrt::Error.
class Bench {
public:
  explicit Bench(const std::vector<TensorDesc> &tensors) {
    nlohmann::json list = nlohmann::json::array();
    int64_t offset = 0;
    for (const TensorDesc &t : tensors) {
      list.push_back({{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"region", "arena"},
                      {"offset", offset}});
      offset += (elements(t.shape) * elementBytes(t.dtype) + 63) / 64 * 64;
    }
    nlohmann::json manifest = {{"version", 1},
                               {"model", "hpc-calibrate"},
                               {"arena_bytes", offset},
                               {"inputs", nlohmann::json::array()},
                               {"outputs", nlohmann::json::array()},
                               {"tensors", list}};
    ctx_ = std::make_unique<hpcrt_ctx>(manifest.dump());
    ctx_->prepare();
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (size_t id = 0; id < tensors.size(); ++id) {
      void *p = hpcrt_tensor_data(ctx_.get(), static_cast<int32_t>(id));
      int64_t n = elements(tensors[id].shape);
      for (int64_t i = 0; i < n; ++i) {
        if (tensors[id].dtype == HPCRT_BF16)
          static_cast<uint16_t *>(p)[i] = hpcrt::floatToBf16(dist(gen));
        else
          static_cast<float *>(p)[i] = dist(gen);
      }
    }
  }

  hpcrt_ctx *ctx() const { return ctx_.get(); }

  /// Seconds per call of `f` (see the file comment); fails when a kernel
  /// recorded an error in the context.
  template <typename F> double secondsPerCall(F &&f, double target, int rounds,
                                              const RunOptions &o) {
    if (o.sync)
      o.sync();
    double t0 = ctx_->nowUs();
    f();
    double once = ctx_->nowUs() - t0;
    t0 = ctx_->nowUs();
    f();
    once = std::min(once, ctx_->nowUs() - t0) * 1e-6;
    int64_t n = std::max<int64_t>(1, static_cast<int64_t>(target / std::max(once, 1e-9)));
    std::vector<double> perCall;
    for (int r = 0; r < rounds; ++r) {
      t0 = ctx_->nowUs();
      for (int64_t i = 0; i < n; ++i)
        f();
      perCall.push_back((ctx_->nowUs() - t0) * 1e-6 / static_cast<double>(n));
    }
    if (!ctx_->error().empty())
      hpcrt::fail(ctx_->error());
    std::sort(perCall.begin(), perCall.end());
    // The best round, but where the ranks share the cores the median: the
    // best is a round when the others happened to wait.
    return o.shared ? perCall[perCall.size() / 2] : perCall.front();
  }

private:
  std::unique_ptr<hpcrt_ctx> ctx_;

  static int64_t elementBytes(int dtype) { return dtype == HPCRT_BF16 ? 2 : 4; }
};

/// Time budget of one case: the target of a round and the rounds.
struct Budget {
  double target;
  int rounds;
  const RunOptions *options;
};

Budget budget(const RunOptions &o) {
  return o.quick ? Budget{0.01, 2, &o} : Budget{0.2, 3, &o};
}

/// A GEMM case: batch x [M, K] x [K, N].
struct GemmCase {
  const char *name;
  int64_t batch, m, k, n;
  DType dtype;
};

const GemmCase kGemmFull[] = {
    {"square-256", 1, 256, 256, 256, DType::FP32},
    {"square-512", 1, 512, 512, 512, DType::FP32},
    {"square-1024", 1, 1024, 1024, 1024, DType::FP32},
    {"square-2048", 1, 2048, 2048, 2048, DType::FP32},
    {"gpt2s-qkv", 1, 128, 768, 2304, DType::FP32},
    {"gpt2s-mlp-fc", 1, 128, 768, 3072, DType::FP32},
    {"gpt2s-mlp-proj", 1, 128, 3072, 768, DType::FP32},
    {"bert-large-fc", 1, 512, 1024, 4096, DType::FP32},
    {"gpt2s-attn-scores", 12, 128, 64, 128, DType::FP32},
    {"square-256", 1, 256, 256, 256, DType::BF16},
    {"square-1024", 1, 1024, 1024, 1024, DType::BF16},
    {"gpt2s-mlp-fc", 1, 128, 768, 3072, DType::BF16},
};
const GemmCase kGemmQuick[] = {
    {"square-128", 1, 128, 128, 128, DType::FP32},
    {"square-256", 1, 256, 256, 256, DType::FP32},
    {"square-512", 1, 512, 512, 512, DType::FP32},
    {"gpt2s-attn-proj", 1, 128, 768, 768, DType::FP32},
    {"square-256", 1, 256, 256, 256, DType::BF16},
};

cost::KernelTiming timeGemm(const GemmCase &c, const Budget &b) {
  int dt = c.dtype == DType::BF16 ? HPCRT_BF16 : HPCRT_F32;
  std::vector<TensorDesc> t;
  if (c.batch > 1)
    t = {{dt, {c.batch, c.m, c.k}}, {dt, {c.batch, c.k, c.n}}, {dt, {c.batch, c.m, c.n}}};
  else
    t = {{dt, {c.m, c.k}}, {dt, {c.k, c.n}}, {dt, {c.m, c.n}}};
  Bench bench(t);
  const int32_t ids[] = {1, 2, 2, 0, 1}; // result 2; operands 0, 1
  hpcrt_ctx *ctx = bench.ctx();
  double s = bench.secondsPerCall(
      [&] { hpcrt_matmul(ctx, 0, ids, nullptr, nullptr, nullptr); }, b.target, b.rounds,
      *b.options);
  double flop = 2.0 * c.batch * c.m * c.k * c.n;
  return {c.name, {c.batch, c.m, c.k, c.n}, c.dtype, s, flop / s};
}

/// A convolution case: [n, c, h, w] by out_channels filters of kh x kw.
struct ConvCase {
  const char *name;
  int64_t n, c, h, w, outChannels, kh, kw, stride, pad;
};

const ConvCase kConvFull[] = {
    {"resnet-conv1", 1, 3, 224, 224, 64, 7, 7, 2, 3},
    {"resnet-3x3-64", 1, 64, 56, 56, 64, 3, 3, 1, 1},
    {"resnet-3x3-256", 1, 256, 14, 14, 256, 3, 3, 1, 1},
};
const ConvCase kConvQuick[] = {
    {"resnet-3x3-64", 1, 64, 56, 56, 64, 3, 3, 1, 1},
};

cost::KernelTiming timeConv(const ConvCase &c, const Budget &b) {
  int64_t oh = (c.h + 2 * c.pad - c.kh) / c.stride + 1;
  int64_t ow = (c.w + 2 * c.pad - c.kw) / c.stride + 1;
  Bench bench({{HPCRT_F32, {c.n, c.c, c.h, c.w}},
               {HPCRT_F32, {c.outChannels, c.c, c.kh, c.kw}},
               {HPCRT_F32, {c.n, c.outChannels, oh, ow}}});
  // hpc.conv: result 2; input 0, weight 1, no bias, no residual. Attributes
  // alphabetically: activation (s), dilations, group, pads, strides (i).
  const int32_t ids[] = {1, 2, 4, 0, 1, -1, -1};
  const int64_t ia[] = {2, 1, 1, 1, 4, c.pad, c.pad, c.pad, c.pad, 2, c.stride, c.stride};
  const char *sa[] = {"none"};
  hpcrt_ctx *ctx = bench.ctx();
  double s = bench.secondsPerCall([&] { hpcrt_conv(ctx, 0, ids, ia, nullptr, sa); },
                                  b.target, b.rounds, *b.options);
  double flop = 2.0 * c.n * c.outChannels * c.c * c.kh * c.kw * oh * ow;
  return {c.name,
          {c.n, c.c, c.h, c.w, c.outChannels, c.kh, c.kw, c.stride, c.pad},
          DType::FP32,
          s,
          flop / s};
}

/// Seconds per call of y = a + b over `n` f32 elements.
double timeAdd(int64_t n, const Budget &b) {
  Bench bench({{HPCRT_F32, {n}}, {HPCRT_F32, {n}}, {HPCRT_F32, {n}}});
  const int32_t ids[] = {1, 2, 2, 0, 1};
  hpcrt_ctx *ctx = bench.ctx();
  return bench.secondsPerCall([&] { hpcrt_add(ctx, 0, ids, nullptr, nullptr, nullptr); },
                              b.target, b.rounds, *b.options);
}

void measureAll(const RunOptions &o, cost::Calibration &out) {
  Budget b = budget(o);
  out.gemm.clear();
  out.conv.clear();
  out.memory.clear();
  if (o.quick) {
    for (const GemmCase &c : kGemmQuick)
      out.gemm.push_back(timeGemm(c, b));
    for (const ConvCase &c : kConvQuick)
      out.conv.push_back(timeConv(c, b));
  } else {
    for (const GemmCase &c : kGemmFull)
      out.gemm.push_back(timeGemm(c, b));
    for (const ConvCase &c : kConvFull)
      out.conv.push_back(timeConv(c, b));
  }
  // The largest add is far beyond the caches (a 300 MiB L3 on these
  // machines) outside --quick; the cluster's bandwidth is the largest's.
  std::vector<int64_t> adds = o.quick ? std::vector<int64_t>{1 << 20, 4 << 20}
                                      : std::vector<int64_t>{1 << 20, 16 << 20, 64 << 20};
  for (int64_t n : adds) {
    double s = timeAdd(n, b);
    int64_t bytes = 3 * 4 * n; // two operands read, one result written
    out.memory.push_back({"add", bytes, s, static_cast<double>(bytes) / s});
  }
  // A tiny kernel: its time is the fixed cost of a call.
  out.kernelOverhead = timeAdd(16, {o.quick ? 0.01 : 0.1, b.rounds, &o});
}

} // namespace

bool hpc::calibrate::measureKernels(const RunOptions &options, cost::Calibration &out,
                                    std::string &error) {
  try {
    hpcrt::defaultBackend().setThreads(options.threads);
    measureAll(options, out);
    return true;
  } catch (const std::exception &e) {
    error = std::string("a runtime kernel failed: ") + e.what();
    if (options.abortJob)
      options.abortJob(error);
    return false;
  }
}

bool hpc::calibrate::gemmWorkload(int64_t size, std::function<void()> &out,
                                   std::string &error) {
  try {
    auto bench = std::make_shared<Bench>(std::vector<TensorDesc>{
        {HPCRT_F32, {size, size}}, {HPCRT_F32, {size, size}}, {HPCRT_F32, {size, size}}});
    out = [bench] {
      const int32_t ids[] = {1, 2, 2, 0, 1}; // result 2; operands 0, 1
      hpcrt_matmul(bench->ctx(), 0, ids, nullptr, nullptr, nullptr);
      if (!bench->ctx()->error().empty())
        hpcrt::fail(bench->ctx()->error());
    };
    return true;
  } catch (const std::exception &e) {
    error = std::string("a runtime kernel failed: ") + e.what();
    return false;
  }
}
