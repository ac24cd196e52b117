//===- MeshTest.cpp - the manifest's mesh, reductions, dist kernel errors ---===//
//
// What of the dist support can be tested in one process without MPI: the
// "mesh" and "bytes_per_rank" fields of the manifest, the elementwise
// reductions of the collectives (comm/Reduce), and the errors of a dist
// kernel called without a mesh or without a communicator. The collectives
// themselves run under mpirun in dist_test.py.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"
#include "comm/MpiComm.h"
#include "comm/Reduce.h"


using namespace hpcrt;
using namespace hpcrt::test;
using nlohmann::json;

namespace {

/// x f32[4] input, y f32[4] arena; one op dist.all_reduce.
json distModel(bool withMesh) {
  json m = {{"version", 1},
            {"arena_bytes", 64},
            {"inputs", {{{"name", "x"}, {"tensor", 0}}}},
            {"outputs", {{{"name", "y"}, {"tensor", 1}}}},
            {"tensors",
             {{{"dtype", 1}, {"shape", {4}}, {"region", "input"}, {"index", 0}},
              {{"dtype", 1}, {"shape", {4}}, {"region", "arena"}, {"offset", 0}}}},
            {"ops", {{{"name", "dist.all_reduce"}, {"loc", "ar"}}}}};
  if (withMesh) {
    m["mesh"] = {{"axes",
                  {{{"name", "dp"}, {"size", 2}, {"level", "inter_node"}},
                   {{"name", "tp"}, {"size", 4}, {"level", "intra_node"}}}}};
    m["bytes_per_rank"] = 96;
  }
  return m;
}

template <typename T> std::vector<T> reduce(int dtype, int64_t kind, std::vector<T> a,
                                            const std::vector<T> &b, int finishG = 0) {
  comm::Reducer r = comm::makeReducer(dtype, kind);
  EXPECT_EQ(r.elementSize, sizeof(T));
  r.combine(a.data(), b.data(), a.size());
  if (finishG && r.finish)
    r.finish(a.data(), a.size(), finishG);
  return a;
}

} // namespace

TEST(Mesh, ManifestMeshAndPlannedBytes) {
  Context c(distModel(true).dump());
  ASSERT_TRUE(c.hasMesh());
  ASSERT_EQ(c.mesh().size(), 2u);
  EXPECT_EQ(c.mesh()[0].name, "dp");
  EXPECT_EQ(c.mesh()[1].size, 4);
  EXPECT_EQ(c.mesh()[1].level, "intra_node");
  EXPECT_EQ(c.meshRanks(), 8);
  EXPECT_EQ(c.plannedBytesPerRank(), 96);
  EXPECT_EQ(c.ranksPerNode(), 0);
  json placed = distModel(true);
  placed["ranks_per_node"] = 4;
  EXPECT_EQ(Context(placed.dump()).ranksPerNode(), 4);
  Context single(distModel(false).dump());
  EXPECT_FALSE(single.hasMesh());
  EXPECT_EQ(single.meshRanks(), 1);
  EXPECT_EQ(single.plannedBytesPerRank(), -1);
}

TEST(Mesh, RejectsMalformedMeshes) {
  json m = distModel(true);
  m["mesh"]["axes"][1]["name"] = "dp";
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("mesh axis 'dp' is listed twice"),
            std::string::npos);
  m = distModel(true);
  m["mesh"]["axes"][0]["size"] = 0;
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("mesh.axes[0].size 0"), std::string::npos);
  m = distModel(true);
  m["mesh"]["axes"] = json::array();
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("mesh.axes is not a non-empty array"),
            std::string::npos);
  for (json bad : {json(0), json(-2), json("2")}) {
    m = distModel(true);
    m["ranks_per_node"] = bad;
    EXPECT_NE(errorOf([&] { Context c(m.dump()); })
                  .find("\"ranks_per_node\" is not a positive rank count"),
              std::string::npos)
        << bad;
  }
  m = distModel(true);
  m["mesh"]["axes"][0].erase("name");
  EXPECT_NE(errorOf([&] { Context c(m.dump()); }).find("mesh.axes[0] has no \"name\""),
            std::string::npos);
}

TEST(Mesh, PlacementCheck) {
  using comm::placementError;
  EXPECT_EQ(placementError(0, {0, 1, 2, 3}), "");    // not compiled for a cluster
  EXPECT_EQ(placementError(2, {0, 0, 2, 2}), "");    // node-major, 2 a node
  EXPECT_EQ(placementError(2, {0, 0, 0, 0}), "");    // all on one machine
  EXPECT_EQ(placementError(4, {0, 0, 0, 0, 4}), ""); // a smaller last node
  EXPECT_EQ(placementError(2, {0, 0, 0, 3}),
            "compiled for 2 ranks per node, node-major (ranks 2-3 on node 1), but ranks 2 "
            "and 3 run on different nodes; start 2 ranks per node in rank order (mpirun "
            "--map-by ppr:2:node)");
  EXPECT_NE(placementError(2, {0, 1, 2, 2}).find("ranks 0 and 1 run on different nodes"),
            std::string::npos);
}

TEST(Mesh, DistKernelWithoutMeshOrCommunicator) {
  const int32_t ids[] = {1, 1, 1, 0};
  const int64_t ia[] = {1, 0, 0, 0}; // axes [0], ranks_per_node 0 (flat), sum
  {
    Context c(distModel(false).dump());
    c.prepare();
    hpcrt_all_reduce(&c, 0, ids, ia, nullptr, nullptr);
    EXPECT_EQ(c.error(), "op 0 (dist.all_reduce at 'ar'): a dist op in a program without a mesh");
  }
  {
    Context c(distModel(true).dump());
    c.prepare();
    hpcrt_all_reduce(&c, 0, ids, ia, nullptr, nullptr);
    EXPECT_EQ(c.error(),
              "op 0 (dist.all_reduce at 'ar'): no communicator: the ranks of the mesh were not started");
  }
  {
    // The op name check accepts "dist." for the dist kernels only.
    json m = distModel(true);
    m["ops"][0]["name"] = "hpc.all_reduce";
    Context c(m.dump());
    c.prepare();
    hpcrt_all_reduce(&c, 0, ids, ia, nullptr, nullptr);
    EXPECT_NE(c.error().find("the manifest lists op 0 as hpc.all_reduce"), std::string::npos);
  }
}

TEST(Reduce, KindsAndTypes) {
  using comm::ReductionKind;
  EXPECT_EQ(reduce<float>(HPCRT_F32, 0, {1, -2, 3}, {0.5f, 4, -3}), (std::vector<float>{1.5f, 2, 0}));
  EXPECT_EQ(reduce<double>(HPCRT_F64, 1, {1, -2, 3}, {0.5, 4, -3}), (std::vector<double>{1, 4, 3}));
  EXPECT_EQ(reduce<int32_t>(HPCRT_I32, 2, {1, -2, 3}, {0, 4, -3}), (std::vector<int32_t>{0, -2, -3}));
  EXPECT_EQ(reduce<int64_t>(HPCRT_I64, 3, {2, -2, 3}, {5, 4, -3}), (std::vector<int64_t>{10, -8, -9}));
  // Integers wrap; avg divides with truncation toward zero (also for g
  // beyond the type's range).
  EXPECT_EQ(reduce<int8_t>(HPCRT_I8, 0, {127, -128}, {1, -1}), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(reduce<int32_t>(HPCRT_I32, 4, {3, -3, 7}, {4, -4, 0}, 2),
            (std::vector<int32_t>{3, -3, 3}));
  EXPECT_EQ(reduce<int8_t>(HPCRT_I8, 4, {100}, {0}, 300), (std::vector<int8_t>{0}));
  EXPECT_EQ(reduce<uint8_t>(HPCRT_U8, 0, {250}, {10}), (std::vector<uint8_t>{4}));
  EXPECT_EQ(reduce<float>(HPCRT_F32, 4, {1, 2}, {2, 2}, 4), (std::vector<float>{0.75f, 1}));
  // max/min propagate NaN from either side.
  std::vector<float> m = reduce<float>(HPCRT_F32, 1, {NAN, 1}, {1, NAN});
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
  m = reduce<float>(HPCRT_F32, 2, {NAN, 1}, {1, NAN});
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
  // bool: sum/max = or, min/prod = and; avg is an error.
  EXPECT_EQ(reduce<uint8_t>(HPCRT_BOOL, 0, {0, 1, 0, 1}, {0, 0, 1, 1}), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(reduce<uint8_t>(HPCRT_BOOL, 3, {0, 1, 0, 7}, {0, 0, 1, 1}), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_NE(errorOf([] { comm::makeReducer(HPCRT_BOOL, 4); }).find("avg is not defined for bool"),
            std::string::npos);
  EXPECT_NE(errorOf([] { comm::makeReducer(HPCRT_F32, 9); }).find("unknown reduction kind 9"),
            std::string::npos);
}

TEST(Reduce, HalfTypesRoundAfterEveryStep) {
  // f16: 2048 + 1 rounds back to 2048 (ties to even) at each step.
  uint16_t a = floatToHalf(2048), b = floatToHalf(1);
  std::vector<uint16_t> r = reduce<uint16_t>(HPCRT_F16, 0, {a}, {b});
  EXPECT_EQ(halfToFloat(r[0]), 2048.0f);
  r = reduce<uint16_t>(HPCRT_F16, 0, {floatToHalf(1.5f)}, {floatToHalf(2.25f)});
  EXPECT_EQ(halfToFloat(r[0]), 3.75f);
  // bf16: 256 + 1 = 256 in bf16; 1 + 0.5 exact; avg in float.
  r = reduce<uint16_t>(HPCRT_BF16, 0, {floatToBf16(256)}, {floatToBf16(1)});
  EXPECT_EQ(bf16ToFloat(r[0]), 256.0f);
  r = reduce<uint16_t>(HPCRT_BF16, 4, {floatToBf16(1)}, {floatToBf16(0.5f)}, 2);
  EXPECT_EQ(bf16ToFloat(r[0]), 0.75f);
}

TEST(Mesh, RankPiecesOfWeights) {
  // A weight f32[8] split over tp (4 ranks): each rank's piece f32[2] is a
  // view 8 bytes further per tp index.
  const float w[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  json m = distModel(true);
  m["weights"] = {{"file", "w.safetensors"},
                  {"bytes", 32},
                  {"hash", hashString(hpcrt_hash64(w, sizeof(w)))}};
  m["tensors"].push_back({{"dtype", 1}, {"shape", {2}}, {"region", "weights"}, {"offset", 0},
                          {"rank_axes", {1}}, {"rank_stride", 8}});
  Context c(m.dump());
  EXPECT_EQ(c.tensor(2).rankAxes, std::vector<int64_t>{1});
  EXPECT_EQ(c.tensor(2).rankStride, 8);
  // The piece depends on the rank: without the mesh's ranks there is none.
  c.setWeightsData(w, sizeof(w));
  EXPECT_EQ(errorOf([&] { c.prepare(); }),
            "a weight is split over the mesh, but the ranks of the mesh were not started");

  json bad = m;
  bad["tensors"][2]["rank_axes"] = {2};
  EXPECT_NE(errorOf([&] { Context c(bad.dump()); })
                .find("tensors[2].rank_axes names mesh axis 2, which the mesh does not have"),
            std::string::npos);
  bad = m;
  bad["tensors"][2]["rank_stride"] = 12;
  EXPECT_NE(errorOf([&] { Context c(bad.dump()); })
                .find("tensors[2]'s last rank piece ends at byte 44, beyond the weights' 32 bytes"),
            std::string::npos);
  bad = m;
  bad["tensors"][2]["rank_axes"] = json::array();
  EXPECT_NE(errorOf([&] { Context c(bad.dump()); }).find("rank_axes is not a non-empty array"),
            std::string::npos);
}
