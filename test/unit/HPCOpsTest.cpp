//===- HPCOpsTest.cpp - result-type inference of hpc ops ------------------===//
//
// Builds hpc ops through the C++ API (OpTy::create with inferred result
// types, as the importer does) and checks the shapes they infer: numpy
// broadcasting, matmul batch broadcast and 1-D promotion, convolution and
// pooling output sizes, and the data-movement ops. Also checks that the
// verifier rejects bad attributes and declared types that disagree with
// inference.
//
//===----------------------------------------------------------------------===//

#include "HPCTestUtils.h"

using namespace mlir;
using namespace hpc;
using namespace hpc_test;

namespace {

using HPCInferTest = HPCTest;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_F(HPCInferTest, AddBroadcastsNumpyStyle) {
  auto op = AddOp::create(builder, loc, value({2, 1, 4}), value({3, 1}));
  EXPECT_EQ(str(op.getType()), "tensor<2x3x4xf32>");
}

TEST_F(HPCInferTest, AddBroadcastsRankZero) {
  auto op = AddOp::create(builder, loc, value({5}), value({}));
  EXPECT_EQ(str(op.getType()), "tensor<5xf32>");
}

TEST_F(HPCInferTest, AddBroadcastsDynamicAgainstStatic) {
  auto op = AddOp::create(builder, loc, value({dyn, 4}), value({3, 1}));
  EXPECT_EQ(str(op.getType()), "tensor<3x4xf32>");
  auto keep = MulOp::create(builder, loc, value({dyn, 4}), value({1, 4}));
  EXPECT_EQ(str(keep.getType()), "tensor<?x4xf32>");
}

TEST_F(HPCInferTest, ComparisonsReturnI1) {
  auto op = LessOp::create(builder, loc, value({4, 1}), value({3}));
  EXPECT_EQ(str(op.getType()), "tensor<4x3xi1>");
  auto eq = EqualOp::create(builder, loc, value({2}, builder.getI64Type()),
                            value({2}, builder.getI64Type()));
  EXPECT_EQ(str(eq.getType()), "tensor<2xi1>");
}

TEST_F(HPCInferTest, AddRejectsShapesThatDoNotBroadcast) {
  auto op = AddOp::create(builder, loc, tensor({2, 3}), value({2, 3}),
                          value({4, 3}));
  EXPECT_NE(verifyErrors(op).find("shapes [2,3] and [4,3] do not broadcast"),
            std::string::npos)
      << verifyErrors(op);
}

TEST_F(HPCInferTest, WhereBroadcastsAllThree) {
  auto op = WhereOp::create(builder, loc, value({1, 4}, builder.getI1Type()),
                            value({3, 1}), value({}));
  EXPECT_EQ(str(op.getType()), "tensor<3x4xf32>");
}

TEST_F(HPCInferTest, CastKeepsShapeChangesElementType) {
  auto op = CastOp::create(builder, loc, value({2, 3}), builder.getI64Type());
  EXPECT_EQ(str(op.getType()), "tensor<2x3xi64>");
}

TEST_F(HPCInferTest, UnaryKeepsType) {
  auto op = GeluOp::create(builder, loc, value({2, 3}), "tanh");
  EXPECT_EQ(str(op.getType()), "tensor<2x3xf32>");
  EXPECT_EQ(verifyErrors(op), "");
}

TEST_F(HPCInferTest, GeluRejectsUnknownApproximation) {
  auto op = GeluOp::create(builder, loc, value({2}), "fast");
  EXPECT_NE(verifyErrors(op).find("approximate must be \"none\" or \"tanh\""),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

TEST_F(HPCInferTest, MatMulBroadcastsBatchDimensions) {
  auto op = MatMulOp::create(builder, loc, value({2, 1, 4, 8}), value({3, 8, 5}));
  EXPECT_EQ(str(op.getType()), "tensor<2x3x4x5xf32>");
  auto op2 = MatMulOp::create(builder, loc, value({1, 4, 8}), value({6, 8, 5}));
  EXPECT_EQ(str(op2.getType()), "tensor<6x4x5xf32>");
}

TEST_F(HPCInferTest, MatMulPromotesOneDimensionalOperands) {
  EXPECT_EQ(str(MatMulOp::create(builder, loc, value({8}), value({8, 5})).getType()),
            "tensor<5xf32>");
  EXPECT_EQ(str(MatMulOp::create(builder, loc, value({4, 8}), value({8})).getType()),
            "tensor<4xf32>");
  EXPECT_EQ(str(MatMulOp::create(builder, loc, value({8}), value({8})).getType()),
            "tensor<f32>");
  EXPECT_EQ(
      str(MatMulOp::create(builder, loc, value({3, 4, 8}), value({8})).getType()),
      "tensor<3x4xf32>");
  EXPECT_EQ(
      str(MatMulOp::create(builder, loc, value({8}), value({3, 8, 5})).getType()),
      "tensor<3x5xf32>");
}

TEST_F(HPCInferTest, MatMulRejectsContractingMismatch) {
  auto op = MatMulOp::create(builder, loc, tensor({4, 5}), value({4, 8}),
                             value({7, 5}));
  EXPECT_NE(verifyErrors(op).find("contracting dimensions differ: [4,8] x [7,5]"),
            std::string::npos)
      << verifyErrors(op);
}

TEST_F(HPCInferTest, DeclaredTypeMustMatchInferredType) {
  auto op = MatMulOp::create(builder, loc, tensor({4, 6}), value({4, 8}),
                             value({8, 5}));
  EXPECT_NE(verifyErrors(op).find("inferred type(s)"), std::string::npos)
      << verifyErrors(op);
}

TEST_F(HPCInferTest, GemmTransposesOperands) {
  auto op = GemmOp::create(builder, loc, value({8, 4}), value({5, 8}),
                           value({5}), llvm::APFloat(1.0), llvm::APFloat(1.0),
                           /*trans_a=*/true, /*trans_b=*/true);
  EXPECT_EQ(str(op.getType()), "tensor<4x5xf32>");
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

TEST_F(HPCInferTest, ConvStridesAndPads) {
  auto op = ConvOp::create(builder, loc, value({1, 3, 32, 32}),
                           value({16, 3, 3, 3}), Value(), Value(), I64s{2, 2},
                           I64s{1, 1, 1, 1}, I64s{1, 1});
  EXPECT_EQ(str(op.getType()), "tensor<1x16x16x16xf32>");
}

TEST_F(HPCInferTest, ConvDilation) {
  auto op = ConvOp::create(builder, loc, value({1, 3, 32, 32}),
                           value({16, 3, 3, 3}), Value(), Value(), I64s{1, 1},
                           I64s{1, 1, 1, 1}, I64s{2, 2});
  // span (3-1)*2+1 = 5: 32 + 2 - 5 + 1 = 30.
  EXPECT_EQ(str(op.getType()), "tensor<1x16x30x30xf32>");
}

TEST_F(HPCInferTest, ConvAsymmetricPadsAndGroups) {
  // pads: begins (h=0, w=1), then ends (h=2, w=3).
  auto op = ConvOp::create(builder, loc, value({2, 8, 10, 10}),
                           value({16, 2, 3, 3}), value({16}), Value(), I64s{1, 1},
                           I64s{0, 1, 2, 3}, I64s{1, 1}, /*group=*/4);
  EXPECT_EQ(str(op.getType()), "tensor<2x16x10x12xf32>");
  EXPECT_EQ(verifyErrors(op), "");
}

TEST_F(HPCInferTest, ConvResidualMustHaveTheResultType) {
  auto ok = ConvOp::create(builder, loc, value({1, 3, 8, 8}), value({16, 3, 3, 3}), Value(),
                           value({1, 16, 8, 8}), I64s{1, 1}, I64s{1, 1, 1, 1}, I64s{1, 1});
  EXPECT_EQ(verifyErrors(ok), "");
  auto bad = ConvOp::create(builder, loc, value({1, 3, 8, 8}), value({16, 3, 3, 3}),
                            value({16}), value({1, 16, 4, 4}), I64s{1, 1}, I64s{1, 1, 1, 1},
                            I64s{1, 1});
  EXPECT_NE(verifyErrors(bad).find("residual has type"), std::string::npos)
      << verifyErrors(bad);
}

TEST_F(HPCInferTest, Conv1D) {
  auto op = ConvOp::create(builder, loc, value({1, 4, 100}), value({8, 4, 5}),
                           Value(), Value(), I64s{3}, I64s{0, 0}, I64s{1});
  // (100 - 5) / 3 + 1 = 32.
  EXPECT_EQ(str(op.getType()), "tensor<1x8x32xf32>");
}

TEST_F(HPCInferTest, ConvRejectsChannelGroupMismatch) {
  auto op = ConvOp::create(builder, loc, tensor({1, 16, 8, 8}),
                           value({1, 6, 8, 8}), value({16, 2, 1, 1}), Value(),
                           Value(), I64s{1, 1}, I64s{0, 0, 0, 0}, I64s{1, 1},
                           /*group=*/2);
  EXPECT_NE(verifyErrors(op).find("input has 6 channels but weight expects 2 x group 2"),
            std::string::npos)
      << verifyErrors(op);
}

TEST_F(HPCInferTest, ConvTransposeOutputSize) {
  auto op = ConvTransposeOp::create(builder, loc, value({1, 4, 5, 5}),
                                    value({4, 2, 3, 3}), Value(), I64s{2, 2},
                                    I64s{0, 0, 0, 0}, I64s{1, 1}, I64s{1, 1},
                                    /*group=*/2);
  // 2*(5-1) + 1 + (3-1)*1 + 1 = 12; channels 2 * group 2 = 4.
  EXPECT_EQ(str(op.getType()), "tensor<1x4x12x12xf32>");
}

TEST_F(HPCInferTest, MaxPoolFloorAndCeilMode) {
  Value x = value({1, 1, 4, 4});
  auto floorOp = MaxPoolOp::create(builder, loc, x, I64s{3, 3}, I64s{2, 2},
                                   I64s{1, 1, 1, 1}, I64s{1, 1}, false);
  // (4 + 2 - 3) / 2 + 1 = 2 (floor), 3 (ceil).
  EXPECT_EQ(str(floorOp.getType()), "tensor<1x1x2x2xf32>");
  auto ceilOp = MaxPoolOp::create(builder, loc, x, I64s{3, 3}, I64s{2, 2},
                                  I64s{1, 1, 1, 1}, I64s{1, 1}, true);
  EXPECT_EQ(str(ceilOp.getType()), "tensor<1x1x3x3xf32>");
}

TEST_F(HPCInferTest, CeilModeDropsWindowStartingInEndPadding) {
  // in 5, kernel 1, stride 2, end pad 1: ceil((5+1-1)/2)+1 = 4 windows, but
  // the 4th would start at 6, inside the end padding only: 3 remain.
  auto op = MaxPoolOp::create(builder, loc, value({1, 1, 5}), I64s{1}, I64s{2},
                              I64s{0, 1}, I64s{1}, true);
  EXPECT_EQ(str(op.getType()), "tensor<1x1x3xf32>");
}

TEST_F(HPCInferTest, AvgPoolDilation) {
  auto op = AvgPoolOp::create(builder, loc, value({2, 3, 9, 9}), I64s{3, 3},
                              I64s{1, 1}, I64s{0, 0, 0, 0}, I64s{2, 2});
  EXPECT_EQ(str(op.getType()), "tensor<2x3x5x5xf32>");
}

TEST_F(HPCInferTest, PoolRejectsWindowLargerThanInput) {
  auto op = MaxPoolOp::create(builder, loc, tensor({1, 1, 1, 1}),
                              value({1, 1, 2, 2}), I64s{3, 3}, I64s{1, 1},
                              I64s{0, 0, 0, 0}, I64s{1, 1}, false);
  EXPECT_NE(verifyErrors(op).find("pooling window 3 does not fit"),
            std::string::npos)
      << verifyErrors(op);
}

TEST_F(HPCInferTest, GlobalPool) {
  auto op = GlobalAvgPoolOp::create(builder, loc, value({2, 3, 7, 5}));
  EXPECT_EQ(str(op.getType()), "tensor<2x3x1x1xf32>");
}

//===----------------------------------------------------------------------===//
// Normalization, reductions, indexing
//===----------------------------------------------------------------------===//

TEST_F(HPCInferTest, LayerNormKeepsType) {
  auto op = LayerNormOp::create(builder, loc, value({2, 7, 64}), value({64}),
                                value({64}), -1, llvm::APFloat(1e-5));
  EXPECT_EQ(str(op.getType()), "tensor<2x7x64xf32>");
  EXPECT_EQ(verifyErrors(op), "");
}

TEST_F(HPCInferTest, Reductions) {
  Value x = value({2, 3, 4});
  EXPECT_EQ(str(ReduceSumOp::create(builder, loc, x, I64s{1}, false).getType()),
            "tensor<2x4xf32>");
  EXPECT_EQ(str(ReduceMeanOp::create(builder, loc, x, I64s{0, 2}, true).getType()),
            "tensor<1x3x1xf32>");
  EXPECT_EQ(str(ArgMaxOp::create(builder, loc, x, /*axis=*/-1).getType()),
            "tensor<2x3x1xi64>");
}

TEST_F(HPCInferTest, GatherShape) {
  Value table = value({10, 4});
  auto rows = GatherOp::create(builder, loc, table,
                               value({2, 3}, builder.getI64Type()), 0);
  EXPECT_EQ(str(rows.getType()), "tensor<2x3x4xf32>");
  auto scalar = GatherOp::create(builder, loc, table,
                                 value({}, builder.getI64Type()), -1);
  EXPECT_EQ(str(scalar.getType()), "tensor<10xf32>");
}

TEST_F(HPCInferTest, TopKReturnsValuesAndIndices) {
  auto op = TopKOp::create(builder, loc, value({3, 10}), 4);
  EXPECT_EQ(str(op.getValues().getType()), "tensor<3x4xf32>");
  EXPECT_EQ(str(op.getIndices().getType()), "tensor<3x4xi64>");
}

TEST_F(HPCInferTest, OneHotInsertsDepth) {
  auto op = OneHotOp::create(builder, loc, value({4}, builder.getI64Type()),
                             value({2}), 10, 0);
  EXPECT_EQ(str(op.getType()), "tensor<10x4xf32>");
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST_F(HPCInferTest, SliceWithPositiveAndNegativeSteps) {
  Value x = value({10, 10, 10});
  // dim 0: 1,4,7; dim 1: 9..0 backwards (end -1 = one before the first);
  // dim 2: 8,5,2.
  auto op = SliceOp::create(builder, loc, x, I64s{1, 9, 8}, I64s{10, -1, 1},
                            I64s{3, -1, -3});
  EXPECT_EQ(str(op.getType()), "tensor<3x10x3xf32>");
}

TEST_F(HPCInferTest, SliceEmptyRange) {
  auto op = SliceOp::create(builder, loc, value({10}), I64s{5}, I64s{2}, I64s{1});
  EXPECT_EQ(str(op.getType()), "tensor<0xf32>");
}

TEST_F(HPCInferTest, SliceRejectsUnnormalizedBounds) {
  auto op = SliceOp::create(builder, loc, tensor({3}), value({10}), I64s{0},
                            I64s{11}, I64s{1});
  EXPECT_NE(verifyErrors(op).find("are not normalized for dimension 0"),
            std::string::npos)
      << verifyErrors(op);
}

TEST_F(HPCInferTest, ConcatAddsAxis) {
  auto op = ConcatOp::create(builder, loc, ValueRange{value({2, 3}), value({2, 5})},
                             -1);
  EXPECT_EQ(str(op.getType()), "tensor<2x8xf32>");
}

TEST_F(HPCInferTest, SplitProducesOneResultPerSize) {
  auto op = SplitOp::create(builder, loc, value({6, 4}), 0, I64s{1, 2, 3});
  ASSERT_EQ(op.getNumResults(), 3u);
  EXPECT_EQ(str(op.getResult(0).getType()), "tensor<1x4xf32>");
  EXPECT_EQ(str(op.getResult(1).getType()), "tensor<2x4xf32>");
  EXPECT_EQ(str(op.getResult(2).getType()), "tensor<3x4xf32>");
}

TEST_F(HPCInferTest, UnsqueezeAndSqueeze) {
  auto un = UnsqueezeOp::create(builder, loc, value({3, 4}), I64s{0, 3});
  EXPECT_EQ(str(un.getType()), "tensor<1x3x4x1xf32>");
  auto sq = SqueezeOp::create(builder, loc, value({1, 3, 1, 4}), I64s{0, 2});
  EXPECT_EQ(str(sq.getType()), "tensor<3x4xf32>");
}

TEST_F(HPCInferTest, UnsqueezeRejectsRepeatedOrOutOfRangeAxes) {
  auto dup = UnsqueezeOp::create(builder, loc, tensor({1, 1, 3, 4}),
                                 value({3, 4}), I64s{0, 0});
  EXPECT_NE(verifyErrors(dup).find(
                "unsqueeze axes [0,0] are not distinct result dimensions of rank 4"),
            std::string::npos)
      << verifyErrors(dup);
  auto neg = UnsqueezeOp::create(builder, loc, tensor({3, 4, 1}), value({3, 4}),
                                 I64s{-1});
  EXPECT_NE(verifyErrors(neg).find("are not distinct result dimensions of rank 3"),
            std::string::npos)
      << verifyErrors(neg);
}

TEST_F(HPCInferTest, TransposePermutes) {
  auto op = TransposeOp::create(builder, loc, value({2, 3, 4}), I64s{2, 0, 1});
  EXPECT_EQ(str(op.getType()), "tensor<4x2x3xf32>");
}

TEST_F(HPCInferTest, TransposeRejectsNonPermutation) {
  auto op = TransposeOp::create(builder, loc, tensor({2, 2, 2}),
                                value({2, 2, 2}), I64s{0, 0, 1});
  EXPECT_NE(verifyErrors(op).find("is not a permutation of 0..2"),
            std::string::npos)
      << verifyErrors(op);
}

TEST_F(HPCInferTest, ReshapeKeepsElementCount) {
  auto op = ReshapeOp::create(builder, loc, value({2, 3, 4}), I64s{6, 4});
  EXPECT_EQ(str(op.getType()), "tensor<6x4xf32>");
  auto bad = ReshapeOp::create(builder, loc, tensor({5, 5}), value({2, 3, 4}),
                               I64s{5, 5});
  EXPECT_NE(verifyErrors(bad).find("(24 elements) to [5,5] (25 elements)"),
            std::string::npos)
      << verifyErrors(bad);
}

TEST_F(HPCInferTest, ExpandPadTile) {
  EXPECT_EQ(str(ExpandOp::create(builder, loc, value({3, 1}), I64s{2, 1, 4})
                    .getType()),
            "tensor<2x3x4xf32>");
  // begins (1, 0), ends (1, 2).
  EXPECT_EQ(str(PadOp::create(builder, loc, value({2, 3}), I64s{1, 0, 1, 2},
                              "constant", llvm::APFloat(0.0))
                    .getType()),
            "tensor<4x5xf32>");
  EXPECT_EQ(str(TileOp::create(builder, loc, value({2, 3}), I64s{2, 2}).getType()),
            "tensor<4x6xf32>");
}

TEST_F(HPCInferTest, ResizeTakesSizes) {
  auto op = ResizeOp::create(builder, loc, value({1, 3, 8, 8}),
                             I64s{1, 3, 16, 16},
                             llvm::SmallVector<double>{1.0, 1.0, 2.0, 2.0});
  EXPECT_EQ(str(op.getType()), "tensor<1x3x16x16xf32>");
}

} // namespace
