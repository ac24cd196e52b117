//===- PlanLayouts.cpp - blocked channel layouts for convolutions ---------===//
//
// hpc-plan-layouts: the compiler decides which activations the runtime keeps
// in oneDNN's blocked channel layout (nChw8c/nChw16c), so that chains of
// convolutions, activations, residual adds and pools run on oneDNN's direct
// convolutions without a reorder between them. The rules of which ops may
// write and read blocked tensors are ProgramPlan.h's (the lowering checks
// the same rules); this pass finds the greatest set of results that satisfy
// them and marks their producers.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"
#include "hpc/Target/ProgramPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace hpc {
#define GEN_PASS_DEF_HPCPLANLAYOUTS
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

/// The ops of `func` whose result 0 can be blocked: every op that may write
/// it blocked, less those that break a rule, until none does (the greatest
/// fixpoint). A value stays blocked when every user reads it blocked and a
/// user that reads it in its result's layout (relu, add, max_pool, a conv's
/// residual) writes blocked too, and such operands of a producer are all
/// blocked.
llvm::SetVector<Operation *> blockedProducers(func::FuncOp func) {
  llvm::SetVector<Operation *> blocked;
  func.walk([&](Operation *op) {
    if (hpc::mayWriteBlocked(op))
      blocked.insert(op);
  });
  auto isBlocked = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && blocked.contains(def) && v == def->getResult(0);
  };
  auto violates = [&](Operation *op) {
    for (OpOperand &use : op->getOpOperands())
      if (hpc::readsInResultLayout(use) && !isBlocked(use.get()))
        return true;
    if (isa<hpc::ConvOp>(op) && !hpc::convLayoutsFit(op, isBlocked(op->getOperand(0)), true))
      return true;
    for (OpOperand &use : op->getResult(0).getUses()) {
      Operation *user = use.getOwner();
      if (!hpc::mayReadBlocked(use) ||
          (hpc::readsInResultLayout(use) && !blocked.contains(user)) ||
          (isa<hpc::ConvOp>(user) && !hpc::convLayoutsFit(user, true, blocked.contains(user))))
        return true;
    }
    return false;
  };
  SmallVector<Operation *> worklist(blocked.begin(), blocked.end());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!blocked.contains(op) || !violates(op))
      continue;
    blocked.remove(op);
    // Its candidate neighbours may break a rule now.
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && blocked.contains(def))
        worklist.push_back(def);
    for (Operation *user : op->getResult(0).getUsers())
      if (blocked.contains(user))
        worklist.push_back(user);
  }
  return blocked;
}

struct PlanLayouts : hpc::impl::HPCPlanLayoutsBase<PlanLayouts> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The backward kernels of a train step read plain tensors.
    if (module->hasAttr("hpc.train"))
      return;
    auto unit = UnitAttr::get(&getContext());
    for (auto func : module.getOps<func::FuncOp>()) {
      func.walk([](Operation *op) { op->removeAttr(hpc::kBlockedAttrName); });
      for (Operation *op : blockedProducers(func)) {
        op->setAttr(hpc::kBlockedAttrName, unit);
        ++numBlocked;
      }
    }
  }
};

} // namespace
