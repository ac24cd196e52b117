//===- DistBucket.cpp - gradient reductions fused into buckets ------------===//
//
// A data-parallel train step all-reduces every weight gradient on its own:
// dozens of small messages, each paying the link's latency (on the two-node
// cluster ~0.1-0.6 ms apiece, more than the transfer of most of them). This
// pass fuses the all-reduces of a per-rank program into buckets, as
// PyTorch DDP and DeepSpeed do: in the order their operands are ready (the
// order the backward pass finishes the gradients), up to `bucket-bytes`
// each (by default the size the cost model of `cluster` predicts leaves the
// least exposed, see modelBucketBytes; without a cluster about 16 buckets
// in all, see autoBucketBytes), the members flattened and concatenated, one
// all_reduce, and the result split back. ZeRO-2's reduce_scatters into gradient rows are
// bucketed the same way (see fuse). A bucket's all_reduce sits right after its last
// member's operand, so dist-async-collectives can start it there.
//
// A collective joins the open bucket only when nothing uses the results of
// the bucket's members before that point, and when axes, reduction and
// element type match and it carries no compression; one needed before the
// next is ready (a forward all-reduce the next op consumes) stays alone.
// Bytes per rank are recounted.
//
//===----------------------------------------------------------------------===//

#include "Relayouts.h"

#include "Dist/DistOps.h"
#include "HPC/HPCOps.h"
#include "hpc/CostModel/Cluster.h"
#include "hpc/CostModel/CostModel.h"
#include "hpc/CostModel/OpCost.h"
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace hpc {
#define GEN_PASS_DEF_DISTBUCKET
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

/// One all_reduce (or dim-0 reduce_scatter) and where it can move.
struct Member {
  Operation *op;       ///< an AllReduceOp or a ReduceScatterOp
  Operation *ready;    ///< its operand's definition (null: a block argument)
  Operation *firstUse; ///< the first op of the block that needs its result
  llvm::SetVector<Operation *> relayouts; ///< re-layouts of the result before that
  int64_t bytes;
};

RankedTensorType rankedOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Whether `a` comes no later than `b` in their block (null: the block's start).
bool notAfter(Operation *a, Operation *b) {
  if (!a)
    return true;
  if (!b)
    return false;
  return a == b || a->isBeforeInBlock(b);
}

/// Whether `op` is a collective a bucket can take: an all_reduce, or a
/// reduce_scatter into dimension 0 (ZeRO-2's gradient rows), uncompressed;
/// with `gathers`, an all_gather of dimension 0 pieces instead (ZeRO-1/2's
/// updated rows gathered back into the parameters; not ZeRO-3's per-use
/// gathers, which dist-async-collectives prefetches one by one).
bool bucketable(Operation &op, bool gathers) {
  if (gathers) {
    auto ag = dyn_cast<AllGatherOp>(op);
    return ag && !ag.getCompressionAttr() && ag.getDim() == 0 && !op.hasAttr("dist.prefetch");
  }
  if (auto ar = dyn_cast<AllReduceOp>(op))
    return !ar.getCompressionAttr();
  if (auto rs = dyn_cast<ReduceScatterOp>(op))
    return !rs.getCompressionAttr() && rs.getDim() == 0;
  return false;
}

/// The collectives of `block` that may be bucketed (reductions, or with
/// `gathers` the gathers), in the order their operands are ready.
SmallVector<Member> candidates(Block &block, bool gathers) {
  SmallVector<Member> out;
  for (Operation &op : block) {
    if (!bucketable(op, gathers))
      continue;
    Value input = op.getOperand(0), result = op.getResult(0);
    Operation *ready = input.getDefiningOp();
    if (ready && (ready->getBlock() != &block || isa<AllReduceOp, ReduceScatterOp>(ready)))
      continue; // a reduction of a reduction stays as it is (fusing erases ops)
    // A ZeRO update writes the rows it gathers in place: they are ready
    // after the last such write before the gather, and a write after it
    // would be moved past.
    bool writtenAfter = false;
    for (Operation *user : input.getUsers()) {
      if (user == &op || user->getBlock() != &block || isMemoryEffectFree(user))
        continue;
      if (op.isBeforeInBlock(user))
        writtenAfter = true;
      else if (!ready || ready->isBeforeInBlock(user))
        ready = user;
    }
    if (writtenAfter)
      continue;
    llvm::SetVector<Operation *> chain = hpc::relayoutsOf(result, &block);
    bool outside = false;
    Operation *first = hpc::firstRealUse(result, &block, chain, outside);
    if (outside || !first || isa<AllReduceOp, ReduceScatterOp>(first))
      continue;
    out.push_back({&op, ready, first, std::move(chain), hpc::dist::bytesOf(input.getType())});
  }
  llvm::stable_sort(out, [](const Member &a, const Member &b) {
    return a.ready != b.ready && notAfter(a.ready, b.ready);
  });
  return out;
}

/// Whether `m` fuses with the open bucket `bucket` (same kind, room left,
/// every member's result first used after `m`'s operand is ready).
bool joins(ArrayRef<Member> bucket, int64_t bucketBytes, const Member &m, int64_t cap) {
  if (bucket.empty())
    return true;
  Operation *head = bucket.front().op;
  if (head->getName() != m.op->getName() ||
      head->getAttr("axes") != m.op->getAttr("axes") ||
      head->getAttr("reduction") != m.op->getAttr("reduction") ||
      head->getAttr("ranks_per_node") != m.op->getAttr("ranks_per_node") ||
      rankedOf(head->getOperand(0)).getElementType() !=
          rankedOf(m.op->getOperand(0)).getElementType() ||
      bucketBytes + m.bytes > cap)
    return false;
  // Sorted by readiness, `m` is the last ready: the fused op goes after
  // its operand, before every member's first use.
  for (const Member &b : bucket)
    if (notAfter(b.firstUse, m.ready))
      return false;
  return true;
}

/// `v` reshaped to `type` (itself when it has that type).
Value reshaped(OpBuilder &b, Location loc, Value v, RankedTensorType type) {
  if (v.getType() == type)
    return v;
  return hpc::ReshapeOp::create(b, loc, type, v, b.getDenseI64ArrayAttr(type.getShape()));
}

/// Replaces the members of `bucket` by one all_reduce of their flattened,
/// concatenated operands, after the last one is ready. A bucket of
/// reduce_scatters into dimension 0 lays each member out as [G, n/G] (row r
/// is rank r's rows: a dim-0 piece is contiguous) and concatenates along
/// dimension 1, so the one reduce_scatter gives every rank its rows of
/// every member. A bucket of all_gathers of dimension 0 pieces gathers the
/// concatenated pieces once and takes each member's columns of the [G, n]
/// result: rank r's piece of every member is row r.
void fuse(ArrayRef<Member> bucket) {
  Operation *last = nullptr;
  for (const Member &m : bucket)
    if (!notAfter(m.ready, last))
      last = m.ready;
  Operation *head = bucket.front().op;
  Block *block = head->getBlock();
  // Everything goes before `anchor`, the op after the last operand (past
  // the members themselves, which go away).
  Operation *anchor = last ? last->getNextNode() : &block->front();
  while (llvm::any_of(bucket, [&](const Member &m) { return m.op == anchor; }))
    anchor = anchor->getNextNode();
  OpBuilder b(anchor);
  Location loc = head->getLoc();
  Type element = rankedOf(head->getOperand(0)).getElementType();
  if (auto gather = dyn_cast<AllGatherOp>(head)) {
    int64_t group = rankedOf(head->getResult(0)).getDimSize(0) /
                    rankedOf(head->getOperand(0)).getDimSize(0);
    SmallVector<Value> flat;
    SmallVector<int64_t> sizes;
    int64_t total = 0;
    for (const Member &m : bucket) {
      int64_t n = rankedOf(m.op->getOperand(0)).getNumElements();
      flat.push_back(reshaped(b, loc, m.op->getOperand(0), RankedTensorType::get({n}, element)));
      sizes.push_back(n);
      total += n;
    }
    Value joined = hpc::ConcatOp::create(b, loc, RankedTensorType::get({total}, element), flat,
                                         b.getI64IntegerAttr(0));
    Value all = AllGatherOp::create(b, loc, RankedTensorType::get({group * total}, element),
                                    joined, gather.getAxes(), b.getI64IntegerAttr(0),
                                    Attribute());
    Value rows = reshaped(b, loc, all, RankedTensorType::get({group, total}, element));
    SmallVector<Type> pieces;
    for (int64_t n : sizes)
      pieces.push_back(RankedTensorType::get({group, n}, element));
    auto split = hpc::SplitOp::create(b, loc, pieces, rows, b.getI64IntegerAttr(1),
                                      b.getDenseI64ArrayAttr(sizes));
    for (auto [m, piece] : llvm::zip(bucket, split.getResults())) {
      Value back = reshaped(b, loc, piece, rankedOf(m.op->getResult(0)));
      m.op->getResult(0).replaceAllUsesWith(back);
      m.op->erase();
      hpc::moveRelayouts(m.relayouts, back.getDefiningOp(), anchor);
    }
    return;
  }
  auto scatter = dyn_cast<ReduceScatterOp>(head);
  // Rows: 1 for an all_reduce, the group for a reduce_scatter.
  int64_t rows = 1;
  if (scatter)
    rows = rankedOf(head->getOperand(0)).getDimSize(0) / rankedOf(head->getResult(0)).getDimSize(0);
  SmallVector<Value> flat;
  SmallVector<int64_t> sizes;
  int64_t total = 0;
  for (const Member &m : bucket) {
    int64_t n = rankedOf(m.op->getOperand(0)).getNumElements() / rows;
    auto type = scatter ? RankedTensorType::get({rows, n}, element)
                        : RankedTensorType::get({n}, element);
    flat.push_back(reshaped(b, loc, m.op->getOperand(0), type));
    sizes.push_back(n);
    total += n;
  }
  Value reduced;
  if (scatter) {
    Value joined = hpc::ConcatOp::create(b, loc, RankedTensorType::get({rows, total}, element),
                                         flat, b.getI64IntegerAttr(1));
    Value mine = ReduceScatterOp::create(b, loc, RankedTensorType::get({1, total}, element),
                                         joined, scatter.getAxes(), scatter.getReductionAttr(),
                                         b.getI64IntegerAttr(0), Attribute(),
                                         scatter.getRanksPerNodeAttr(), Value());
    reduced = reshaped(b, loc, mine, RankedTensorType::get({total}, element));
  } else {
    auto whole = RankedTensorType::get({total}, element);
    Value joined = hpc::ConcatOp::create(b, loc, whole, flat, b.getI64IntegerAttr(0));
    auto ar = cast<AllReduceOp>(head);
    reduced = AllReduceOp::create(b, loc, whole, joined, ar.getAxes(), ar.getReductionAttr(),
                                  Attribute(), ar.getRanksPerNodeAttr(), Value());
  }
  SmallVector<Type> pieces;
  for (int64_t n : sizes)
    pieces.push_back(RankedTensorType::get({n}, element));
  auto split = hpc::SplitOp::create(b, loc, pieces, reduced, b.getI64IntegerAttr(0),
                                    b.getDenseI64ArrayAttr(sizes));
  for (auto [m, piece] : llvm::zip(bucket, split.getResults())) {
    RankedTensorType type = rankedOf(m.op->getResult(0));
    Value back = reshaped(b, loc, piece, type);
    m.op->getResult(0).replaceAllUsesWith(back);
    m.op->erase();
    // Re-layouts that were before the bucket follow it.
    hpc::moveRelayouts(m.relayouts, back.getDefiningOp(), anchor);
  }
}

/// The automatic bucket size: about 16 buckets of the `total` bytes, none
/// smaller than 1 MiB (the link's latency amortized) or larger than 25 MiB
/// (PyTorch DDP's bucket_cap_mb). Measured on the two-node cluster (4-layer
/// GPT, 17 MB of gradients): 1 MiB buckets hide 80% of the communication,
/// one 25 MiB bucket none (docs/benchmarks.md).
int64_t autoBucketBytes(int64_t total) {
  constexpr int64_t MiB = 1 << 20;
  return std::clamp<int64_t>(total / 16, MiB, 25 * MiB);
}

/// The group a bucket of `head`'s kind reduces over, as the cost model
/// counts it: its size, and how many of its ranks share a node (ranks are
/// row-major over the mesh axes, so a group over the last axes is
/// contiguous; the cluster's nodes are filled in rank order).
hpc::cost::CommGroup groupOf(Operation *head, const hpc::cost::ClusterSpec &cluster) {
  MeshAttr mesh = lookupMesh(head);
  auto axes = head->getAttrOfType<ArrayAttr>("axes");
  hpc::cost::CommGroup g;
  if (!mesh || !axes)
    return g;
  SmallVector<StringRef> names;
  int64_t last = -1;
  for (Attribute a : axes) {
    names.push_back(cast<StringAttr>(a).getValue());
    last = std::max(last, mesh.axisIndex(names.back()));
  }
  g.size = groupSize(mesh, names);
  int64_t stride = 1;
  for (int64_t i = last + 1; i < int64_t(mesh.getSizes().size()); ++i)
    stride *= mesh.getSizes()[i];
  g.perNode = std::clamp<int64_t>(cluster.devicesPerNode / stride, 1, g.size);
  return g;
}

struct DistBucket : hpc::impl::DistBucketBase<DistBucket> {
  using DistBucketBase::DistBucketBase;

  hpc::cost::ClusterSpec clusterSpec;
  bool haveCluster = false;

  /// Whether the `i`th of `all` (sorted by readiness) stays alone: needed
  /// before the next is even ready (a forward all-reduce).
  static bool staysAlone(ArrayRef<Member> all, size_t i) {
    return i + 1 < all.size() && notAfter(all[i].firstUse, all[i + 1].ready);
  }

  /// The cost model's bucket size for the members `all` of `block`, and
  /// the line that says what it predicts.
  int64_t modelBucketBytes(Block &block, ArrayRef<Member> all) {
    constexpr double MiB = 1024.0 * 1024;
    llvm::DenseMap<Operation *, std::pair<double, double>> span; // start, end
    double t = 0;
    for (Operation &op : block) {  // t: the compute so far
      double start = t;
      op.walk([&](Operation *nested) { t += hpc::estimateSeconds(nested, clusterSpec); });
      span[&op] = {start, t};
    }
    std::vector<hpc::cost::GradientReady> grads;
    double scatterBytes = 0, bytes = 0;
    Operation *head = nullptr;
    for (size_t i = 0; i < all.size(); ++i) {
      if (staysAlone(all, i))
        continue;
      const Member &m = all[i];
      head = head ? head : m.op;
      grads.push_back({m.ready ? span[m.ready].second : 0.0, span[m.firstUse].first,
                       double(m.bytes)});
      bytes += m.bytes;
      if (isa<ReduceScatterOp>(m.op))
        scatterBytes += m.bytes;
    }
    if (!head)
      return 25 << 20;
    hpc::cost::BucketChoice choice = hpc::cost::chooseBucketBytes(
        clusterSpec, groupOf(head, clusterSpec), 2 * scatterBytes > bytes, grads);
    llvm::errs() << llvm::formatv(
        "dist-bucket: buckets of at most {0:F2} MiB from the cost model of {1}: {2} bucket(s) "
        "of {3:F2} MB, {4:F1} ms on the link, {5:F1} ms predicted exposed in a step "
        "of {6:F1} ms of compute\n",
        choice.capBytes / MiB, clusterSpec.name, choice.buckets, bytes / 1e6,
        choice.linkSeconds * 1e3, choice.exposedSeconds * 1e3, t * 1e3);
    return int64_t(choice.capBytes);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (bucketBytes == 0)
      return;
    if (!cluster.empty() && bucketBytes < 0) {
      std::string error;
      if (!hpc::cost::parseClusterSpec(cluster, clusterSpec, error)) {
        module.emitError() << "dist-bucket: " << error;
        return signalPassFailure();
      }
      haveCluster = true;
    }
    module.walk([&](func::FuncOp func) {
      if (func.getBody().empty())
        return;
      SmallVector<Member> all = candidates(func.getBody().front(), /*gathers=*/false);
      int64_t cap = bucketBytes;
      if (cap < 0 && haveCluster) {
        cap = modelBucketBytes(func.getBody().front(), all);
      } else if (cap < 0) {
        int64_t total = 0;
        for (const Member &m : all)
          total += m.bytes;
        cap = autoBucketBytes(total);
        // ZeRO-2/3 hold only a dp-th of the gradients, next to the two
        // buckets in flight (dist-async-collectives): half-size buckets keep
        // those to about a sixteenth of the gradients.
        if (auto zero = module->getAttrOfType<IntegerAttr>("dist.zero"); zero && zero.getInt() >= 2)
          cap = std::max<int64_t>(cap / 2, 1 << 20);
      }
      SmallVector<Member> bucket;
      int64_t bytes = 0;
      auto close = [&] {
        if (bucket.size() > 1) {
          fuse(bucket);
          ++buckets;
          fused += bucket.size();
        }
        bucket.clear();
        bytes = 0;
      };
      for (auto [i, m] : llvm::enumerate(all)) {
        // Needed before the next one is even ready (a forward all-reduce):
        // it stays alone and does not close the open bucket.
        if (staysAlone(all, i))
          continue;
        if (!joins(bucket, bytes, m, cap))
          close();
        bucket.push_back(m);
        bytes += m.bytes;
      }
      close();
      // ZeRO-1/2's gathers of the updated rows, one per parameter tensor:
      // each is a round trip through the communication thread (0.05-0.15
      // ms a gather in the steps of the benchmark's GPTs on 2 shared
      // cores). Alone, a gather writes straight into its parameter; in a
      // bucket its rows are copied three times (concat, split, assign),
      // which for a 1 MiB bucket of the 4-layer GPT cost more than the
      // round trips it saved (docs/benchmarks.md). So only small pieces
      // share a gather: biases, norms, a small model's matrices.
      cap = bucketBytes > 0 ? int64_t(bucketBytes) : int64_t(hpc::cost::kZeroGatherBucketBytes);
      for (Member &m : candidates(func.getBody().front(), /*gathers=*/true)) {
        if (!joins(bucket, bytes, m, cap))
          close();
        bucket.push_back(m);
        bytes += m.bytes;
      }
      close();
    });
    if (module->hasAttr("dist.bytes_per_rank"))
      module->setAttr("dist.bytes_per_rank",
                      IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                       hpc::dist::bytesSentByRankZeroIn(module)));
  }
};

} // namespace
