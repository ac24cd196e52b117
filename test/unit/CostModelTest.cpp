//===- CostModelTest.cpp - cluster specs and the stage cost model ---------===//
//
// Presets and the JSON cluster format (including its error messages and the
// "calibration" section of hpc-calibrate's files), the alpha-beta collective
// formulas, ZeRO and activation memory against their
// published formulas, and Megatron-LM's FLOP count.
//
//===----------------------------------------------------------------------===//

#include "hpc/CostModel/CostModel.h"
#include "hpc/Search/Search.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace hpc::cost;

namespace {

constexpr double GiB = 1024.0 * 1024 * 1024;

/// A GPT transformer block as ModelExtract builds it for the gen_gpt3_shapes
/// graph (per sample; s sequence, h hidden, a heads, no dropout).
Layer gptBlock(double s, double h, double a) {
  Layer l;
  l.kind = LayerKind::Block;
  auto linear = [&](double k, double n, Gemm::Split split) {
    Gemm g;
    g.m = s;
    g.k = k;
    g.n = n;
    g.split = split;
    l.gemms.push_back(g);
  };
  for (int i = 0; i < 3; ++i)
    linear(h, h, Gemm::Split::N); // q, k, v
  Gemm scores;
  scores.scalesBatch = true;
  scores.batch = a;
  scores.m = s;
  scores.k = h / a;
  scores.n = s;
  scores.split = Gemm::Split::Batch;
  l.gemms.push_back(scores);
  Gemm context = scores;
  context.k = s;
  context.n = h / a;
  l.gemms.push_back(context);
  linear(h, h, Gemm::Split::K);     // attention projection
  linear(h, 4 * h, Gemm::Split::N); // MLP up
  linear(4 * h, h, Gemm::Split::K); // MLP down
  l.paramsSharded = 12 * h * h + 7 * h;
  l.paramsReplicated = 6 * h;
  l.savedReplicated = 4 * s * h;          // LN inputs, QKV and MLP inputs
  l.savedSharded = 12 * s * h + a * s * s; // q, k, v, softmax, proj, GELU
  l.inputElems = l.outputElems = s * h;
  l.tpForwardAllReduce = 2 * s * h;
  l.tpBackwardAllReduce = 2 * s * h;
  l.tpForwardCollectives = l.tpBackwardCollectives = 2;
  l.paramTensors = 12;
  l.tpDivisor = int64_t(a);
  return l;
}

/// A cluster file with one edit, and the error it must give.
struct ErrorCase {
  std::string from, to, message;
};

/// Each case applied to `good` must fail with its message (a prefix).
template <size_t N> void expectErrors(const std::string &good, const ErrorCase (&cases)[N]) {
  for (const ErrorCase &k : cases) {
    std::string text = good;
    size_t at = text.find(k.from);
    ASSERT_NE(at, std::string::npos) << k.from;
    text.replace(at, k.from.size(), k.to);
    ClusterSpec c;
    std::string error;
    EXPECT_FALSE(clusterFromJSON(text, "c.json", c, error)) << k.message;
    EXPECT_EQ(error.rfind(k.message, 0), 0u) << "got: " << error << "\nwant: " << k.message;
  }
}

ClusterSpec preset(const std::string &name) {
  ClusterSpec c;
  std::string error;
  EXPECT_TRUE(clusterFromPreset(name, c, error)) << error;
  return c;
}

/// One GPT block of (s, h, a) on a preset cluster, as a stage's context for
/// a global batch of `batch` samples.
struct BlockStage {
  Model model;
  ClusterSpec c;
  CostContext ctx;
  BlockStage(double s, double h, double a, const std::string &cluster, int64_t batch) {
    model.layers.push_back(gptBlock(s, h, a));
    c = preset(cluster);
    ctx.model = &model;
    ctx.cluster = &c;
    ctx.options.globalBatch = batch;
  }
  BlockStage(const BlockStage &) = delete;
};

} // namespace

TEST(ClusterTest, Presets) {
  ClusterSpec a = preset("dgx-a100-80g:128");
  EXPECT_EQ(a.numDevices(), 1024);
  EXPECT_EQ(a.devicesPerNode, 8);
  EXPECT_EQ(a.device.peakFlops[int(DType::BF16)], 312e12);
  EXPECT_EQ(a.device.memoryBytes, 80 * GiB);
  EXPECT_EQ(a.device.memoryBandwidth, 2039e9);
  EXPECT_EQ(a.intraNode.bandwidth, 300e9);
  EXPECT_EQ(a.interNode.bandwidth, 25e9);
  EXPECT_EQ(a.name, "dgx-a100-80g:128");
  ClusterSpec a40 = preset("dgx-a100-40g:2");
  EXPECT_EQ(a40.device.memoryBytes, 40 * GiB);
  EXPECT_EQ(a40.device.memoryBandwidth, 1555e9);
  ClusterSpec h = preset("dgx-h100:4");
  EXPECT_EQ(h.device.peakFlops[int(DType::BF16)], 989.4e12);
  EXPECT_EQ(h.device.peakFlops[int(DType::FP8)], 1978.9e12);
  EXPECT_EQ(h.interNode.bandwidth, 50e9);
  ClusterSpec h2 = preset("h200");
  EXPECT_EQ(h2.nodes, 1);
  EXPECT_EQ(h2.device.memoryBandwidth, 4800e9);
  ClusterSpec asc = preset("ascend-910:16");
  EXPECT_EQ(asc.numDevices(), 128);
  EXPECT_EQ(asc.device.peakFlops[int(DType::FP16)], 256e12);
  EXPECT_EQ(asc.device.peakFlops[int(DType::BF16)], 0);
  EXPECT_EQ(asc.device.memoryBytes, 32 * GiB);

  ClusterSpec c;
  std::string error;
  EXPECT_FALSE(clusterFromPreset("dgx-b200:4", c, error));
  EXPECT_NE(error.find("unknown preset 'dgx-b200'"), std::string::npos);
  EXPECT_FALSE(clusterFromPreset("dgx-h100:0", c, error));
  EXPECT_NE(error.find("node count"), std::string::npos);
  EXPECT_FALSE(clusterFromPreset("dgx-h100:x", c, error));
}

TEST(ClusterTest, JSONRoundTrip) {
  ClusterSpec a = preset("dgx-h100:16");
  ClusterSpec b;
  std::string error;
  ASSERT_TRUE(clusterFromJSON(clusterToJSON(a), "x.json", b, error)) << error;
  EXPECT_EQ(b.nodes, a.nodes);
  EXPECT_EQ(b.devicesPerNode, a.devicesPerNode);
  EXPECT_EQ(b.device.kind, a.device.kind);
  EXPECT_DOUBLE_EQ(b.device.memoryBytes, a.device.memoryBytes);
  EXPECT_DOUBLE_EQ(b.device.peakFlops[int(DType::BF16)],
                   a.device.peakFlops[int(DType::BF16)]);
  EXPECT_DOUBLE_EQ(b.interNode.bandwidth, a.interNode.bandwidth);
  EXPECT_DOUBLE_EQ(b.intraNode.latency, a.intraNode.latency);
  EXPECT_DOUBLE_EQ(b.efficiency.matmul, a.efficiency.matmul);
  // Whole cores are the default and are not written; a share is.
  EXPECT_DOUBLE_EQ(b.device.coreShare, 1);
  EXPECT_EQ(clusterToJSON(a).find("core_share"), std::string::npos);
  EXPECT_DOUBLE_EQ(b.device.coreLending, 1);
  a.device.coreShare = 0.5;
  a.device.coreLending = 0.25;
  ASSERT_TRUE(clusterFromJSON(clusterToJSON(a), "x.json", b, error)) << error;
  EXPECT_DOUBLE_EQ(b.device.coreShare, 0.5);
  EXPECT_DOUBLE_EQ(b.device.coreLending, 0.25);
}

TEST(ClusterTest, JSONErrorsNameTheField) {
  const std::string good = R"({
    "nodes": 2, "devices_per_node": 4,
    "device": {"kind": "X", "memory_gib": 64,
               "memory_bandwidth_gbytes_per_s": 2000,
               "peak_tflops": {"bf16": 400}},
    "links": [
      {"level": "intra-node", "bandwidth_gbytes_per_s": 200, "latency_us": 2},
      {"level": "inter-node", "bandwidth_gbytes_per_s": 25, "latency_us": 5}]})";
  ClusterSpec c;
  std::string error;
  ASSERT_TRUE(clusterFromJSON(good, "c.json", c, error)) << error;
  EXPECT_EQ(c.numDevices(), 8);
  EXPECT_DOUBLE_EQ(c.device.reservedBytes, 2 * GiB);
  EXPECT_DOUBLE_EQ(c.interNode.latency, 5e-6);

  const ErrorCase cases[] = {
      {"\"nodes\": 2", "\"nodes\": 0",
       "c.json: nodes: expected an integer >= 1, got 0"},
      {"\"nodes\": 2, ", "", "c.json: nodes: missing"},
      {"\"memory_gib\": 64", "\"memory_gib\": \"lots\"",
       "c.json: device.memory_gib: expected a number"},
      {"\"bandwidth_gbytes_per_s\": 25", "\"bandwidth_gbytes_per_s\": -25",
       "c.json: links[1].bandwidth_gbytes_per_s: expected a number > 0, got -25"},
      {"\"level\": \"inter-node\"", "\"level\": \"rack\"",
       "c.json: links[1].level: expected \"intra-node\" or \"inter-node\", "
       "got \"rack\""},
      {"\"bf16\": 400", "\"bf17\": 400",
       "c.json: device.peak_tflops.bf17: unknown field"},
      {"\"kind\": \"X\", ", "", "c.json: device.kind: missing"},
      {"\"latency_us\": 2}", "\"latency_us\": 2, \"speed\": 1}",
       "c.json: links[0].speed: unknown field"},
      {"\"bf16\": 400", "\"bf16\": 0",
       "c.json: device.peak_tflops: needs at least one dtype with a peak > 0"},
      {"\"memory_gib\": 64", "\"memory_gib\": 64, \"core_share\": 1.5",
       "c.json: device.core_share: expected a fraction <= 1, got 1.5"},
      {"\"memory_gib\": 64", "\"memory_gib\": 64, \"core_share\": 0",
       "c.json: device.core_share: expected a number > 0, got 0"},
      {"\"memory_gib\": 64", "\"memory_gib\": 64, \"core_lending\": 1.2",
       "c.json: device.core_lending: expected a fraction <= 1, got 1.2"},
      {"\"memory_gib\": 64", "\"memory_gib\": 64, \"core_lending\": -0.1",
       "c.json: device.core_lending: expected a number >= 0, got -0.1"},
  };
  expectErrors(good, cases);
  // Two nodes need an inter-node level.
  std::string oneLevel = good;
  size_t cut = oneLevel.find(",\n      {\"level\": \"inter-node\"");
  oneLevel.erase(cut, oneLevel.find("}]") + 1 - cut);
  EXPECT_FALSE(clusterFromJSON(oneLevel, "c.json", c, error));
  EXPECT_EQ(error, "c.json: links: needs an \"inter-node\" level (nodes is 2)");
  // Syntax errors say where.
  EXPECT_FALSE(clusterFromJSON("{\"nodes\": 2,", "c.json", c, error));
  EXPECT_EQ(error.rfind("c.json: invalid JSON: ", 0), 0u) << error;
}

/// A one-node, two-device calibrated cluster, as hpc-calibrate writes one.
ClusterSpec calibratedCluster() {
  ClusterSpec c;
  c.name = "host";
  c.devicesPerNode = 2;
  c.device.kind = "Some CPU";
  c.device.memoryBytes = 8 * GiB;
  c.device.reservedBytes = 0.5 * GiB;
  c.device.memoryBandwidth = 12.5e9;
  c.device.peakFlops[int(DType::FP32)] = 150e9;
  c.device.peakFlops[int(DType::BF16)] = 30e9;
  c.intraNode = {"hpcrt-mpi", 3e9, 2e-6};
  c.interNode = c.intraNode;
  c.hasInterNode = false;
  c.efficiency.matmul = c.efficiency.memory = 1;
  c.efficiency.network = c.efficiency.networkInter = 1;
  c.efficiency.kernelOverhead = 1.5e-6;
  c.efficiency.collectiveOverhead = 12e-6;
  Calibration &cal = c.calibration;
  cal.present = true;
  cal.date = "2025-01-02T03:04:05Z";
  cal.ranks = 2;
  cal.threads = 1;
  cal.quick = true;
  cal.gemm = {{"square-512", {1, 512, 512, 512}, DType::FP32, 2e-3, 134e9},
              {"square-256", {1, 256, 256, 256}, DType::BF16, 1e-3, 33.5e9}};
  cal.conv = {{"resnet-3x3-64", {1, 64, 56, 56, 64, 3, 3, 1, 1}, DType::FP32, 4e-3, 57.8e9}};
  cal.memory = {{"add", 3 << 22, 1e-3, 12.58e9}};
  cal.kernelOverhead = 1.5e-6;
  CollectiveTiming ar;
  ar.level = "intra-node";
  ar.kind = "all_reduce";
  ar.groupSize = 2;
  ar.alpha = 5e-6;
  ar.beta = 2e9;
  ar.sizes = {4096, 65536};
  ar.seconds = {7e-6, 3.7e-5};
  CollectiveTiming p2p = ar;
  p2p.kind = "send_recv";
  cal.collectives = {ar, p2p};
  cal.overlap = {true, 4 << 20, 2e-3, 2.5e-3, 4e-3, 0.25};
  cal.collectiveOverhead = 12e-6;
  return c;
}

TEST(ClusterTest, CalibrationRoundTrip) {
  ClusterSpec a = calibratedCluster();
  std::string text = clusterToJSON(a), error;
  // Only the levels the machine has are printed.
  EXPECT_NE(text.find("\"intra-node\""), std::string::npos);
  EXPECT_EQ(text.find("\"inter-node\""), std::string::npos);
  ClusterSpec b;
  ASSERT_TRUE(clusterFromJSON(text, "host.json", b, error)) << error;
  EXPECT_TRUE(b.hasIntraNode);
  EXPECT_FALSE(b.hasInterNode);
  EXPECT_DOUBLE_EQ(b.interNode.bandwidth, a.intraNode.bandwidth);
  EXPECT_DOUBLE_EQ(b.efficiency.kernelOverhead, 1.5e-6);
  const Calibration &cal = b.calibration;
  ASSERT_TRUE(cal.present);
  EXPECT_EQ(cal.date, "2025-01-02T03:04:05Z");
  EXPECT_EQ(cal.ranks, 2);
  EXPECT_TRUE(cal.quick);
  ASSERT_EQ(cal.gemm.size(), 2u);
  EXPECT_EQ(cal.gemm[1].name, "square-256");
  EXPECT_EQ(cal.gemm[1].dtype, DType::BF16);
  EXPECT_EQ(cal.gemm[0].shape, (std::vector<int64_t>{1, 512, 512, 512}));
  EXPECT_DOUBLE_EQ(cal.gemm[0].flopRate, 134e9);
  ASSERT_EQ(cal.conv.size(), 1u);
  EXPECT_EQ(cal.conv[0].shape.back(), 1);
  ASSERT_EQ(cal.memory.size(), 1u);
  EXPECT_EQ(cal.memory[0].bytes, 3 << 22);
  EXPECT_DOUBLE_EQ(cal.memory[0].bandwidth, 12.58e9);
  EXPECT_DOUBLE_EQ(cal.kernelOverhead, 1.5e-6);
  ASSERT_EQ(cal.collectives.size(), 2u);
  EXPECT_EQ(cal.collectives[1].kind, "send_recv");
  EXPECT_DOUBLE_EQ(cal.collectives[0].alpha, 5e-6);
  EXPECT_DOUBLE_EQ(cal.collectives[0].beta, 2e9);
  EXPECT_EQ(cal.collectives[0].sizes, (std::vector<int64_t>{4096, 65536}));
  ASSERT_TRUE(cal.overlap.present);
  EXPECT_EQ(cal.overlap.bytes, 4 << 20);
  EXPECT_DOUBLE_EQ(cal.overlap.bothS, 4e-3);
  EXPECT_DOUBLE_EQ(cal.overlap.fraction, 0.25);
  // Recorded, not applied: the efficiency keeps its own overlap.
  EXPECT_DOUBLE_EQ(b.efficiency.overlap, a.efficiency.overlap);
  EXPECT_DOUBLE_EQ(cal.collectiveOverhead, 12e-6);
  EXPECT_DOUBLE_EQ(b.efficiency.collectiveOverhead, 12e-6);
  // Printing what was read gives the same text.
  EXPECT_EQ(clusterToJSON(b), text);
  // A file without the section has none, and prints none; nor does a
  // preset print a collective overhead (0).
  ClusterSpec p = preset("dgx-h100:2"), q;
  ASSERT_TRUE(clusterFromJSON(clusterToJSON(p), "p.json", q, error)) << error;
  EXPECT_FALSE(q.calibration.present);
  EXPECT_EQ(clusterToJSON(q).find("calibration"), std::string::npos);
  EXPECT_EQ(clusterToJSON(q).find("collective_overhead_us"), std::string::npos);
  EXPECT_DOUBLE_EQ(q.efficiency.collectiveOverhead, 0);
  // A calibration from before the measurement reads as not measured.
  std::string old = text;
  size_t at = old.find("\"collective_overhead_us\": 12,");
  ASSERT_NE(at, std::string::npos) << old;
  old.erase(at, std::string("\"collective_overhead_us\": 12,").size());
  ASSERT_TRUE(clusterFromJSON(old, "old.json", q, error)) << error;
  EXPECT_LT(q.calibration.collectiveOverhead, 0);
}

TEST(ClusterTest, CalibrationErrorsNameTheField) {
  const std::string good = clusterToJSON(calibratedCluster());
  ClusterSpec c;
  std::string error;
  ASSERT_TRUE(clusterFromJSON(good, "c.json", c, error)) << error;
  const ErrorCase cases[] = {
      {"\"gflops\": 134", "\"gflops\": -134",
       "c.json: calibration.gemm[0].gflops: expected a number > 0, got -134"},
      {"\"dtype\": \"bf16\"", "\"dtype\": \"int4\"",
       "c.json: calibration.gemm[1].dtype: expected fp32, tf32, bf16, fp16 or fp8, "
       "got \"int4\""},
      {"\"quick\": true", "\"quick\": 1",
       "c.json: calibration.quick: expected true or false"},
      {"\"quick\": true", "\"quick\": true,\n    \"notes\": 1",
       "c.json: calibration.notes: unknown field"},
      {"\"kind\": \"send_recv\"", "\"kind\": \"gather\"",
       "c.json: calibration.collectives[1].kind: expected one of all_reduce, "},
      {"\"kind\": \"send_recv\"", "\"kind\": \"all_reduce\"",
       "c.json: calibration.collectives[1]: all_reduce on level \"intra-node\" "
       "given twice"},
      {"\"group_size\": 2", "\"group_size\": 1",
       "c.json: calibration.collectives[0].group_size: expected an integer >= 2, got 1"},
      {"\"kernel\": \"add\"", "\"kernel\": \"add\", \"gbps\": 3",
       "c.json: calibration.memory[0].gbps: unknown field"},
      {"\"date\": \"2025-01-02T03:04:05Z\",", "",
       "c.json: calibration.date: missing"},
      {"\"collective_overhead_us\": 12,", "\"collective_overhead_us\": -1,",
       "c.json: calibration.collective_overhead_us: expected a number >= 0, got -1"},
  };
  expectErrors(good, cases);
  // A shape of the wrong length, and times that do not match the sizes.
  ClusterSpec bad = calibratedCluster();
  bad.calibration.conv[0].shape.pop_back();
  EXPECT_FALSE(clusterFromJSON(clusterToJSON(bad), "c.json", c, error));
  EXPECT_EQ(error, "c.json: calibration.conv[0].shape: expected 9 integers (n, c, h, "
                   "w, out_channels, kernel_h, kernel_w, stride, pad), got 8");
  bad = calibratedCluster();
  bad.calibration.collectives[0].seconds.pop_back();
  EXPECT_FALSE(clusterFromJSON(clusterToJSON(bad), "c.json", c, error));
  EXPECT_EQ(error, "c.json: calibration.collectives[0].seconds: expected 2 times "
                   "(one per size), got 1");
}

TEST(CostModelTest, Collectives) {
  ClusterSpec c = preset("dgx-a100-80g:4");
  c.efficiency.network = 0.5;
  c.efficiency.networkInter = 0.5;
  double bw = 300e9 * 0.5, ib = 25e9 * 0.5;
  double a = c.intraNode.latency, ai = c.interNode.latency;
  double B = 1e9;
  // One node: ring all-reduce 2 (p-1)/p B / bw + 2 (p-1) alpha.
  EXPECT_DOUBLE_EQ(allReduceRingTime(c, B, {8, 8}),
                   2 * (7.0 / 8 * B / bw + 7 * a));
  // Four nodes, 8 per node: intra RS/AG plus an inter-node ring on B/8.
  EXPECT_DOUBLE_EQ(allReduceRingTime(c, B, {32, 8}),
                   2 * (7.0 / 8 * B / bw + 7 * a) +
                       2 * (3.0 / 4 * (B / 8) / ib + 3 * ai));
  // One per node (stride >= node): a flat inter-node ring.
  EXPECT_DOUBLE_EQ(allReduceRingTime(c, B, {4, 1}),
                   2 * (3.0 / 4 * B / ib + 3 * ai));
  // Big messages take the ring, tiny ones the tree.
  EXPECT_EQ(allReduceTime(c, B, {32, 8}), allReduceRingTime(c, B, {32, 8}));
  EXPECT_EQ(allReduceTime(c, 64, {32, 8}), allReduceTreeTime(c, 64, {32, 8}));
  EXPECT_LT(allReduceTreeTime(c, 64, {32, 8}), allReduceRingTime(c, 64, {32, 8}));
  // Reduce-scatter + all-gather = ring all-reduce.
  EXPECT_DOUBLE_EQ(reduceScatterTime(c, B, {32, 8}) + allGatherTime(c, B, {32, 8}),
                   allReduceRingTime(c, B, {32, 8}));
  EXPECT_EQ(allReduceTime(c, B, {1, 1}), 0);
  // All-to-all: (p-1)/n of the data inside the node, the rest across.
  EXPECT_DOUBLE_EQ(allToAllTime(c, B, {16, 8}),
                   7.0 / 16 * B / bw + 8.0 / 16 * B / ib + 15 * ai);
  EXPECT_DOUBLE_EQ(sendTime(c, B, true), ai + B / ib);
  // A flat ring over 4 nodes moves 31/32 of the buffer over the slowest link.
  EXPECT_DOUBLE_EQ(flatRingPassTime(c, B, {32, 8}), 31.0 / 32 * B / ib + 31 * ai);
  EXPECT_GT(flatRingPassTime(c, B, {32, 8}), 4 * reduceScatterTime(c, B, {32, 8}));
  // Inter-node links have their own efficiency.
  c.efficiency.networkInter = 1;
  EXPECT_DOUBLE_EQ(sendTime(c, B, true), ai + B / 25e9);
  EXPECT_DOUBLE_EQ(sendTime(c, B, false), a + B / bw);

  // Groups of a stage: TP innermost, then DP.
  StageConfig s;
  s.tp = 4;
  s.dp = 8;
  EXPECT_EQ(tensorGroup(c, s).perNode, 4);
  EXPECT_EQ(dataGroup(c, s).perNode, 2); // two TP groups per node
  s.tp = 8;
  s.dp = 4;
  EXPECT_EQ(dataGroup(c, s).perNode, 1);
  s.tp = 16;
  s.dp = 2;
  EXPECT_EQ(tensorGroup(c, s).perNode, 8); // TP across two nodes
}

/// Two nodes of one device, a 1 GB/s link between them.
ClusterSpec twoNodes(double latency) {
  ClusterSpec c;
  c.nodes = 2;
  c.devicesPerNode = 1;
  c.interNode.bandwidth = 1e9;
  c.interNode.latency = latency;
  c.intraNode = c.interNode;
  c.efficiency.networkInter = 1;
  c.efficiency.network = 1;
  c.efficiency.kernelOverhead = 0;
  return c;
}

TEST(CostModelTest, BucketSize) {
  constexpr double KiB = 1024, MiB = 1024 * KiB;
  CommGroup pair{2, 1};
  // 64 gradients of 256 KiB finished evenly over a 1 s backward pass, the
  // optimizer right after the last: the link keeps up, so what is exposed
  // is the last bucket. One gradient a bucket is least; of the sizes that
  // give the same buckets, the largest (under 512 KiB, which takes two).
  ClusterSpec c = twoNodes(0);
  std::vector<GradientReady> spread;
  for (int i = 0; i < 64; ++i)
    spread.push_back({(i + 1) / 64.0, 1.0, 256 * KiB});
  BucketChoice b = chooseBucketBytes(c, pair, false, spread);
  EXPECT_EQ(b.buckets, 64);
  EXPECT_GE(b.capBytes, 256 * KiB);
  EXPECT_LT(b.capBytes, 512 * KiB);
  EXPECT_NEAR(b.exposedSeconds, allReduceTime(c, 256 * KiB, pair), 1e-12);
  EXPECT_NEAR(b.linkSeconds, 64 * allReduceTime(c, 256 * KiB, pair), 1e-12);
  // A reduce-scatter moves half of that.
  BucketChoice rs = chooseBucketBytes(c, pair, true, spread);
  EXPECT_NEAR(rs.exposedSeconds, reduceScatterTime(c, 256 * KiB, pair), 1e-12);

  // All finished at once, at the end: every size exposes all of it, and
  // each message pays the latency, so one bucket is best (25 MiB holds all).
  ClusterSpec slow = twoNodes(20e-6);
  std::vector<GradientReady> atEnd(64, GradientReady{1.0, 1.0, 256 * KiB});
  b = chooseBucketBytes(slow, pair, false, atEnd);
  EXPECT_EQ(b.capBytes, 25 * MiB);
  EXPECT_EQ(b.buckets, 1);
  EXPECT_NEAR(b.exposedSeconds, allReduceTime(slow, 16 * MiB, pair), 1e-12);

  // A short backward pass (10 ms for 16.8 ms of link): the link is the
  // bottleneck, busy from the first bucket on: the least exposed is one
  // gradient a bucket (the link time the backward does not cover), and
  // the choice is a larger size within 5% of it.
  std::vector<GradientReady> fast;
  for (int i = 0; i < 64; ++i)
    fast.push_back({(i + 1) / 6400.0, 0.01, 256 * KiB});
  b = chooseBucketBytes(c, pair, false, fast);
  double least = 1 / 6400.0 + 64 * allReduceTime(c, 256 * KiB, pair) - 0.01;
  EXPECT_GE(b.exposedSeconds, least - 1e-12);
  EXPECT_LE(b.exposedSeconds, least * 1.05 + 1e-4);
  EXPECT_LT(b.buckets, 64);

  // A value needed as soon as it is ready (a forward all-reduce) closes its
  // bucket, as dist-bucket does: the later gradients do not join it (in
  // one 25 MiB bucket with it, the forward would wait for the backward).
  std::vector<GradientReady> early = {{0.1, 0.1, 4}, {0.5, 1.0, 256 * KiB}, {0.9, 1.0, 256 * KiB}};
  b = chooseBucketBytes(c, pair, false, early);
  EXPECT_EQ(b.capBytes, 25 * MiB);
  EXPECT_EQ(b.buckets, 2);
  EXPECT_NEAR(b.exposedSeconds, allReduceTime(c, 4, pair), 1e-12);
}

TEST(CostModelTest, CollectiveOverheadPerCollective) {
  // A block on 2 devices of one node, its gradient synchronization all
  // exposed: each collective pays the overhead once, the bucket's
  // all-reduce (ZeRO-1: reduce-scatter) once, and ZeRO-1's gather of the
  // updated rows once per parameter tensor of the block (12: a layer built
  // with only their count).
  BlockStage b(2048, 256, 4, "dgx-a100-80g:1", 8);
  ClusterSpec &c = b.c;
  b.ctx.options.overlapGradSync = false;
  std::vector<LayerRun> runs{{0, 1}};
  StagePlace place;
  StageConfig cfg;
  cfg.dp = 2;
  CommGroup dp = dataGroup(c, cfg);
  double grads = b.model.layers[0].params() * 2; // bf16
  auto sync = [&] { return evaluateStage(b.ctx, runs, cfg, 8, place).gradSync; };
  EXPECT_DOUBLE_EQ(sync(), allReduceTime(c, grads, dp));
  c.efficiency.collectiveOverhead = 40e-6;
  EXPECT_NEAR(sync(), allReduceTime(c, grads, dp) + 40e-6, 1e-12);
  cfg.zero = 1;
  EXPECT_NEAR(sync(), reduceScatterTime(c, grads, dp) + allGatherTime(c, grads, dp) + 13 * 40e-6,
              1e-12);
  // With the layer's tensors known, the small pieces share gathers as
  // dist-bucket packs them (in order, up to 64 KiB of one rank's rows; a
  // larger piece alone): at h = 256 in bf16 over dp = 2, the norms and
  // biases around the four matrices make 9 gathers of the 12 tensors.
  double h = 256;
  b.model.layers[0].tensors = {{h, false},         {h, false},      {3 * h * h, true},
                               {3 * h, true},      {h * h, true},   {h, false},
                               {h, false},         {h, false},      {4 * h * h, true},
                               {4 * h, true},      {4 * h * h, true}, {h, false}};
  EXPECT_NEAR(sync(), reduceScatterTime(c, grads, dp) + allGatherTime(c, grads, dp) + 10 * 40e-6,
              1e-12);
  // A recalibration scales the links' bandwidth and their latency apart,
  // never the hand-off to the communication thread.
  double bandwidth = c.intraNode.bandwidth, latency = c.intraNode.latency;
  scaleClusterSpec(c, 1, 3, 1);
  EXPECT_DOUBLE_EQ(c.intraNode.bandwidth, bandwidth / 3);
  EXPECT_DOUBLE_EQ(c.intraNode.latency, latency);
  EXPECT_DOUBLE_EQ(c.efficiency.collectiveOverhead, 40e-6);
  scaleClusterSpec(c, 1, 0.5, 0.5);
  EXPECT_DOUBLE_EQ(c.intraNode.bandwidth, bandwidth / 1.5);
  EXPECT_DOUBLE_EQ(c.intraNode.latency, latency / 2);
  EXPECT_DOUBLE_EQ(c.efficiency.collectiveOverhead, 40e-6);
}

TEST(CostModelTest, ZeroMemoryAndActivations) {
  // One GPT-3-sized block on 8 devices, against the ZeRO paper's 2 + 2 + 12
  // bytes per parameter and Korthikanti et al.'s activation formulas
  // (without their dropout terms: our graphs have no dropout).
  double s = 2048, h = 12288, a = 96;
  Model model;
  model.layers.push_back(gptBlock(s, h, a));
  model.tokensPerSample = s;
  ClusterSpec c = preset("dgx-a100-80g:1");
  CostContext ctx;
  ctx.model = &model;
  ctx.cluster = &c;
  ctx.options.globalBatch = 64;
  std::vector<LayerRun> runs{{0, 1}};
  StagePlace place;
  const Layer &l = model.layers[0];
  double P = l.params();

  StageConfig cfg;
  cfg.dp = 8;
  for (int zero = 0; zero <= 3; ++zero) {
    cfg.zero = zero;
    StageCost cost = evaluateStage(ctx, runs, cfg, 8, place);
    EXPECT_DOUBLE_EQ(cost.weights, (zero >= 3 ? P / 8 : P) * 2);
    EXPECT_DOUBLE_EQ(cost.grads, (zero >= 2 ? P / 8 : P) * 2);
    EXPECT_DOUBLE_EQ(cost.optimizerStates, (zero >= 1 ? P / 8 : P) * 12);
  }

  double b = 1; // samples per device
  // Tensor parallelism t: 10 sbh replicated bytes... here 8 sbh (no dropout)
  // + 24 sbh / t + 2 a s^2 b / t.
  for (int64_t t : {1, 2, 4, 8}) {
    cfg = StageConfig();
    cfg.tp = t;
    StageCost noSp = evaluateStage(ctx, runs, cfg, 1, place);
    EXPECT_DOUBLE_EQ(noSp.activationsPerMicroBatch,
                     s * b * h * (8 + 24.0 / t) + 2 * a * s * s * b / t);
    if (t > 1) {
      cfg.sp = true; // sequence parallelism: everything split by t
      StageCost sp = evaluateStage(ctx, runs, cfg, 1, place);
      EXPECT_DOUBLE_EQ(sp.activationsPerMicroBatch,
                       (s * b * h * 8) / t + s * b * h * 24.0 / t +
                           2 * a * s * s * b / t);
    }
    cfg.recompute = true; // only the layer input (2 sbh, / t with sp)
    StageCost rc = evaluateStage(ctx, runs, cfg, 1, place);
    EXPECT_DOUBLE_EQ(rc.activationsPerMicroBatch,
                     2 * s * b * h / (cfg.sp ? t : 1));
    EXPECT_GT(rc.workspace, rc.activationsPerMicroBatch);
    EXPECT_GT(rc.compute, noSp.compute); // one more forward pass
  }
}

TEST(CostModelTest, MegatronFlopCount) {
  // 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)) per step, here per sample.
  double s = 2048, h = 12288, a = 96, V = 51200;
  int layers = 96;
  Model model;
  model.tokensPerSample = s;
  for (int i = 0; i < layers; ++i)
    model.layers.push_back(gptBlock(s, h, a));
  Layer head;
  head.kind = LayerKind::Head;
  Gemm logits;
  logits.m = s;
  logits.k = h;
  logits.n = V;
  logits.split = Gemm::Split::N;
  head.gemms.push_back(logits);
  model.layers.push_back(head);
  double l = layers;
  double expected = 96 * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(model.megatronFlopsPerSample(), expected, expected * 1e-12);
  // Parameters: 12 l h^2 (+ 13 l h biases and norms) + V h.
  EXPECT_NEAR(model.layers[0].params(), 12 * h * h + 13 * h, 1);
}

TEST(CostModelTest, TensorParallelCommunicationAndCompute) {
  double s = 2048, h = 4096, a = 32;
  BlockStage b(s, h, a, "dgx-a100-80g:2", 8);
  ClusterSpec &c = b.c;
  const CostContext &ctx = b.ctx;
  std::vector<LayerRun> runs{{0, 4}};
  StagePlace place;
  StageConfig cfg;
  cfg.tp = 8;
  StageCost inNode = evaluateStage(ctx, runs, cfg, 1, place);
  // 4 layers x (2 forward + 2 backward) all-reduces of s h bf16 elements,
  // each priced at its own size: every call pays the link's latency.
  double bytes = s * h * 2;
  EXPECT_DOUBLE_EQ(inNode.tpComm,
                   4 * 4 * allReduceTime(c, bytes, tensorGroup(c, cfg)));
  EXPECT_GT(inNode.tpComm, 4 * 2 * allReduceTime(c, 2 * bytes, tensorGroup(c, cfg)));
  cfg.recompute = true; // the forward all-reduces run again
  StageCost rc = evaluateStage(ctx, runs, cfg, 1, place);
  EXPECT_DOUBLE_EQ(rc.tpComm, 1.5 * inNode.tpComm);
  // Each of the 16 collectives also pays the collective overhead (24
  // with the forward ones again under recomputation).
  c.efficiency.collectiveOverhead = 50e-6;
  EXPECT_NEAR(evaluateStage(ctx, runs, cfg, 1, place).tpComm, rc.tpComm + 24 * 50e-6, 1e-12);
  cfg.recompute = false;
  EXPECT_NEAR(evaluateStage(ctx, runs, cfg, 1, place).tpComm, inNode.tpComm + 16 * 50e-6,
              1e-12);
  c.efficiency.collectiveOverhead = 0;
  // TP across nodes is slower than inside one, even hierarchically.
  cfg = StageConfig();
  cfg.tp = 16;
  StageCost across = evaluateStage(ctx, runs, cfg, 1, place);
  EXPECT_GT(across.tpComm, 1.5 * inNode.tpComm);
  // GEMM time shrinks with tp, but less than linearly (smaller GEMMs).
  cfg.tp = 1;
  StageCost one = evaluateStage(ctx, runs, cfg, 1, place);
  EXPECT_LT(inNode.compute, one.compute / 6);
  EXPECT_GT(inNode.compute, one.compute / 8);
}
