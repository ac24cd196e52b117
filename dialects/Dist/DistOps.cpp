//===- DistOps.cpp - dist op verifiers ------------------------------------===//
//
// Collectives are checked against the mesh of the enclosing module: the axes
// exist and are not repeated, split dimensions divide by the group size, and
// the result (or the token's payload) has exactly the shape the collective
// produces from its operand.
//
//===----------------------------------------------------------------------===//

#include "Dist/DistOps.h"

#include "common/Codecs.h"

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

SmallVector<StringRef> hpc::dist::axisNames(ArrayAttr axes) {
  SmallVector<StringRef> names;
  for (Attribute a : axes)
    names.push_back(cast<StringAttr>(a).getValue());
  return names;
}

/// Ring all_reduce over g members whose chunk c has chunk(c) elements,
/// from member i: g-1 reduce-scatter steps sending chunk i-s, then g-1
/// all-gather steps sending chunk i-s+1, as MpiComm's ring passes send.
template <typename Chunk>
static int64_t ringAllReduceBytes(int64_t g, int64_t elementBytes, int64_t i, Chunk chunk) {
  auto mod = [&](int64_t a) { return ((a % g) + g) % g; };
  int64_t elements = 0;
  for (int64_t s = 0; s < g - 1; ++s)
    elements += chunk(mod(i - s)) + chunk(mod(i - s + 1));
  return elements * elementBytes;
}

/// Chunk c of n values split over g members (MpiComm's chunkSize): n/g,
/// one more for c < n%g.
static int64_t chunkOf(int64_t n, int64_t g, int64_t c) { return n / g + (c < n % g ? 1 : 0); }

/// The ring all_reduce of n elements in even chunks.
static int64_t ringAllReduceBytes(int64_t n, int64_t g, int64_t elementBytes, int64_t i) {
  return ringAllReduceBytes(g, elementBytes, i, [&](int64_t c) { return chunkOf(n, g, c); });
}

SmallVector<CodecPiece> hpc::dist::powerSgdPieces(PowerSgdAttr codec, RankedTensorType input) {
  SmallVector<CodecPiece> pieces;
  for (auto [r, c] : llvm::zip(codec.getRows(), codec.getCols()))
    pieces.push_back({r, c});
  if (pieces.empty() && input.getRank() >= 1) {
    int64_t rows = input.getDimSize(0);
    pieces.push_back({rows, rows ? input.getNumElements() / rows : 0});
  }
  return pieces;
}

SmallVector<int64_t> hpc::dist::powerSgdChunks(ArrayRef<CodecPiece> pieces, int64_t L) {
  SmallVector<int64_t> prefix{0};
  for (const CodecPiece &p : pieces)
    prefix.push_back(prefix.back() + p.size());
  const int64_t P = int64_t(pieces.size()), total = prefix.back();
  SmallVector<int64_t> bounds{0};
  for (int64_t j = 1; j < L; ++j) {
    // The boundary nearest j/L of the values: |prefix * L - j * total| least.
    int64_t best = bounds.back();
    auto off = [&](int64_t b) { return std::abs(prefix[b] * L - j * total); };
    for (int64_t b = best + 1; b <= P; ++b)
      if (off(b) < off(best))
        best = b;
    bounds.push_back(best);
  }
  bounds.push_back(P);
  return bounds;
}

PowerSgdSums hpc::dist::powerSgdSums(ArrayRef<CodecPiece> pieces, int64_t begin, int64_t end,
                                     int64_t rank) {
  PowerSgdSums sums;
  for (const CodecPiece &p : pieces.slice(begin, end - begin)) {
    sums.first += p.isMatrix() ? p.rows * rank : p.rows;
    sums.second += p.isMatrix() ? p.cols * rank : 0;
  }
  return sums;
}

/// PowerSGD's state for pieces [begin, end): each matrix's Q, then with
/// error feedback each matrix's residual.
static int64_t powerSgdState(ArrayRef<CodecPiece> pieces, int64_t begin, int64_t end,
                             int64_t rank, bool feedback) {
  int64_t n = 0;
  for (const CodecPiece &p : pieces.slice(begin, end - begin))
    if (p.isMatrix())
      n += p.cols * rank + (feedback ? p.rows * p.cols : 0);
  return n;
}

/// Mesh axis indices of a collective's `axes` attribute.
static SmallVector<int64_t> axisIndices(MeshAttr mesh, ArrayAttr axes) {
  SmallVector<int64_t> out;
  for (Attribute a : axes)
    out.push_back(mesh.axisIndex(cast<StringAttr>(a).getValue()));
  return out;
}

SmallVector<int64_t> hpc::dist::groupWorldRanks(MeshAttr mesh, ArrayRef<int64_t> axes,
                                                int64_t rank, int64_t *index) {
  ArrayRef<int64_t> sizes = mesh.getSizes();
  SmallVector<int64_t> coords(sizes.size());
  for (size_t a = sizes.size(), rem = rank; a-- > 0;) {
    coords[a] = int64_t(rem) % sizes[a];
    rem /= sizes[a];
  }
  int64_t g = 1, mine = 0;
  for (int64_t a : axes) {
    g *= sizes[a];
    mine = mine * sizes[a] + coords[a];
  }
  if (index)
    *index = mine;
  SmallVector<int64_t> members;
  for (int64_t j = 0; j < g; ++j) {
    SmallVector<int64_t> c = coords;
    for (size_t k = axes.size(), rem = j; k-- > 0;) {
      c[axes[k]] = int64_t(rem) % sizes[axes[k]];
      rem /= sizes[axes[k]];
    }
    int64_t w = 0;
    for (size_t a = 0; a < sizes.size(); ++a)
      w = w * sizes[a] + c[a];
    members.push_back(w);
  }
  return members;
}

namespace {
/// Where member `index` of a group (world ranks `members`) sits on nodes of
/// `perNode` ranks: its node-local ring and its ring across nodes (world
/// ranks), and its place in each. Empty rings when the group is not
/// uniform over nodes. The runtime builds the same (MpiComm::twoLevel).
struct Placed {
  SmallVector<int64_t> local, cross;
  int64_t l = 0, k = 0;
};
Placed place(ArrayRef<int64_t> members, int64_t index, int64_t perNode) {
  SmallVector<int64_t> nodes; // node ids in order of first appearance
  llvm::DenseMap<int64_t, SmallVector<int64_t>> on;
  for (int64_t w : members) {
    auto &list = on[w / perNode];
    if (list.empty())
      nodes.push_back(w / perNode);
    list.push_back(w);
  }
  Placed p;
  int64_t count = int64_t(on[nodes.front()].size());
  for (int64_t n : nodes)
    if (int64_t(on[n].size()) != count)
      return p;
  int64_t me = members[index];
  p.local = on[me / perNode];
  p.l = llvm::find(p.local, me) - p.local.begin();
  for (auto [k, n] : llvm::enumerate(nodes)) {
    if (n == me / perNode)
      p.k = int64_t(k);
    p.cross.push_back(on[n][p.l]);
  }
  return p;
}
} // namespace

std::optional<TwoLevels> hpc::dist::twoLevels(MeshAttr mesh, ArrayRef<StringRef> axes,
                                              int64_t ranksPerNode) {
  if (!mesh || ranksPerNode <= 0)
    return std::nullopt;
  SmallVector<int64_t> idx;
  for (StringRef a : axes) {
    if (mesh.axisIndex(a) < 0)
      return std::nullopt;
    idx.push_back(mesh.axisIndex(a));
  }
  std::optional<TwoLevels> levels;
  for (int64_t r = 0, n = mesh.numDevices(); r < n; ++r) {
    int64_t i = 0;
    SmallVector<int64_t> members = groupWorldRanks(mesh, idx, r, &i);
    Placed p = place(members, i, ranksPerNode);
    TwoLevels t{int64_t(p.cross.size()), int64_t(p.local.size())};
    if (t.nodes < 2 || t.perNode < 2 || (levels && (levels->nodes != t.nodes ||
                                                    levels->perNode != t.perNode)))
      return std::nullopt;
    levels = t;
  }
  return levels;
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

SentBytes hpc::dist::bytesSentByAllRanksIn(Operation *root, int64_t ranksPerNode) {
  SentBytes sum;
  root->walk([&](Operation *op) {
    MeshAttr mesh = lookupMesh(op);
    if (!mesh || !isa<DistDialect>(op->getDialect()))
      return;
    for (int64_t r = 0, n = mesh.numDevices(); r < n; ++r) {
      SentBytes b = bytesSentByRank(op, r, ranksPerNode);
      sum.total += b.total;
      sum.acrossNodes += b.acrossNodes;
    }
  });
  return sum;
}

int64_t hpc::dist::bytesSentByRankZeroIn(Operation *root) {
  int64_t bytes = 0;
  root->walk([&](Operation *op) { bytes += bytesSentByRankZero(op); });
  return bytes;
}

int64_t hpc::dist::bytesSentByRankZero(Operation *op) {
  return bytesSentByRank(op, 0, 0).total;
}

SentBytes hpc::dist::bytesSentByRank(Operation *op, int64_t rank, int64_t ranksPerNode) {
  SentBytes out;
  MeshAttr mesh = lookupMesh(op);
  if (!mesh)
    return out;
  // Every message: `bytes` to world rank `to`.
  auto sendTo = [&](int64_t to, int64_t bytes) {
    out.total += bytes;
    if (ranksPerNode > 0 && to / ranksPerNode != rank / ranksPerNode)
      out.acrossNodes += bytes;
  };
  auto collective = [&](auto o, Type resultType) -> int64_t {
    using T = decltype(o);
    int64_t i = 0;
    SmallVector<int64_t> members =
        groupWorldRanks(mesh, axisIndices(mesh, o.getAxes()), rank, &i);
    int64_t g = int64_t(members.size());
    if (g == 1)
      return 0;
    int64_t next = members[(i + 1) % g];
    Type in = o.getInput().getType();
    constexpr bool allReduce =
        std::is_same_v<T, AllReduceOp> || std::is_same_v<T, AllReduceStartOp>;
    constexpr bool reduceScatter =
        std::is_same_v<T, ReduceScatterOp> || std::is_same_v<T, ReduceScatterStartOp>;
    if constexpr (allReduce || reduceScatter) {
      std::optional<uint64_t> perNode = o.getRanksPerNode();
      Placed p = perNode ? place(members, i, int64_t(*perNode)) : Placed();
      int64_t L = int64_t(p.local.size()), N = int64_t(p.cross.size());
      int64_t localNext = L ? p.local[(p.l + 1) % L] : 0, crossNext = N ? p.cross[(p.k + 1) % N] : 0;
      bool twoLevel = L >= 2 && N >= 2;
      // A compressed hop: the cross-node one, or the whole group.
      if (Attribute codec = o.getCompressionAttr()) {
        ArrayRef<int64_t> hop = twoLevel ? ArrayRef<int64_t>(p.cross) : ArrayRef<int64_t>(members);
        int64_t k = twoLevel ? p.k : i, G = int64_t(hop.size());
        auto toOthers = [&](auto bytesTo) {
          for (int64_t j = 0; j < G; ++j)
            if (j != k)
              sendTo(hop[j], bytesTo(j));
        };
        if constexpr (allReduce) {
          auto t = cast<RankedTensorType>(in);
          int64_t n = t.getNumElements(), e = n ? bytesOf(t) / n : 0, m = n;
          if (auto psgd = dyn_cast<PowerSgdAttr>(codec)) {
            // The node's ring on whole pieces, then two plain f32 rings
            // across: the P's (and exact values) of this member's chunk,
            // then its Q's.
            SmallVector<CodecPiece> pieces = powerSgdPieces(psgd, t);
            SmallVector<int64_t> b = powerSgdChunks(pieces, twoLevel ? L : 1);
            int64_t own = twoLevel ? (p.l + 1) % L : 0;
            if (twoLevel)
              sendTo(localNext, ringAllReduceBytes(L, e, p.l, [&](int64_t c) {
                       int64_t size = 0;
                       for (int64_t q = b[c]; q < b[c + 1]; ++q)
                         size += pieces[q].size();
                       return size;
                     }));
            PowerSgdSums sums = powerSgdSums(pieces, b[own], b[own + 1], psgd.getRank());
            sendTo(hop[(k + 1) % G], ringAllReduceBytes(sums.first, G, 4, k) +
                                         ringAllReduceBytes(sums.second, G, 4, k));
            return 0;
          }
          if (twoLevel) {
            sendTo(localNext, ringAllReduceBytes(n, L, e, p.l));
            m = chunkOf(n, L, (p.l + 1) % L);
          }
          // int8: an all-to-all of the int8 pieces of the hop's values,
          // then this member's quantized sum to every other; top-k: this
          // member's pairs to every other.
          if (auto int8 = dyn_cast<Int8BlockAttr>(codec)) {
            int64_t B = int8.getBlock();
            toOthers([&](int64_t j) {
              return hpc::codecs::int8BlockBytes(chunkOf(m, G, j), B) +
                     hpc::codecs::int8BlockBytes(chunkOf(m, G, k), B);
            });
          } else if (auto topk = dyn_cast<TopKAttr>(codec)) {
            int64_t pairs = hpc::codecs::topkCount(m, topk.getShare());
            toOthers([&](int64_t) { return pairs * hpc::codecs::kTopkPairBytes; });
          }
        } else {
          int64_t count = cast<RankedTensorType>(resultType).getNumElements();
          if (twoLevel)
            sendTo(localNext, (L - 1) * N * bytesOf(resultType));
          // Each other member's block, encoded.
          int64_t bytes = 0;
          if (auto int8 = dyn_cast<Int8BlockAttr>(codec))
            bytes = hpc::codecs::int8BlockBytes(count, int8.getBlock());
          else if (auto topk = dyn_cast<TopKAttr>(codec))
            bytes = hpc::codecs::topkCount(count, topk.getShare()) * hpc::codecs::kTopkPairBytes;
          toOthers([&](int64_t) { return bytes; });
        }
        return 0;
      }
      if constexpr (allReduce) {
        auto t = cast<RankedTensorType>(in);
        int64_t n = t.getNumElements(), e = n ? bytesOf(t) / n : 0;
        if (L < 2 || N < 2) {
          sendTo(next, ringAllReduceBytes(n, g, e, i));
        } else {
          // A ring over the node's L chunks, then this member's chunk
          // (l+1 mod L, where the node's reduce-scatter leaves it) all-reduced
          // across the nodes.
          int64_t own = (p.l + 1) % L;
          int64_t chunk = n / L + (own < n % L ? 1 : 0);
          sendTo(localNext, ringAllReduceBytes(n, L, e, p.l));
          sendTo(crossNext, ringAllReduceBytes(chunk, N, e, p.k));
        }
      } else {
        int64_t block = bytesOf(resultType);
        if (L < 2 || N < 2) {
          sendTo(next, (g - 1) * block);
        } else {
          // The node's members reduce-scatter N blocks each, then the
          // block of each reduces across the nodes.
          sendTo(localNext, (L - 1) * N * block);
          sendTo(crossNext, (N - 1) * block);
        }
      }
    } else if constexpr (std::is_same_v<T, AllGatherOp> || std::is_same_v<T, AllGatherStartOp>) {
      sendTo(next, (g - 1) * bytesOf(in));
    } else if constexpr (std::is_same_v<T, AllToAllOp> || std::is_same_v<T, AllToAllStartOp>) {
      for (int64_t j = 0; j < g; ++j)
        if (j != i)
          sendTo(members[j], bytesOf(in) / g);
    } else {
      // Broadcast: a chain root, root+1, ...; everyone but the last forwards.
      bool last = (i - int64_t(o.getRoot()) + g) % g == g - 1;
      if (!last)
        sendTo(next, bytesOf(in));
    }
    return 0;
  };
  if (either<AllReduceOp, AllReduceStartOp>(op, collective) ||
      either<ReduceScatterOp, ReduceScatterStartOp>(op, collective) ||
      either<AllGatherOp, AllGatherStartOp>(op, collective) ||
      either<AllToAllOp, AllToAllStartOp>(op, collective) ||
      either<BroadcastOp, BroadcastStartOp>(op, collective))
    return out;
  // A send reaches a peer only inside the axis.
  auto sent = [&](StringRef axis, int64_t offset, Value input) {
    int64_t a = mesh.axisIndex(axis);
    ArrayRef<int64_t> sizes = mesh.getSizes();
    int64_t stride = 1;
    for (size_t b = a + 1; b < sizes.size(); ++b)
      stride *= sizes[b];
    int64_t c = rank / stride % sizes[a] + offset;
    if (c >= 0 && c < sizes[a])
      sendTo(rank + offset * stride, bytesOf(input.getType()));
  };
  if (auto o = dyn_cast<SendOp>(op))
    sent(o.getAxis(), o.getOffset(), o.getInput());
  if (auto o = dyn_cast<SendStartOp>(op))
    sent(o.getAxis(), o.getOffset(), o.getInput());
  return out;
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

int64_t hpc::dist::codecStateElements(Operation *op) {
  MeshAttr mesh = lookupMesh(op);
  auto elements = [&](auto o, Type resultType) -> int64_t {
    Attribute codec = o.getCompressionAttr();
    if (!mesh || !codec)
      return 0;
    int64_t g = groupSize(mesh, axisNames(o.getAxes()));
    std::optional<uint64_t> perNode = o.getRanksPerNode();
    std::optional<TwoLevels> levels =
        perNode ? twoLevels(mesh, axisNames(o.getAxes()), int64_t(*perNode)) : std::nullopt;
    int64_t G = levels ? levels->nodes : g;
    int64_t count = cast<RankedTensorType>(resultType).getNumElements();
    if constexpr (std::is_same_v<decltype(o), AllReduceOp> ||
                  std::is_same_v<decltype(o), AllReduceStartOp>) {
      if (auto psgd = dyn_cast<PowerSgdAttr>(codec)) {
        SmallVector<CodecPiece> pieces =
            powerSgdPieces(psgd, cast<RankedTensorType>(o.getInput().getType()));
        SmallVector<int64_t> b = powerSgdChunks(pieces, levels ? levels->perNode : 1);
        int64_t most = 0;
        for (size_t c = 0; c + 1 < b.size(); ++c)
          most = std::max(most, powerSgdState(pieces, b[c], b[c + 1], psgd.getRank(),
                                              psgd.getErrorFeedback()));
        return most;
      }
      int64_t m = levels ? (count + levels->perNode - 1) / levels->perNode : count;
      return isa<TopKAttr>(codec) ? m : m + (m + G - 1) / G;
    } else {
      return G * count;
    }
  };
  if (std::optional<int64_t> n = either<AllReduceOp, AllReduceStartOp>(op, elements))
    return *n;
  if (std::optional<int64_t> n = either<ReduceScatterOp, ReduceScatterStartOp>(op, elements))
    return *n;
  return 0;
}

/// A collective's compression and state operand: a codec the runtime has,
/// on a reduction it can compress, with state of the size the codec keeps.
static LogicalResult verifyCompression(Operation *op, Type input, Value feedback,
                                       std::optional<ReductionKind> kind) {
  Attribute compression = op->getAttr("compression");
  if (!compression) {
    if (feedback)
      return op->emitOpError("has error-feedback state but no compression");
    return success();
  }
  if (!isa<Int8BlockAttr, PowerSgdAttr, TopKAttr>(compression))
    return op->emitOpError("compression ")
           << compression
           << " is not a codec the runtime has (#dist.int8_block, #dist.powersgd, #dist.topk)";
  if (!kind)
    return op->emitOpError("compression applies to all_reduce and reduce_scatter only");
  auto type = cast<RankedTensorType>(input);
  // bf16 values (a bucket kept in bf16) cross as the codec encodes them
  // from f32; a reduce_scatter's compressed blocks are f32 only.
  bool bf16 = type.getElementType().isBF16() && isa<AllReduceOp, AllReduceStartOp>(op);
  if (!type.getElementType().isF32() && !bf16)
    return op->emitOpError(isa<AllReduceOp, AllReduceStartOp>(op)
                               ? "compresses f32 or bf16 values only, not "
                               : "compresses f32 values only, not ")
           << type.getElementType();
  if (*kind != ReductionKind::sum && *kind != ReductionKind::avg)
    return op->emitOpError("compresses sum and avg reductions only, not ")
           << stringifyReductionKind(*kind);
  if (auto psgd = dyn_cast<PowerSgdAttr>(compression)) {
    if (!isa<AllReduceOp, AllReduceStartOp>(op))
      return op->emitOpError("#dist.powersgd compresses all_reduce only (a reduce_scatter's "
                             "blocks are no matrices): use #dist.int8_block or #dist.topk");
    if (psgd.getRows().empty() && type.getRank() < 2)
      return op->emitOpError("#dist.powersgd on a value of rank ")
             << type.getRank() << " needs its pieces listed (a matrix is RxC)";
    int64_t values = 0;
    for (const CodecPiece &p : powerSgdPieces(psgd, type)) {
      if (p.isMatrix() && psgd.getRank() > std::min(p.rows, p.cols))
        return op->emitOpError("#dist.powersgd rank ")
               << psgd.getRank() << " is above the smaller dimension of its " << p.rows << "x"
               << p.cols << " matrix";
      values += p.size();
    }
    if (values != type.getNumElements())
      return op->emitOpError("#dist.powersgd pieces hold ")
             << values << " values, the reduction " << type.getNumElements();
    if (!feedback)
      return op->emitOpError("#dist.powersgd needs its state operand (each matrix's Q)");
  }
  if (isa<TopKAttr>(compression) && type.getNumElements() >= hpc::codecs::kTopkMaxValues)
    return op->emitOpError("#dist.topk indexes its values in 32 bits: ")
           << type.getNumElements() << " values are too many";
  if (feedback) {
    auto t = cast<RankedTensorType>(feedback.getType());
    int64_t need = codecStateElements(op);
    if (t.getRank() != 1 || t.getDimSize(0) != need)
      return op->emitOpError("codec state ")
             << t << " must be tensor<" << need
             << "xf32> or tensor<" << need << "xbf16> (hpc::dist::codecStateElements)";
  }
  return success();
}

/// Kinds of collective, for the shared verifier.
enum class Kind { AllReduce, ReduceScatter, AllGather, AllToAll, Broadcast };

/// Verifies a collective: axes, attributes, and that `result` (the result
/// type, or the token payload) is what the collective makes of `input`.
static LogicalResult verifyCollective(Operation *op, Kind kind, Type inputType,
                                      ArrayAttr axesAttr, Type result,
                                      int64_t dim = 0, int64_t dim2 = 0,
                                      std::optional<uint64_t> ranksPerNode = std::nullopt) {
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
  if (ranksPerNode &&
      !twoLevels(*mesh, axisNames(axesAttr), static_cast<int64_t>(*ranksPerNode)))
    return op->emitOpError("ranks_per_node = ")
           << *ranksPerNode << ": the groups over " << joined(axes)
           << " do not lie on several nodes of that many ranks with the same number "
              "(more than one) of members on each";
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
  if (kind != Kind::AllReduce && kind != Kind::ReduceScatter)
    return verifyCompression(op, in, Value(), std::nullopt);
  return success();
}

static Type payload(Value token) { return cast<TokenType>(token.getType()).getPayload(); }

LogicalResult AllReduceOp::verify() {
  if (failed(verifyCollective(*this, Kind::AllReduce, getInput().getType(), getAxes(),
                              getType(), 0, 0, getRanksPerNode())))
    return failure();
  return verifyCompression(*this, getInput().getType(), getFeedback(), getReduction());
}
LogicalResult AllReduceStartOp::verify() {
  if (failed(verifyCollective(*this, Kind::AllReduce, getInput().getType(), getAxes(),
                              payload(getToken()), 0, 0, getRanksPerNode())))
    return failure();
  return verifyCompression(*this, getInput().getType(), getFeedback(), getReduction());
}
LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyCollective(*this, Kind::ReduceScatter, getInput().getType(), getAxes(),
                              getType(), getDim(), 0, getRanksPerNode())))
    return failure();
  return verifyCompression(*this, getInput().getType(), getFeedback(), getReduction());
}
LogicalResult ReduceScatterStartOp::verify() {
  if (failed(verifyCollective(*this, Kind::ReduceScatter, getInput().getType(), getAxes(),
                              payload(getToken()), getDim(), 0, getRanksPerNode())))
    return failure();
  return verifyCompression(*this, getInput().getType(), getFeedback(), getReduction());
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
