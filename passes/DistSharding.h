//===- DistSharding.h - shardings as values, shared by dist passes -*- C++ -*-===//
//
// A plain-value form of #dist.sharding that the propagation and partitioning
// passes edit, with conversions to and from the attribute.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_PASSES_DISTSHARDING_H
#define HPC_PASSES_DISTSHARDING_H

#include "Dist/DistOps.h"
#include "HPC/HPCOps.h"

#include "mlir/IR/Builders.h"

#include <string>
#include <vector>

namespace hpc::dist {

struct Sharding {
  /// Mesh axes per tensor dimension, major to minor.
  std::vector<std::vector<std::string>> dims;
  /// Axes holding partial sums.
  std::vector<std::string> partial;

  static Sharding replicated(int64_t rank) {
    Sharding s;
    s.dims.resize(rank);
    return s;
  }
  static Sharding fromAttr(ShardingAttr attr) {
    Sharding s;
    for (unsigned d = 0; d < attr.getDims().size(); ++d) {
      s.dims.emplace_back();
      for (llvm::StringRef a : attr.axesOf(d))
        s.dims.back().push_back(a.str());
    }
    for (mlir::StringAttr a : attr.getPartial())
      s.partial.push_back(a.str());
    return s;
  }
  ShardingAttr toAttr(mlir::MLIRContext *ctx) const {
    mlir::Builder b(ctx);
    llvm::SmallVector<mlir::ArrayAttr> d;
    for (const auto &axes : dims) {
      llvm::SmallVector<mlir::Attribute> names;
      for (const auto &a : axes)
        names.push_back(b.getStringAttr(a));
      d.push_back(b.getArrayAttr(names));
    }
    llvm::SmallVector<mlir::StringAttr> p;
    for (const auto &a : partial)
      p.push_back(b.getStringAttr(a));
    return ShardingAttr::get(ctx, d, p, ReductionKind::sum);
  }
  bool operator==(const Sharding &o) const {
    return dims == o.dims && partial == o.partial;
  }
  bool isReplicated() const {
    if (!partial.empty())
      return false;
    for (const auto &a : dims)
      if (!a.empty())
        return false;
    return true;
  }
};

/// Product of the sizes of `axes` in `mesh`.
inline int64_t groupOf(MeshAttr mesh, const std::vector<std::string> &axes) {
  int64_t g = 1;
  for (const auto &a : axes)
    g *= mesh.getSizes()[mesh.axisIndex(a)];
  return g;
}

/// The mesh axes that split the batch, major to minor: dp, then ep (expert
/// parallelism is data parallelism for all but the experts); those of more
/// than one rank.
inline std::vector<std::string> dataAxes(MeshAttr mesh) {
  std::vector<std::string> axes;
  for (llvm::StringRef a : {"dp", "ep"})
    if (int64_t i = mesh.axisIndex(a); i >= 0 && mesh.getSizes()[i] > 1)
      axes.push_back(a.str());
  return axes;
}

/// Parses a --mesh spec ("dp=2,tp=4:intra"); `error` says what is wrong.
mlir::FailureOr<MeshAttr> parseMesh(mlir::MLIRContext *ctx, llvm::StringRef text,
                                    std::string &error);

/// The sharding a ZeRO pass gave a training state variable (its `dist.sharding`
/// attribute), if any.
inline ShardingAttr shardingOfVariable(mlir::Operation *op) {
  return op->getAttrOfType<ShardingAttr>("dist.sharding");
}

/// The gradient an update's grad operand was computed from: through the
/// clipping multiply by a scalar (hpc-optimizer's clip_grad_norm_).
inline mlir::Value rawGradient(mlir::Value grad) {
  while (auto mul = grad.getDefiningOp<hpc::MulOp>()) {
    mlir::Value next;
    for (auto [a, b] : {std::pair(mul.getLhs(), mul.getRhs()),
                        std::pair(mul.getRhs(), mul.getLhs())})
      if (a.getType() == grad.getType() &&
          mlir::cast<mlir::RankedTensorType>(b.getType()).getRank() == 0)
        next = a;
    if (!next)
      break;
    grad = next;
  }
  return grad;
}

/// Annotates an optimizer update's gradient: where the backward pass
/// finishes it (`finished`: the reduction happens there, so it can overlap
/// the rest of the backward pass) and as the update reads it, after the
/// clipping multiply (`read`). Used by dist-zero and by dist-propagate's
/// tensor-parallel state.
inline void annotateUpdateGradient(mlir::Operation *update, ShardingAttr finished,
                                   ShardingAttr read) {
  mlir::Value raw = rawGradient(update->getOperand(1));
  mlir::OpBuilder b(update);
  if (mlir::Operation *def = raw.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(update->getBlock());
  auto reduced = AnnotateOp::create(b, update->getLoc(), raw.getType(), raw, finished);
  raw.replaceAllUsesExcept(reduced.getResult(), reduced);
  b.setInsertionPoint(update);
  mlir::Value grad = update->getOperand(1);
  update->setOperand(1, AnnotateOp::create(b, update->getLoc(), grad.getType(), grad, read));
}

} // namespace hpc::dist

#endif // HPC_PASSES_DISTSHARDING_H
