//===- DistOps.cpp - dist op verifiers ------------------------------------===//
//
// Collectives are checked against the mesh of the enclosing module: the axes
// exist and are not repeated, split dimensions divide by the group size, and
// the result (or the token's payload) has exactly the shape the collective
// produces from its operand.
//
//===----------------------------------------------------------------------===//

#include "Dist/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace hpc::dist;

MeshAttr hpc::dist::lookupMesh(Operation *op) {
  for (Operation *p = op; p; p = p->getParentOp())
    if (auto mesh = p->getAttrOfType<MeshAttr>("dist.mesh"))
      return mesh;
  return {};
}

int64_t hpc::dist::groupSize(MeshAttr mesh, ArrayRef<StringRef> axes) {
  int64_t g = 1;
  for (StringRef a : axes)
    g *= mesh.getSizes()[mesh.axisIndex(a)];
  return g;
}

int64_t hpc::dist::bytesOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  int64_t bits = t.getElementType().isInteger(1) ? 8 : t.getElementTypeBitWidth();
  return t.getNumElements() * bits / 8;
}

/// Axis names of a collective's `axes` attribute.
static SmallVector<StringRef> axesOf(ArrayAttr axes) {
  SmallVector<StringRef> names;
  for (Attribute a : axes)
    names.push_back(cast<StringAttr>(a).getValue());
  return names;
}

/// Ring all_reduce of n elements over g ranks, from rank 0: g-1
/// reduce-scatter steps then g-1 all-gather steps, one chunk each (chunk i
/// has n/g elements, one more for i < n%g).
static int64_t ringAllReduceBytes(int64_t n, int64_t g, int64_t elementBytes) {
  auto chunk = [&](int64_t i) { return n / g + (i < n % g ? 1 : 0); };
  int64_t elements = 0;
  for (int64_t s = 0; s < g - 1; ++s)
    elements += chunk(((0 - s) % g + g) % g) + chunk(((1 - s) % g + g) % g);
  return elements * elementBytes;
}

/// Bytes for a collective in either form (`Op` sync, `StartOp` async).
template <typename Op, typename StartOp, typename F>
static std::optional<int64_t> either(Operation *op, F &&bytes) {
  if (auto o = dyn_cast<Op>(op))
    return bytes(o, o.getResult().getType());
  if (auto o = dyn_cast<StartOp>(op))
    return bytes(o, cast<TokenType>(o.getToken().getType()).getPayload());
  return std::nullopt;
}

int64_t hpc::dist::bytesSentByRankZeroIn(Operation *root) {
  int64_t bytes = 0;
  root->walk([&](Operation *op) { bytes += bytesSentByRankZero(op); });
  return bytes;
}

int64_t hpc::dist::bytesSentByRankZero(Operation *op) {
  MeshAttr mesh = lookupMesh(op);
  if (!mesh)
    return 0;
  auto group = [&](ArrayAttr axes) { return groupSize(mesh, axesOf(axes)); };
  auto result = [&](auto o, Type resultType) -> std::optional<int64_t> {
    using T = decltype(o);
    Type in = o.getInput().getType();
    if constexpr (std::is_same_v<T, AllReduceOp> || std::is_same_v<T, AllReduceStartOp>) {
      auto t = cast<RankedTensorType>(in);
      int64_t n = t.getNumElements();
      return ringAllReduceBytes(n, group(o.getAxes()), n ? bytesOf(t) / n : 0);
    } else if constexpr (std::is_same_v<T, ReduceScatterOp> ||
                         std::is_same_v<T, ReduceScatterStartOp>) {
      return (group(o.getAxes()) - 1) * bytesOf(resultType);
    } else if constexpr (std::is_same_v<T, AllGatherOp> ||
                         std::is_same_v<T, AllGatherStartOp>) {
      return (group(o.getAxes()) - 1) * bytesOf(in);
    } else if constexpr (std::is_same_v<T, AllToAllOp> ||
                         std::is_same_v<T, AllToAllStartOp>) {
      int64_t g = group(o.getAxes());
      return (g - 1) * bytesOf(in) / g;
    } else {
      // Broadcast: a chain root, root+1, ...; everyone but the last forwards.
      int64_t g = group(o.getAxes());
      bool last = g > 1 && (g - int64_t(o.getRoot())) % g == g - 1;
      return g > 1 && !last ? bytesOf(in) : 0;
    }
  };
  for (auto bytes : {either<AllReduceOp, AllReduceStartOp>(op, result),
                     either<ReduceScatterOp, ReduceScatterStartOp>(op, result),
                     either<AllGatherOp, AllGatherStartOp>(op, result),
                     either<AllToAllOp, AllToAllStartOp>(op, result),
                     either<BroadcastOp, BroadcastStartOp>(op, result)})
    if (bytes)
      return *bytes;
  // A send from coordinates 0 reaches a peer only forwards.
  auto sent = [&](StringRef axis, int64_t offset, Value input) -> int64_t {
    int64_t size = mesh.getSizes()[mesh.axisIndex(axis)];
    return offset > 0 && offset < size ? bytesOf(input.getType()) : 0;
  };
  if (auto o = dyn_cast<SendOp>(op))
    return sent(o.getAxis(), o.getOffset(), o.getInput());
  if (auto o = dyn_cast<SendStartOp>(op))
    return sent(o.getAxis(), o.getOffset(), o.getInput());
  return 0;
}

static std::string joined(ArrayRef<StringRef> axes) {
  std::string s;
  for (StringRef a : axes)
    s += (s.empty() ? "" : ", ") + a.str();
  return s;
}

LogicalResult hpc::dist::verifySharding(function_ref<InFlightDiagnostic()> emitError,
                                        ShardingAttr sharding, RankedTensorType type,
                                        MeshAttr mesh) {
  if (static_cast<int64_t>(sharding.getDims().size()) != type.getRank())
    return emitError() << "sharding has " << sharding.getDims().size()
                       << " dimension entries for a tensor of rank " << type.getRank();
  auto known = [&](StringRef axis) -> LogicalResult {
    if (mesh.axisIndex(axis) < 0)
      return emitError() << "mesh axis '" << axis << "' is not in the mesh " << mesh;
    return success();
  };
  for (int64_t d = 0; d < type.getRank(); ++d) {
    SmallVector<StringRef> axes = sharding.axesOf(d);
    for (StringRef a : axes)
      if (failed(known(a)))
        return failure();
    int64_t g = groupSize(mesh, axes);
    int64_t size = type.getDimSize(d);
    if (!ShapedType::isDynamic(size) && size % g != 0)
      return emitError() << "dimension " << d << " of size " << size
                         << " is not divisible by " << g << " (mesh axes "
                         << joined(axes) << ")";
  }
  for (StringAttr a : sharding.getPartial())
    if (failed(known(a.getValue())))
      return failure();
  return success();
}

/// The mesh of `op`, or an error saying one is needed.
static FailureOr<MeshAttr> meshFor(Operation *op) {
  if (MeshAttr mesh = lookupMesh(op))
    return mesh;
  return op->emitOpError("needs a #dist.mesh in a 'dist.mesh' attribute of an "
                         "enclosing op (the module)");
}

LogicalResult AnnotateOp::verify() {
  auto mesh = meshFor(*this);
  if (failed(mesh))
    return failure();
  return verifySharding([&] { return emitOpError(); }, getSharding(),
                        getInput().getType(), *mesh);
}

LogicalResult ReshardOp::verify() {
  auto mesh = meshFor(*this);
  if (failed(mesh))
    return failure();
  auto type = getInput().getType();
  if (failed(verifySharding([&] { return emitOpError("source "); }, getFrom(), type, *mesh)) ||
      failed(verifySharding([&] { return emitOpError("target "); }, getTo(), type, *mesh)))
    return failure();
  return success();
}

/// Kinds of collective, for the shared verifier.
enum class Kind { AllReduce, ReduceScatter, AllGather, AllToAll, Broadcast };

/// Verifies a collective: axes, attributes, and that `result` (the result
/// type, or the token payload) is what the collective makes of `input`.
static LogicalResult verifyCollective(Operation *op, Kind kind, Type inputType,
                                      ArrayAttr axesAttr, Type result,
                                      int64_t dim = 0, int64_t dim2 = 0) {
  auto mesh = meshFor(op);
  if (failed(mesh))
    return failure();
  SmallVector<StringRef> axes;
  llvm::SmallSet<StringRef, 4> seen;
  for (Attribute a : axesAttr) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (mesh->axisIndex(name) < 0)
      return op->emitOpError("mesh axis '") << name << "' is not in the mesh " << *mesh;
    if (!seen.insert(name).second)
      return op->emitOpError("mesh axis '") << name << "' is repeated";
    axes.push_back(name);
  }
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  int64_t g = groupSize(*mesh, axes);
  auto in = cast<RankedTensorType>(inputType);
  auto out = dyn_cast_or_null<RankedTensorType>(result);
  if (!out)
    return op->emitOpError("token must carry the result tensor type");
  if (in.getElementType() != out.getElementType())
    return op->emitOpError("result element type ")
           << out.getElementType() << " differs from the operand's "
           << in.getElementType();
  SmallVector<int64_t> expected(in.getShape());
  auto checkDim = [&](int64_t d, StringRef what) -> LogicalResult {
    if (d < 0 || d >= in.getRank())
      return op->emitOpError(what) << " " << d << " is out of range for rank " << in.getRank();
    return success();
  };
  auto divide = [&](int64_t d) -> LogicalResult {
    if (!ShapedType::isDynamic(expected[d]) && expected[d] % g != 0)
      return op->emitOpError("dimension ")
             << d << " of size " << expected[d] << " is not divisible by the group size "
             << g << " (mesh axes " << joined(axes) << ")";
    if (!ShapedType::isDynamic(expected[d]))
      expected[d] /= g;
    return success();
  };
  switch (kind) {
  case Kind::AllReduce:
    break;
  case Kind::Broadcast:
    if (dim < 0 || dim >= g)
      return op->emitOpError("root ") << dim << " is not a rank of the group of " << g;
    break;
  case Kind::ReduceScatter:
    if (failed(checkDim(dim, "dim")) || failed(divide(dim)))
      return failure();
    break;
  case Kind::AllGather:
    if (failed(checkDim(dim, "dim")))
      return failure();
    if (!ShapedType::isDynamic(expected[dim]))
      expected[dim] *= g;
    break;
  case Kind::AllToAll:
    if (failed(checkDim(dim, "split dim")) || failed(checkDim(dim2, "concat dim")) ||
        failed(divide(dim)))
      return failure();
    if (!ShapedType::isDynamic(expected[dim2]))
      expected[dim2] *= g;
    break;
  }
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("result type ")
           << out << " does not match the expected "
           << RankedTensorType::get(expected, in.getElementType());
  return success();
}

static Type payload(Value token) { return cast<TokenType>(token.getType()).getPayload(); }

LogicalResult AllReduceOp::verify() {
  return verifyCollective(*this, Kind::AllReduce, getInput().getType(), getAxes(), getType());
}
LogicalResult AllReduceStartOp::verify() {
  return verifyCollective(*this, Kind::AllReduce, getInput().getType(), getAxes(),
                          payload(getToken()));
}
LogicalResult ReduceScatterOp::verify() {
  return verifyCollective(*this, Kind::ReduceScatter, getInput().getType(), getAxes(),
                          getType(), getDim());
}
LogicalResult ReduceScatterStartOp::verify() {
  return verifyCollective(*this, Kind::ReduceScatter, getInput().getType(), getAxes(),
                          payload(getToken()), getDim());
}
LogicalResult AllGatherOp::verify() {
  return verifyCollective(*this, Kind::AllGather, getInput().getType(), getAxes(),
                          getType(), getDim());
}
LogicalResult AllGatherStartOp::verify() {
  return verifyCollective(*this, Kind::AllGather, getInput().getType(), getAxes(),
                          payload(getToken()), getDim());
}
LogicalResult AllToAllOp::verify() {
  return verifyCollective(*this, Kind::AllToAll, getInput().getType(), getAxes(),
                          getType(), getSplitDim(), getConcatDim());
}
LogicalResult AllToAllStartOp::verify() {
  return verifyCollective(*this, Kind::AllToAll, getInput().getType(), getAxes(),
                          payload(getToken()), getSplitDim(), getConcatDim());
}
LogicalResult BroadcastOp::verify() {
  return verifyCollective(*this, Kind::Broadcast, getInput().getType(), getAxes(),
                          getType(), getRoot());
}
LogicalResult BroadcastStartOp::verify() {
  return verifyCollective(*this, Kind::Broadcast, getInput().getType(), getAxes(),
                          payload(getToken()), getRoot());
}

LogicalResult AllSliceOp::verify() {
  // Same shape rule as reduce_scatter: the dimension divides by the group.
  return verifyCollective(*this, Kind::ReduceScatter, getInput().getType(), getAxes(),
                          getType(), getDim());
}

/// Point-to-point: the axis exists and the offset reaches another rank.
static LogicalResult verifyPeer(Operation *op, StringRef axis, int64_t offset) {
  auto mesh = meshFor(op);
  if (failed(mesh))
    return failure();
  int64_t index = mesh->axisIndex(axis);
  if (index < 0)
    return op->emitOpError("mesh axis '") << axis << "' is not in the mesh " << *mesh;
  int64_t size = mesh->getSizes()[index];
  if (offset == 0 || offset <= -size || offset >= size)
    return op->emitOpError("offset ")
           << offset << " does not reach another rank along axis '" << axis
           << "' of size " << size;
  return success();
}

LogicalResult SendOp::verify() { return verifyPeer(*this, getAxis(), getOffset()); }

LogicalResult SendStartOp::verify() {
  if (payload(getToken()))
    return emitOpError("token of a send carries no payload");
  return verifyPeer(*this, getAxis(), getOffset());
}

LogicalResult RecvOp::verify() { return verifyPeer(*this, getAxis(), getOffset()); }

LogicalResult RecvStartOp::verify() {
  if (!isa_and_nonnull<RankedTensorType>(payload(getToken())))
    return emitOpError("token of a recv must carry the received tensor type");
  return verifyPeer(*this, getAxis(), getOffset());
}

LogicalResult WaitOp::verify() {
  Type p = payload(getToken());
  if (!p) {
    if (getResult())
      return emitOpError("token carries no payload, so wait has no result");
    return success();
  }
  if (!getResult() || getResult().getType() != p)
    return emitOpError("result must be the token's payload ") << p;
  return success();
}

//===----------------------------------------------------------------------===//
// Folders: collectives that undo each other
//===----------------------------------------------------------------------===//

/// all_gather(all_slice(x)) and all_slice(all_gather(x)) over the same axes
/// and dimension give x back.
template <typename Inner, typename Outer>
static OpFoldResult foldInverse(Outer op) {
  auto inner = op.getInput().template getDefiningOp<Inner>();
  if (!inner || inner.getAxes() != op.getAxes() || inner.getDim() != op.getDim() ||
      inner.getInput().getType() != op.getType())
    return {};
  // Not when something wrote the piece in between (a ZeRO update of this
  // rank's rows, gathered back).
  for (Operation *user : inner.getResult().getUsers())
    if (user != op.getOperation() && !isMemoryEffectFree(user))
      return {};
  return inner.getInput();
}

/// A collective over a group of one rank (no axes, or axes of size 1)
/// leaves its operand as it is.
template <typename Op>
static OpFoldResult foldSingleRank(Op op) {
  MeshAttr mesh = lookupMesh(op);
  if (!mesh || op.getInput().getType() != op.getType())
    return {};
  for (Attribute a : op.getAxes()) {
    int64_t index = mesh.axisIndex(cast<StringAttr>(a).getValue());
    if (index < 0 || mesh.getSizes()[index] != 1)
      return {};
  }
  return op.getInput();
}

OpFoldResult AllGatherOp::fold(FoldAdaptor) {
  if (OpFoldResult r = foldSingleRank(*this))
    return r;
  return foldInverse<AllSliceOp>(*this);
}
OpFoldResult AllSliceOp::fold(FoldAdaptor) {
  if (OpFoldResult r = foldSingleRank(*this))
    return r;
  return foldInverse<AllGatherOp>(*this);
}
OpFoldResult AllReduceOp::fold(FoldAdaptor) { return foldSingleRank(*this); }
OpFoldResult ReduceScatterOp::fold(FoldAdaptor) { return foldSingleRank(*this); }
OpFoldResult AllToAllOp::fold(FoldAdaptor) { return foldSingleRank(*this); }
OpFoldResult BroadcastOp::fold(FoldAdaptor) { return foldSingleRank(*this); }

#define GET_OP_CLASSES
#include "Dist/DistOps.cpp.inc"
