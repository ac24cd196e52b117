//===- DataTest.cpp - indexing and data movement kernels -------------------===//

#include "RuntimeTestUtils.h"

using namespace hpcrt;
using namespace hpcrt::test;

namespace {
Val iota(int dtype, std::vector<int64_t> shape) {
  Val x{dtype, shape, {}};
  for (int64_t i = 0; i < numElements(shape); ++i)
    x.v.push_back(static_cast<double>(i));
  return x;
}
} // namespace

TEST(Gather, NegativeIndicesAndAxes) {
  Val data = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run1({hpcrt_gather, {data, val(HPCRT_I64, {1, 2}, {-1, 0})}, {{HPCRT_F32, {1, 2, 2}}}, {0}}),
            (std::vector<double>{5, 6, 1, 2}));
  EXPECT_EQ(run1({hpcrt_gather, {data, val(HPCRT_I32, {1}, {1})}, {{HPCRT_F32, {3, 1}}}, {-1}}),
            (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(run1({hpcrt_gather, {data, val(HPCRT_I64, {}, {2})}, {{HPCRT_F32, {2}}}, {0}}),
            (std::vector<double>{5, 6}));
  Result r = run({hpcrt_gather, {data, val(HPCRT_I64, {2}, {0, 3})}, {{HPCRT_F32, {2, 2}}}, {0}});
  EXPECT_NE(r.error.find("index 3 is out of range for axis 0 of size 3"), std::string::npos) << r.error;
  r = run({hpcrt_gather, {data, val(HPCRT_I64, {1}, {-4})}, {{HPCRT_F32, {1, 2}}}, {0}});
  EXPECT_NE(r.error.find("out of range"), std::string::npos) << r.error;
}

TEST(GatherElements, Basic) {
  Val data = f32({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run1({hpcrt_gather_elements, {data, val(HPCRT_I64, {2, 2}, {0, 0, 1, 0})}, {{HPCRT_F32, {2, 2}}}, {1}}),
            (std::vector<double>{1, 1, 4, 3}));
  Val d3 = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(run1({hpcrt_gather_elements, {d3, val(HPCRT_I32, {2, 3}, {1, 2, 0, 2, 0, -3})}, {{HPCRT_F32, {2, 3}}}, {0}}),
            (std::vector<double>{4, 8, 3, 7, 2, 3}));
}

TEST(ScatterElements, ReductionsAndOrder) {
  Val data = f32({3, 3}, std::vector<double>(9, 0));
  Val idx = val(HPCRT_I64, {2, 3}, {1, 0, 2, 0, 2, 1});
  Val upd = f32({2, 3}, {1.0, 1.1, 1.2, 2.0, 2.1, 2.2});
  // iattrs: axis; sattrs: reduction.
  expectNear(run1({hpcrt_scatter_elements, {data, idx, upd}, {{HPCRT_F32, {3, 3}}}, {0}, {}, {"none"}}),
             {2.0, 1.1, 0, 1.0, 0, 2.2, 0, 2.1, 1.2});
  Val row = f32({1, 5}, {1, 2, 3, 4, 5});
  Val dup = val(HPCRT_I64, {1, 2}, {1, -4});
  Val u2 = f32({1, 2}, {1.1, 2.1});
  expectNear(run1({hpcrt_scatter_elements, {row, dup, u2}, {{HPCRT_F32, {1, 5}}}, {1}, {}, {"add"}}),
             {1, 5.2, 3, 4, 5});
  expectNear(run1({hpcrt_scatter_elements, {row, dup, u2}, {{HPCRT_F32, {1, 5}}}, {1}, {}, {"mul"}}),
             {1, 2 * 1.1 * 2.1, 3, 4, 5});
  expectNear(run1({hpcrt_scatter_elements, {row, dup, u2}, {{HPCRT_F32, {1, 5}}}, {1}, {}, {"max"}}),
             {1, 2.1, 3, 4, 5});
  expectNear(run1({hpcrt_scatter_elements, {row, dup, u2}, {{HPCRT_F32, {1, 5}}}, {1}, {}, {"min"}}),
             {1, 1.1, 3, 4, 5});
  expectNear(run1({hpcrt_scatter_elements, {row, dup, u2}, {{HPCRT_F32, {1, 5}}}, {1}, {}, {"none"}}),
             {1, 2.1, 3, 4, 5}); // the later update wins
}

TEST(OneHot, NegativeAndOutOfRangeIndices) {
  Val ind = val(HPCRT_I64, {3}, {0, -1, 5});
  Val values = f32({2}, {0, 1});
  // iattrs: axis, depth.
  EXPECT_EQ(run1({hpcrt_one_hot, {ind, values}, {{HPCRT_F32, {3, 3}}}, {-1, 3}}),
            (std::vector<double>{1, 0, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(run1({hpcrt_one_hot, {ind, val(HPCRT_I32, {2}, {2, 7})}, {{HPCRT_I32, {3, 3}}}, {0, 3}}),
            (std::vector<double>{7, 2, 2, 2, 2, 2, 2, 7, 2}));
  EXPECT_EQ(run1({hpcrt_one_hot, {f32({2}, {1.7, -2}), values}, {{HPCRT_F32, {2, 2}}}, {1, 2}}),
            (std::vector<double>{0, 1, 1, 0}));
}

TEST(TopK, TiesTakeTheLowerIndexFirst) {
  Val x = f32({5}, {3, 1, 3, 2, 3});
  // iattrs: axis, k, largest, sorted.
  Result r = run({hpcrt_top_k, {x}, {{HPCRT_F32, {2}}, {HPCRT_I64, {2}}}, {-1, 2, 1, 1}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outs[0].v, (std::vector<double>{3, 3}));
  EXPECT_EQ(r.outs[1].v, (std::vector<double>{0, 2}));
  r = run({hpcrt_top_k, {x}, {{HPCRT_F32, {3}}, {HPCRT_I64, {3}}}, {0, 3, 0, 1}});
  EXPECT_EQ(r.outs[0].v, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(r.outs[1].v, (std::vector<double>{1, 3, 0}));
  Val m = f32({3, 2}, {1, 6, 5, 4, 5, 8});
  r = run({hpcrt_top_k, {m}, {{HPCRT_F32, {2, 2}}, {HPCRT_I64, {2, 2}}}, {0, 2, 1, 1}});
  EXPECT_EQ(r.outs[0].v, (std::vector<double>{5, 8, 5, 6}));
  EXPECT_EQ(r.outs[1].v, (std::vector<double>{1, 2, 2, 0}));
}

TEST(Transpose, Permutation3D) {
  Val x = iota(HPCRT_F32, {2, 3, 4});
  std::vector<double> want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        want.push_back(i * 12 + j * 4 + k);
  EXPECT_EQ(run1({hpcrt_transpose, {x}, {{HPCRT_F32, {4, 2, 3}}}, {3, 2, 0, 1}}), want);
  Val b = iota(HPCRT_I8, {2, 3});
  EXPECT_EQ(run1({hpcrt_transpose, {b}, {{HPCRT_I8, {3, 2}}}, {2, 1, 0}}), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Slice, NegativeSteps) {
  Val x = iota(HPCRT_F32, {10});
  // iattrs: ends, starts, steps.
  EXPECT_EQ(run1({hpcrt_slice, {x}, {{HPCRT_F32, {3}}}, {1, -1, 1, 8, 1, -3}}), (std::vector<double>{8, 5, 2}));
  EXPECT_EQ(run1({hpcrt_slice, {x}, {{HPCRT_F32, {10}}}, {1, -1, 1, 9, 1, -1}}),
            (std::vector<double>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(run1({hpcrt_slice, {x}, {{HPCRT_F32, {3}}}, {1, 10, 1, 1, 1, 4}}), (std::vector<double>{1, 5, 9}));
  Val m = iota(HPCRT_I64, {3, 4});
  EXPECT_EQ(run1({hpcrt_slice, {m}, {{HPCRT_I64, {2, 2}}}, {2, -1, 4, 2, 2, 0, 2, -2, 2}}),
            (std::vector<double>{8, 10, 0, 2}));
  EXPECT_EQ(run1({hpcrt_slice, {m}, {{HPCRT_I64, {0, 4}}}, {2, 1, 4, 2, 1, 0, 2, 1, 1}}),
            (std::vector<double>{}));
  Result r = run({hpcrt_slice, {x}, {{HPCRT_F32, {3}}}, {1, 13, 1, 9, 1, 1}});
  EXPECT_NE(r.error.find("clamped"), std::string::npos) << r.error;
}

TEST(ConcatSplit, RoundTrip) {
  Val a = iota(HPCRT_F32, {2, 1, 3}), b = iota(HPCRT_F32, {2, 2, 3});
  for (double &v : b.v)
    v += 100;
  auto cat = run1({hpcrt_concat, {a, b}, {{HPCRT_F32, {2, 3, 3}}}, {1}});
  EXPECT_EQ(cat, (std::vector<double>{0, 1, 2, 100, 101, 102, 103, 104, 105,
                                      3, 4, 5, 106, 107, 108, 109, 110, 111}));
  Val c = f32({2, 3, 3}, cat);
  // iattrs: axis, sizes.
  Result r = run({hpcrt_split, {c}, {{HPCRT_F32, {2, 1, 3}}, {HPCRT_F32, {2, 2, 3}}}, {-2, 2, 1, 2}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outs[0].v, a.v);
  EXPECT_EQ(r.outs[1].v, b.v);
}

TEST(Expand, BroadcastToShape) {
  Val x = f32({3, 1}, {1, 2, 3});
  EXPECT_EQ(run1({hpcrt_expand, {x}, {{HPCRT_F32, {2, 3, 2}}}, {3, 2, 1, 2}}),
            (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(run1({hpcrt_expand, {x}, {{HPCRT_F32, {3, 1}}}, {1, 1}}), (std::vector<double>{1, 2, 3}));
}

TEST(Pad, Modes) {
  Val x = f32({3}, {1, 2, 3});
  // sattrs: mode; iattrs: pads; fattrs: value.
  EXPECT_EQ(run1({hpcrt_pad, {x}, {{HPCRT_F32, {7}}}, {2, 2, 2}, {0}, {"reflect"}}),
            (std::vector<double>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(run1({hpcrt_pad, {x}, {{HPCRT_F32, {7}}}, {2, 2, 2}, {0}, {"edge"}}),
            (std::vector<double>{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(run1({hpcrt_pad, {x}, {{HPCRT_F32, {7}}}, {2, 2, 2}, {9}, {"constant"}}),
            (std::vector<double>{9, 9, 1, 2, 3, 9, 9}));
  EXPECT_EQ(run1({hpcrt_pad, {x}, {{HPCRT_F32, {3}}}, {2, -1, 1}, {0}, {"constant"}}),
            (std::vector<double>{2, 3, 0}));
  Val m = iota(HPCRT_I32, {2, 2});
  EXPECT_EQ(run1({hpcrt_pad, {m}, {{HPCRT_I32, {3, 4}}}, {4, 1, 1, 0, 1}, {-1}, {"constant"}}),
            (std::vector<double>{-1, -1, -1, -1, -1, 0, 1, -1, -1, 2, 3, -1}));
}

TEST(Tile, Repeats) {
  Val x = f32({1, 2}, {1, 2});
  EXPECT_EQ(run1({hpcrt_tile, {x}, {{HPCRT_F32, {2, 4}}}, {2, 2, 2}}),
            (std::vector<double>{1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST(Transpose, LargeTiledMatchesNaive) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  for (const Case &c : {Case{{3, 40, 50}, {0, 2, 1}}, Case{{2, 20, 3, 30}, {3, 1, 0, 2}},
                        Case{{64, 33}, {1, 0}}}) {
    Val x = iota(HPCRT_I32, c.shape);
    std::vector<int64_t> os, xs = stridesOf(c.shape);
    for (int64_t p : c.perm)
      os.push_back(c.shape[p]);
    std::vector<int64_t> ost = stridesOf(os);
    std::vector<double> want;
    for (int64_t i = 0; i < numElements(os); ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < os.size(); ++d)
        off += ((i / ost[d]) % os[d]) * xs[c.perm[d]];
      want.push_back(static_cast<double>(off));
    }
    std::vector<int64_t> ia = {static_cast<int64_t>(c.perm.size())};
    ia.insert(ia.end(), c.perm.begin(), c.perm.end());
    EXPECT_EQ(run1({hpcrt_transpose, {x}, {{HPCRT_I32, os}}, ia}), want);
  }
}
