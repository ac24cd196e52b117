//===- HPCFoldTest.cpp - constant folding of hpc ops ----------------------===//
//
// Folds hpc ops through OpBuilder::createOrFold, as the importer and the
// canonicalizer do, and checks the folded values: integer shape arithmetic,
// data movement on constants, identity folds to the operand, and the cases
// that must stay ops (unknown operands, division by zero, large constants).
//
//===----------------------------------------------------------------------===//

#include "HPCTestUtils.h"

using namespace mlir;
using namespace hpc;
using namespace hpc_test;

namespace {

using HPCFoldTest = HPCTest;

/// The value a folded result holds, printed ("dense<...> : tensor<...>"), or
/// "not folded" when `v` is not produced by an hpc.constant.
std::string folded(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return "not folded";
  return str(constant.getValue());
}

TEST_F(HPCFoldTest, FoldAddOfI64Constants) {
  Value v = builder.createOrFold<AddOp>(loc, i64Constant({2}, {1, 64}),
                                        i64Constant({2}, {3, -4}));
  EXPECT_EQ(folded(v), "dense<[4, 60]> : tensor<2xi64>");
}

TEST_F(HPCFoldTest, FoldBroadcastMul) {
  Value v = builder.createOrFold<MulOp>(loc, i64Constant({2, 1}, {2, 3}),
                                        i64Constant({3}, {1, 10, 100}));
  EXPECT_EQ(folded(v), "dense<[[2, 20, 200], [3, 30, 300]]> : tensor<2x3xi64>");
}

TEST_F(HPCFoldTest, FoldIntegerDivisionAndRemainder) {
  Value a = i64Constant({4}, {7, -7, 7, -7});
  Value b = i64Constant({4}, {2, 2, -2, -2});
  // div truncates toward zero; mod takes the divisor's sign (Python %);
  // fmod takes the dividend's sign (C fmod).
  EXPECT_EQ(folded(builder.createOrFold<DivOp>(loc, a, b)),
            "dense<[3, -3, -3, 3]> : tensor<4xi64>");
  EXPECT_EQ(folded(builder.createOrFold<ModOp>(loc, a, b)),
            "dense<[1, 1, -1, -1]> : tensor<4xi64>");
  EXPECT_EQ(folded(builder.createOrFold<FModOp>(loc, a, b)),
            "dense<[1, -1, 1, -1]> : tensor<4xi64>");
}

TEST_F(HPCFoldTest, NoFoldOfIntegerDivisionByZero) {
  Value v = builder.createOrFold<DivOp>(loc, i64Constant({2}, {1, 2}),
                                        i64Constant({2}, {1, 0}));
  EXPECT_EQ(folded(v), "not folded");
  EXPECT_TRUE(v.getDefiningOp<DivOp>());
}

TEST_F(HPCFoldTest, FoldFloatUnaryAndCompare) {
  Value x = f32Constant({3}, {4.0f, 0.25f, 9.0f});
  EXPECT_EQ(folded(builder.createOrFold<SqrtOp>(loc, x)),
            "dense<[2.000000e+00, 5.000000e-01, 3.000000e+00]> : tensor<3xf32>");
  Value y = f32Constant({3}, {4.0f, 1.0f, 5.0f});
  EXPECT_EQ(folded(builder.createOrFold<GreaterOp>(loc, x, y)),
            "dense<[false, false, true]> : tensor<3xi1>");
}

TEST_F(HPCFoldTest, FoldEqualAndWhere) {
  Value shape = i64Constant({3}, {1, -1, 64});
  Value minusOne = i64Constant({}, {-1});
  Value isMinus = builder.createOrFold<EqualOp>(loc, shape, minusOne);
  EXPECT_EQ(folded(isMinus), "dense<[false, true, false]> : tensor<3xi1>");
  Value v = builder.createOrFold<WhereOp>(loc, isMinus, i64Constant({}, {16}),
                                          shape);
  EXPECT_EQ(folded(v), "dense<[1, 16, 64]> : tensor<3xi64>");
}

TEST_F(HPCFoldTest, FoldCast) {
  Value x = f32Constant({3}, {1.7f, -1.7f, 0.0f});
  EXPECT_EQ(folded(builder.createOrFold<CastOp>(loc, x, builder.getI64Type())),
            "dense<[1, -1, 0]> : tensor<3xi64>");
  EXPECT_EQ(folded(builder.createOrFold<CastOp>(loc, x, builder.getI1Type())),
            "dense<[true, true, false]> : tensor<3xi1>");
  Value i = i64Constant({2}, {3, -2});
  EXPECT_EQ(folded(builder.createOrFold<CastOp>(loc, i, builder.getF32Type())),
            "dense<[3.000000e+00, -2.000000e+00]> : tensor<2xf32>");
}

TEST_F(HPCFoldTest, FoldCastToSameTypeIsOperand) {
  Value x = value({4});
  EXPECT_EQ(builder.createOrFold<CastOp>(loc, x, builder.getF32Type()), x);
}

TEST_F(HPCFoldTest, FoldGatherOfShape) {
  Value shape = i64Constant({3}, {1, 16, 64});
  EXPECT_EQ(folded(builder.createOrFold<GatherOp>(loc, shape,
                                                  i64Constant({}, {1}), 0)),
            "dense<16> : tensor<i64>");
  EXPECT_EQ(folded(builder.createOrFold<GatherOp>(
                loc, shape, i64Constant({2}, {-1, 0}), 0)),
            "dense<[64, 1]> : tensor<2xi64>");
}

TEST_F(HPCFoldTest, FoldGatherAlongInnerAxis) {
  Value x = i64Constant({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(folded(builder.createOrFold<GatherOp>(
                loc, x, i64Constant({2}, {2, 0}), 1)),
            "dense<[[3, 1], [6, 4]]> : tensor<2x2xi64>");
}

TEST_F(HPCFoldTest, NoFoldOfGatherOutOfRange) {
  Value v = builder.createOrFold<GatherOp>(loc, i64Constant({3}, {1, 2, 3}),
                                           i64Constant({}, {3}), 0);
  EXPECT_EQ(folded(v), "not folded");
}

TEST_F(HPCFoldTest, FoldConcat) {
  EXPECT_EQ(folded(builder.createOrFold<ConcatOp>(
                loc, ValueRange{i64Constant({1}, {1}), i64Constant({2}, {2, 3})},
                0)),
            "dense<[1, 2, 3]> : tensor<3xi64>");
  EXPECT_EQ(folded(builder.createOrFold<ConcatOp>(
                loc,
                ValueRange{i64Constant({2, 1}, {1, 2}),
                           i64Constant({2, 2}, {3, 4, 5, 6})},
                1)),
            "dense<[[1, 3, 4], [2, 5, 6]]> : tensor<2x3xi64>");
}

TEST_F(HPCFoldTest, FoldSliceWithNegativeStep) {
  Value x = i64Constant({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(folded(builder.createOrFold<SliceOp>(loc, x, I64s{8}, I64s{1},
                                                 I64s{-3})),
            "dense<[8, 5, 2]> : tensor<3xi64>");
  EXPECT_EQ(folded(builder.createOrFold<SliceOp>(loc, x, I64s{2}, I64s{-1},
                                                 I64s{-1})),
            "dense<[2, 1, 0]> : tensor<3xi64>");
}

TEST_F(HPCFoldTest, FoldTransposeOfConstant) {
  Value x = i64Constant({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(folded(builder.createOrFold<TransposeOp>(loc, x, I64s{1, 0})),
            "dense<[[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>");
}

TEST_F(HPCFoldTest, FoldExpandOfConstant) {
  Value x = i64Constant({2, 1}, {1, 2});
  EXPECT_EQ(folded(builder.createOrFold<ExpandOp>(loc, x, I64s{2, 3})),
            "dense<[[1, 1, 1], [2, 2, 2]]> : tensor<2x3xi64>");
}

TEST_F(HPCFoldTest, FoldReductions) {
  Value x = i64Constant({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(folded(builder.createOrFold<ReduceProdOp>(loc, x, I64s{0, 1}, false)),
            "dense<720> : tensor<i64>");
  EXPECT_EQ(folded(builder.createOrFold<ReduceSumOp>(loc, x, I64s{1}, true)),
            "dense<[[6], [15]]> : tensor<2x1xi64>");
  EXPECT_EQ(folded(builder.createOrFold<ReduceMaxOp>(loc, x, I64s{0}, false)),
            "dense<[4, 5, 6]> : tensor<3xi64>");
}

TEST_F(HPCFoldTest, FoldSqueezeUnsqueezeOfConstant) {
  Value x = i64Constant({1, 2}, {7, 8});
  EXPECT_EQ(folded(builder.createOrFold<SqueezeOp>(loc, x, I64s{0})),
            "dense<[7, 8]> : tensor<2xi64>");
  EXPECT_EQ(folded(builder.createOrFold<UnsqueezeOp>(loc, x, I64s{2})),
            "dense<[[[7], [8]]]> : tensor<1x2x1xi64>");
}

TEST_F(HPCFoldTest, IdentityFoldsReturnTheOperand) {
  Value x = value({2, 3});
  EXPECT_EQ(builder.createOrFold<ReshapeOp>(loc, x, I64s{2, 3}), x);
  EXPECT_EQ(builder.createOrFold<TransposeOp>(loc, x, I64s{0, 1}), x);
  EXPECT_EQ(builder.createOrFold<SliceOp>(loc, x, I64s{0, 0}, I64s{2, 3},
                                          I64s{1, 1}),
            x);
  EXPECT_EQ(builder.createOrFold<ExpandOp>(loc, x, I64s{1, 3}), x);
  EXPECT_EQ(builder.createOrFold<ConcatOp>(loc, ValueRange{x}, 0), x);
}

TEST_F(HPCFoldTest, NoFoldOfUnknownOperand) {
  Value v = builder.createOrFold<AddOp>(loc, value({2}, builder.getI64Type()),
                                        i64Constant({2}, {1, 2}));
  EXPECT_TRUE(v.getDefiningOp<AddOp>());
  Value t = builder.createOrFold<TransposeOp>(loc, value({2, 3}), I64s{1, 0});
  EXPECT_TRUE(t.getDefiningOp<TransposeOp>());
}

TEST_F(HPCFoldTest, NoFoldAboveTheElementLimit) {
  int64_t n = hpc::detail::kMaxFoldElements + 1;
  auto type = tensor({n}, builder.getI64Type());
  Value big = ConstantOp::create(builder, loc,
                                 DenseElementsAttr::get(type, builder.getI64IntegerAttr(1)))
                  .getResult();
  Value v = builder.createOrFold<AddOp>(loc, big, big);
  EXPECT_TRUE(v.getDefiningOp<AddOp>());
  // At the limit it still folds.
  auto small = tensor({hpc::detail::kMaxFoldElements}, builder.getI64Type());
  Value s = ConstantOp::create(builder, loc,
                               DenseElementsAttr::get(small, builder.getI64IntegerAttr(1)))
                .getResult();
  EXPECT_TRUE(builder.createOrFold<AddOp>(loc, s, s).getDefiningOp<ConstantOp>());
}

} // namespace
