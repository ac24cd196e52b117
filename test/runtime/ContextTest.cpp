//===- ContextTest.cpp - manifest, weights, binding, high-water, trace -----===//

#include "RuntimeTestUtils.h"

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace hpcrt;
using namespace hpcrt::test;
using nlohmann::json;

namespace {

/// The header's definition, written out independently.
uint64_t referenceHash(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < s.size(); i += 8) {
    uint64_t w = 0;
    for (size_t j = 0; j < 8 && i + j < s.size(); ++j)
      w |= static_cast<uint64_t>(static_cast<uint8_t>(s[i + j])) << (8 * j);
    h = (h ^ w) * 0x100000001b3ULL;
  }
  return h ^ s.size();
}

/// A model: input x f32[4], weight w f32[4] at weights offset 0, arena
/// tensors t0 f32[4] at 0 and t1 f32[4] at 64; ops add, mul.
json model(const std::string &weightsHash, uint64_t weightsBytes = 16) {
  return json{{"version", 1},
              {"model", "m.onnx"},
              {"arena_bytes", 128},
              {"weights", {{"file", "m.safetensors"}, {"bytes", weightsBytes}, {"hash", weightsHash}}},
              {"inputs", {{{"name", "x"}, {"tensor", 0}}}},
              {"outputs", {{{"name", "y"}, {"tensor", 3}}}},
              {"tensors",
               {{{"dtype", 1}, {"shape", {4}}, {"region", "input"}, {"index", 0}},
                {{"dtype", 1}, {"shape", {4}}, {"region", "weights"}, {"offset", 0}},
                {{"dtype", 1}, {"shape", {4}}, {"region", "arena"}, {"offset", 0}},
                {{"dtype", 1}, {"shape", {4}}, {"region", "arena"}, {"offset", 64}}}},
              {"ops", {{{"name", "hpc.add"}, {"loc", "node_add"}}, {{"name", "hpc.mul"}, {"loc", "node_mul"}}}}};
}

const float kWeights[4] = {1, 2, 3, 4};

std::string weightsHash() { return hashString(hpcrt_hash64(kWeights, sizeof(kWeights))); }

/// A safetensors file with the given header padding and metadata hash.
std::string writeSafetensors(const std::string &name, const std::string &metaHash, size_t pad,
                             const void *data, size_t bytes) {
  std::string path = ::testing::TempDir() + "/hpcrt_ctx_" + std::to_string(getpid()) + "_" + name;
  json h = {{"__metadata__", {{"hpc_hash", metaHash}}},
            {"w", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, bytes}}}}};
  std::string header = h.dump();
  header.append(pad, ' ');
  std::ofstream f(path, std::ios::binary);
  uint64_t n = header.size();
  f.write(reinterpret_cast<const char *>(&n), 8);
  f << header;
  f.write(static_cast<const char *>(data), static_cast<std::streamsize>(bytes));
  return path;
}

} // namespace

TEST(Hash, MatchesTheHeaderDefinition) {
  EXPECT_EQ(hpcrt_hash64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(hpcrt_hash64("a", 1), 0xaf63dc4c8601ec8dULL);
  EXPECT_EQ(hpcrt_hash64("hello world!", 12), 0xcf408dcabfc8e053ULL);
  EXPECT_EQ(hpcrt_hash64("0123456789abcdef", 16), 0x677356ce06b78085ULL);
  EXPECT_EQ(hpcrt_hash64("hpcrt-hash-tail-13", 18), 0x6b99601f4cc83ed5ULL);
  std::string s;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(hpcrt_hash64(s.data(), s.size()), referenceHash(s)) << i;
    s += static_cast<char>(i * 7 + 3);
  }
  EXPECT_EQ(hashString(0xabcdef), "0000000000abcdef");
  EXPECT_EQ(parseHash("0000000000ABCDEF", "t"), 0xabcdefULL);
}

TEST(Manifest, RejectsMalformedManifests) {
  EXPECT_NE(errorOf([] { Context c("{not json"); }).find("invalid JSON"), std::string::npos);
  json m = model(weightsHash());
  m["version"] = 2;
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("version 2"), std::string::npos);
  m = model(weightsHash());
  m["tensors"][3]["offset"] = 120;
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("beyond arena_bytes 128"), std::string::npos);
  m = model(weightsHash());
  m["tensors"][1]["offset"] = 8;
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("beyond the weights"), std::string::npos);
  m = model(weightsHash());
  m["tensors"][2]["region"] = "stack";
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("unknown region 'stack'"), std::string::npos);
  m = model(weightsHash());
  m["tensors"][2]["dtype"] = 8;
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("unsupported dtype 8"), std::string::npos);
  m = model(weightsHash());
  m["outputs"][0]["tensor"] = 9;
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("not in the table"), std::string::npos);
  m = model(weightsHash());
  m.erase("tensors");
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("no \"tensors\""), std::string::npos);
  m = model("xyz");
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("16 hex digits"), std::string::npos);
  EXPECT_EQ(errorOf([&] { Context c(model(weightsHash()).dump()); }), "");
}

// The layout and precision keys the compiler writes for the oneDNN kernels.
TEST(Manifest, LayoutAndPrecision) {
  json m = model(weightsHash());
  m["tensors"][2]["layout"] = "nhwc";
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find(".layout 'nhwc' is not plain or blocked"),
            std::string::npos);
  m = model(weightsHash());
  m["tensors"][2]["layout"] = "blocked"; // f32 [4]: not [N, C, H, W]
  EXPECT_NE(errorOf([&] { Context c(m.dump()); })
                .find("is blocked but not an f32 or bf16 [N, C, H, W]"),
            std::string::npos);
  m = model(weightsHash());
  m["precision"] = 16;
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("\"precision\" is not a string"),
            std::string::npos);
  m = model(weightsHash());
  EXPECT_EQ(Context(m.dump()).precision(), "fp32");
  m["precision"] = "bf16";
  EXPECT_EQ(Context(m.dump()).precision(), "bf16");
}

// Only the layout-aware kernels touch a blocked tensor.
TEST(Execution, BlockedTensorsOnlyInLayoutAwareKernels) {
  json m = model(weightsHash());
  m["arena_bytes"] = 4096;
  // t4 f32 [1, 16, 2, 2] blocked at 128, t5 the same plain at 384.
  m["tensors"].push_back({{"dtype", 1}, {"shape", {1, 16, 2, 2}}, {"region", "arena"},
                          {"offset", 128}, {"layout", "blocked"}});
  m["tensors"].push_back(
      {{"dtype", 1}, {"shape", {1, 16, 2, 2}}, {"region", "arena"}, {"offset", 384}});
  m["ops"] = json::array();
  Context c(m.dump());
  c.setWeightsData(kWeights, 16);
  c.prepare();
  int32_t neg[] = {1, 5, 1, 4}; // t5 = neg(t4): neg does not read blocked
  hpcrt_neg(&c, 0, neg, nullptr, nullptr, nullptr);
  EXPECT_NE(c.error().find("does not read or write the blocked layout"), std::string::npos)
      << c.error();
  c.clearError();
  int32_t relu[] = {1, 5, 1, 4}; // relu does, but not into a plain result
  hpcrt_relu(&c, 0, relu, nullptr, nullptr, nullptr);
  EXPECT_NE(c.error().find("mix the plain and blocked layouts"), std::string::npos) << c.error();
  c.clearError();
  int32_t inPlace[] = {1, 4, 1, 4};
  hpcrt_relu(&c, 0, inPlace, nullptr, nullptr, nullptr);
  EXPECT_FALSE(c.failed()) << c.error();
}

TEST(Weights, InMemoryHashAndSize) {
  Context c(model(weightsHash()).dump());
  EXPECT_NE(errorOf([&] { c.prepare(); }).find("not loaded"), std::string::npos);
  float other[4] = {1, 2, 3, 5};
  EXPECT_NE(errorOf([&] { c.setWeightsData(other, 16); }).find("does not match"), std::string::npos);
  EXPECT_NE(errorOf([&] { c.setWeightsData(kWeights, 12); }).find("expects 16"), std::string::npos);
  c.setWeightsData(kWeights, 16);
  c.prepare();
  EXPECT_EQ(c.tensor(1).as<float>()[3], 4.0f);
}

TEST(Weights, SafetensorsFile) {
  std::string h = weightsHash();
  for (size_t pad : {0, 3, 64}) { // aligned or not: both must work
    std::string path = writeSafetensors("ok.safetensors", h, pad, kWeights, 16);
    Context c(model(h).dump());
    c.loadWeightsFile(path);
    c.prepare();
    EXPECT_EQ(c.tensor(1).as<float>()[2], 3.0f);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.tensor(1).data) % 4, 0u);
    std::remove(path.c_str());
  }
  Context c(model(h).dump());
  EXPECT_NE(errorOf([&] { c.loadWeightsFile("/nonexistent/m.safetensors"); })
                .find("/nonexistent/m.safetensors: cannot open"),
            std::string::npos);
  std::string meta = writeSafetensors("meta.safetensors", "0123456789abcdef", 0, kWeights, 16);
  EXPECT_NE(errorOf([&] { c.loadWeightsFile(meta); }).find("hpc_hash 0123456789abcdef does not match"),
            std::string::npos);
  float other[4] = {1, 2, 3, 5};
  std::string data = writeSafetensors("data.safetensors", h, 0, other, 16);
  EXPECT_NE(errorOf([&] { c.loadWeightsFile(data); }).find("data hash"), std::string::npos);
  std::string junk = ::testing::TempDir() + "/hpcrt_ctx_junk";
  std::ofstream(junk) << "abc";
  EXPECT_NE(errorOf([&] { c.loadWeightsFile(junk); }).find("not a safetensors file"), std::string::npos);
  for (const std::string &p : {meta, data, junk})
    std::remove(p.c_str());
}

TEST(Inputs, ShapeAndDtypeMismatchNameBoth) {
  Context c(model(weightsHash()).dump());
  float x[4] = {1, 2, 3, 4};
  std::string e = errorOf([&] { c.bindInput(0, HPCRT_F32, {2, 2}, x, 16); });
  EXPECT_NE(e.find("input 'x': expected f32 [4], got f32 [2, 2]"), std::string::npos) << e;
  e = errorOf([&] { c.bindInput(0, HPCRT_F64, {4}, x, 32); });
  EXPECT_NE(e.find("expected f32 [4], got f64 [4]"), std::string::npos) << e;
  EXPECT_EQ(errorOf([&] { c.bindInput(0, HPCRT_F32, {4}, x, 16); }), "");
}

TEST(Execution, HighWaterTraceAndErrors) {
  Context c(model(weightsHash()).dump());
  c.setWeightsData(kWeights, 16);
  float x[4] = {10, 20, 30, 40};
  c.bindInput(0, HPCRT_F32, {4}, x, 16);
  c.prepare();
  c.setTracing(true);
  c.beginRun();
  int32_t add[] = {1, 2, 2, 0, 1}; // t0 = x + w
  hpcrt_add(&c, 0, add, nullptr, nullptr, nullptr);
  EXPECT_EQ(c.highWater(), 16u);
  int32_t mul[] = {1, 3, 2, 2, 1}; // t1 = t0 * w
  hpcrt_mul(&c, 1, mul, nullptr, nullptr, nullptr);
  ASSERT_FALSE(c.failed()) << c.error();
  EXPECT_EQ(c.highWater(), 80u);
  EXPECT_EQ(c.tensor(3).as<float>()[3], 176.0f);
  std::string path = ::testing::TempDir() + "/hpcrt_trace_" + std::to_string(getpid()) + ".json";
  c.writeTrace(path);
  std::ifstream f(path);
  json t = json::parse(f);
  ASSERT_EQ(t["traceEvents"].size(), 2u);
  EXPECT_EQ(t["traceEvents"][1]["name"], "hpc.mul");
  EXPECT_EQ(t["traceEvents"][1]["ph"], "X");
  EXPECT_EQ(t["traceEvents"][1]["args"]["loc"], "node_mul");
  EXPECT_GE(t["traceEvents"][1]["dur"].get<double>(), 0.0);
  std::remove(path.c_str());

  // The manifest's op name must be the kernel's.
  hpcrt_mul(&c, 0, mul, nullptr, nullptr, nullptr);
  EXPECT_NE(c.error().find("op 0 (hpc.mul at 'node_add'): the manifest lists op 0 as hpc.add"),
            std::string::npos)
      << c.error();
  // After an error every kernel is a no-op and the first error stays.
  float before = c.tensor(2).as<float>()[0];
  hpcrt_add(&c, 0, add, nullptr, nullptr, nullptr);
  EXPECT_EQ(c.tensor(2).as<float>()[0], before);
  EXPECT_NE(c.error().find("lists op 0"), std::string::npos);
  c.clearError();
  int32_t badIds[] = {1, 7, 2, 0, 1};
  hpcrt_add(&c, 0, badIds, nullptr, nullptr, nullptr);
  EXPECT_NE(c.error().find("tensor id 7"), std::string::npos) << c.error();
  c.clearError();
  int32_t toInput[] = {1, 0, 2, 1, 1}; // results must be in the arena
  hpcrt_add(&c, 0, toInput, nullptr, nullptr, nullptr);
  EXPECT_NE(c.error().find("not in the arena"), std::string::npos) << c.error();
}

namespace {

/// A second backend, as a device backend would be one: its own memory (with
/// its own release function) and its own table, here the CPU's kernels
/// without hpc.mul.
class TestBackend final : public Backend {
public:
  TestBackend() {
    for (int i = 0; i < kNumOps; ++i)
      table_[i] = defaultBackend().kernel(static_cast<OpId>(i));
    table_[static_cast<int>(OpId::mul)] = KernelEntry{};
  }
  const char *name() const override { return "test"; }
  const KernelEntry &kernel(OpId id) const override { return table_[static_cast<int>(id)]; }
  Buffer allocate(size_t bytes) const override {
    allocated += bytes;
    ++live;
    void *p = nullptr;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
      fail("out of memory");
    return Buffer(p, bytes, [](void *q) {
      --live;
      free(q);
    });
  }
  void setThreads(int t) const override { threads_ = t; }
  int threads() const override { return threads_; }
  std::string describeKernels(const hpcrt_ctx &) const override { return "test kernels"; }

  static inline size_t allocated = 0;
  static inline int live = 0;

private:
  KernelEntry table_[kNumOps];
  mutable int threads_ = 1;
};

} // namespace

TEST(Backend, CpuBackendHasEveryKernel) {
  const Backend &cpu = defaultBackend();
  EXPECT_STREQ(cpu.name(), "cpu");
  for (int i = 0; i < kNumOps; ++i)
    EXPECT_NE(cpu.kernel(static_cast<OpId>(i)).fn, nullptr)
        << opMnemonic(static_cast<OpId>(i));
  EXPECT_TRUE(cpu.kernel(OpId::conv).stateful);
  EXPECT_TRUE(cpu.kernel(OpId::conv).readsBlocked);
  EXPECT_FALSE(cpu.kernel(OpId::neg).readsBlocked);
  EXPECT_FALSE(cpu.kernel(OpId::add).stateful);
  EXPECT_TRUE(isCommunicating(OpId::all_reduce));
  EXPECT_FALSE(isCommunicating(OpId::matmul));
  EXPECT_STREQ(opMnemonic(OpId::and_), "and");
  EXPECT_STREQ(opMnemonic(OpId::wait), "dist.wait");
}

TEST(Backend, ContextRunsOnItsBackend) {
  TestBackend backend;
  TestBackend::allocated = 0;
  TestBackend::live = 0;
  {
    Context c(model(weightsHash()).dump(), backend);
    EXPECT_STREQ(c.backend().name(), "test");
    c.setWeightsData(kWeights, 16);
    float x[4] = {10, 20, 30, 40};
    c.bindInput(0, HPCRT_F32, {4}, x, 16);
    c.prepare();
    // The input's buffer and the arena are the backend's memory.
    EXPECT_EQ(TestBackend::allocated, 16u + 128u);
    int32_t add[] = {1, 2, 2, 0, 1}; // t0 = x + w, the CPU's kernel via the table
    hpcrt_add(&c, 0, add, nullptr, nullptr, nullptr);
    ASSERT_FALSE(c.failed()) << c.error();
    EXPECT_EQ(c.tensor(2).as<float>()[3], 44.0f);
    int32_t mul[] = {1, 3, 2, 2, 1};
    hpcrt_mul(&c, 1, mul, nullptr, nullptr, nullptr);
    EXPECT_EQ(c.error(), "op 1 (hpc.mul at 'node_mul'): the test backend has no kernel for hpc.mul");
  }
  EXPECT_EQ(TestBackend::live, 0); // every Buffer went back through its release
}
