//===- DistAsync.cpp - collectives in their asynchronous form -------------===//
//
// Each synchronous collective becomes `<op>_start` as early as its operand
// allows (right after the operand's definition) and a `dist.wait` right
// before its first use, so the kernels in between run while the data moves
// (the runtime's communication thread does the moving). The traffic is
// unchanged; the starts keep their relative order, which every rank shares.
//
// "First use" looks through re-layouts (Relayouts.h): the reshapes and transposes that
// only bring a result to the shape its real user wants (a reduced weight
// gradient reshaped for its optimizer update at the end of the step) move
// with the wait, so the wait lands at the first op that needs the data.
//
// An all_to_all (expert parallelism's token exchange, which the very next
// ops wait for) also goes ahead of the ops it does not depend on: they run
// while the tokens travel (an expert layer's weight gradients while its
// input gradients go back to the tokens' ranks).
//
//===----------------------------------------------------------------------===//

#include "Relayouts.h"

#include "Dist/DistOps.h"
#include "hpc/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace hpc {
#define GEN_PASS_DEF_DISTASYNCCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;
using namespace hpc::dist;

namespace {

/// The asynchronous form of a synchronous collective (null for others).
Operation *startOf(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  auto token = [&](Value result) { return TokenType::get(b.getContext(), result.getType()); };
  if (auto o = dyn_cast<AllReduceOp>(op))
    return AllReduceStartOp::create(b, loc, token(o.getResult()), o.getInput(), o.getAxes(),
                                    o.getReductionAttr(), o.getCompressionAttr(),
                                    o.getRanksPerNodeAttr(), o.getFeedback());
  if (auto o = dyn_cast<ReduceScatterOp>(op))
    return ReduceScatterStartOp::create(b, loc, token(o.getResult()), o.getInput(),
                                        o.getAxes(), o.getReductionAttr(), o.getDimAttr(),
                                        o.getCompressionAttr(), o.getRanksPerNodeAttr(),
                                        o.getFeedback());
  if (auto o = dyn_cast<AllGatherOp>(op))
    return AllGatherStartOp::create(b, loc, token(o.getResult()), o.getInput(), o.getAxes(),
                                    o.getDimAttr(), o.getCompressionAttr());
  if (auto o = dyn_cast<AllToAllOp>(op))
    return AllToAllStartOp::create(b, loc, token(o.getResult()), o.getInput(), o.getAxes(),
                                   o.getSplitDimAttr(), o.getConcatDimAttr(),
                                   o.getCompressionAttr());
  if (auto o = dyn_cast<BroadcastOp>(op))
    return BroadcastStartOp::create(b, loc, token(o.getResult()), o.getInput(), o.getAxes(),
                                    o.getRootAttr(), o.getCompressionAttr());
  return nullptr;
}

/// A started collective holds its operand until its wait: a gradient
/// bucket (all-reduce or reduce-scatter) its concatenated gradients, a
/// ZeRO parameter gather the updated rows. So that these buffers do not
/// all stay alive to the end of the step (the optimizer is the first to
/// read the results; ZeRO-2 exists to free the full gradients), at most
/// `kInFlight` of each kind are in flight: the wait of one comes no later
/// than the start of the one `kInFlight` after it. The communication
/// thread runs them in order anyway, so a wait there costs only what the
/// link has not done by then.
constexpr int kInFlight = 2;
constexpr size_t kPrefetch = 4;

void boundInFlight(Block &block) {
  for (int kind = 0; kind < 3; ++kind) {
    SmallVector<Operation *> starts;
    for (Operation &op : block)
      if ((kind == 0 && isa<AllReduceStartOp>(op)) ||
          (kind == 1 && isa<ReduceScatterStartOp>(op)) ||
          (kind == 2 && isa<AllGatherStartOp>(op) && !op.hasAttr("dist.prefetch")))
        starts.push_back(&op);
    for (size_t k = 0; k + kInFlight < starts.size(); ++k) {
      Operation *limit = starts[k + kInFlight];
      for (Operation *user : starts[k]->getResult(0).getUsers())
        if (isa<WaitOp>(user) && user->getBlock() == &block && limit->isBeforeInBlock(user))
          user->moveBefore(limit);
    }
  }
}

/// Moves `start` (with what it depends on) ahead of the ops before it that
/// it does not depend on, within the stretch of pure kernels right before
/// it (a collective, a wait or an op with effects ends the stretch), so
/// that those ops run between the start and its wait. The moved ops keep
/// their order; nothing they feed comes before them.
void startBeforeIndependentOps(Operation *start) {
  SmallVector<Operation *> stretch;
  for (Operation *op = start->getPrevNode(); op; op = op->getPrevNode()) {
    if (!isMemoryEffectFree(op) || isa<DistDialect>(op->getDialect()))
      break;
    stretch.push_back(op);
  }
  llvm::DenseSet<Operation *> inStretch(stretch.begin(), stretch.end()), needed;
  SmallVector<Operation *> work{start};
  while (!work.empty())
    for (Value v : work.pop_back_val()->getOperands())
      if (Operation *def = v.getDefiningOp(); def && inStretch.contains(def) &&
                                              needed.insert(def).second)
        work.push_back(def);
  Operation *after = start;
  for (Operation *op : llvm::reverse(stretch))
    if (!needed.contains(op)) {
      op->moveAfter(after);
      after = op;
    }
}

struct DistAsyncCollectives : hpc::impl::DistAsyncCollectivesBase<DistAsyncCollectives> {
  void runOnOperation() override {
    SmallVector<Operation *> collectives;
    llvm::DenseSet<Operation *> started;
    getOperation().walk([&](Operation *op) {
      if (isa<AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp, BroadcastOp>(op))
        collectives.push_back(op);
    });
    // ZeRO-3's per-use parameter gathers (dist.prefetch), in program order:
    // each starts once the one kPrefetch before it is waited for, so the
    // next parameters arrive while the current ones are used and only
    // about kPrefetch whole parameters are alive at a time.
    SmallVector<Operation *> prefetchWaits;
    for (Operation *op : collectives) {
      Value result = op->getResult(0);
      bool prefetch = op->hasAttr("dist.prefetch");
      // The first real user in the block (users elsewhere wait where the op
      // was, and nothing moves).
      llvm::SetVector<Operation *> chain = hpc::relayoutsOf(result, op->getBlock());
      bool outside = false;
      Operation *first = hpc::firstRealUse(result, op->getBlock(), chain, outside);
      if (outside) {
        first = op->getNextNode();
        chain.clear();
      }
      // Start as early as the operand allows: right after its definition
      // (dist-partition places a collective just before the op that needs
      // it, which may be long after the data is ready).
      OpBuilder b(op);
      Value input = op->getOperand(0);
      Block *block = op->getBlock();
      Block::iterator at = op->getIterator();
      if (Operation *def = input.getDefiningOp(); def && def->getBlock() == block)
        at = std::next(def->getIterator());
      else if (!def && cast<BlockArgument>(input).getOwner() == block)
        at = block->begin();
      // ... and after its other operands (a compressed reduction's
      // error-feedback state).
      for (Value other : op->getOperands().drop_front())
        if (Operation *d = other.getDefiningOp();
            d && d->getBlock() == block && (at == block->end() || !d->isBeforeInBlock(&*at)))
          at = std::next(d->getIterator());
      // ... and after every op before it that writes the operand in place
      // (a ZeRO update of its rows, gathered next).
      for (Operation *user : input.getUsers())
        if (user != op && user->getBlock() == block && user->isBeforeInBlock(op) &&
            !isMemoryEffectFree(user) && !user->isBeforeInBlock(&*at))
          at = std::next(user->getIterator());
      if (prefetch && prefetchWaits.size() >= kPrefetch) {
        Operation *earlier = prefetchWaits[prefetchWaits.size() - kPrefetch];
        if (earlier->getBlock() == block && (&*at)->isBeforeInBlock(earlier) &&
            earlier->isBeforeInBlock(op))
          at = std::next(earlier->getIterator());
      }
      // After the starts already placed there, so starts keep program order.
      while (at != op->getIterator() && started.contains(&*at))
        ++at;
      b.setInsertionPoint(block, at);
      Operation *start = startOf(b, op);
      started.insert(start);
      b.setInsertionPoint(first ? first : op->getNextNode());
      auto wait = WaitOp::create(b, op->getLoc(), result.getType(), start->getResult(0));
      if (prefetch) {
        start->setAttr("dist.prefetch", b.getUnitAttr());
        prefetchWaits.push_back(wait);
      }
      result.replaceAllUsesWith(wait.getResult());
      // The re-layouts follow the wait (a chain has users: `first` is set).
      if (!chain.empty())
        hpc::moveRelayouts(chain, wait, first);
      op->erase();
    }
    SmallVector<Operation *> exchanges;
    getOperation().walk([&](AllToAllStartOp start) { exchanges.push_back(start); });
    for (Operation *start : exchanges)
      startBeforeIndependentOps(start);
    getOperation().walk([](Block *block) { boundInFlight(*block); });
  }
};

} // namespace
