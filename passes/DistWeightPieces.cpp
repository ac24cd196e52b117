//===- DistWeightPieces.cpp - store the pieces of weights a rank reads ---===//
//
// A per-rank program reads pieces of its weights: dist-partition takes a
// rank's piece with dist.all_slice, and unfusing QKV projections takes each
// projection out of the fused weight with hpc.slice. Both were copies on
// every run. This pass moves them to compile time:
//
//  - a weight read only through static hpc.slice ops becomes one weight per
//    slice, holding the slice's data;
//  - a weight read only through all_slice ops of one split (same axes, same
//    dim) is stored piece-major, tensor<G x piece>, and each all_slice takes
//    row 0..G-1 of it (its outermost dimension, which the runtime plans as a
//    view at a rank-dependent offset, not a copy), reshaped to the piece.
//
// The original weight goes away, so the weights data keeps its size when the
// slices partition it (QKV) and always for piece-major storage. Slices of
// weights in a single-rank program are stored the same way.
//
//===----------------------------------------------------------------------===//

#include "Dist/DistOps.h"
#include "HPC/HPCOps.h"
#include "hpc/Passes.h"
#include "hpc/Target/ProgramPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace hpc {
#define GEN_PASS_DEF_DISTWEIGHTPIECES
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

/// New data of `type` for a piece of `w`: a splat stays a splat, else the
/// bytes `bytes` makes.
ElementsAttr pieceData(hpc::WeightOp w, RankedTensorType type, StringRef name,
                       llvm::function_ref<std::string()> bytes) {
  if (auto dense = dyn_cast<DenseElementsAttr>(*w.getValue()); dense && dense.isSplat())
    return dense.resizeSplat(type);
  std::string data = bytes();
  return hpc::elementsFromBytes(type, name, ArrayRef<char>(data.data(), data.size()));
}

/// The data of a weight the pass can rearrange: a non-bool weight with data.
FailureOr<std::string> rearrangeableBytes(hpc::WeightOp w) {
  auto type = cast<RankedTensorType>(w.getType());
  if (!w.getValue() || type.getElementType().isInteger(1) ||
      type.getElementTypeBitWidth() % 8 != 0)
    return failure();
  return hpc::elementBytesOf(*w.getValue());
}

std::string boxName(ArrayRef<int64_t> starts, ArrayRef<int64_t> steps, ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ",";
    // The end is one step past the last element taken, as ONNX writes it.
    int64_t end = shape[i] ? starts[i] + (shape[i] - 1) * steps[i] + (steps[i] > 0 ? 1 : -1)
                           : starts[i];
    s += std::to_string(starts[i]) + ":" + std::to_string(end);
    if (steps[i] != 1)
      s += ":" + std::to_string(steps[i]);
  }
  return s + "]";
}

/// A weight read only through hpc.slice: one weight per slice (appended to
/// `pieces`).
bool splitSlicedWeight(hpc::WeightOp w, SmallVectorImpl<hpc::WeightOp> &pieces) {
  if (w->use_empty() ||
      !llvm::all_of(w->getUsers(), [](Operation *u) { return isa<hpc::SliceOp>(u); }))
    return false;
  auto data = rearrangeableBytes(w);
  if (failed(data))
    return false;
  auto type = cast<RankedTensorType>(w.getType());
  if (!type.hasStaticShape() || llvm::any_of(w->getUsers(), [](Operation *u) {
        return !cast<RankedTensorType>(u->getResult(0).getType()).hasStaticShape();
      }))
    return false;
  int64_t eltBytes = type.getElementTypeBitWidth() / 8;
  OpBuilder b(w);
  for (Operation *user : llvm::make_early_inc_range(w->getUsers())) {
    auto slice = cast<hpc::SliceOp>(user);
    auto result = cast<RankedTensorType>(slice.getType());
    std::string name = w.getName().str() +
                       boxName(slice.getStarts(), slice.getSteps(), result.getShape());
    auto piece = hpc::WeightOp::create(
        b, w.getLoc(), result, b.getStringAttr(name), pieceData(w, result, name, [&] {
          return hpc::sliceBytes(*data, type.getShape(), eltBytes, slice.getStarts(),
                            slice.getSteps(), result.getShape());
        }));
    slice.replaceAllUsesWith(piece.getResult());
    slice.erase();
    pieces.push_back(piece);
  }
  w.erase();
  return true;
}

/// A weight read only through all_slice ops of one split: stored piece-major.
bool storePieceMajor(hpc::WeightOp w) {
  if (w->use_empty())
    return false;
  hpc::dist::AllSliceOp first;
  for (Operation *user : w->getUsers()) {
    auto s = dyn_cast<hpc::dist::AllSliceOp>(user);
    if (!s)
      return false;
    if (!first)
      first = s;
    else if (s.getAxes() != first.getAxes() || s.getDim() != first.getDim())
      return false;
  }
  auto type = cast<RankedTensorType>(w.getType());
  auto piece = cast<RankedTensorType>(first.getType());
  int64_t dim = first.getDim();
  // Along the outermost dimension a piece is contiguous already.
  if (llvm::all_of(type.getShape().take_front(dim), [](int64_t d) { return d == 1; }))
    return false;
  auto data = rearrangeableBytes(w);
  if (failed(data) || !type.hasStaticShape() || !piece.hasStaticShape())
    return false;
  int64_t length = piece.getDimSize(dim);
  int64_t groups = type.getDimSize(dim) / length;
  int64_t eltBytes = type.getElementTypeBitWidth() / 8;
  auto pieceMajor = [&] {
    return hpc::pieceMajorBytes(*data, type.getShape(), eltBytes, dim, groups);
  };
  SmallVector<int64_t> majorShape{groups};
  llvm::append_range(majorShape, piece.getShape());
  auto majorType = RankedTensorType::get(majorShape, type.getElementType());
  SmallVector<int64_t> rowShape{1};
  llvm::append_range(rowShape, piece.getShape());
  auto rowType = RankedTensorType::get(rowShape, type.getElementType());

  OpBuilder b(w);
  auto major = hpc::WeightOp::create(b, w.getLoc(), majorType, w.getNameAttr(),
                                     pieceData(w, majorType, w.getName(), pieceMajor));
  // Say how it is laid out, for whoever reads the weights by name.
  major->setAttr("dist.pieces_of", b.getDictionaryAttr(
                                        {b.getNamedAttr("shape", b.getDenseI64ArrayAttr(type.getShape())),
                                         b.getNamedAttr("dim", b.getI64IntegerAttr(dim))}));
  for (Operation *user : llvm::make_early_inc_range(w->getUsers())) {
    auto s = cast<hpc::dist::AllSliceOp>(user);
    b.setInsertionPoint(s);
    auto row = hpc::dist::AllSliceOp::create(b, s.getLoc(), rowType, major.getResult(),
                                             s.getAxes(), b.getI64IntegerAttr(0));
    auto local = hpc::ReshapeOp::create(b, s.getLoc(), piece, row.getResult(),
                                        b.getDenseI64ArrayAttr(piece.getShape()));
    s.replaceAllUsesWith(local.getResult());
    s.erase();
  }
  w.erase();
  return true;
}

struct DistWeightPieces : hpc::impl::DistWeightPiecesBase<DistWeightPieces> {
  void runOnOperation() override {
    SmallVector<hpc::WeightOp> weights;
    getOperation().walk([&](hpc::WeightOp w) { weights.push_back(w); });
    // Slices first: the weights they make may be read through all_slice.
    SmallVector<hpc::WeightOp> next;
    for (hpc::WeightOp w : weights)
      if (!splitSlicedWeight(w, next))
        next.push_back(w);
    for (hpc::WeightOp w : next)
      storePieceMajor(w);
  }
};

} // namespace
