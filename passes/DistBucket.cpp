//===- DistBucket.cpp - gradient all-reduces fused into buckets -----------===//
//
// A data-parallel train step all-reduces every weight gradient on its own:
// dozens of small messages, each paying the link's latency (on the two-node
// cluster ~0.1-0.6 ms apiece, more than the transfer of most of them). This
// pass fuses the all-reduces of a per-rank program into buckets, as
// PyTorch DDP and DeepSpeed do: in the order their operands are ready (the
// order the backward pass finishes the gradients), up to `bucket-bytes`
// each (by default about 16 buckets in all, see autoBucketBytes), the members flattened and concatenated, one all_reduce, and the
// result split back. A bucket's all_reduce sits right after its last
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
#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace hpc {
#define GEN_PASS_DEF_DISTBUCKET
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

/// One all_reduce and where it can move.
struct Member {
  mutable AllReduceOp op; ///< a handle (its accessors are not const)
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

/// The all_reduces of `block` that may be bucketed, in the order their
/// operands are ready.
SmallVector<Member> candidates(Block &block) {
  SmallVector<Member> out;
  for (Operation &op : block) {
    auto ar = dyn_cast<AllReduceOp>(op);
    if (!ar || ar.getCompressionAttr())
      continue;
    Operation *ready = ar.getInput().getDefiningOp();
    if (ready && (ready->getBlock() != &block || isa<AllReduceOp>(ready)))
      continue; // a reduction of a reduction stays as it is (fusing erases ops)
    llvm::SetVector<Operation *> chain = hpc::relayoutsOf(ar.getResult(), &block);
    bool outside = false;
    Operation *first = hpc::firstRealUse(ar.getResult(), &block, chain, outside);
    if (outside || !first || isa<AllReduceOp>(first))
      continue;
    out.push_back(
        {ar, ready, first, std::move(chain), hpc::dist::bytesOf(ar.getInput().getType())});
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
  AllReduceOp head = bucket.front().op;
  if (head.getAxes() != m.op.getAxes() || head.getReduction() != m.op.getReduction() ||
      rankedOf(head.getInput()).getElementType() != rankedOf(m.op.getInput()).getElementType() ||
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
/// concatenated operands, after the last one is ready.
void fuse(ArrayRef<Member> bucket) {
  Operation *last = nullptr;
  for (const Member &m : bucket)
    if (!notAfter(m.ready, last))
      last = m.ready;
  AllReduceOp head = bucket.front().op;
  Block *block = head->getBlock();
  // Everything goes before `anchor`, the op after the last operand (past
  // the members themselves, which go away).
  Operation *anchor = last ? last->getNextNode() : &block->front();
  while (llvm::any_of(bucket, [&](const Member &m) { return m.op == anchor; }))
    anchor = anchor->getNextNode();
  OpBuilder b(anchor);
  Location loc = head.getLoc();
  Type element = rankedOf(head.getInput()).getElementType();
  SmallVector<Value> flat;
  SmallVector<int64_t> sizes;
  int64_t total = 0;
  for (const Member &m : bucket) {
    int64_t n = rankedOf(m.op.getInput()).getNumElements();
    auto type = RankedTensorType::get({n}, element);
    flat.push_back(reshaped(b, loc, m.op.getInput(), type));
    sizes.push_back(n);
    total += n;
  }
  auto whole = RankedTensorType::get({total}, element);
  Value joined = hpc::ConcatOp::create(b, loc, whole, flat, b.getI64IntegerAttr(0));
  Value reduced = AllReduceOp::create(b, loc, whole, joined, head.getAxes(),
                                      head.getReductionAttr(), Attribute());
  SmallVector<Type> pieces;
  for (int64_t n : sizes)
    pieces.push_back(RankedTensorType::get({n}, element));
  auto split = hpc::SplitOp::create(b, loc, pieces, reduced, b.getI64IntegerAttr(0),
                                    b.getDenseI64ArrayAttr(sizes));
  for (auto [m, piece] : llvm::zip(bucket, split.getResults())) {
    RankedTensorType type = rankedOf(m.op.getResult());
    Value back = reshaped(b, loc, piece, type);
    m.op.getResult().replaceAllUsesWith(back);
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

struct DistBucket : hpc::impl::DistBucketBase<DistBucket> {
  using DistBucketBase::DistBucketBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (bucketBytes == 0)
      return;
    module.walk([&](func::FuncOp func) {
      if (func.getBody().empty())
        return;
      SmallVector<Member> all = candidates(func.getBody().front());
      int64_t cap = bucketBytes;
      if (cap < 0) {
        int64_t total = 0;
        for (const Member &m : all)
          total += m.bytes;
        cap = autoBucketBytes(total);
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
        if (i + 1 < all.size() && notAfter(m.firstUse, all[i + 1].ready))
          continue;
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
