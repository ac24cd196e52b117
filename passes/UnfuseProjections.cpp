//===- UnfuseProjections.cpp - one projection per piece of a split --------===//
//
// Exporters fuse the Q, K and V projections of attention into one product by
// a [d, 3d] weight whose result is split three ways. Tensor parallelism
// splits a projection's output features over tp; split afterwards, each
// rank's contiguous part would hold all of Q and half of K, so the split
// would need the whole result on every rank (an all-gather, and attention
// run whole by every rank). One projection per piece, each on its own part
// of the weight, splits each of Q, K and V by heads instead (Megatron-LM's
// layout), and attention runs on each rank's heads.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"

#include "HPC/HPCOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace hpc {
#define GEN_PASS_DEF_HPCUNFUSESPLITPROJECTIONS
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

RankedTensorType withDim(Type t, int64_t dim, int64_t size) {
  auto rt = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(rt.getShape());
  shape[dim < 0 ? dim + rt.getRank() : dim] = size;
  return RankedTensorType::get(shape, rt.getElementType());
}

/// `v`'s pieces of `sizes` along `dim`: static slices (dist-weight-pieces
/// stores each as a weight of its own), or one hpc.split (whose gradient is
/// one concat, where slices' would be a zero-padded copy per piece, summed).
SmallVector<Value> piecesOf(OpBuilder &b, Location loc, Value v, int64_t dim,
                            ArrayRef<int64_t> sizes, bool bySplit) {
  auto vt = cast<RankedTensorType>(v.getType());
  SmallVector<Type> types;
  for (int64_t size : sizes)
    types.push_back(withDim(vt, dim, size));
  if (bySplit) {
    auto split = hpc::SplitOp::create(b, loc, types, v, b.getI64IntegerAttr(dim),
                                      b.getDenseI64ArrayAttr(sizes));
    return SmallVector<Value>(split.getResults());
  }
  SmallVector<Value> pieces;
  int64_t begin = 0;
  for (auto [size, type] : llvm::zip(sizes, types)) {
    SmallVector<int64_t> starts(vt.getRank(), 0), ends(vt.getShape());
    starts[dim] = begin;
    ends[dim] = begin + size;
    pieces.push_back(hpc::SliceOp::create(
                         b, loc, type, v, b.getDenseI64ArrayAttr(starts),
                         b.getDenseI64ArrayAttr(ends),
                         b.getDenseI64ArrayAttr(SmallVector<int64_t>(vt.getRank(), 1)))
                         .getResult());
    begin += size;
  }
  return pieces;
}

struct UnfuseSplitProjections
    : hpc::impl::HPCUnfuseSplitProjectionsBase<UnfuseSplitProjections> {
  using Base::Base;
  void runOnOperation() override {
    getOperation().walk(
        [&](func::FuncOp f) { hpc::unfuseSplitProjections(f, /*splitWeights=*/true); });
  }
};

} // namespace

void hpc::unfuseSplitProjections(func::FuncOp func, bool splitWeights) {
  SmallVector<hpc::SplitOp> splits;
  func.walk([&](hpc::SplitOp op) { splits.push_back(op); });
  for (hpc::SplitOp split : splits) {
    std::optional<hpc::SplitProjection> p = hpc::matchSplitProjection(split);
    if (!p)
      continue;
    OpBuilder b(split);
    Location loc = split.getLoc();
    ArrayRef<int64_t> sizes = split.getSizes();
    SmallVector<Value> weights =
        piecesOf(b, loc, p->weight, p->transposed ? 0 : 1, sizes, splitWeights);
    SmallVector<Value> biases;
    if (p->bias)
      biases = piecesOf(b, loc, p->bias, 0, sizes, splitWeights);
    for (auto [i, size] : llvm::enumerate(sizes)) {
      Operation *piece = b.clone(*p->op);
      piece->setOperand(1, weights[i]);
      if (p->bias && isa<hpc::GemmOp>(p->op))
        piece->setOperand(2, biases[i]);
      piece->getResult(0).setType(withDim(p->op->getResult(0).getType(), -1, size));
      Value out = piece->getResult(0);
      if (p->add) {
        out = p->add.getLhs() == p->op->getResult(0)
                  ? hpc::AddOp::create(b, loc, out.getType(), out, biases[i]).getResult()
                  : hpc::AddOp::create(b, loc, out.getType(), biases[i], out).getResult();
      }
      if (p->reshape) {
        auto rt = withDim(p->reshape.getType(), -1, size);
        out = hpc::ReshapeOp::create(b, loc, rt, out, b.getDenseI64ArrayAttr(rt.getShape()))
                  .getResult();
      }
      split.getResult(i).replaceAllUsesWith(out);
    }
    split.erase();
    if (p->reshape)
      p->reshape.erase();
    if (p->add)
      p->add.erase();
    p->op->erase();
  }
}
