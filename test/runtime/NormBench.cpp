//===- NormBench.cpp - the runtime's norms and softmax against oneDNN ------===//
//
// Microseconds per call of f32 softmax, log_softmax, layer_norm and
// (inference) batch_norm at the shapes of the bundled and benchmark models:
// GPT-2 small at 128 tokens, the bundled examples/gpt2.onnx (d=64, 4 heads,
// seq 16 and 64), gpt-6x512 at batch 4 x seq 256 (and its loss's
// log_softmax over the 1024-token vocabulary), and ResNet-18's batch-norm
// shapes (the inference export folds them into the convolutions; training
// and unfolded exports run them). Three sides on the same input:
//   own      the runtime's own kernel through its C entry point, with
//            onednn::setPrimitivesEnabled(false);
//   oneDNN   oneDNN's primitive made directly (softmax_v2, layer and batch
//            normalization, forward_inference, plain layouts) and executed;
//   runtime  the entry point as the compiled program calls it (whatever the
//            kernel runs today: oneDNN where it moved, its own code else).
// For each shape and each thread count (1 and 2 unless --threads) the sides
// run in interleaved rounds (the order rotating), each round the same
// number of calls of every side, as many as the fastest side makes in
// ~--time/rounds seconds; the medians count. A row whose own and oneDNN results
// differ by more than 1e-5 relative (to max |y|, at least 1) is flagged.
//
// usage: hpcrt-norm-bench [--threads T] [--time S] [--rounds R] [--only OP]
// (--only: the rows of one op, e.g. softmax)
//
//===----------------------------------------------------------------------===//

#include "core/KernelCall.h"
#include "cpu/Dnnl.h"

#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

enum class Kind { Softmax, LogSoftmax, LayerNorm, LayerNormNoBias, BatchNorm };

struct Case {
  const char *what;
  Kind kind;
  std::vector<int64_t> shape;
  int axis = -1; ///< softmax: the axis (-1: the last)
};

const Case kCases[] = {
    {"gpt2s attn", Kind::Softmax, {12, 128, 128}},
    {"gpt2s attn", Kind::Softmax, {1, 12, 128, 128}},
    {"gpt2 (bundled) attn seq 64", Kind::Softmax, {4, 4, 64, 64}},
    {"gpt2 (bundled) attn seq 16", Kind::Softmax, {1, 4, 16, 16}},
    {"gpt-6x512 attn", Kind::Softmax, {4, 8, 256, 256}},
    {"(axis 1, not the last)", Kind::Softmax, {12, 128, 128}, 1},
    {"gpt-6x512 loss", Kind::LogSoftmax, {1024, 1024}},
    {"gpt2s loss", Kind::LogSoftmax, {128, 50257}},
    {"gpt2s ln", Kind::LayerNorm, {128, 768}},
    {"gpt2s ln (no bias)", Kind::LayerNormNoBias, {128, 768}},
    {"gpt2 (bundled) ln seq 64", Kind::LayerNorm, {256, 64}},
    {"gpt2 (bundled) ln seq 16", Kind::LayerNorm, {16, 64}},
    {"gpt-6x512 ln", Kind::LayerNorm, {1024, 512}},
    {"resnet18 bn", Kind::BatchNorm, {1, 64, 56, 56}},
    {"resnet18 bn", Kind::BatchNorm, {1, 128, 28, 28}},
    {"resnet18 bn", Kind::BatchNorm, {1, 256, 14, 14}},
    {"resnet18 bn", Kind::BatchNorm, {1, 512, 7, 7}},
};

const char *kindName(Kind k) {
  switch (k) {
  case Kind::Softmax: return "softmax";
  case Kind::LogSoftmax: return "log_softmax";
  case Kind::LayerNorm: return "layer_norm";
  case Kind::LayerNormNoBias: return "layer_norm";
  case Kind::BatchNorm: return "batch_norm";
  }
  return "?";
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// A context with f32 arena tensors of `shapes` (ids 0, 1, ...), prepared.
struct Arena {
  std::unique_ptr<hpcrt_ctx> ctx;
  explicit Arena(const std::vector<std::vector<int64_t>> &shapes) {
    nlohmann::json tensors = nlohmann::json::array();
    int64_t off = 0;
    for (const auto &s : shapes) {
      tensors.push_back({{"dtype", HPCRT_F32}, {"shape", s}, {"region", "arena"},
                         {"offset", off}});
      off += (numel(s) * 4 + 63) / 64 * 64;
    }
    nlohmann::json m = {{"version", 1},
                        {"model", "norm-bench"},
                        {"arena_bytes", off},
                        {"inputs", nlohmann::json::array()},
                        {"outputs", nlohmann::json::array()},
                        {"tensors", tensors}};
    ctx = std::make_unique<hpcrt_ctx>(m.dump());
    ctx->prepare();
  }
  float *data(int id) { return static_cast<float *>(hpcrt_tensor_data(ctx.get(), id)); }
};

/// Seconds per call of each side: rounds of n calls of every side in turn
/// (the first side rotating), n sized so that a round of the fastest side
/// takes about target/rounds; the median round of each.
std::vector<double> timeInterleaved(const std::vector<std::function<void()>> &sides,
                                    double target, int rounds) {
  double once = 1e30;
  for (const auto &f : sides) { // warm-up (first touch, primitive creation)
    f();
    double t0 = now();
    f();
    once = std::min(once, now() - t0);
  }
  int64_t n = std::max<int64_t>(1, static_cast<int64_t>(target / rounds / std::max(once, 1e-9)));
  std::vector<std::vector<double>> t(sides.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < sides.size(); ++k) {
      size_t s = (k + static_cast<size_t>(r)) % sides.size();
      double t0 = now();
      for (int64_t i = 0; i < n; ++i)
        sides[s]();
      t[s].push_back((now() - t0) / static_cast<double>(n));
    }
  std::vector<double> med;
  for (auto &v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

int benchMain(int argc, char **argv) {
  double target = 0.6;
  int rounds = 7;
  std::vector<int> threadCounts = {1, 2};
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      int t = atoi(argv[++i]);
      if (t < 1) {
        fprintf(stderr, "hpcrt-norm-bench: --threads must be >= 1\n");
        return 1;
      }
      threadCounts = {t};
    } else if (a == "--time" && i + 1 < argc) {
      target = atof(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, atoi(argv[++i]));
    } else {
      fprintf(stderr, "usage: hpcrt-norm-bench [--threads T] [--time SECONDS] [--rounds R] "
                      "[--only OP]\n");
      return a == "-h" || a == "--help" ? 0 : 1;
    }
  }
  const dnnl_version_t *v = dnnl_version();
  printf("cpu: %s; oneDNN %d.%d.%d (%s)\n", cpuModel().c_str(), v->major, v->minor, v->patch,
         hpcrt::onednn::isaName().c_str());
  printf("f32; per shape and thread count %d interleaved rounds, ~%.2f s of the fastest "
         "side each, medians\n\n",
         rounds, target / rounds);
  printf("| op | shape | model | threads | own us | oneDNN us | runtime us | own/oneDNN "
         "| runtime/oneDNN | oneDNN impl |\n");
  printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
  fflush(stdout);

  namespace dn = ::dnnl;
  using dt = dn::memory::data_type;
  dn::engine eng(dn::engine::kind::cpu, 0);
  dn::stream strm(eng);
  int bad = 0;
  for (const Case &c : kCases) {
    if (!only.empty() && only != kindName(c.kind))
      continue;
    const std::vector<int64_t> &xs = c.shape;
    int64_t rank = static_cast<int64_t>(xs.size());
    int64_t axis = c.axis < 0 ? rank - 1 : c.axis;
    bool softmax = c.kind == Kind::Softmax || c.kind == Kind::LogSoftmax;
    bool ln = c.kind == Kind::LayerNorm || c.kind == Kind::LayerNormNoBias;
    int64_t n = xs.back(), C = c.kind == Kind::BatchNorm ? xs[1] : n;
    // Tensors: 0 x, 1 y (own), 2 y (oneDNN), 3 y (runtime), then the
    // parameters: layer_norm 4 scale, 5 bias; batch_norm 4 scale, 5 bias,
    // 6 mean, 7 var.
    std::vector<std::vector<int64_t>> shapes = {xs, xs, xs, xs};
    int params = softmax ? 0 : ln ? 2 : 4;
    for (int k = 0; k < params; ++k)
      shapes.push_back({C});
    Arena ar(shapes);
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    float scale = softmax ? 8.f : 1.f; // attention logits span a few units
    for (int64_t i = 0; i < numel(xs); ++i)
      ar.data(0)[i] = scale * d(gen) + (ln ? 0.5f : 0.f);
    for (int k = 0; k < params; ++k)
      for (int64_t i = 0; i < C; ++i)
        ar.data(4 + k)[i] = k == 3 ? 0.5f + std::fabs(d(gen)) : d(gen);

    // The runtime's entry point (op number `op`: its own kernel state).
    hpcrt_ctx *ctx = ar.ctx.get();
    std::vector<int32_t> ids;
    std::vector<int64_t> ia;
    std::vector<double> fa;
    auto idsFor = [&](int32_t y) {
      ids = {1, y};
      if (softmax) {
        ids.insert(ids.end(), {1, 0});
        ia = {axis};
      } else if (ln) {
        ids.insert(ids.end(), {3, 0, 4, c.kind == Kind::LayerNorm ? 5 : -1});
        ia = {rank - 1};
        fa = {1e-5};
      } else {
        ids.insert(ids.end(), {5, 0, 4, 5, 6, 7});
        fa = {1e-5};
      }
    };
    auto entry = [&](int32_t op, int32_t y) {
      idsFor(y);
      switch (c.kind) {
      case Kind::Softmax: hpcrt_softmax(ctx, op, ids.data(), ia.data(), fa.data(), nullptr); break;
      case Kind::LogSoftmax:
        hpcrt_log_softmax(ctx, op, ids.data(), ia.data(), fa.data(), nullptr);
        break;
      case Kind::LayerNorm:
      case Kind::LayerNormNoBias:
        hpcrt_layer_norm(ctx, op, ids.data(), ia.data(), fa.data(), nullptr);
        break;
      case Kind::BatchNorm:
        hpcrt_batch_norm(ctx, op, ids.data(), ia.data(), fa.data(), nullptr);
        break;
      }
    };

    for (int threads : threadCounts) {
      omp_set_num_threads(threads);
      // oneDNN directly, made under this thread count.
      dn::memory::dims dims(xs.begin(), xs.end());
      dn::primitive prim;
      dn::primitive_desc_base pd;
      std::unordered_map<int, dn::memory> args;
      auto mem = [&](const dn::memory::desc &md, int id) { return dn::memory(md, eng, ar.data(id)); };
      if (softmax) {
        auto md = hpcrt::onednn::plain(dims, dt::f32);
        dn::softmax_v2_forward::primitive_desc p(
            dn::softmax_v2_forward::desc(dn::prop_kind::forward_inference,
                                         c.kind == Kind::Softmax ? dn::algorithm::softmax_accurate
                                                                 : dn::algorithm::softmax_log,
                                         md, md, static_cast<int>(axis)),
            eng);
        prim = dn::softmax_v2_forward(p);
        pd = p;
        args = {{DNNL_ARG_SRC, mem(md, 0)}, {DNNL_ARG_DST, mem(md, 2)}};
      } else if (ln) {
        auto md = hpcrt::onednn::plain({numel(xs) / n, n}, dt::f32);
        auto flags = dn::normalization_flags::use_scale;
        if (c.kind == Kind::LayerNorm)
          flags |= dn::normalization_flags::use_shift;
        dn::layer_normalization_forward::primitive_desc p(
            dn::layer_normalization_forward::desc(dn::prop_kind::forward_inference, md, 1e-5f,
                                                  flags),
            eng);
        prim = dn::layer_normalization_forward(p);
        pd = p;
        auto vd = hpcrt::onednn::plain({n}, dt::f32);
        args = {{DNNL_ARG_SRC, mem(md, 0)}, {DNNL_ARG_DST, mem(md, 2)},
                {DNNL_ARG_SCALE, mem(vd, 4)}};
        if (c.kind == Kind::LayerNorm)
          args.emplace(DNNL_ARG_SHIFT, mem(vd, 5));
      } else {
        auto md = hpcrt::onednn::plain(dims, dt::f32);
        auto flags = dn::normalization_flags::use_global_stats |
                     dn::normalization_flags::use_scale | dn::normalization_flags::use_shift;
        dn::batch_normalization_forward::primitive_desc p(
            dn::batch_normalization_forward::desc(dn::prop_kind::forward_inference, md, 1e-5f,
                                                  flags),
            eng);
        prim = dn::batch_normalization_forward(p);
        pd = p;
        auto vd = hpcrt::onednn::plain({C}, dt::f32);
        args = {{DNNL_ARG_SRC, mem(md, 0)},   {DNNL_ARG_DST, mem(md, 2)},
                {DNNL_ARG_SCALE, mem(vd, 4)}, {DNNL_ARG_SHIFT, mem(vd, 5)},
                {DNNL_ARG_MEAN, mem(vd, 6)},  {DNNL_ARG_VARIANCE, mem(vd, 7)}};
      }
      if (pd.scratchpad_desc().get_size())
        args.emplace(DNNL_ARG_SCRATCHPAD, dn::memory(pd.scratchpad_desc(), eng));

      int32_t rtOp = threads; // its own state per thread count (op 0: own)
      std::vector<std::function<void()>> sides = {
          [&] {
            hpcrt::onednn::setPrimitivesEnabled(false);
            entry(0, 1);
            hpcrt::onednn::setPrimitivesEnabled(true);
          },
          [&] {
            prim.execute(strm, args);
            strm.wait();
          },
          [&] { entry(rtOp, 3); },
      };
      std::vector<double> t = timeInterleaved(sides, target, rounds);
      if (!ctx->error().empty()) {
        fprintf(stderr, "hpcrt-norm-bench: runtime kernel failed: %s\n", ctx->error().c_str());
        return 1;
      }
      double diff = 0, mag = 1, diffRt = 0;
      for (int64_t i = 0; i < numel(xs); ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(ar.data(1)[i] - ar.data(2)[i])));
        diffRt = std::max(diffRt, static_cast<double>(std::fabs(ar.data(3)[i] - ar.data(1)[i])));
        mag = std::max(mag, static_cast<double>(std::fabs(ar.data(2)[i])));
      }
      std::string impl = pd.impl_info_str();
      printf("| %s%s | %s | %s | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %s |\n", kindName(c.kind),
             c.kind == Kind::LayerNormNoBias ? " (no bias)" : "", shapeStr(xs).c_str(), c.what,
             threads, t[0] * 1e6, t[1] * 1e6, t[2] * 1e6, t[0] / t[1], t[2] / t[1],
             impl.c_str());
      if (diff > 1e-5 * mag || diffRt > 1e-5 * mag) {
        printf("MISMATCH above: max |own - oneDNN| %.3g, |runtime - own| %.3g (max |y| %.3g)\n",
               diff, diffRt, mag);
        ++bad;
      }
      fflush(stdout);
    }
  }
  printf("\nown/oneDNN and runtime/oneDNN: time ratios (above 1: oneDNN is faster)\n");
  return bad ? 2 : 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return benchMain(argc, argv);
  } catch (const std::exception &e) {
    fprintf(stderr, "hpcrt-norm-bench: error: %s\n", e.what());
    return 1;
  }
}
