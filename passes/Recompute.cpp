//===- Recompute.cpp - activation recomputation of a train step -----------===//
//
// See Recompute.h. The block is flat (func.func @main's body): the forward
// ops come first, in order, then the backward's, so positions in the forward
// list order the forward and isBeforeInBlock orders everything.
//
//===----------------------------------------------------------------------===//

#include "hpc/Recompute.h"
#include "hpc/Passes.h"

#include "HPC/HPCOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;

std::optional<hpc::RecomputeMode> hpc::parseRecomputeMode(llvm::StringRef s) {
  if (s == "none")
    return RecomputeMode::None;
  if (s == "full")
    return RecomputeMode::Full;
  if (s == "selective")
    return RecomputeMode::Selective;
  return std::nullopt;
}

namespace {

int64_t valueBytes(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return 0;
  return t.getNumElements() * std::max<int64_t>(t.getElementTypeBitWidth() / 8, 1);
}

/// A product with a weight, or its bias add: its result is what selective
/// recomputation keeps (the expensive half of a layer; what is cheap to redo
/// lies between them). The bias add too, so that it stays the product's
/// only reader and fuses into its epilogue.
bool isWeightProduct(Operation *op, const llvm::DenseSet<Value> &onInput,
                     const llvm::DenseSet<Value> &onParam) {
  auto weightOnly = [&](Value v) { return onParam.contains(v) && !onInput.contains(v); };
  if (isa<hpc::MatMulOp, hpc::GemmOp, hpc::ConvOp, hpc::ConvTransposeOp>(op))
    return llvm::any_of(op->getOperands(), weightOnly);
  if (!isa<hpc::AddOp>(op))
    return false;
  for (auto [a, b] : {std::pair(op->getOperand(0), op->getOperand(1)),
                      std::pair(op->getOperand(1), op->getOperand(0))})
    if (Operation *def = a.getDefiningOp();
        def && a.hasOneUse() && weightOnly(b) && isWeightProduct(def, onInput, onParam))
      return true;
  return false;
}

} // namespace

void hpc::recomputeActivations(Block &body, ArrayRef<Operation *> forward,
                               ArrayRef<Value> params, RecomputeMode mode,
                               RecomputeStats &stats) {
  if (mode == RecomputeMode::None || forward.empty())
    return;
  llvm::DenseMap<Operation *, int64_t> pos;
  for (auto [i, op] : llvm::enumerate(forward))
    pos[op] = i;
  auto inForward = [&](Operation *op) { return pos.contains(op); };

  // What each forward value depends on: the batch (block arguments) and the
  // trainable parameters.
  llvm::DenseSet<Value> onInput(body.args_begin(), body.args_end());
  llvm::DenseSet<Value> onParam(params.begin(), params.end());
  for (Operation *op : forward) {
    bool input = llvm::any_of(op->getOperands(), [&](Value v) { return onInput.contains(v); });
    bool param = llvm::any_of(op->getOperands(), [&](Value v) { return onParam.contains(v); });
    for (Value r : op->getResults()) {
      if (input)
        onInput.insert(r);
      if (param)
        onParam.insert(r);
    }
  }
  // Recomputable: a batch-dependent result of an op with no effects and no
  // regions (a copy computes the same thing).
  auto recomputable = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && inForward(def) && onInput.contains(v) && def->getNumRegions() == 0 &&
           isMemoryEffectFree(def);
  };
  // Read by the backward pass (the terminator's forward outputs are
  // replaced by the train step's results).
  auto backwardReads = [&](Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      return !inForward(user) && !user->hasTrait<OpTrait::IsTerminator>();
    });
  };
  llvm::DenseMap<Value, int64_t> lastForwardUse;
  for (Operation *op : forward)
    for (Value v : op->getOperands())
      lastForwardUse[v] = pos[op];
  auto liveAfter = [&](Value v, int64_t p) {
    auto it = lastForwardUse.find(v);
    return it != lastForwardUse.end() && it->second > p;
  };

  // Cut points: after op p, one activation (batch and parameter dependent)
  // is live, or one and others of at most 1/16 of its size together (a
  // train-mode batch norm's batch statistics, live until the running
  // statistics update; kept, like everything live at a cut); one candidate
  // per such value, at its first position.
  struct Cut {
    int64_t pos;
    Value value;
  };
  SmallVector<Cut> candidates;
  llvm::SetVector<Value> live;
  for (auto [p, op] : llvm::enumerate(forward)) {
    for (Value v : op->getOperands())
      if (live.contains(v) && !liveAfter(v, p))
        live.remove(v);
    for (Value r : op->getResults())
      if (onInput.contains(r) && onParam.contains(r) && liveAfter(r, p))
        live.insert(r);
    if (live.empty())
      continue;
    Value largest = live[0];
    int64_t total = 0;
    for (Value v : live) {
      total += valueBytes(v);
      if (valueBytes(v) > valueBytes(largest))
        largest = v;
    }
    int64_t rest = total - valueBytes(largest);
    bool alone = live.size() == 1 || 16 * rest <= valueBytes(largest);
    if (alone && (candidates.empty() || candidates.back().value != largest))
      candidates.push_back({int64_t(p), largest});
  }
  if (candidates.empty())
    return;

  // Full: Chen's greedy choice, a cut once about sqrt(needed x cut size)
  // bytes of needed activations lie behind the last one. Selective: every
  // cut (it keeps the expensive values anyway; cuts only place the copies).
  SmallVector<Cut> cuts;
  auto neededBytes = [&](int64_t from, int64_t to) { // positions [from, to)
    int64_t n = 0;
    for (int64_t p = from; p < to; ++p)
      for (Value r : forward[p]->getResults())
        if (recomputable(r) && backwardReads(r))
          n += valueBytes(r);
    return n;
  };
  if (mode == RecomputeMode::Selective) {
    cuts = candidates;
    // As below: a tail lighter than the segment before it (a loss that
    // reads nothing back) is no reason to recompute that segment at once.
    int64_t n = cuts.size();
    if (n >= 1 && neededBytes(cuts[n - 1].pos + 1, forward.size()) <
                      neededBytes(n >= 2 ? cuts[n - 2].pos + 1 : 0, cuts[n - 1].pos + 1))
      cuts.pop_back();
  } else {
    double needed = neededBytes(0, forward.size()), cutBytes = 0;
    for (const Cut &c : candidates)
      cutBytes += valueBytes(c.value);
    double budget = std::sqrt(needed * (cutBytes / candidates.size()));
    double behind = 0;
    auto next = candidates.begin();
    for (auto [p, op] : llvm::enumerate(forward)) {
      for (Value r : op->getResults())
        if (recomputable(r) && backwardReads(r))
          behind += valueBytes(r);
      if (next != candidates.end() && next->pos == int64_t(p)) {
        if (behind >= budget) {
          cuts.push_back(*next);
          behind = 0;
        }
        ++next;
      }
    }
    // The last segment, which the backward reads first, is kept whole: a
    // cut whose tail is shorter than a segment (the loss) only moves the
    // recomputation right behind the forward.
    if (!cuts.empty() && behind < budget)
      cuts.pop_back();
  }
  if (cuts.empty())
    return;
  if (mode == RecomputeMode::Full)
    stats.checkpoints += cuts.size();

  // Kept: what is not recomputable, what is live at a cut (the checkpoint,
  // and batch-only values such as labels), the last segment, and under
  // selective the weight products and values the forward reads twice.
  llvm::DenseSet<Value> kept;
  for (auto [p, op] : llvm::enumerate(forward))
    for (Value r : op->getResults()) {
      bool keep = !recomputable(r) || int64_t(p) > cuts.back().pos;
      for (const Cut &c : cuts)
        keep |= int64_t(p) <= c.pos && liveAfter(r, c.pos);
      if (mode == RecomputeMode::Selective)
        keep |= isWeightProduct(op, onInput, onParam) ||
                llvm::count_if(r.getUsers(), inForward) >= 2;
      if (keep)
        kept.insert(r);
    }

  SmallVector<Operation *> unused;
  int64_t segmentBegin = 0;
  for (const Cut &cut : cuts) {
    // The needed values this segment's copy replaces.
    SmallVector<Value> replaced;
    for (int64_t p = segmentBegin; p <= cut.pos; ++p)
      for (Value r : forward[p]->getResults())
        if (!kept.contains(r) && backwardReads(r))
          replaced.push_back(r);
    segmentBegin = cut.pos + 1;
    if (replaced.empty())
      continue;
    // Their producers and, through values not kept, the producers' producers.
    llvm::DenseSet<Operation *> closure;
    SmallVector<Operation *> work;
    for (Value v : replaced)
      if (closure.insert(v.getDefiningOp()).second)
        work.push_back(v.getDefiningOp());
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value v : op->getOperands())
        if (!kept.contains(v) && recomputable(v) && closure.insert(v.getDefiningOp()).second)
          work.push_back(v.getDefiningOp());
    }
    SmallVector<Operation *> ops(closure.begin(), closure.end());
    llvm::sort(ops, [&](Operation *a, Operation *b) { return pos[a] < pos[b]; });

    // The copies go right before the first backward op that reads one of
    // the replaced values.
    Operation *first = nullptr;
    for (Value v : replaced)
      for (Operation *user : v.getUsers())
        if (!inForward(user) && !user->hasTrait<OpTrait::IsTerminator>() &&
            (!first || user->isBeforeInBlock(first)))
          first = user;
    OpBuilder b(first);
    IRMapping map;
    llvm::DenseSet<Operation *> copies;
    for (Operation *op : ops) {
      Operation *copy = b.clone(*op, map);
      // On a pipeline stage it is part of the backward (dist-pipeline).
      if (copy->hasAttr(kStageAttr))
        copy->setAttr(kBackwardAttr, b.getUnitAttr());
      copy->setAttr("hpc.recomputed", b.getUnitAttr());
      copies.insert(copy);
    }
    stats.clonedOps += ops.size();
    ++stats.segments;
    for (Value v : replaced)
      stats.freedBytes += valueBytes(v);
    // Backward readers after the copies read the copies.
    Operation *firstCopy = map.lookup(ops.front()->getResult(0)).getDefiningOp();
    for (Operation *op : ops)
      for (Value r : op->getResults())
        r.replaceUsesWithIf(map.lookup(r), [&](OpOperand &use) {
          Operation *user = use.getOwner();
          return !inForward(user) && !copies.contains(user) &&
                 !user->hasTrait<OpTrait::IsTerminator>() && firstCopy->isBeforeInBlock(user);
        });
    unused.append(ops.begin(), ops.end());
  }
  // A forward op only the backward read computes nothing now. (Erased last:
  // a copy made later could take an erased op's address.)
  for (Operation *op : llvm::reverse(unused))
    if (op->use_empty())
      op->erase();
}
