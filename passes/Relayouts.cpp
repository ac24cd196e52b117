//===- Relayouts.cpp - looking through re-layouts of a collective's result ===//

#include "Relayouts.h"

#include "HPC/HPCOps.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;

namespace {

void collect(Value v, Block *block, llvm::SetVector<Operation *> &chain) {
  for (Operation *user : v.getUsers()) {
    bool relayout = hpc::isViewOp(user) || isa<hpc::TransposeOp, hpc::SplitOp>(user);
    if (user->getBlock() != block || user->getNumOperands() != 1 || !relayout ||
        !chain.insert(user))
      continue;
    for (Value r : user->getResults())
      collect(r, block, chain);
  }
}

} // namespace

llvm::SetVector<Operation *> hpc::relayoutsOf(Value v, Block *block) {
  llvm::SetVector<Operation *> chain;
  collect(v, block, chain);
  return chain;
}

Operation *hpc::firstRealUse(Value v, Block *block, const llvm::SetVector<Operation *> &chain,
                             bool &outside) {
  Operation *first = nullptr;
  outside = false;
  auto consider = [&](Value x) {
    for (Operation *user : x.getUsers()) {
      Operation *inBlock = block->findAncestorOpInBlock(*user);
      if (!inBlock) {
        outside = true;
        continue;
      }
      if (chain.contains(inBlock))
        continue;
      if (!first || inBlock->isBeforeInBlock(first))
        first = inBlock;
    }
  };
  consider(v);
  for (Operation *c : chain)
    for (Value r : c->getResults())
      consider(r);
  return first;
}

void hpc::moveRelayouts(const llvm::SetVector<Operation *> &chain, Operation *after,
                        Operation *at) {
  llvm::SmallVector<Operation *> moved(chain.begin(), chain.end());
  llvm::sort(moved, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *m : moved)
    if (m->isBeforeInBlock(after))
      m->moveBefore(at);
}
